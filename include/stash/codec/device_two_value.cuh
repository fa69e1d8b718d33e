/**
 * @file device_two_value.cuh
 * @brief Stream-ordered two_value encode/decode; bytes identical to stash::two_value, refusing
 * data that is not two-valued exactly when two_value::two_value_of does (through a device word,
 * since the data decides after the call returns).
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/detail/two_value_kernels.cuh>
#include <stash/codec/device_codec.cuh>
#include <stash/codec/identity.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace stash {

/// @brief Device side of stash::two_value<T>. Not a stash::device_codec: whether the data can be
/// encoded at all is known only once the kernels ran, so encode_async reports a refusal in a
/// device word (`*d_refused`) the caller reads in the stream's order, where host_encode throws;
/// device_two_value_transfer then writes the elements unchanged (keep_unchanged_async).
/// @tparam T The element type.
template <codec_element T>
class device_two_value {
 public:
  /// @brief The codec whose bytes this writes.
  using host_codec = two_value<T>;

  /// @brief Encoder scratch: the first nonzero element's index and the refusal flag.
  /// @return 16.
  [[nodiscard]] static constexpr std::size_t encode_scratch_bytes() noexcept
  {
    return sizeof(detail::two_value_encode_state);
  }
  /// @brief Decoder scratch: the validated header's fields and the mask's any-bit flag.
  /// @return 32.
  [[nodiscard]] static constexpr std::size_t decode_scratch_bytes() noexcept
  {
    return sizeof(detail::two_value_decode_state);
  }

  /// @brief Enqueues the encode of n elements. Two-valued data (every element the all-zero bit
  /// pattern or one same other pattern c, bitwise) gives two_value<T>::host_encode's bytes,
  /// `*d_compressed_bytes` their size and `*d_refused` 0. Otherwise (two different nonzero
  /// patterns: host_encode would throw) `*d_refused` is 1, `*d_compressed_bytes` 0 and no header
  /// is written (the mask words at `d_out` are, so its contents are not a buffer).
  /// @param d_in The elements (device memory).
  /// @param n How many.
  /// @param d_out Where the buffer goes: 16-byte aligned, host_codec::max_compressed_bytes(n).
  /// @param out_capacity Bytes at `d_out`.
  /// @param d_compressed_bytes Device-accessible memory for the buffer's size.
  /// @param d_refused Device-accessible word: 1 when the data is not two-valued, else 0.
  /// @param d_scratch encode_scratch_bytes() of device memory, 8-byte aligned.
  /// @param scratch_bytes Bytes at `d_scratch`.
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error Before anything is queued: a null or misaligned pointer, an
  ///   output or a scratch too small.
  /// @throws stash::cuda_error For a launch that failed.
  static void encode_async(T const* d_in, std::size_t n, std::byte* d_out, std::size_t out_capacity,
                           std::size_t* d_compressed_bytes, std::uint32_t* d_refused,
                           void* d_scratch, std::size_t scratch_bytes, cuda::stream_ref stream)
  {
    detail::expect_device_encode_args("device_two_value::encode_async", d_in, n, d_out,
                                      out_capacity, host_codec::max_compressed_bytes(n),
                                      d_compressed_bytes);
    STASH_EXPECTS(d_refused != nullptr, "device_two_value::encode_async: null refusal word");
    expect_scratch("device_two_value::encode_async", d_scratch, scratch_bytes,
                   encode_scratch_bytes());
    STASH_CUDA_TRY(detail::two_value_encode_async(
        d_in, n, d_out, d_compressed_bytes, d_refused,
        static_cast<detail::two_value_encode_state*>(d_scratch), stream.get()));
  }

  /// @brief Enqueues, after encode_async on the same stream: when it refused the data
  /// (`*d_refused` set), the elements unchanged as an identity<T> buffer at `d_out` and its size
  /// in `*d_compressed_bytes`; otherwise nothing. The fallback of device_two_value_transfer.
  /// @param d_in The elements encode_async was given (device memory).
  /// @param n How many.
  /// @param d_out The same output: 16-byte aligned, identity<T>::max_compressed_bytes(n).
  /// @param out_capacity Bytes at `d_out`.
  /// @param d_compressed_bytes The same size word.
  /// @param d_refused The word encode_async wrote.
  /// @param stream The stream encode_async was queued on.
  /// @throws stash::logic_error Before anything is queued: a null or misaligned pointer, an
  ///   output too small for the elements.
  /// @throws stash::cuda_error For a launch that failed.
  static void keep_unchanged_async(T const* d_in, std::size_t n, std::byte* d_out,
                                   std::size_t out_capacity, std::size_t* d_compressed_bytes,
                                   std::uint32_t const* d_refused, cuda::stream_ref stream)
  {
    detail::expect_device_encode_args("device_two_value::keep_unchanged_async", d_in, n, d_out,
                                      out_capacity, identity<T>::max_compressed_bytes(n),
                                      d_compressed_bytes);
    STASH_EXPECTS(d_refused != nullptr,
                  "device_two_value::keep_unchanged_async: null refusal word");
    STASH_CUDA_TRY(detail::two_value_keep_unchanged_async(d_in, n, d_out, d_compressed_bytes,
                                                          d_refused, stream.get()));
  }

  /// @brief Enqueues validation and decode of a two_value buffer into at most `out_capacity`
  /// elements (the verdict in `*d_status`; on an error the destination may be partly written:
  /// zero it, e.g. with zero_on_decode_error_async).
  /// @param d_src The buffer (device-accessible, 16-byte aligned).
  /// @param src_bytes Bytes at `d_src`.
  /// @param d_out The elements' destination (device memory).
  /// @param out_capacity Elements `d_out` holds.
  /// @param d_status Where the verdict goes (device-accessible; see throw_if_error).
  /// @param d_scratch decode_scratch_bytes() of device memory, 8-byte aligned.
  /// @param scratch_bytes Bytes at `d_scratch`.
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a null or misaligned pointer or a scratch too small, before
  ///   anything is queued.
  /// @throws stash::cuda_error For a launch that failed.
  static void decode_async(std::byte const* d_src, std::size_t src_bytes, T* d_out,
                           std::size_t out_capacity, codec_status* d_status, void* d_scratch,
                           std::size_t scratch_bytes, cuda::stream_ref stream)
  {
    decode<false>("device_two_value::decode_async", d_src, src_bytes, d_out, out_capacity, d_status,
                  d_scratch, scratch_bytes, stream);
  }

  /// @brief As decode_async, for what device_two_value_transfer writes: a two_value buffer or the
  /// identity<T> buffer of keep_unchanged_async, either holding exactly `n` elements (fewer is
  /// payload_size_mismatch at the count, as two_value_transfer's decode says).
  /// @param d_src The buffer (device-accessible, 16-byte aligned).
  /// @param src_bytes Bytes at `d_src`.
  /// @param d_out The elements' destination (device memory).
  /// @param n Elements `d_out` holds, and the buffer must.
  /// @param d_status Where the verdict goes (device-accessible).
  /// @param d_scratch decode_scratch_bytes() of device memory, 8-byte aligned.
  /// @param scratch_bytes Bytes at `d_scratch`.
  /// @param stream The stream the kernels are queued on.
  /// @throws stash::logic_error For a null or misaligned pointer or a scratch too small, before
  ///   anything is queued.
  /// @throws stash::cuda_error For a launch that failed.
  static void decode_or_unchanged_async(std::byte const* d_src, std::size_t src_bytes, T* d_out,
                                        std::size_t n, codec_status* d_status, void* d_scratch,
                                        std::size_t scratch_bytes, cuda::stream_ref stream)
  {
    decode<true>("device_two_value::decode_or_unchanged_async", d_src, src_bytes, d_out, n,
                 d_status, d_scratch, scratch_bytes, stream);
  }

 private:
  // The scratch's u64 fields take 64-bit atomics (misaligned: a device fault).
  static void expect_scratch(const char* who, void const* scratch, std::size_t bytes,
                             std::size_t need)
  {
    STASH_EXPECTS(scratch != nullptr && bytes >= need &&
                      reinterpret_cast<std::uintptr_t>(scratch) % alignof(std::uint64_t) == 0,
                  std::string(who) + ": scratch of " + std::to_string(bytes) + " bytes, " +
                      std::to_string(need) + " needed, 8-byte aligned");
  }

  template <bool OrUnchanged>
  static void decode(const char* who, std::byte const* d_src, std::size_t src_bytes, T* d_out,
                     std::size_t out_capacity, codec_status* d_status, void* d_scratch,
                     std::size_t scratch_bytes, cuda::stream_ref stream)
  {
    detail::expect_device_decode_args(who, d_src, d_out, out_capacity, d_status);
    expect_scratch(who, d_scratch, scratch_bytes, decode_scratch_bytes());
    STASH_CUDA_TRY((detail::two_value_decode_async<T, OrUnchanged>(
        d_src, src_bytes, d_out, out_capacity, d_status,
        static_cast<detail::two_value_decode_state*>(d_scratch), stream.get())));
  }
};

}  // namespace stash
