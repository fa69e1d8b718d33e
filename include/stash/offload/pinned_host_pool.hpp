/**
 * @file pinned_host_pool.hpp
 * @brief The one pinned host pool offloaded tensors live in: taken from the upstream in large
 * steps, with a budget, never one cudaHostAlloc per tensor.
 *
 * cudaHostAlloc costs milliseconds and can synchronise the device; PyTorch's per-tensor pinning
 * is the most cited cost of its offloading. The pool is a caching_pool whose every segment is one
 * large step and whose blocks split down to the rounding, so tensors of any size share segments.
 * `reserve()` takes memory up front, e.g. before capturing a CUDA graph: while the requesting
 * stream is being captured, the pool takes nothing from the upstream and refuses what its cached
 * blocks cannot serve with stash::logic_error, changing nothing (see caching_pool).
 */
#pragma once

#include <stash/core/pinned_host_upstream.hpp>
#include <stash/core/units.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/stream_order.hpp>

#include <cstddef>
#include <limits>

namespace stash {

/// @brief Options for a pinned host pool: a `budget` on pinned bytes, grown `step` bytes at a time
/// (larger tensors get a segment of their own, rounded to `step`).
/// @param budget The most pinned bytes the pool may hold.
/// @param step The size pinned blocks are carved from.
/// @return Options for a caching_pool of pinned memory.
[[nodiscard]] inline caching_pool_options pinned_host_pool_options(
    std::size_t budget = std::numeric_limits<std::size_t>::max(), std::size_t step = 64 * MiB)
{
  caching_pool_options o;
  o.rounding       = 512;
  o.small_limit    = step;
  o.small_segment  = step;
  o.medium_limit   = step;
  o.medium_segment = step;
  o.large_rounding = step;
  // A segment reserved for many tensors must hold as many as fit: without this, the block taken
  // when at most one step would remain swallows the rest of the segment.
  o.split_large_segments = true;
  o.budget               = budget;
  return o;
}

/// @brief A pinned host pool (over `Upstream`, ordered by `Order`); build it with
/// pinned_host_pool_options(). The template parameters come in caching_pool's order (Upstream,
/// then Order), as every stash pool's do.
/// @tparam Upstream The pinned host memory source.
/// @tparam Order The stream order of the pool.
template <upstream_resource Upstream = pinned_host_upstream, stream_order Order = cuda_event_order>
using pinned_host_pool = caching_pool<Upstream, Order>;

}  // namespace stash
