/**
 * @file device_bitmask.cuh
 * @brief Stream-ordered Binarize encode/decode and ReLU-backward masking; bytes identical to
 * stash::bitmask.
 */
#pragma once

#include <stash/codec/bitmask.hpp>
#include <stash/codec/detail/bitmask_kernels.cuh>
#include <stash/codec/device_codec.cuh>

namespace stash {

/// @brief Device side of stash::bitmask (a stash::device_codec).
class device_bitmask {
 public:
  /// @brief The codec whose bytes this writes.
  using host_codec = bitmask;

  /// @brief No scratch needed.
  [[nodiscard]] static std::size_t encode_scratch_bytes(std::size_t) { return 0; }
  /// @brief No scratch needed.
  [[nodiscard]] static std::size_t decode_scratch_bytes(std::size_t) { return 0; }

  /// @brief Enqueues the encode; `*d_compressed_bytes` gets the size.
  static void encode_async(float const* d_in, std::size_t n, std::byte* d_out,
                           std::size_t out_capacity, std::size_t* d_compressed_bytes, void*,
                           std::size_t, cuda::stream_ref stream)
  {
    detail::expect_device_encode_args("device_bitmask::encode_async", d_in, n, d_out, out_capacity,
                                      bitmask::max_compressed_bytes(n), d_compressed_bytes);
    STASH_CUDA_TRY(detail::bitmask_encode_async(d_in, n, d_out, d_compressed_bytes, stream.get()));
  }

  /// @brief Enqueues validation and decode (to 0.0f / 1.0f).
  static void decode_async(std::byte const* d_src, std::size_t src_bytes, float* d_out,
                           std::size_t out_capacity, codec_status* d_status, void*, std::size_t,
                           cuda::stream_ref stream)
  {
    detail::expect_device_decode_args("device_bitmask::decode_async", d_src, d_out, out_capacity,
                                      d_status);
    STASH_CUDA_TRY(detail::bitmask_decode_async<false>(d_src, src_bytes, d_out, out_capacity,
                                                       d_status, stream.get()));
  }

  /// @brief ReLU backward: zeroes d_grad where the mask bit is 0. The element count comes from
  /// the buffer; more than `grad_elements` is reported in *d_status.
  static void apply_mask_to_gradient_async(std::byte const* d_src, std::size_t src_bytes,
                                           float* d_grad, std::size_t grad_elements,
                                           codec_status* d_status, cuda::stream_ref stream)
  {
    detail::expect_device_decode_args("device_bitmask::apply_mask_to_gradient_async", d_src, d_grad,
                                      grad_elements, d_status);
    STASH_CUDA_TRY(detail::bitmask_decode_async<true>(d_src, src_bytes, d_grad, grad_elements,
                                                      d_status, stream.get()));
  }
};

}  // namespace stash
