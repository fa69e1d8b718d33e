/**
 * @file pool_argmax_transfer.hpp
 * @brief Gist's 4-bit max-pool argmax as a transfer: a max pool's int64 index tensor (the second
 * result of aten::max_pool2d_with_indices) crosses the link as one window position per output
 * and comes back as the exact indices. The pool's geometry is the transfer's per-tensor
 * descriptor (`descriptor_type`, a pool_geometry).
 *
 * Without a geometry (the offload manager refuses it), or with one that does not describe the
 * tensor (its size is not the geometry's outputs x 8 bytes, a window or stride outside 1..4),
 * host_bytes refuses the tensor
 * with stash::logic_error before anything is taken: it stays resident (stash::allocator then
 * sends it raw and counts it in encoding_fallbacks). An index outside its window (a geometry of
 * the right size that is not the pool's: padding, dilation, ceil_mode) is found only by the
 * encoder, which runs in the stream's order after the device bytes are given up; it then writes
 * the indices unchanged (an identity<int64_t> buffer) so they still come back exact, and the
 * wire carries 32 + 8 x outputs bytes (offload_stats::bytes_encoded shows it). That is why the
 * host slot is sized for the indices themselves, not for the 4-bit form.
 */
#pragma once

#include <stash/codec/codec_error.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/pool_argmax.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/detail/unchanged_fallback.hpp>
#include <stash/offload/transfer.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

namespace stash {

namespace detail {

// Whether `g` describes a tensor of `bytes` that pool_argmax_transfer can encode: the
// conditions argmax_geometry (and pool_geometry::validate) checks, without an exception.
inline bool argmax_geometry_fits(std::size_t bytes, pool_geometry const& g) noexcept
{
  auto in = [](std::size_t v) { return v >= 1 && v <= 4; };
  if (!(in(g.window_h) && in(g.window_w) && in(g.stride_h) && in(g.stride_w))) { return false; }
  if (g.height < g.window_h || g.width < g.window_w) { return false; }
  constexpr std::size_t max_elements = std::numeric_limits<std::size_t>::max() / 8 - 64;
  if (g.width > max_elements / g.height ||
      (g.planes != 0 && g.height * g.width > max_elements / g.planes)) {
    return false;
  }
  return bytes == g.outputs() * sizeof(std::int64_t);
}

// `g` when it describes a tensor pool_argmax_transfer can encode, or stash::logic_error naming why
// not.
inline pool_geometry const& argmax_geometry(std::size_t bytes, pool_geometry const& g,
                                            const char* who)
{
  g.validate(who);
  STASH_EXPECTS(bytes == g.outputs() * sizeof(std::int64_t),
                std::string(who) + ": a tensor of " + std::to_string(bytes) +
                    " bytes is not the geometry's " + std::to_string(g.outputs()) +
                    " int64 indices (" + std::to_string(g.outputs() * sizeof(std::int64_t)) +
                    " bytes)");
  return g;
}

}  // namespace detail

/// @brief Max-pool indices through pool_argmax's host reference on the host backend's streams
/// (the CPU twin of device_pool_argmax_transfer). Exact: a lossless transfer of int64 indices.
struct pool_argmax_transfer {
  /// @brief The indices come back exactly.
  static constexpr bool lossless = true;
  /// @brief encode and decode write a codec_status.
  static constexpr bool reports_status = true;
  /// @brief The tensor's element type.
  using value_type = std::int64_t;
  /// @brief The codec that writes the bytes.
  static constexpr std::uint16_t codec_id = pool_argmax::id;
  /// @brief The per-tensor descriptor: the max pool whose indices the tensor holds.
  using descriptor_type = pool_geometry;

  /// @brief Whether `g` describes the tensor (host_bytes takes it).
  /// @param bytes The tensor's size.
  /// @param g The pool's geometry.
  /// @return Whether the tensor is `g`'s int64 indices, `g` within the format's limits.
  static bool accepts(std::size_t bytes, pool_geometry const& g) noexcept
  {
    return detail::argmax_geometry_fits(bytes, g);
  }
  /// @brief The host slot: room for the indices unchanged (see the file docs).
  /// @param bytes The tensor's size.
  /// @param geometry The pool's geometry.
  /// @return The slot's bytes.
  /// @throws stash::logic_error Unless `geometry` describes the tensor.
  static std::size_t host_bytes(std::size_t bytes, pool_geometry const& geometry)
  {
    auto const& g = detail::argmax_geometry(bytes, geometry, "pool_argmax_transfer");
    return identity<std::int64_t>::max_compressed_bytes(g.outputs());
  }
  /// @brief None: the host reference needs none.
  /// @return 0.
  static std::size_t scratch_bytes(std::size_t) noexcept { return 0; }

  /// @brief host_encode_indices in `s`'s order; indices outside their windows go unchanged.
  /// @tparam Backend A backend with `launch(stream, task)` (host_backend).
  /// @param b The backend.
  /// @param s The stream the encode runs in the order of.
  /// @param device The indices.
  /// @param bytes Their size.
  /// @param host The host slot.
  /// @param capacity Its size (host_bytes).
  /// @param status Where the encoded size lands.
  /// @param geometry The pool's geometry.
  /// @throws stash::logic_error Unless `geometry` describes the tensor (nothing queued).
  template <class Backend>
  static void encode(Backend& b, typename Backend::stream s, void const* device, std::size_t bytes,
                     void* host, std::size_t capacity, void* /*scratch*/, transfer_status* status,
                     pool_geometry const& geometry)
  {
    pool_geometry const g =
        detail::argmax_geometry(bytes, geometry, "pool_argmax_transfer::encode");
    b.launch(s, [=] {
      std::span<std::int64_t const> const in(static_cast<std::int64_t const*>(device),
                                             bytes / sizeof(std::int64_t));
      std::span<std::byte> const out(static_cast<std::byte*>(host), capacity);
      std::size_t used = 0;
      try {
        used = pool_argmax::host_encode_indices(in, g, out);
      } catch (codec_error const&) {  // bad_index: not this pool's indices
        used = identity<std::int64_t>::host_encode(in, out);
      }
      *status = transfer_status{codec_status{0, 0, 0}, used, 0};
    });
  }

  /// @brief The exact indices back in `s`'s order; a bad host copy leaves zeros and an error in
  /// `*status`.
  /// @tparam Backend A backend with `launch(stream, task)` (host_backend).
  /// @param b The backend.
  /// @param s The stream the decode runs in the order of.
  /// @param host The host copy.
  /// @param capacity Its slot's size.
  /// @param device Where the indices go.
  /// @param bytes Their size.
  /// @param status Where a decode error lands.
  /// @param encoded_bytes The host copy's size when known (else unknown_encoded_bytes).
  /// @param geometry The pool's geometry.
  /// @throws stash::logic_error Unless `geometry` describes the tensor (nothing queued).
  template <class Backend>
  static void decode(Backend& b, typename Backend::stream s, void const* host, std::size_t capacity,
                     void* device, std::size_t bytes, void* /*scratch*/, transfer_status* status,
                     std::size_t encoded_bytes, pool_geometry const& geometry)
  {
    pool_geometry const g =
        detail::argmax_geometry(bytes, geometry, "pool_argmax_transfer::decode");
    std::size_t const readable = encoded_bytes < capacity ? encoded_bytes : capacity;
    b.launch(s, [=] {
      std::span<std::byte const> const src(static_cast<std::byte const*>(host), readable);
      std::span<std::int64_t> const dst(static_cast<std::int64_t*>(device),
                                        bytes / sizeof(std::int64_t));
      detail::decode_and_report(
          [&] {
            if (detail::written_unchanged(src)) {
              detail::expect_every_element(identity<std::int64_t>::host_decode(src, dst),
                                           dst.size());
            } else {
              (void)pool_argmax::host_decode_indices(src, g, dst);
            }
          },
          device, bytes, status);
    });
  }
};

/// @brief `pool_argmax` in a Codec slot, on a host-task backend.
template <detail::host_task_backend Backend>
struct transfer_for<Backend, pool_argmax> {
  using type = pool_argmax_transfer;  ///< the transfer
};

}  // namespace stash
