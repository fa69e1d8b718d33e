/**
 * @file pinned_host_upstream.hpp
 * @brief Page-locked host memory from cudaHostAlloc as an upstream.
 *
 * Pinned memory is what lets a D2H/H2D copy run asynchronously on a copy engine; pageable memory
 * makes cudaMemcpyAsync stage through a driver buffer and synchronise. cudaHostAlloc is slow
 * (milliseconds per call), so stash takes it in large blocks and pools them.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace stash {

/// @brief Pinned host memory via cudaHostAlloc (page aligned); accessible from host and device.
class pinned_host_upstream {
 public:
  /// @brief Pinned memory is mapped into the device's address space (unified addressing).
  static constexpr bool is_device_accessible = true;
  /// @brief Pinned memory is host memory.
  static constexpr bool is_host_accessible = true;

  /// @brief Uses `flags` for cudaHostAlloc (cudaHostAllocDefault, cudaHostAllocMapped, ...).
  /// @param flags cudaHostAlloc flags for every allocation.
  explicit pinned_host_upstream(unsigned int flags = cudaHostAllocDefault) noexcept : flags_(flags)
  {
  }

  /// @brief cudaHostAlloc; throws stash::out_of_memory when the host cannot pin more.
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096 (cudaHostAlloc's pages are aligned to more).
  /// @return The pinned memory.
  /// @throws stash::out_of_memory When the host cannot pin `bytes`.
  /// @throws stash::logic_error For an alignment that is not a power of two up to 4096.
  /// @throws stash::cuda_error For any other cudaHostAlloc failure.
  void* allocate(std::size_t bytes, std::size_t alignment = cuda_allocation_alignment)
  {
    STASH_EXPECTS(is_pow2(alignment) && alignment <= 4096,
                  "pinned_host_upstream: alignment must be a power of two <= 4096");
    void* p                  = nullptr;
    cudaError_t const status = cudaHostAlloc(&p, bytes, flags_);
    if (status == cudaErrorMemoryAllocation) {
      detail::clear_last_error_if(status);
      throw out_of_memory("pinned_host_upstream (cudaHostAlloc)", bytes, std::nullopt,
                          std::nullopt);
    }
    STASH_CUDA_TRY(status);
    return p;
  }

  /// @brief cudaFreeHost; a failure is reported on stderr, never thrown.
  /// @param p Memory from allocate().
  void deallocate(void* p, std::size_t /*bytes*/,
                  std::size_t /*alignment*/ = cuda_allocation_alignment) noexcept
  {
    STASH_CUDA_CHECK_NOTHROW(cudaFreeHost(p));
  }

  /// @brief CCCL >= 3.1's name of allocate (cuda::mr::synchronous_resource).
  /// @param bytes Size.
  /// @param alignment As for allocate().
  /// @return The pinned memory.
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

  /// @brief The cudaHostAlloc flags in use.
  /// @return The flags given at construction.
  [[nodiscard]] unsigned int flags() const noexcept { return flags_; }

  /// @brief Equal when both allocate with the same flags (either may free the other's memory).
  friend bool operator==(pinned_host_upstream const& a, pinned_host_upstream const& b) noexcept
  {
    return a.flags_ == b.flags_;
  }

#if defined(STASH_HAS_CUDA_MR)
  /// @brief cuda::mr property: the memory is host accessible.
  friend void get_property(pinned_host_upstream const&, cuda::mr::host_accessible) noexcept {}
  /// @brief cuda::mr property: the memory is device accessible.
  friend void get_property(pinned_host_upstream const&, cuda::mr::device_accessible) noexcept {}
#endif

 private:
  unsigned int flags_;
};

static_assert(upstream_resource<pinned_host_upstream>);

}  // namespace stash
