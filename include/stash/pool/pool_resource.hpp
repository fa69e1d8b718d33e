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
 * are: they do not block the host. Alignment: any power of two up to a page (4096 B); a wrong
 * free never throws (core/misuse.hpp). The `cuda::mr` accessibility properties are declared by each
 * pool (STASH_POOL_PROPERTIES): a constraint on the derived class in this base would be checked
 * while it is still incomplete.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/misuse.hpp>
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
/// @brief Nothing: no cuda::mr.
#define STASH_POOL_PROPERTIES(Self, Device, Host)
#endif

namespace stash {

/// @brief The largest alignment every stash pool honours: a page. Up to it, any power of two.
inline constexpr std::size_t pool_max_alignment = 4096;

/// @brief Why `alignment` cannot be served by a stash pool ("" when it can): not a power of two,
/// or above pool_max_alignment; each message says which.
/// @param alignment The alignment asked for.
/// @return What is wrong, or an empty string.
[[nodiscard]] inline std::string pool_alignment_problem(std::size_t alignment)
{
  if (!is_pow2(alignment)) {
    return "alignment " + std::to_string(alignment) + " B is not a power of two";
  }
  if (alignment > pool_max_alignment) {
    return "alignment " + std::to_string(alignment) +
           " B is above the largest a stash pool honours (" + std::to_string(pool_max_alignment) +
           " B, a page)";
  }
  return {};
}

/// @brief Base of stash's pools: the `cuda::mr` spellings over two stream-ordered primitives.
///
/// `Derived` provides `void* do_allocate(std::size_t bytes, std::size_t alignment, stream_ref
/// stream)` (nullptr for 0 bytes; `alignment` a power of two up to pool_max_alignment, checked
/// here), `void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, stream_ref
/// stream) noexcept` (a wrong free reported through stash::detail::report_misuse, the pool
/// unchanged), `static constexpr bool is_host_accessible` / `is_device_accessible`, and
/// STASH_POOL_PROPERTIES in its body. Pools are stateful: two compare equal only when they are
/// the same object. Every deallocate spelling is noexcept (cuda::mr's); see core/misuse.hpp.
/// @tparam Derived The pool (CRTP).
template <class Derived>
class pool_resource {
 public:
  /// @brief Largest alignment the pool honours (any power of two up to it).
  static constexpr std::size_t max_alignment = pool_max_alignment;

  /// @brief `bytes` in `stream`'s order, aligned to `alignment` (a power of two up to 4096);
  /// another alignment is a stash::logic_error saying why, and changes nothing.
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096.
  /// @param stream The stream the memory is used on.
  /// @return The memory, or nullptr for 0 bytes.
  /// @throws stash::logic_error For another alignment.
  /// @throws stash::out_of_memory When the pool cannot serve `bytes`.
  void* allocate_async(std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    if (auto const problem = pool_alignment_problem(alignment); !problem.empty()) {
      STASH_FAIL("stash pool allocate: " + problem);
    }
    return self().do_allocate(bytes, alignment, stream);
  }
  /// @brief `bytes` in `stream`'s order at 256 B (cudaMalloc's alignment).
  /// @param bytes Size.
  /// @param stream The stream the memory is used on.
  /// @return The memory, or nullptr for 0 bytes.
  /// @throws stash::out_of_memory When the pool cannot serve `bytes`.
  void* allocate_async(std::size_t bytes, stream_ref stream)
  {
    return self().do_allocate(bytes, cuda_allocation_alignment, stream);
  }
  /// @brief Frees in `stream`'s order; `bytes` and `alignment` as allocated. Never throws: a
  /// wrong free goes to the misuse handler and changes nothing (core/misuse.hpp).
  /// @param p Memory from this pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  /// @param stream The stream of its last use.
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment,
                        stream_ref stream) noexcept
  {
    if (!is_pow2(alignment) || alignment > max_alignment) {
      std::string problem;
      try {
        problem = pool_alignment_problem(alignment);
      } catch (...) {  // no memory for the message: the kind says it
      }
      detail::report_misuse(misuse_kind::bad_alignment, "stash pool", problem, p, bytes, alignment);
      return;
    }
    self().do_deallocate(p, bytes, alignment, stream);
  }
  /// @brief Frees in `stream`'s order (allocated at 256 B).
  /// @param p Memory from this pool.
  /// @param bytes Its size.
  /// @param stream The stream of its last use.
  void deallocate_async(void* p, std::size_t bytes, stream_ref stream) noexcept
  {
    self().do_deallocate(p, bytes, cuda_allocation_alignment, stream);
  }

  /// @brief CCCL >= 3.1's stream-ordered spelling.
  /// @param stream The stream the memory is used on.
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096.
  /// @return The memory.
  /// @throws stash::logic_error For another alignment.
  /// @throws stash::out_of_memory When the pool cannot serve `bytes`.
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    return allocate_async(bytes, alignment, stream_ref{stream});
  }
  /// @brief CCCL >= 3.1's stream-ordered spelling.
  /// @param stream The stream of its last use.
  /// @param p Memory from this pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate(cuda::stream_ref stream, void* p, std::size_t bytes,
                  std::size_t alignment) noexcept
  {
    deallocate_async(p, bytes, alignment, stream_ref{stream});
  }

  /// @brief On the default stream (see the file docs).
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096.
  /// @return The memory.
  /// @throws stash::logic_error For another alignment.
  /// @throws stash::out_of_memory When the pool cannot serve `bytes`.
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    return allocate_async(bytes, alignment, stream_ref{});
  }
  /// @brief On the default stream (see the file docs).
  /// @param p Memory from this pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate_async(p, bytes, alignment, stream_ref{});
  }
  /// @brief CCCL >= 3.1's synchronous spelling; as allocate(bytes, alignment).
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096.
  /// @return The memory.
  /// @throws stash::logic_error For another alignment.
  /// @throws stash::out_of_memory When the pool cannot serve `bytes`.
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return allocate(bytes, alignment);
  }
  /// @brief CCCL >= 3.1's synchronous spelling; as deallocate(p, bytes, alignment).
  /// @param p Memory from this pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment) noexcept
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
};

}  // namespace stash
