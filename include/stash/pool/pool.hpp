/**
 * @file pool.hpp
 * @brief The `pool` concept (the Pool slot of stash::allocator) and the statistics every pool
 * reports.
 *
 * Customization points of a pool `P`:
 * - `void* allocate(std::size_t bytes, cudaStream_t stream)`: stream-ordered allocation. The
 *   memory may be used by work queued on `stream` after the call. Returns nullptr for 0 bytes.
 *   Beyond the pool's budget it throws `stash::out_of_memory` carrying the figures of
 *   `pool_stats`, and leaves the pool exactly as it was.
 * - `void deallocate(void* p, std::size_t bytes, cudaStream_t stream)`: the memory may be reused
 *   once the work queued on `stream` so far has finished (reuse on the same stream is immediate;
 *   on another stream only after an event says so). Freeing a pointer the pool did not hand out,
 *   or with another size, throws `stash::logic_error` and changes nothing.
 * - `pool_stats stats() const`: the figures below.
 * - `static constexpr bool is_host_accessible`: whether tests may touch the memory on the host.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdint>

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

/// @brief A stream-ordered memory pool (see the file docs for its customization points).
/// @tparam P The type checked.
template <class P>
concept pool = requires(P& p, P const& cp, std::size_t bytes, void* ptr, cudaStream_t stream)
{
  {
    p.allocate(bytes, stream)
    } -> std::same_as<void*>;
  p.deallocate(ptr, bytes, stream);
  {
    cp.stats()
    } -> std::same_as<pool_stats>;
  {
    P::is_host_accessible
    } -> std::convertible_to<bool>;
};

}  // namespace stash
