// Figures of one train_cnn run's memory, the same for the CUDA and the CPU build.
#pragma once

#include <cstdint>

namespace train_cnn {

/// @brief Figures of one run's memory, cumulative since it started.
struct memory_report {
  std::uint64_t offloads{0};
  std::uint64_t prefetches{0};
  std::uint64_t demand_prefetches{0};
  std::uint64_t bytes_offloaded{0};       ///< uncompressed
  std::uint64_t bytes_encoded{0};         ///< host bytes of the completed offloads (compressed)
  std::uint64_t bytes_encoded_source{0};  ///< uncompressed bytes of those same offloads
  std::uint64_t peak_in_use{0};           ///< device bytes handed out at once, since reset_peak()
  std::uint64_t peak_reserved{0};         ///< device bytes the pool took from cudaMalloc (ever)
  std::uint64_t reserved{0};              ///< device bytes the pool holds from cudaMalloc now
  std::uint64_t arena_bytes{0};
  std::uint64_t pool_fallbacks{0};
  std::uint64_t replans{0};        ///< schedules the allocator re-planned
  std::uint64_t arena_replans{0};  ///< plans the lifetime_arena re-made (split lifetimes)
  std::uint64_t deviations{0};
  std::uint64_t bytes_prefetched{0};      ///< host -> device bytes (uncompressed)
  std::uint64_t decode_failures{0};       ///< host copies found corrupted on the way back
  std::uint64_t enforced_peak{0};         ///< device bytes in use at once while the budget held
  std::uint64_t budget_refusals{0};       ///< allocations the budget refused
  std::uint64_t scheduled_offloads{0};    ///< offloads issued from the schedule
  std::uint64_t scheduled_prefetches{0};  ///< prefetches issued from the schedule
  std::uint64_t encoding_fallbacks{0};    ///< planned encodings that travelled raw instead
  std::uint64_t recomputes{0};            ///< storages rematerialised by re-running their ops
  std::uint64_t recompute_ops{0};         ///< op re-runs those took
  std::uint64_t recomputed_bytes{0};      ///< bytes rematerialised
  std::uint64_t recompute_fallbacks{0};   ///< planned recomputes kept resident (no callable)
  std::uint64_t scheduled_redrops{0};     ///< redrop entries run: back to a kept host copy, no copy
  std::uint64_t redrop_fallbacks{0};      ///< redrop entries that copied (no kept host copy)
  std::uint64_t manager_redrops{0};       ///< the manager's redrop_async calls (offload_stats)
  std::uint64_t host_peak_in_use{0};      ///< host bytes the offloaded copies held at most
  std::uint64_t host_peak_reserved{0};    ///< host bytes the staging pool took at most
};

/// @brief The figures of a stash::allocator `alloc` over a budget_guard<lifetime_arena> `pool`:
/// one reading for the CPU build's memory (host_memory) and the CUDA build's (memory.cuh).
/// @tparam Alloc a stash::allocator (stats(), host_pool_stats()).
/// @tparam Pool a budget_guard over a lifetime_arena (peak(), enforced_peak(), refusals(),
/// stats(), inner()).
template <class Alloc, class Pool>
[[nodiscard]] memory_report memory_report_of(Alloc const& alloc, Pool const& pool)
{
  memory_report r;
  auto const a           = alloc.stats();
  auto const& o          = a.offload;
  r.offloads             = o.offloads;
  r.prefetches           = o.prefetches;
  r.demand_prefetches    = o.demand_prefetches;
  r.bytes_offloaded      = o.bytes_offloaded;
  r.bytes_prefetched     = o.bytes_prefetched;
  r.bytes_encoded        = o.bytes_encoded;
  r.bytes_encoded_source = o.bytes_encoded_source;
  r.decode_failures      = o.decode_failures;
  auto const s           = pool.stats();
  r.peak_in_use          = pool.peak();
  r.enforced_peak        = pool.enforced_peak();
  r.budget_refusals      = pool.refusals();
  r.peak_reserved        = s.peak_reserved_bytes;
  r.reserved             = s.reserved_bytes;
  r.arena_bytes          = pool.inner().arena_bytes();
  r.pool_fallbacks       = s.fallbacks;
  r.replans              = a.replanned;
  r.arena_replans        = pool.inner().replans();
  r.deviations           = a.deviations;
  r.scheduled_offloads   = a.scheduled_offloads;
  r.scheduled_prefetches = a.scheduled_prefetches;
  r.encoding_fallbacks   = a.encoding_fallbacks;
  r.recomputes           = a.recomputes;
  r.recompute_ops        = a.recompute_ops;
  r.recomputed_bytes     = a.recomputed_bytes;
  r.recompute_fallbacks  = a.recompute_fallbacks;
  r.scheduled_redrops    = a.scheduled_redrops;
  r.redrop_fallbacks     = a.redrop_fallbacks;
  r.manager_redrops      = o.redrops;
  auto const host        = alloc.host_pool_stats();
  r.host_peak_in_use     = host.peak_in_use_bytes;
  r.host_peak_reserved   = host.peak_reserved_bytes;
  return r;
}

}  // namespace train_cnn
