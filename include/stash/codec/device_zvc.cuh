/**
 * @file device_zvc.cuh
 * @brief Stream-ordered ZVC encode/decode; output byte-identical to stash::zvc.
 */
#pragma once

#include <stash/codec/detail/encode_scratch.hpp>
#include <stash/codec/detail/zvc_kernels.cuh>
#include <stash/codec/device_codec.cuh>
#include <stash/codec/zvc.hpp>

#include <string>

namespace stash {

/// @brief Device side of stash::zvc<T> (a stash::device_codec).
/// @tparam T The element type.
template <codec_element T>
class device_zvc {
 public:
  /// @brief The codec whose bytes this writes.
  using host_codec = zvc<T>;

  /// @brief Scratch for encode_async: per-chunk counts, the scanned chunk table and CUB scan
  /// storage.
  /// @param n Element count.
  /// @return The bytes encode_async needs for n elements.
  /// @throws stash::cuda_error When CUB's size query fails.
  [[nodiscard]] static std::size_t encode_scratch_bytes(std::size_t n)
  {
    std::size_t bytes = 0;
    STASH_CUDA_TRY(detail::zvc_encode_scratch_bytes(n, bytes));
    return bytes;
  }
  /// @brief Decoding needs no scratch.
  /// @return 0.
  [[nodiscard]] static std::size_t decode_scratch_bytes(std::size_t) { return 0; }

  /// @brief Throws stash::logic_error when one buffer cannot hold n elements (the chunk table
  /// stores u32 counts); checked by encode_async, and by callers before they take any memory.
  /// @param n Element count.
  /// @throws stash::logic_error When n is beyond the limit.
  static void expect_encodable(std::size_t n)
  {
    detail::expect_device_element_limit("device_zvc", n, host_codec::max_elements);
  }

  /// @brief Enqueues the encode of n elements; `*d_compressed_bytes` gets the size.
  /// @param d_in The elements (device memory).
  /// @param n How many.
  /// @param d_out Where the buffer goes: 16-byte aligned, host_codec::max_compressed_bytes(n).
  /// @param out_capacity Bytes at `d_out`.
  /// @param d_compressed_bytes Device memory for the buffer's size.
  /// @param d_scratch encode_scratch_bytes(n) of device memory, 4-byte aligned (its first
  ///   arrays are u32 counts and tables).
  /// @param scratch_bytes Bytes at `d_scratch`.
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error Before anything is queued: n beyond expect_encodable(), a null or
  ///   misaligned pointer, an output or a scratch too small.
  /// @throws stash::cuda_error A launch or CUB call that failed.
  static void encode_async(T const* d_in, std::size_t n, std::byte* d_out, std::size_t out_capacity,
                           std::size_t* d_compressed_bytes, void* d_scratch,
                           std::size_t scratch_bytes, cuda::stream_ref stream)
  {
    expect_encodable(n);
    detail::expect_device_encode_args("device_zvc::encode_async", d_in, n, d_out, out_capacity,
                                      host_codec::max_compressed_bytes(n), d_compressed_bytes);
    detail::expect_encode_scratch("device_zvc::encode_async", d_scratch, scratch_bytes,
                                  encode_scratch_bytes(n));
    STASH_CUDA_TRY(detail::zvc_encode_async(d_in, n, d_out, d_compressed_bytes, d_scratch,
                                            scratch_bytes, stream.get()));
  }

  /// @brief Enqueues validation and decode into at most `out_capacity` elements.
  /// @param d_src The buffer (device memory, 16-byte aligned).
  /// @param src_bytes Bytes at `d_src`.
  /// @param d_out The elements' destination (device memory).
  /// @param out_capacity Elements `d_out` holds.
  /// @param d_status Where the verdict goes (device memory; see throw_if_error).
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a null or misaligned pointer, before anything is queued.
  /// @throws stash::cuda_error For a launch that failed.
  static void decode_async(std::byte const* d_src, std::size_t src_bytes, T* d_out,
                           std::size_t out_capacity, codec_status* d_status, void*, std::size_t,
                           cuda::stream_ref stream)
  {
    detail::expect_device_decode_args("device_zvc::decode_async", d_src, d_out, out_capacity,
                                      d_status);
    std::size_t const cap =
        out_capacity < host_codec::max_elements ? out_capacity : host_codec::max_elements;
    STASH_CUDA_TRY(detail::zvc_decode_async(d_src, src_bytes, d_out, cap, d_status, stream.get()));
  }
};

/// @brief zvc<T>'s device form.
template <codec_element T>
struct device_codec_for<zvc<T>> {
  using type = device_zvc<T>;  ///< the device codec
};

}  // namespace stash
