/**
 * @file device_pool_argmax.cuh
 * @brief Stream-ordered encode/decode of max-pool indices as 4-bit window positions; bytes
 * identical to pool_argmax::host_encode_indices (and to identity<int64_t> for indices outside
 * their windows, see encode_indices_async).
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/detail/pool_argmax_kernels.cuh>
#include <stash/codec/device_codec.cuh>
#include <stash/codec/identity.hpp>
#include <stash/codec/pool_argmax.hpp>
#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace stash {

/// @brief Device side of pool_argmax's index encoding (the geometry is per call, so it is not a
/// stash::device_codec).
class device_pool_argmax {
 public:
  /// @brief The codec whose bytes this writes.
  using host_codec = pool_argmax;

  /// @brief One device word, padded to 16: whether an index fell outside its window.
  /// @return 16.
  [[nodiscard]] static constexpr std::size_t encode_scratch_bytes() noexcept { return 16; }

  /// @brief Enqueues the encode of `g.outputs()` indices; `*d_size` gets the size. When an index
  /// is outside its window the buffer is identity<int64_t>'s (the indices unchanged), so
  /// `out_capacity` must hold identity<int64_t>::max_compressed_bytes(g.outputs()).
  /// @param d_in The int64 indices (device memory).
  /// @param g The pool's geometry.
  /// @param d_out Where the buffer goes (16-byte aligned).
  /// @param out_capacity Bytes at `d_out`.
  /// @param d_size Device memory for the buffer's size.
  /// @param scratch encode_scratch_bytes() of device memory.
  /// @param scratch_bytes Bytes at `scratch`.
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a bad geometry, a null or misaligned pointer, or an output or
  ///  scratch too small.
  /// @throws stash::cuda_error For a launch that failed.
  static void encode_indices_async(std::int64_t const* d_in, pool_geometry const& g,
                                   std::byte* d_out, std::size_t out_capacity, std::size_t* d_size,
                                   void* scratch, std::size_t scratch_bytes,
                                   cuda::stream_ref stream)
  {
    g.validate("device_pool_argmax::encode_indices_async");
    std::size_t const n = g.outputs();
    detail::expect_device_encode_args("device_pool_argmax::encode_indices_async", d_in, n, d_out,
                                      out_capacity, identity<std::int64_t>::max_compressed_bytes(n),
                                      d_size);
    // atomicOr on the scratch word needs it 4-byte aligned (a misaligned atomic is a device fault).
    STASH_EXPECTS(scratch != nullptr && scratch_bytes >= encode_scratch_bytes() &&
                      reinterpret_cast<std::uintptr_t>(scratch) % alignof(std::uint32_t) == 0,
                  "device_pool_argmax::encode_indices_async: scratch of " +
                      std::to_string(scratch_bytes) + " bytes, " +
                      std::to_string(encode_scratch_bytes()) + " needed, 4-byte aligned");
    STASH_CUDA_TRY(detail::argmax_encode_async(d_in, g.dims(), n, g.param(), d_out, d_size,
                                               static_cast<std::uint32_t*>(scratch), stream.get()));
  }

  /// @brief Enqueues validation and decode into `g.outputs()` indices (the verdict in
  /// `*d_status`; on an error the destination is left partly written: zero it, e.g. with
  /// zero_on_decode_error_async).
  /// @param d_src The buffer (device memory, 16-byte aligned).
  /// @param src_bytes Bytes at `d_src`.
  /// @param g The geometry it was encoded with.
  /// @param d_out The indices' destination (device memory).
  /// @param out_capacity Elements `d_out` holds.
  /// @param d_status Where the verdict goes (device memory).
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a bad geometry or a null or misaligned pointer.
  /// @throws stash::cuda_error For a launch that failed.
  static void decode_indices_async(std::byte const* d_src, std::size_t src_bytes,
                                   pool_geometry const& g, std::int64_t* d_out,
                                   std::size_t out_capacity, codec_status* d_status,
                                   cuda::stream_ref stream)
  {
    g.validate("device_pool_argmax::decode_indices_async");
    detail::expect_device_decode_args("device_pool_argmax::decode_indices_async", d_src, d_out,
                                      out_capacity, d_status);
    STASH_EXPECTS(out_capacity >= g.outputs(),
                  "device_pool_argmax::decode_indices_async: destination of " +
                      std::to_string(out_capacity) + " indices, the geometry has " +
                      std::to_string(g.outputs()) + " outputs");
    STASH_CUDA_TRY(detail::argmax_decode_async(d_src, src_bytes, g.dims(), g.outputs(), g.param(),
                                               d_out, d_status, stream.get()));
  }
};

}  // namespace stash
