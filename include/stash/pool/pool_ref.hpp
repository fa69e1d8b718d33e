/**
 * @file pool_ref.hpp
 * @brief `stash::pool_ref<Pool>`: a copyable reference to a pool, for code that wants to hold its
 * memory resource by value (CCCL >= 3.1's `cuda::mr::resource_ref` and so
 * `rmm::device_async_resource_ref`, RMM's adaptors). A stash pool is an object with identity and
 * cannot be copied; a pool_ref can, and refs to one pool compare equal.
 */
#pragma once

#include <stash/core/stream_ref.hpp>
#include <stash/core/units.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_resource.hpp>

#include <cuda/stream_ref>

#include <cstddef>

namespace stash {

/// @brief A non-owning, copyable handle to `Pool` with every `cuda::mr` spelling of pool.hpp.
/// @tparam Pool A stash::pool; it outlives every copy of the reference.
template <pool Pool>
class pool_ref {
 public:
  /// @brief As the pool.
  static constexpr bool is_host_accessible = pool_is_host_accessible<Pool>();
  /// @brief As the pool.
  static constexpr bool is_device_accessible = pool_is_device_accessible<Pool>();
  STASH_POOL_PROPERTIES(pool_ref, pool_is_device_accessible<Pool>(),
                        pool_is_host_accessible<Pool>())

  /// @brief Refers to `p`.
  /// @param p The pool (outlives every ref to it).
  explicit pool_ref(Pool& p) noexcept : pool_(&p) {}

  /// @brief The pool's stream-ordered allocation (CCCL 3.0 spelling).
  /// @param bytes Size.
  /// @param alignment Alignment.
  /// @param stream The stream.
  /// @return The memory.
  /// @throws stash::out_of_memory As the pool's allocation.
  void* allocate_async(std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    return pool_allocate(*pool_, stream, bytes, alignment);
  }
  /// @brief The pool's stream-ordered free (CCCL 3.0 spelling).
  /// @param p Memory from the pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  /// @param stream The stream of its last use.
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment,
                        stream_ref stream) noexcept
  {
    pool_deallocate(*pool_, stream, p, bytes, alignment);
  }
  /// @brief The pool's stream-ordered allocation (CCCL >= 3.1 spelling).
  /// @param stream The stream.
  /// @param bytes Size.
  /// @param alignment Alignment.
  /// @return The memory.
  /// @throws stash::out_of_memory As the pool's allocation.
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    return pool_allocate(*pool_, stream_ref{stream}, bytes, alignment);
  }
  /// @brief The pool's stream-ordered free (CCCL >= 3.1 spelling).
  /// @param stream The stream of its last use.
  /// @param p Memory from the pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate(cuda::stream_ref stream, void* p, std::size_t bytes,
                  std::size_t alignment) noexcept
  {
    pool_deallocate(*pool_, stream_ref{stream}, p, bytes, alignment);
  }
  /// @brief On the default stream, as stash::pool_resource's synchronous forms.
  /// @param bytes Size.
  /// @param alignment Alignment.
  /// @return The memory.
  /// @throws stash::out_of_memory As the pool's allocation.
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    return pool_allocate(*pool_, stream_ref{}, bytes, alignment);
  }
  /// @brief On the default stream.
  /// @param p Memory from the pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    pool_deallocate(*pool_, stream_ref{}, p, bytes, alignment);
  }
  /// @brief CCCL >= 3.1's synchronous spelling.
  /// @param bytes Size.
  /// @param alignment Alignment.
  /// @return The memory.
  /// @throws stash::out_of_memory As the pool's allocation.
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return allocate(bytes, alignment);
  }
  /// @brief CCCL >= 3.1's synchronous spelling.
  /// @param p Memory from the pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate(p, bytes, alignment);
  }

  /// @brief The pool's statistics, where it has them.
  /// @return The pool's figures.
  [[nodiscard]] pool_stats stats() const requires pool_with_stats<Pool> { return pool_->stats(); }

  /// @brief The pool referred to.
  /// @return The pool.
  [[nodiscard]] Pool& get() const noexcept { return *pool_; }

  /// @brief References to the same pool.
  friend bool operator==(pool_ref a, pool_ref b) noexcept { return a.pool_ == b.pool_; }

 private:
  Pool* pool_;
};

}  // namespace stash
