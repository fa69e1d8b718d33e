/**
 * @file device_upstream.hpp
 * @brief Device memory from cudaMalloc as an upstream.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace stash {

/// @brief Device memory of the current device via cudaMalloc (256-byte aligned). Stateless.
class device_upstream {
 public:
  /// @brief Device memory is device accessible.
  static constexpr bool is_device_accessible = true;
  /// @brief Device memory is not host accessible.
  static constexpr bool is_host_accessible = false;

  /// @brief cudaMalloc; throws stash::out_of_memory (with the device's total and used bytes) when
  /// the device is full, stash::cuda_error on any other failure.
  /// @param bytes Size.
  /// @param alignment A power of two up to 256 (cudaMalloc's alignment).
  /// @return The device memory.
  /// @throws stash::out_of_memory When the device cannot serve `bytes`.
  /// @throws stash::logic_error For an alignment cudaMalloc does not give.
  /// @throws stash::cuda_error For any other cudaMalloc failure.
  void* allocate(std::size_t bytes, std::size_t alignment = cuda_allocation_alignment)
  {
    STASH_EXPECTS(is_pow2(alignment) && alignment <= cuda_allocation_alignment,
                  "device_upstream: alignment must be a power of two <= 256");
    void* p                  = nullptr;
    cudaError_t const status = cudaMalloc(&p, bytes);
    if (status == cudaErrorMemoryAllocation) {
      detail::clear_last_error_if(status);
      std::size_t free_bytes = 0, total_bytes = 0;
      cudaError_t const info = cudaMemGetInfo(&free_bytes, &total_bytes);
      if (info == cudaSuccess) {
        throw out_of_memory("device_upstream (cudaMalloc)", bytes, total_bytes,
                            total_bytes - free_bytes);
      }
      detail::clear_last_error_if(info);
      throw out_of_memory("device_upstream (cudaMalloc)", bytes, std::nullopt, std::nullopt);
    }
    STASH_CUDA_TRY(status);
    return p;
  }

  /// @brief cudaFree; a failure is reported on stderr, never thrown.
  /// @param p Memory from allocate().
  void deallocate(void* p, std::size_t /*bytes*/,
                  std::size_t /*alignment*/ = cuda_allocation_alignment) noexcept
  {
    STASH_CUDA_CHECK_NOTHROW(cudaFree(p));
  }

  /// @brief CCCL >= 3.1's name of allocate (cuda::mr::synchronous_resource).
  /// @param bytes Size.
  /// @param alignment As for allocate().
  /// @return The device memory.
  /// @throws stash::out_of_memory As allocate().
  void* allocate_sync(std::size_t bytes, std::size_t alignment = cuda_allocation_alignment)
  {
    return allocate(bytes, alignment);
  }
  /// @brief CCCL >= 3.1's name of deallocate.
  /// @param p Memory from allocate_sync().
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate_sync(void* p, std::size_t bytes,
                       std::size_t alignment = cuda_allocation_alignment) noexcept
  {
    deallocate(p, bytes, alignment);
  }

  /// @brief Any device_upstream may free another's memory.
  friend bool operator==(device_upstream const&, device_upstream const&) noexcept { return true; }

#if defined(STASH_HAS_CUDA_MR)
  /// @brief cuda::mr property: the memory is device accessible.
  friend void get_property(device_upstream const&, cuda::mr::device_accessible) noexcept {}
#endif
};

static_assert(upstream_resource<device_upstream>);

}  // namespace stash
