/**
 * @file range_mask_transfer.hpp
 * @brief range_mask as a transfer on the host backend: the float32 input of a clamp whose
 * backward reads it only through `x <= lo || x >= hi` (hardtanh's, ReLU6's) crosses the link as
 * one bit per element and comes back as lo or a value inside (lo, hi), which that backward reads
 * exactly as it read the original. The clamp's bounds are the transfer's per-tensor descriptor
 * (`descriptor_type`, a range_bounds), as a max pool's geometry is pool_argmax_transfer's.
 *
 * Without bounds (the offload manager refuses the tensor), with unusable ones (a NaN, no float
 * strictly between lo and hi) or for a size that is not whole float32 elements, host_bytes
 * refuses the tensor with stash::logic_error before anything is taken: it stays resident
 * (stash::allocator then sends it raw and counts it in encoding_fallbacks). Every float tensor
 * with usable bounds encodes, so there is no unchanged fallback and the host slot is sized for
 * the 1-bit form. The device twin is device_range_mask_transfer
 * (device_range_mask_transfer.cuh).
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/range_mask.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/detail/unchanged_fallback.hpp>
#include <stash/offload/transfer.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace stash {

namespace detail {

// `b` when it and a tensor of `bytes` are something range_mask_transfer can encode (usable
// bounds, whole float32 elements), or stash::logic_error naming why not.
inline range_bounds const& range_mask_bounds(std::size_t bytes, range_bounds const& b,
                                             const char* who)
{
  b.validate(who);
  STASH_EXPECTS(b.type == element_type::f32,
                std::string(who) + ": range_mask reads float32; the tensor is described as " +
                    std::string(to_string(b.type)));
  STASH_EXPECTS(bytes % sizeof(float) == 0, std::string(who) + ": a tensor of " +
                                                std::to_string(bytes) +
                                                " bytes is not a whole number of float32 elements");
  return b;
}

}  // namespace detail

/// @brief range_mask's host reference on the host backend's streams (the CPU twin of
/// device_range_mask_transfer). Lossy: exact for the clamp's backward only.
struct range_mask_transfer {
  /// @brief The values come back as lo or the inside value.
  static constexpr bool lossless = false;
  /// @brief encode and decode write a codec_status.
  static constexpr bool reports_status = true;
  /// @brief The tensor's element type.
  using value_type = float;
  /// @brief The codec that writes the bytes.
  static constexpr std::uint16_t codec_id = range_mask::id;
  /// @brief The per-tensor descriptor: the clamp whose backward reads the tensor.
  using descriptor_type = range_bounds;

  /// @brief Whether host_bytes takes the tensor.
  /// @param bytes The tensor's size.
  /// @param bounds The clamp's bounds.
  /// @return Whether the bounds are usable and the tensor whole float32 elements.
  static bool accepts(std::size_t bytes, range_bounds const& bounds) noexcept
  {
    return bytes % sizeof(float) == 0 && bounds.type == element_type::f32 && bounds.valid();
  }
  /// @brief The host slot: range_mask's size for the tensor's elements.
  /// @param bytes The tensor's size.
  /// @param bounds The clamp's bounds.
  /// @return The slot's bytes.
  /// @throws stash::logic_error Unless accepts(bytes, bounds).
  static std::size_t host_bytes(std::size_t bytes, range_bounds const& bounds)
  {
    (void)detail::range_mask_bounds(bytes, bounds, "range_mask_transfer");
    return range_mask::max_compressed_bytes(bytes / sizeof(float));
  }
  /// @brief None: the host reference needs none.
  /// @return 0.
  static std::size_t scratch_bytes(std::size_t) noexcept { return 0; }

  /// @brief range_mask's encoder in `s`'s order.
  /// @tparam Backend A backend with `launch(stream, task)` (host_backend).
  /// @param b The backend.
  /// @param s The stream the encode runs in the order of.
  /// @param device The tensor.
  /// @param bytes Its size.
  /// @param host The host slot.
  /// @param capacity Its size (host_bytes).
  /// @param status Where the encoded size lands.
  /// @param bounds The clamp's bounds.
  /// @throws stash::logic_error Unless accepts(bytes, bounds) (nothing queued).
  template <class Backend>
  static void encode(Backend& b, typename Backend::stream s, void const* device, std::size_t bytes,
                     void* host, std::size_t capacity, void* /*scratch*/, transfer_status* status,
                     range_bounds const& bounds)
  {
    range_bounds const r = detail::range_mask_bounds(bytes, bounds, "range_mask_transfer::encode");
    b.launch(s, [=] {
      std::span<float const> const in(static_cast<float const*>(device), bytes / sizeof(float));
      std::span<std::byte> const out(static_cast<std::byte*>(host), capacity);
      std::size_t const used = range_mask::host_encode(in, out, r);
      *status                = transfer_status{codec_status{0, 0, 0}, used, 0};
    });
  }

  /// @brief The decoded tensor (lo or the inside value) in `s`'s order; a bad host copy leaves
  /// zeros and an error in `*status`, as does one holding fewer elements than the tensor.
  /// @tparam Backend A backend with `launch(stream, task)` (host_backend).
  /// @param b The backend.
  /// @param s The stream the decode runs in the order of.
  /// @param host The host copy.
  /// @param capacity Its slot's size.
  /// @param device Where the elements go.
  /// @param bytes Their size.
  /// @param status Where a decode error lands.
  /// @param encoded_bytes The host copy's size when known (else unknown_encoded_bytes).
  /// @param bounds The clamp's bounds (the host copy carries its own; these are checked usable).
  /// @throws stash::logic_error Unless accepts(bytes, bounds) (nothing queued).
  template <class Backend>
  static void decode(Backend& b, typename Backend::stream s, void const* host, std::size_t capacity,
                     void* device, std::size_t bytes, void* /*scratch*/, transfer_status* status,
                     std::size_t encoded_bytes, range_bounds const& bounds)
  {
    (void)detail::range_mask_bounds(bytes, bounds, "range_mask_transfer::decode");
    std::size_t const readable = encoded_bytes < capacity ? encoded_bytes : capacity;
    b.launch(s, [=] {
      std::span<std::byte const> const src(static_cast<std::byte const*>(host), readable);
      std::span<float> const dst(static_cast<float*>(device), bytes / sizeof(float));
      detail::decode_and_report(
          [&] { detail::expect_every_element(range_mask::host_decode(src, dst), dst.size()); },
          device, bytes, status);
    });
  }
};

/// @brief `range_mask` in a Codec slot, on a host-task backend.
template <detail::host_task_backend Backend>
struct transfer_for<Backend, range_mask> {
  using type = range_mask_transfer;  ///< the transfer
};

}  // namespace stash
