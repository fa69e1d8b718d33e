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
  [[nodiscard]] static std::size_t encode_scratch_bytes(std::size_t) { return 0; }
  /// @brief No scratch needed.
  [[nodiscard]] static std::size_t decode_scratch_bytes(std::size_t) { return 0; }

  /// @brief Enqueues the encode; `*d_compressed_bytes` gets the size.
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

}  // namespace stash
