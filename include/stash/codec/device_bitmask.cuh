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
  /// @return 0.
  [[nodiscard]] static std::size_t encode_scratch_bytes(std::size_t) { return 0; }
  /// @brief No scratch needed.
  /// @return 0.
  [[nodiscard]] static std::size_t decode_scratch_bytes(std::size_t) { return 0; }

  /// @brief Enqueues the encode; `*d_compressed_bytes` gets the size.
  /// @param d_in The elements (device memory).
  /// @param n How many.
  /// @param d_out Where the buffer goes: 16-byte aligned, host_codec::max_compressed_bytes(n).
  /// @param out_capacity Bytes at `d_out`.
  /// @param d_compressed_bytes Device memory for the buffer's size.
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a null or misaligned pointer or an output too small.
  /// @throws stash::cuda_error For a launch that failed.
  static void encode_async(float const* d_in, std::size_t n, std::byte* d_out,
                           std::size_t out_capacity, std::size_t* d_compressed_bytes, void*,
                           std::size_t, cuda::stream_ref stream)
  {
    detail::expect_device_encode_args("device_bitmask::encode_async", d_in, n, d_out, out_capacity,
                                      bitmask::max_compressed_bytes(n), d_compressed_bytes);
    STASH_CUDA_TRY(detail::bitmask_encode_async(d_in, n, d_out, d_compressed_bytes, stream.get()));
  }

  /// @brief Enqueues validation and decode (to 0.0f / 1.0f).
  /// @param d_src The buffer (device memory, 16-byte aligned).
  /// @param src_bytes Bytes at `d_src`.
  /// @param d_out The elements' destination (device memory).
  /// @param out_capacity Elements `d_out` holds.
  /// @param d_status Where the verdict goes (device memory; see throw_if_error).
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a null or misaligned pointer, before anything is queued.
  /// @throws stash::cuda_error For a launch that failed.
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
  /// @param d_src A bitmask buffer (device memory, 16-byte aligned).
  /// @param src_bytes Bytes at `d_src`.
  /// @param d_grad The gradient, updated in place (device memory).
  /// @param grad_elements Elements at `d_grad`.
  /// @param d_status Where the verdict goes (device memory).
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a null or misaligned pointer.
  /// @throws stash::cuda_error For a launch that failed.
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

/// @brief bitmask's device form.
template <>
struct device_codec_for<bitmask> {
  using type = device_bitmask;  ///< the device codec
};

}  // namespace stash
