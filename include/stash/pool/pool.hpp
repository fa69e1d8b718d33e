/**
 * @file pool.hpp
 * @brief The `pool` concept (the Pool slot of stash::allocator), the statistics pools report and
 * the calls stash makes on any pool.
 *
 * A pool is shaped like libcu++'s `cuda::mr` stream-ordered resources, so RMM's and CCCL's
 * resources can be stash pools and stash's pools can go wherever a `cuda::mr` resource is taken.
 * Customization points of a pool `P` (either spelling of the first two; stash's pools have both,
 * see stash::pool_resource):
 * - `void* allocate_async(std::size_t bytes, std::size_t alignment, stream_ref stream)` (the CUDA
 *   13.0 toolkit's CCCL) or `void* allocate(cuda::stream_ref stream, std::size_t bytes,
 *   std::size_t alignment)` (CCCL >= 3.1, RMM 26): memory aligned to `alignment` that work queued
 *   on `stream` after the call may use. Beyond the pool's budget it throws `stash::out_of_memory`
 *   with the figures of `pool_stats`, and leaves the pool exactly as it was.
 * - `void deallocate_async(void* p, std::size_t bytes, std::size_t alignment, stream_ref stream)`
 *   or `deallocate(cuda::stream_ref stream, void* p, std::size_t bytes, std::size_t alignment)`:
 *   the memory may be reused once the work queued on `stream` so far has finished. Never throws
 *   (noexcept in stash's pools, as cuda::mr asks): a wrong free goes to stash's misuse handler
 *   and leaves the pool as it was (core/misuse.hpp).
 * - `operator==`: equal pools may free each other's memory (for a stateful pool: the same pool).
 *
 * Optional:
 * - `pool_stats stats() const`: the figures below (stash::statistics_adaptor adds them to a pool
 *   that has none).
 * - `get_property(p, cuda::mr::host_accessible)` / `device_accessible`, or the static members
 *   `is_host_accessible` / `is_device_accessible`: where the memory may be touched (the
 *   conformance kit writes to host-accessible memory). Absent: device memory.
 * - `void begin_iteration()` / `void end_iteration()`: called by stash::allocator around each
 *   training iteration (stash::lifetime_arena records and replays with them).
 */
#pragma once

#include <stash/core/misuse.hpp>
#include <stash/core/stream_ref.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

namespace stash {

/// @brief What a pool reports; all byte counts are in bytes.
struct pool_stats {
  std::size_t in_use_bytes{0};         ///< handed out now (after rounding)
  std::size_t peak_in_use_bytes{0};    ///< most handed out at once
  std::size_t reserved_bytes{0};       ///< taken from the upstream now
  std::size_t peak_reserved_bytes{0};  ///< most taken from the upstream at once
  std::size_t largest_free_bytes{0};   ///< largest block allocate() could return without growing
  std::size_t budget_bytes{0};         ///< cap on reserved bytes (SIZE_MAX when none)
  std::uint64_t allocations{0};        ///< successful allocate() calls with bytes > 0
  std::uint64_t fallbacks{0};          ///< allocations not served by the pool's primary path
};

namespace detail {

// The CUDA 13.0 toolkit's CCCL (3.0) spelling of a stream-ordered resource.
template <class P>
concept async_spelled_pool = requires(P& p, void* ptr, std::size_t n, std::size_t a, stream_ref s)
{
  {
    p.allocate_async(n, a, s)
    } -> std::same_as<void*>;
  p.deallocate_async(ptr, n, a, s);
};

// The spelling of CCCL >= 3.1 (and RMM 26): the stream comes first.
template <class P>
concept stream_first_pool = requires(P& p, void* ptr, std::size_t n, std::size_t a,
                                     cuda::stream_ref s)
{
  {
    p.allocate(s, n, a)
    } -> std::same_as<void*>;
  p.deallocate(s, ptr, n, a);
};

}  // namespace detail

/// @brief A stream-ordered memory resource (see the file docs for its customization points).
/// @tparam P The type checked.
template <class P>
concept pool = std::equality_comparable<P> &&
    (detail::async_spelled_pool<P> || detail::stream_first_pool<P>);

namespace detail {

/// @brief static_asserts naming what `P` lacks to fill the Pool slot of stash::allocator; true
/// when nothing is missing.
template <class P>
constexpr bool check_pool_slot()
{
  static_assert(async_spelled_pool<P> || stream_first_pool<P>,
                "Pool slot: the type does not satisfy stash::pool: it lacks "
                "`void* allocate_async(std::size_t bytes, std::size_t alignment, stream)` and "
                "`void deallocate_async(void*, std::size_t bytes, std::size_t alignment, stream)` "
                "(or CCCL 3.1's `allocate(cuda::stream_ref, bytes, alignment)` / "
                "`deallocate(cuda::stream_ref, p, bytes, alignment)`); derive from "
                "stash::pool_resource to get every spelling");
  static_assert(std::equality_comparable<P>,
                "Pool slot: the type does not satisfy stash::pool: it lacks `operator==`");
  return true;
}

}  // namespace detail

/// @brief Whether `P` reports pool_stats.
/// @tparam P The type checked.
template <class P>
concept pool_with_stats = pool<P> && requires(P const& p)
{
  {
    p.stats()
    } -> std::same_as<pool_stats>;
};

/// @brief Whether `P` wants to hear of training iterations (begin_iteration / end_iteration).
/// @tparam P The type checked.
template <class P>
concept iteration_aware_pool = requires(P& p)
{
  p.begin_iteration();
  p.end_iteration();
};

/// @brief Allocates `bytes` aligned to `alignment` from `p` in `stream`'s order, in whichever
/// spelling `p` has (nullptr for 0 bytes). The arguments come in CCCL's order,
/// `allocate(stream, bytes, alignment)`.
/// @param p The pool.
/// @param stream The stream the memory is used on first.
/// @param bytes Size.
/// @param alignment A power of two the pool supports (stash's pools: up to 4096).
/// @return The memory (nullptr for 0 bytes).
/// @throws stash::out_of_memory when the pool cannot serve `bytes`; stash::logic_error for an
/// alignment it does not honour.
template <pool P>
[[nodiscard]] void* pool_allocate(P& p, stream_ref stream, std::size_t bytes,
                                  std::size_t alignment = cuda_allocation_alignment)
{
  if (bytes == 0) { return nullptr; }
  if constexpr (detail::async_spelled_pool<P>) {
    return p.allocate_async(bytes, alignment, stream);
  } else {
    return p.allocate(cuda::stream_ref{stream}, bytes, alignment);
  }
}

/// @brief Gives `p` back memory from pool_allocate with the same size and alignment; it may be
/// reused once the work queued on `stream` so far has finished. Never throws: a foreign pool's
/// free that throws is reported to the misuse handler as misuse_kind::failed_free
/// (core/misuse.hpp); stash's pools report wrong frees there themselves.
/// The arguments come in CCCL's order, `deallocate(stream, p, bytes, alignment)`.
/// @param p The pool.
/// @param stream The stream that used it last.
/// @param ptr What pool_allocate returned.
/// @param bytes Its size.
/// @param alignment As allocated.
template <pool P>
void pool_deallocate(P& p, stream_ref stream, void* ptr, std::size_t bytes,
                     std::size_t alignment = cuda_allocation_alignment) noexcept
{
  if (ptr == nullptr && bytes == 0) { return; }
  try {
    if constexpr (detail::async_spelled_pool<P>) {
      p.deallocate_async(ptr, bytes, alignment, stream);
    } else {
      p.deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
    }
  } catch (std::exception const& e) {
    detail::report_misuse(misuse_kind::failed_free, "pool_deallocate",
                          std::string("the pool's free threw: ") + e.what(), ptr, bytes, alignment);
  } catch (...) {
    detail::report_misuse(misuse_kind::failed_free, "pool_deallocate",
                          "the pool's free threw a non-standard exception", ptr, bytes, alignment);
  }
}

/// @brief Whether the host may touch memory from `P` (its `is_host_accessible`, or its
/// `cuda::mr::host_accessible` property where the CCCL has them; device memory otherwise).
/// @tparam P A pool.
/// @return Whether the host may touch the memory.
template <class P>
[[nodiscard]] constexpr bool pool_is_host_accessible() noexcept
{
  if constexpr (requires { P::is_host_accessible; }) {
    return P::is_host_accessible;
  } else {
    return declares_host_accessible<P>();
  }
}

/// @brief Whether device code may touch memory from `P` (its `is_device_accessible`, or its
/// `cuda::mr::device_accessible` property where the CCCL has them; absent: a pool of device
/// memory unless it says it is host-accessible only).
/// @tparam P A pool.
/// @return Whether device code may touch the memory.
template <class P>
[[nodiscard]] constexpr bool pool_is_device_accessible() noexcept
{
  if constexpr (requires { P::is_device_accessible; }) {
    return P::is_device_accessible;
  } else {
    return declares_device_accessible<P>() || !pool_is_host_accessible<P>();
  }
}

}  // namespace stash
