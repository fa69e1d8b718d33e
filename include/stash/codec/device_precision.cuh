/**
 * @file device_precision.cuh
 * @brief Stream-ordered DPR encode/decode; bytes identical to stash::precision.
 */
#pragma once

#include <stash/codec/detail/precision_kernels.cuh>
#include <stash/codec/device_codec.cuh>
#include <stash/codec/precision.hpp>

namespace stash {

/// @brief Device side of stash::precision<float, To> (a stash::device_codec).
/// @tparam To The narrow format (fp16, bf16, fp8_e4m3, ...).
template <class To>
class device_precision {
 public:
  /// @brief The codec whose bytes this writes.
  using host_codec = precision<float, To>;

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
    detail::expect_device_encode_args("device_precision::encode_async", d_in, n, d_out,
                                      out_capacity, host_codec::max_compressed_bytes(n),
                                      d_compressed_bytes);
    STASH_CUDA_TRY(
        detail::precision_encode_async<To>(d_in, n, d_out, d_compressed_bytes, stream.get()));
  }

  /// @brief Enqueues validation and decode.
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
    detail::expect_device_decode_args("device_precision::decode_async", d_src, d_out, out_capacity,
                                      d_status);
    STASH_CUDA_TRY(detail::precision_decode_async<To>(d_src, src_bytes, d_out, out_capacity,
                                                      d_status, stream.get()));
  }
};

/// @brief precision<float, To>'s device form.
template <class To>
struct device_codec_for<precision<float, To>> {
  using type = device_precision<To>;  ///< the device codec
};

}  // namespace stash
