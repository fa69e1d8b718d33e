/**
 * @file staging_kernels.cuh
 * @brief Kernels around a device decode: copy the prefix of a codec buffer its header declares,
 * and zero a destination whose decode failed. Functions here return cudaError_t.
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/detail/format.hpp>
#include <stash/codec/detail/kernel_common.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace stash::detail {

/// Copies header + payload of the buffer at `src` (16-byte aligned, readable up to
/// align16(capacity)), clamped to `capacity`, to `dst` in 16-byte chunks. One thread per block
/// reads the length: `src` may be in host memory. A decoder never reads past that prefix
/// (parse_header bounds the payload by it).
template <int Unused = 0>
__global__ void copy_declared_prefix_kernel(std::byte const* src, std::uint64_t capacity,
                                            std::byte* dst)
{
  __shared__ std::uint64_t chunks;
  if (threadIdx.x == 0) {
    std::uint64_t payload = 0;  // unread when the slot cannot hold a header
    if (capacity >= header_bytes) {
      // Header bytes [16, 32) (count, payload) in one 16-byte load: one PCIe read, not eight.
      static_assert(off_payload == 24 && header_bytes == 32);
      uint4 const tail = reinterpret_cast<uint4 const*>(src)[1];
      payload          = (std::uint64_t{tail.w} << 32) | tail.z;
    }
    chunks = align16(declared_prefix_bytes(capacity, payload)) / 16;
  }
  __syncthreads();
  auto const* from = reinterpret_cast<uint4 const*>(src);
  auto* to         = reinterpret_cast<uint4*>(dst);
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < chunks;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    to[i] = from[i];
  }
}

/// Zeroes `bytes` at `dst` when the status reports an error: no half-decoded data is left.
template <int Unused = 0>
__global__ void zero_on_error_kernel(unsigned char* dst, std::uint64_t bytes,
                                     codec_status const* status)
{
  if (block_status_ok(status)) { return; }
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < bytes;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    dst[i] = 0;
  }
}

/// Enough blocks to keep a copy of `bytes` at PCIe speed, few enough that the per-block length
/// read is noise.
inline unsigned int staging_grid(std::uint64_t bytes)
{
  std::uint64_t const blocks = (bytes / 16 + codec_block_threads - 1) / codec_block_threads;
  return static_cast<unsigned int>(std::clamp<std::uint64_t>(blocks, 1, 1024));
}

inline cudaError_t copy_declared_prefix_async(std::byte const* src, std::uint64_t capacity,
                                              std::byte* dst, cudaStream_t stream)
{
  copy_declared_prefix_kernel<>
      <<<staging_grid(align16(capacity)), codec_block_threads, 0, stream>>>(src, capacity, dst);
  return cudaGetLastError();
}

inline cudaError_t zero_on_error_async(void* dst, std::uint64_t bytes, codec_status const* status,
                                       cudaStream_t stream)
{
  zero_on_error_kernel<>
      <<<256, codec_block_threads, 0, stream>>>(static_cast<unsigned char*>(dst), bytes, status);
  return cudaGetLastError();
}

}  // namespace stash::detail
