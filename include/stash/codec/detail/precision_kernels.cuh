/**
 * @file precision_kernels.cuh
 * @brief DPR kernels: one thread per storage group (1 element, or 3 for fp10) around the shared
 * minifloat_encode/decode. Bytes match precision.hpp. Functions here return cudaError_t.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/detail/kernel_common.cuh>
#include <stash/codec/detail/minifloat.hpp>

#include <cstdint>

namespace stash::detail {

template <class To>
__global__ void precision_encode_kernel(float const* in, std::uint64_t n, std::byte* out,
                                        std::size_t* d_size)
{
  std::uint64_t const groups = precision_groups<To>(n);
  std::uint64_t const first  = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (first == 0) {
    write_header(out, codec_ids::precision | To::code, static_cast<std::uint8_t>(element_type::f32),
                 0, n, groups * To::group_bytes);
    *d_size = static_cast<std::size_t>(header_bytes + groups * To::group_bytes);
  }
  for (std::uint64_t g = first; g < groups; g += std::uint64_t{gridDim.x} * blockDim.x) {
    precision_encode_group<To>(in, n, g, out + header_bytes);
  }
}

template <class To>
__global__ void precision_validate_kernel(std::byte const* src, std::uint64_t src_bytes,
                                          std::uint64_t capacity, codec_status* status)
{
  header_fields h{};
  check_result r = parse_header(src, src_bytes, codec_ids::precision | To::code,
                                static_cast<std::uint8_t>(element_type::f32), 0, capacity, h);
  if (r.code == codec_errc::ok && h.payload != precision_groups<To>(h.count) * To::group_bytes) {
    r = {codec_errc::payload_size_mismatch, off_payload};
  }
  store_status(status, r);
}

template <class To>
__global__ void precision_decode_kernel(std::byte const* src, float* dst, codec_status* status)
{
  if (!block_status_ok(status)) { return; }  // one read per block; the header is valid
  std::uint64_t const n      = load_u64(src + off_count);
  std::uint64_t const groups = precision_groups<To>(n);
  for (std::uint64_t g = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups;
       g += std::uint64_t{gridDim.x} * blockDim.x) {
    report(status, precision_decode_group<To>(src + header_bytes, n, g, dst));
  }
}

inline unsigned int precision_grid(std::uint64_t groups)
{
  std::uint64_t const b = (groups + codec_block_threads - 1) / codec_block_threads;
  return static_cast<unsigned int>(b == 0 ? 1 : (b > 65535 ? 65535 : b));
}

template <class To>
cudaError_t precision_encode_async(float const* in, std::uint64_t n, std::byte* out,
                                   std::size_t* d_size, cudaStream_t stream)
{
  precision_encode_kernel<To>
      <<<precision_grid(precision_groups<To>(n)), codec_block_threads, 0, stream>>>(in, n, out,
                                                                                    d_size);
  return cudaGetLastError();
}

template <class To>
cudaError_t precision_decode_async(std::byte const* src, std::uint64_t src_bytes, float* dst,
                                   std::uint64_t capacity, codec_status* status,
                                   cudaStream_t stream)
{
  precision_validate_kernel<To><<<1, 1, 0, stream>>>(src, src_bytes, capacity, status);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  precision_decode_kernel<To>
      <<<precision_grid(precision_groups<To>(capacity)), codec_block_threads, 0, stream>>>(src, dst,
                                                                                           status);
  return cudaGetLastError();
}

}  // namespace stash::detail
