/**
 * @file device_range_mask.cuh
 * @brief Stream-ordered range_mask encode/decode and hardtanh-backward masking; bytes identical
 * to stash::range_mask.
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/detail/range_mask_kernels.cuh>
#include <stash/codec/device_codec.cuh>
#include <stash/codec/range_mask.hpp>
#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace stash {

/// @brief Device side of stash::range_mask (the bounds are per call, so it is not a
/// stash::device_codec, as device_pool_argmax is not).
class device_range_mask {
 public:
  /// @brief The codec whose bytes this writes.
  using host_codec = range_mask;

  /// @brief Enqueues the encode; `*d_compressed_bytes` gets the size.
  /// @param d_in The elements (device memory).
  /// @param n How many.
  /// @param bounds The clamp's bounds.
  /// @param d_out Where the buffer goes: 16-byte aligned, host_codec::max_compressed_bytes(n).
  /// @param out_capacity Bytes at `d_out`.
  /// @param d_compressed_bytes Device-accessible memory for the buffer's size.
  /// @param stream The stream the kernel is queued on.
  /// @throws stash::logic_error For unusable bounds, a null or misaligned pointer or an output
  ///   too small (nothing queued).
  /// @throws stash::cuda_error For a launch that failed.
  static void encode_async(float const* d_in, std::size_t n, range_bounds const& bounds,
                           std::byte* d_out, std::size_t out_capacity,
                           std::size_t* d_compressed_bytes, cuda::stream_ref stream)
  {
    bounds.validate("device_range_mask::encode_async");
    detail::expect_device_encode_args("device_range_mask::encode_async", d_in, n, d_out,
                                      out_capacity, range_mask::max_compressed_bytes(n),
                                      d_compressed_bytes);
    STASH_CUDA_TRY(detail::range_mask_encode_async(d_in, n, detail::f32_bits(bounds.lo),
                                                   detail::f32_bits(bounds.hi), d_out,
                                                   d_compressed_bytes, stream.get()));
  }

  /// @brief Enqueues validation and decode (to the inside value or lo) into at most
  /// `out_capacity` elements (on an error the destination may be partly written: zero it, e.g.
  /// with zero_on_decode_error_async).
  /// @param d_src The buffer (device-accessible, 16-byte aligned).
  /// @param src_bytes Bytes at `d_src`.
  /// @param d_out The elements' destination (device memory).
  /// @param out_capacity Elements `d_out` holds.
  /// @param d_status Where the verdict goes (device-accessible; see throw_if_error).
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a null or misaligned pointer, before anything is queued.
  /// @throws stash::cuda_error For a launch that failed.
  static void decode_async(std::byte const* d_src, std::size_t src_bytes, float* d_out,
                           std::size_t out_capacity, codec_status* d_status,
                           cuda::stream_ref stream)
  {
    detail::expect_device_decode_args("device_range_mask::decode_async", d_src, d_out, out_capacity,
                                      d_status);
    STASH_CUDA_TRY(detail::range_mask_decode_async<false>(d_src, src_bytes, d_out, out_capacity,
                                                          false, d_status, stream.get()));
  }

  /// @brief As decode_async, for a buffer that must hold exactly `n` elements (fewer is
  /// payload_size_mismatch at the count, as range_mask_transfer's decode says).
  /// @param d_src The buffer (device-accessible, 16-byte aligned).
  /// @param src_bytes Bytes at `d_src`.
  /// @param d_out The elements' destination (device memory).
  /// @param n Elements `d_out` holds, and the buffer must.
  /// @param d_status Where the verdict goes (device-accessible).
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a null or misaligned pointer, before anything is queued.
  /// @throws stash::cuda_error For a launch that failed.
  static void decode_exact_async(std::byte const* d_src, std::size_t src_bytes, float* d_out,
                                 std::size_t n, codec_status* d_status, cuda::stream_ref stream)
  {
    detail::expect_device_decode_args("device_range_mask::decode_exact_async", d_src, d_out, n,
                                      d_status);
    STASH_CUDA_TRY(detail::range_mask_decode_async<false>(d_src, src_bytes, d_out, n, true,
                                                          d_status, stream.get()));
  }

  /// @brief hardtanh backward: zeroes d_grad where the mask bit is 0. The buffer must hold
  /// exactly `grad_elements` elements: more is destination_too_small, fewer
  /// payload_size_mismatch, in *d_status (the host's apply_mask_to_gradient throws
  /// stash::logic_error for fewer; here the count is known only on the device).
  /// @param d_src A range_mask buffer (device-accessible, 16-byte aligned).
  /// @param src_bytes Bytes at `d_src`.
  /// @param d_grad The gradient, updated in place (device memory).
  /// @param grad_elements Elements at `d_grad`.
  /// @param d_status Where the verdict goes (device-accessible).
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a null or misaligned pointer.
  /// @throws stash::cuda_error For a launch that failed.
  static void apply_mask_to_gradient_async(std::byte const* d_src, std::size_t src_bytes,
                                           float* d_grad, std::size_t grad_elements,
                                           codec_status* d_status, cuda::stream_ref stream)
  {
    detail::expect_device_decode_args("device_range_mask::apply_mask_to_gradient_async", d_src,
                                      d_grad, grad_elements, d_status);
    STASH_CUDA_TRY(detail::range_mask_decode_async<true>(d_src, src_bytes, d_grad, grad_elements,
                                                         true, d_status, stream.get()));
  }
};

}  // namespace stash
