/**
 * @file host_upstream.hpp
 * @brief Plain (pageable) host memory as an upstream, so pools run and are tested on a CPU.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>

#include <cstddef>
#include <limits>
#include <new>

namespace stash {

/// @brief Host memory from aligned `operator new`. Stateless; all instances compare equal.
class host_upstream {
 public:
  /// @brief Host memory can be touched by the host only.
  static constexpr bool is_device_accessible = false;
  /// @brief Host memory can be touched by the host.
  static constexpr bool is_host_accessible = true;

  /// @brief Allocates `bytes` aligned to `alignment` (a power of two); throws stash::out_of_memory.
  /// @param bytes Size (0 is served as 1 byte: distinct pointers).
  /// @param alignment A power of two.
  /// @return The memory.
  /// @throws stash::out_of_memory When the host cannot serve `bytes` (or it exceeds PTRDIFF_MAX).
  /// @throws stash::logic_error For an alignment that is not a power of two.
  void* allocate(std::size_t bytes, std::size_t alignment = alignof(std::max_align_t))
  {
    STASH_EXPECTS(is_pow2(alignment), "host_upstream: alignment must be a power of two");
    if (bytes == 0) { bytes = 1; }  // distinct non-null pointers, as operator new gives
    // No object is larger than PTRDIFF_MAX: refused here, not by an allocator that may abort
    // (sanitizers) instead of throwing.
    if (bytes > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max())) {
      throw out_of_memory("host_upstream", bytes, std::nullopt, std::nullopt);
    }
    try {
      return ::operator new (bytes, std::align_val_t{alignment});
    } catch (std::bad_alloc const&) {
      throw out_of_memory("host_upstream", bytes, std::nullopt, std::nullopt);
    }
  }

  /// @brief Frees memory from allocate() with the same alignment.
  /// @param p Memory from allocate().
  /// @param alignment The alignment it was allocated with.
  void deallocate(void* p, std::size_t /*bytes*/,
                  std::size_t alignment = alignof(std::max_align_t)) noexcept
  {
    ::operator delete (p, std::align_val_t{alignment});
  }

  /// @brief CCCL >= 3.1's name of allocate (cuda::mr::synchronous_resource).
  /// @param bytes Size.
  /// @param alignment As for allocate().
  /// @return The memory.
  /// @throws stash::out_of_memory As allocate().
  void* allocate_sync(std::size_t bytes, std::size_t alignment = alignof(std::max_align_t))
  {
    return allocate(bytes, alignment);
  }
  /// @brief CCCL >= 3.1's name of deallocate.
  /// @param p Memory from allocate_sync().
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate_sync(void* p, std::size_t bytes,
                       std::size_t alignment = alignof(std::max_align_t)) noexcept
  {
    deallocate(p, bytes, alignment);
  }

  /// @brief Any host_upstream may free another's memory.
  friend bool operator==(host_upstream const&, host_upstream const&) noexcept { return true; }

#if defined(STASH_HAS_CUDA_MR)
  /// @brief cuda::mr property: the memory is host accessible.
  friend void get_property(host_upstream const&, cuda::mr::host_accessible) noexcept {}
#endif
};

static_assert(upstream_resource<host_upstream>);

}  // namespace stash
