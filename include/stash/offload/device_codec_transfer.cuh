/**
 * @file device_codec_transfer.cuh
 * @brief The offload manager's codec path on a GPU: the encode kernel writes the compressed tensor
 * straight into the pinned host slot, and the decode kernel reads it back from there.
 *
 * Pinned host memory is mapped into the device's address space, so the encoder's stores cross
 * PCIe as they are made and the number of bytes moved is exactly the compressed size, with no
 * host round trip to learn it (cDMA's compressing DMA engine, in software). It also needs no device
 * buffer for the compressed bytes and is legal in a CUDA graph. The alternatives (encode into
 * device scratch, then a worst-case cudaMemcpyAsync, a copy kernel that reads the device-written
 * size, or a host round trip for the size) are measured against it by bench_offload
 * (benchmarks/offload/offload_bandwidth.cu, section 3); no GPU result is recorded yet.
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/device_codec.cuh>
#include <stash/core/error.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/transfer.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

namespace stash {

namespace detail {

// Kernels defined in a header are templates, launched as `kernel<><<<...>>>`: a template may be
// defined in every translation unit that includes it (`__global__ inline` draws nvcc warning
// #20050, the inline being ignored). The codec kernels (bitmask_kernels.cuh) do the same.

// A failed decode must not leave half-decoded data behind: zero the destination.
template <int Unused = 0>
__global__ void zero_on_decode_error_kernel(unsigned char* dst, std::size_t bytes,
                                            codec_status const* status)
{
  if (status->code == 0) { return; }
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < bytes;
       i += std::size_t(gridDim.x) * blockDim.x) {
    dst[i] = 0;
  }
}

// The status lives in pinned host memory: a one-thread kernel clears it, which a CUDA graph
// captures like any kernel (a memset node is meant for device memory).
template <int Unused = 0>
__global__ void clear_status_kernel(codec_status* status)
{
  *status = codec_status{};
}

}  // namespace detail

/// @brief Transfer through device codec `D` (device_zvc, device_bitmask, device_precision, ...).
/// @tparam D The device codec.
template <device_codec D>
struct device_codec_transfer {
  /// @brief The host reference that defines the bytes.
  using host_codec = typename D::host_codec;
  /// @brief The element type.
  using value_type = typename host_codec::value_type;
  /// @brief The codec that writes the bytes.
  static constexpr std::uint16_t codec_id = host_codec::id;
  /// @brief As the codec.
  static constexpr bool lossless = host_codec::lossless;
  /// @brief The kernels write a status.
  static constexpr bool reports_status = true;

  /// @brief The codec's worst case. Throws stash::logic_error for a tensor the encoder refuses
  /// (its size limit), so the offload manager refuses it before taking any memory.
  static std::size_t host_bytes(std::size_t bytes)
  {
    STASH_EXPECTS(bytes % sizeof(value_type) == 0,
                  "device_codec_transfer: tensor size is not a whole number of elements");
    std::size_t const n = bytes / sizeof(value_type);
    if constexpr (requires { D::expect_encodable(n); }) { D::expect_encodable(n); }
    return host_codec::max_compressed_bytes(n);
  }
  /// @brief The larger of the encoder's and decoder's scratch.
  static std::size_t scratch_bytes(std::size_t bytes)
  {
    std::size_t const n = bytes / sizeof(value_type);
    return std::max(D::encode_scratch_bytes(n), D::decode_scratch_bytes(n));
  }

  /// @brief Encodes on `s` into the pinned slot; the compressed size lands in the status record.
  static void encode(cuda_backend&, cudaStream_t s, void const* device, std::size_t bytes,
                     void* host, std::size_t capacity, void* scratch, transfer_status* status)
  {
    detail::clear_status_kernel<><<<1, 1, 0, s>>>(&status->status);
    STASH_CUDA_TRY(cudaGetLastError());
    D::encode_async(static_cast<value_type const*>(device), bytes / sizeof(value_type),
                    static_cast<std::byte*>(host), capacity, &status->encoded_bytes, scratch,
                    scratch_bytes(bytes), s);
  }

  /// @brief Decodes on `s` from the pinned slot; on a bad buffer the status says why and the
  /// destination is zeroed.
  static void decode(cuda_backend&, cudaStream_t s, void const* host, std::size_t capacity,
                     void* device, std::size_t bytes, void* scratch, transfer_status* status)
  {
    D::decode_async(static_cast<std::byte const*>(host), capacity, static_cast<value_type*>(device),
                    bytes / sizeof(value_type), &status->status, scratch, scratch_bytes(bytes), s);
    detail::zero_on_decode_error_kernel<>
        <<<256, 256, 0, s>>>(static_cast<unsigned char*>(device), bytes, &status->status);
    STASH_CUDA_TRY(cudaGetLastError());
  }
};

}  // namespace stash
