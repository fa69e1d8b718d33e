/**
 * @file two_value_transfer.hpp
 * @brief two_value as a transfer on the host backend: a tensor of zeros and one value c (a
 * scaled dropout mask) crosses the link as one bit per element plus c, and comes back exact.
 *
 * Whether the tensor is two-valued is known only to the encoder, which runs in the stream's
 * order after the device bytes are given up (the planner predicts it from the trace's ops; the
 * data decides). A tensor holding a third bit pattern is written unchanged (an identity<T>
 * buffer), as pool_argmax_transfer does for indices outside their window, so nothing is lost and
 * the wire carries 32 + sizeof(T) n bytes (offload_stats::bytes_encoded shows it). That is why
 * the host slot is sized for the elements themselves, not for the 1-bit form. The device twin is
 * device_two_value_transfer (device_two_value_transfer.cuh).
 */
#pragma once

#include <stash/codec/codec_error.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/detail/unchanged_fallback.hpp>
#include <stash/offload/transfer.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace stash {

/// @brief two_value<T>'s host reference on the host backend's streams, falling back to the
/// elements unchanged for data that is not two-valued (see the file docs). Lossless either way.
/// @tparam T The element type.
template <codec_element T>
struct two_value_transfer {
  /// @brief The elements come back exactly.
  static constexpr bool lossless = true;
  /// @brief encode and decode write a codec_status.
  static constexpr bool reports_status = true;
  /// @brief The tensor's element type.
  using value_type = T;
  /// @brief The codec that writes the bytes (identity's when the data is not two-valued).
  static constexpr std::uint16_t codec_id = two_value<T>::id;

  /// @brief Whether host_bytes takes a tensor of `bytes`: whole elements.
  /// @param bytes The tensor's size.
  /// @return Whether host_bytes takes the tensor.
  static bool accepts(std::size_t bytes) noexcept { return bytes % sizeof(T) == 0; }
  /// @brief The host slot: room for either form (the elements unchanged, or two_value's).
  /// @param bytes The tensor's size.
  /// @return The slot's bytes.
  /// @throws stash::logic_error For a size that is not whole elements.
  static std::size_t host_bytes(std::size_t bytes)
  {
    STASH_EXPECTS(accepts(bytes),
                  "two_value_transfer: tensor size is not a whole number of elements");
    std::size_t const n = bytes / sizeof(T);
    return std::max(identity<T>::max_compressed_bytes(n), two_value<T>::max_compressed_bytes(n));
  }
  /// @brief None: the host reference needs none.
  /// @return 0.
  static std::size_t scratch_bytes(std::size_t) noexcept { return 0; }

  /// @brief two_value's encoder in `s`'s order, or the elements unchanged when they are not
  /// two-valued.
  /// @tparam Backend A backend with `launch(stream, task)` (host_backend).
  /// @param b The backend.
  /// @param s The stream.
  /// @param device The tensor.
  /// @param bytes Its size.
  /// @param host The host slot.
  /// @param capacity Its size (host_bytes).
  /// @param status Where the encoded size lands.
  template <class Backend>
  static void encode(Backend& b, typename Backend::stream s, void const* device, std::size_t bytes,
                     void* host, std::size_t capacity, void* /*scratch*/, transfer_status* status)
  {
    b.launch(s, [=] {
      std::span<T const> const in(static_cast<T const*>(device), bytes / sizeof(T));
      std::span<std::byte> const out(static_cast<std::byte*>(host), capacity);
      std::size_t const used = two_value<T>::two_value_of(in) ? two_value<T>::host_encode(in, out)
                                                              : identity<T>::host_encode(in, out);
      *status                = transfer_status{codec_status{0, 0, 0}, used, 0};
    });
  }

  /// @brief The exact elements back in `s`'s order; a bad host copy leaves zeros and an error
  /// in `*status`.
  /// @tparam Backend A backend with `launch(stream, task)` (host_backend).
  /// @param b The backend.
  /// @param s The stream.
  /// @param host The host copy.
  /// @param capacity Its slot's size.
  /// @param device Where the elements go.
  /// @param bytes Their size.
  /// @param status Where a decode error lands.
  /// @param encoded_bytes The host copy's size when known (else unknown_encoded_bytes).
  template <class Backend>
  static void decode(Backend& b, typename Backend::stream s, void const* host, std::size_t capacity,
                     void* device, std::size_t bytes, void* /*scratch*/, transfer_status* status,
                     std::size_t encoded_bytes = unknown_encoded_bytes)
  {
    std::size_t const readable = encoded_bytes < capacity ? encoded_bytes : capacity;
    b.launch(s, [=] {
      std::span<std::byte const> const src(static_cast<std::byte const*>(host), readable);
      std::span<T> const dst(static_cast<T*>(device), bytes / sizeof(T));
      detail::decode_and_report(
          [&] {
            detail::expect_every_element(detail::written_unchanged(src)
                                             ? identity<T>::host_decode(src, dst)
                                             : two_value<T>::host_decode(src, dst),
                                         dst.size());
          },
          device, bytes, status);
    });
  }
};

/// @brief `two_value<T>` in a Codec slot, on a host-task backend: with its fallback (a plain
/// host_codec_transfer would fail the offload of data that is not two-valued).
template <detail::host_task_backend Backend, codec_element T>
struct transfer_for<Backend, two_value<T>> {
  using type = two_value_transfer<T>;  ///< the transfer
};

}  // namespace stash
