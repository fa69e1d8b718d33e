/**
 * @file pool_resource.hpp
 * @brief `stash::pool_resource<Derived>`: what makes a stash pool a `cuda::mr` resource. A pool
 * writes two functions (stream-ordered allocate and deallocate, at its own alignment) and this base
 * adds every spelling the CCCL and RMM versions in use ask for, alignment checks, identity
 * equality and the accessibility properties.
 *
 * Spellings provided (see pool.hpp):
 * - `allocate_async(bytes, alignment, stream)` / `deallocate_async(p, bytes, alignment, stream)`
 *   and `allocate(bytes, alignment)` / `deallocate(p, bytes, alignment)`:
 * `cuda::mr::async_resource` as the CUDA 13.0 toolkit's CCCL (3.0) spells it;
 * - `allocate(stream, bytes, alignment)` / `deallocate(stream, p, bytes, alignment)` and
 *   `allocate_sync` / `deallocate_sync`: `cuda::mr::resource` of CCCL >= 3.1 (RMM 26);
 * - `allocate_async(bytes, stream)` / `deallocate_async(p, bytes, stream)`: the pool's own
 *   alignment (256 B), as RMM's `device_memory_resource` has.
 * The synchronous forms are ordered on CUDA's default stream (a host pool: no stream), as RMM's
 * are: they do not block the host. The `cuda::mr` accessibility properties are declared by each
 * pool (STASH_POOL_PROPERTIES): a constraint on the derived class in this base would be checked
 * while it is still incomplete.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/stream_ref.hpp>
#include <stash/core/units.hpp>
#include <stash/pool/pool.hpp>

#include <cstddef>
#include <string>

#if defined(STASH_HAS_CUDA_MR)
/// @brief Declares, inside pool class template `Self`, the `cuda::mr` accessibility properties
/// where `Device` / `Host` (constant expressions over its template parameters) hold; nothing
/// without cuda::mr.
#define STASH_POOL_PROPERTIES(Self, Device, Host)                                                 \
  friend void get_property(Self const&, cuda::mr::device_accessible) noexcept requires(Device) {} \
  friend void get_property(Self const&, cuda::mr::host_accessible) noexcept requires(Host) {}
#else
#define STASH_POOL_PROPERTIES(Self, Device, Host)
#endif

namespace stash {

/// @brief Base of stash's pools: the `cuda::mr` spellings over two stream-ordered primitives.
///
/// `Derived` provides `void* do_allocate(std::size_t bytes, stream_ref stream)` (nullptr for 0
/// bytes; 256-byte aligned), `void do_deallocate(void* p, std::size_t bytes, stream_ref stream)`,
/// `static constexpr bool is_host_accessible` / `is_device_accessible`, and
/// STASH_POOL_PROPERTIES in its body. Pools are stateful:
/// two compare equal only when they are the same object.
/// @tparam Derived The pool (CRTP).
template <class Derived>
class pool_resource {
 public:
  /// @brief Largest alignment every pool guarantees (blocks start on upstream-aligned offsets).
  static constexpr std::size_t max_alignment = cuda_allocation_alignment;

  /// @brief `bytes` in `stream`'s order, aligned to `alignment` (a power of two <= 256).
  void* allocate_async(std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    check_alignment(alignment, "allocate");
    return self().do_allocate(bytes, stream);
  }
  /// @brief `bytes` in `stream`'s order at the pool's alignment (256 B).
  void* allocate_async(std::size_t bytes, stream_ref stream)
  {
    return self().do_allocate(bytes, stream);
  }
  /// @brief Frees in `stream`'s order; `alignment` as allocated.
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    check_alignment(alignment, "deallocate");
    self().do_deallocate(p, bytes, stream);
  }
  /// @brief Frees in `stream`'s order.
  void deallocate_async(void* p, std::size_t bytes, stream_ref stream)
  {
    self().do_deallocate(p, bytes, stream);
  }

  /// @brief CCCL >= 3.1's stream-ordered spelling.
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    return allocate_async(bytes, alignment, stream_ref{stream});
  }
  /// @brief CCCL >= 3.1's stream-ordered spelling.
  void deallocate(cuda::stream_ref stream, void* p, std::size_t bytes, std::size_t alignment)
  {
    deallocate_async(p, bytes, alignment, stream_ref{stream});
  }

  /// @brief On the default stream (see the file docs).
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    return allocate_async(bytes, alignment, stream_ref{});
  }
  /// @brief On the default stream (see the file docs).
  void deallocate(void* p, std::size_t bytes, std::size_t alignment)
  {
    deallocate_async(p, bytes, alignment, stream_ref{});
  }
  /// @brief CCCL >= 3.1's synchronous spelling; as allocate(bytes, alignment).
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return allocate(bytes, alignment);
  }
  /// @brief CCCL >= 3.1's synchronous spelling; as deallocate(p, bytes, alignment).
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment)
  {
    deallocate(p, bytes, alignment);
  }

  /// @brief The same pool.
  friend bool operator==(pool_resource const& a, pool_resource const& b) noexcept
  {
    return &a == &b;
  }

 protected:
  pool_resource() = default;

 private:
  Derived& self() noexcept { return static_cast<Derived&>(*this); }

  static void check_alignment(std::size_t alignment, const char* what)
  {
    STASH_EXPECTS(is_pow2(alignment) && alignment <= max_alignment,
                  std::string("stash pool ") + what + ": alignment " + std::to_string(alignment) +
                      " B is not a power of two up to " + std::to_string(max_alignment) + " B");
  }
};

}  // namespace stash
