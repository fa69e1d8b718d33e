/**
 * @file rmm_pool_ref.hpp
 * @brief RMM's side of a stash pool: `stash::rmm_pool_ref<Pool>`, a copyable reference that RMM's
 * resource refs and adaptors take, and that speaks RMM's exception types.
 *
 * The integration header, used only where RMM is (stash never requires it): with
 * `<rmm/error.hpp>` on the include path (CMake's STASH_WITH_RMM) it declares the types below;
 * without RMM it declares nothing. stash's pools throw stash::out_of_memory; RMM's code looks for
 * `rmm::out_of_memory` (failure_callback_resource_adaptor retries on it, RMM's exhaustion tests
 * expect it). Through an rmm_pool_ref, an exhaustion is `stash::rmm_out_of_memory`: an
 * rmm::out_of_memory whose message is stash's (requested bytes, budget, in use, largest free
 * block) and which keeps the stash::out_of_memory with those figures (`figures()`). It cannot be
 * both types: both derive from std::bad_alloc, and a catch of std::bad_alloc would then be
 * ambiguous and miss it.
 */
#pragma once

#if __has_include(<rmm/error.hpp>)

#include <stash/core/error.hpp>
#include <stash/core/stream_ref.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_ref.hpp>
#include <stash/pool/pool_resource.hpp>

#include <rmm/error.hpp>

#include <cuda/stream_ref>

#include <cstddef>

namespace stash {

/// @brief stash::out_of_memory as RMM's type: RMM's catch sites see rmm::out_of_memory (and
/// std::bad_alloc), with stash's message and figures.
class rmm_out_of_memory : public rmm::out_of_memory {
 public:
  /// @brief Carries `e`'s message and figures.
  /// @param e What the stash pool threw.
  explicit rmm_out_of_memory(stash::out_of_memory const& e)
      : rmm::out_of_memory(e.what()), figures_(e)
  {
  }
  /// @brief The stash error, with requested_bytes(), budget_bytes(), in_use_bytes() and
  /// largest_free_bytes().
  [[nodiscard]] stash::out_of_memory const& figures() const noexcept { return figures_; }

 private:
  stash::out_of_memory figures_;
};

/// @brief A copyable reference to a stash pool for RMM (as stash::pool_ref), whose allocations
/// throw stash::rmm_out_of_memory where the pool throws stash::out_of_memory. Refs to one pool
/// compare equal.
/// @tparam Pool A stash::pool; it outlives every copy of the reference.
template <pool Pool>
class rmm_pool_ref {
 public:
  /// @brief As the pool.
  static constexpr bool is_host_accessible = pool_is_host_accessible<Pool>();
  /// @brief As the pool.
  static constexpr bool is_device_accessible = pool_is_device_accessible<Pool>();
  STASH_POOL_PROPERTIES(rmm_pool_ref, pool_is_device_accessible<Pool>(),
                        pool_is_host_accessible<Pool>())

  /// @brief Refers to `p`.
  /// @param p The pool.
  explicit rmm_pool_ref(Pool& p) noexcept : ref_(p) {}

  /// @brief The pool's stream-ordered allocation; exhaustion is rmm_out_of_memory.
  /// @param stream The stream the memory is used on first.
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096.
  /// @return The memory.
  /// @throws stash::rmm_out_of_memory when the pool cannot serve `bytes`.
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    try {
      return ref_.allocate(stream, bytes, alignment);
    } catch (stash::out_of_memory const& e) {
      throw rmm_out_of_memory(e);
    }
  }
  /// @brief The pool's stream-ordered free; never throws.
  /// @param stream The stream that used the memory last.
  /// @param p What allocate returned.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate(cuda::stream_ref stream, void* p, std::size_t bytes,
                  std::size_t alignment) noexcept
  {
    ref_.deallocate(stream, p, bytes, alignment);
  }
  /// @brief On the default stream; exhaustion is rmm_out_of_memory.
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096.
  /// @return The memory.
  /// @throws stash::rmm_out_of_memory when the pool cannot serve `bytes`.
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return allocate(cuda::stream_ref{cudaStream_t{nullptr}}, bytes, alignment);
  }
  /// @brief On the default stream; never throws.
  /// @param p What allocate_sync returned.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate(cuda::stream_ref{cudaStream_t{nullptr}}, p, bytes, alignment);
  }

  /// @brief The pool's statistics, where it has them.
  /// @return Its pool_stats.
  [[nodiscard]] pool_stats stats() const requires pool_with_stats<Pool> { return ref_.stats(); }
  /// @brief The pool referred to.
  [[nodiscard]] Pool& get() const noexcept { return ref_.get(); }

  /// @brief References to the same pool.
  friend bool operator==(rmm_pool_ref const& a, rmm_pool_ref const& b) noexcept
  {
    return a.ref_ == b.ref_;
  }

 private:
  pool_ref<Pool> ref_;
};

}  // namespace stash

#endif
