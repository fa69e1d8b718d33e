// Persistent tensors (parameters and optimizer state, allocated before the first iteration)
// moved by stash::allocator between two of their uses inside an iteration, on the host backend:
// a small training step with real float kernels (support/recompute_mlp.hpp) whose schedule
// offloads every weight and gradient across its gaps gives weights and gradients bitwise
// identical to keeping everything, with the device pool's in-use bytes within the planned peak;
// the persistent tensors are resident at every iteration's end; a failed offload leaves them
// resident; keep_persistent removes their entries; a recompute entry for one is refused.
#include "support/recompute_mlp.hpp"

#include <stash/allocator.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/statistics_adaptor.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/search_swap.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching  = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using counted       = stash::statistics_adaptor<host_caching>;
constexpr int steps = 4;

// Offloads every storage that is never freed in the trace (the persistent ones) across each gap
// between two of its accesses: after the first, prefetched at the second.
struct persistent_gaps_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "persistent_gaps"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    std::vector<stash::swap_entry> entries;
    auto const& life = a.lifetimes().storages;
    for (stash::storage_id id = 0; id < life.size(); ++id) {
      if (!life[id].persistent()) { continue; }
      auto const& acc = life[id].accesses;
      for (std::size_t k = 0; k + 1 < acc.size(); ++k) {
        auto const u = acc[k].op, v = acc[k + 1].op;
        if (v <= u + 1) { continue; }
        entries.push_back({id, u, v, u + 1, v, life[id].bytes});
      }
    }
    return stash::make_schedule(a, std::string(name()), budget, std::move(entries));
  }
};

// Recomputes the first persistent storage between its first two accesses: always refused.
struct persistent_recompute_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "recompute_state"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    auto s           = stash::no_swap{}.plan(a, budget);
    auto const& life = a.lifetimes().storages;
    auto const& acc  = life[0].accesses;
    s.recomputes.push_back({0, acc[0].op, acc[1].op, acc[1].op, life[0].bytes});
    return s;
  }
};

struct run_result {
  std::vector<stash::test::mlp_state> states;  // after each step
  stash::allocator_stats stats;
  stash::schedule schedule;
  std::size_t peak{0};           // sampled in-use bytes of the replayed steps
  int away_at_iteration_end{0};  // persistent tensors not resident after an end_iteration()
};

template <class Policy>
run_result run(Policy policy, stash::allocator_options ao = {},
               stash::test::mlp_options o = {.layers = 4, .n = 256, .batch = 1})
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching base;
  counted pool(base);
  stash::allocator<counted, Policy, void, stash::host_backend> alloc(backend, pool, ao, policy);
  stash::test::mlp net(alloc, backend, s, o);
  net.in_use = [&] { return pool.stats().in_use_bytes; };
  run_result r;
  for (int i = 0; i < steps; ++i) {
    net.step(i);
    for (auto h : net.persistent()) {
      if (alloc.where(h) != stash::tensor_state::resident) { ++r.away_at_iteration_end; }
    }
    r.states.push_back(net.state());
  }
  alloc.synchronize();
  r.stats    = alloc.stats();
  r.schedule = alloc.current_schedule();
  r.peak     = net.sampled_peak;
  return r;
}

}  // namespace

TEST_CASE("persistent swaps: weights and gradients offloaded mid-iteration, bitwise the kept run")
{
  auto const kept = run(stash::no_swap{});
  auto const r    = run(persistent_gaps_policy{});
  auto const n    = r.schedule.entries.size();
  REQUIRE(n > 0);
  MESSAGE("persistent_gaps: " << n << " entries, planned peak " << r.schedule.device_peak
                              << " (no-offload peak " << r.schedule.baseline_peak
                              << "), sampled pool peak " << r.peak << " (kept run " << kept.peak
                              << ")");
  CHECK(r.states == kept.states);  // float vectors compared bit for bit (no NaN)
  CHECK(r.stats.deviations == 0);
  CHECK(r.stats.persistent_offloads == (steps - 1) * n);
  CHECK(r.stats.scheduled_offloads == (steps - 1) * n);
  CHECK(r.stats.scheduled_prefetches == (steps - 1) * n);
  CHECK(r.stats.offload.offloads == (steps - 1) * n);
  CHECK(r.stats.offload.demand_prefetches == 0);
  CHECK(r.stats.failed_offloads == 0);
  CHECK(r.stats.persistent_restores == 0);
  CHECK(r.away_at_iteration_end == 0);
  CHECK(r.schedule.device_peak < r.schedule.baseline_peak);
  CHECK(r.peak <= r.schedule.device_peak);
  CHECK(r.peak < kept.peak);
}

TEST_CASE("persistent swaps: search_swap's any-kind plan runs, parameters included")
{
  auto const kept = run(stash::no_swap{});
  REQUIRE(kept.peak > 0);
  stash::allocator_options ao;
  ao.device_budget                 = kept.schedule.baseline_peak * 55 / 100;
  auto const r                     = run(stash::search_swap{}, ao);
  std::uint64_t persistent_entries = 0;
  for (auto const& e : r.schedule.entries) {
    // The mlp's persistent tensors are its first storages: 2 per layer.
    if (e.id < 2 * 4) { ++persistent_entries; }
  }
  MESSAGE("search_swap at 55%: " << r.schedule.entries.size() << " entries (" << persistent_entries
                                 << " of persistent tensors), planned peak "
                                 << r.schedule.device_peak << " of " << ao.device_budget
                                 << ", sampled pool peak " << r.peak);
  CHECK(persistent_entries > 0);  // activations alone cannot reach 55% here
  CHECK(r.peak <= r.schedule.device_peak);
  CHECK(r.states == kept.states);
  CHECK(r.stats.deviations == 0);
  CHECK(r.stats.persistent_offloads == (steps - 1) * persistent_entries);
  CHECK(r.stats.scheduled_offloads == (steps - 1) * r.schedule.entries.size());
  CHECK(r.away_at_iteration_end == 0);
}

TEST_CASE("persistent swaps: a failed offload leaves the persistent tensor resident")
{
  auto const kept = run(stash::no_swap{});
  stash::allocator_options ao;
  ao.host_budget = 64;  // below any weight's host slot: every offload fails
  auto const r   = run(persistent_gaps_policy{}, ao);
  auto const n   = r.schedule.entries.size();
  REQUIRE(n > 0);
  CHECK(r.states == kept.states);
  CHECK(r.stats.failed_offloads == (steps - 1) * n);
  CHECK(r.stats.persistent_offloads == 0);
  CHECK(r.stats.offload.offloads == 0);
  CHECK(r.away_at_iteration_end == 0);
}

TEST_CASE("persistent swaps: keep_persistent removes their entries from the schedule in force")
{
  auto const kept = run(stash::no_swap{});
  stash::allocator_options ao;
  ao.keep_persistent = true;
  auto const r       = run(persistent_gaps_policy{}, ao);
  CHECK(r.schedule.entries.empty());
  CHECK(r.schedule.policy == "persistent_gaps");
  CHECK(r.schedule.device_peak == r.schedule.baseline_peak);  // recomputed without them
  CHECK(r.stats.scheduled_offloads == 0);
  CHECK(r.states == kept.states);
}

TEST_CASE("persistent swaps: a recompute entry for a persistent storage is a schedule_error")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator<host_caching, persistent_recompute_policy, void, stash::host_backend> alloc(
      backend, pool);
  auto w = alloc.allocate_async(1024, stash::storage_kind::param, "w", s);
  alloc.begin_iteration();
  auto x = alloc.allocate_async(1024, stash::storage_kind::act, "x", s);
  (void)alloc.op("a", std::vector{w}, std::vector{x}, s);
  (void)alloc.op("b", std::vector{x}, {}, s);
  (void)alloc.op("c", std::vector{w}, {}, s);
  alloc.deallocate_async(x);
  std::string what;
  try {
    alloc.end_iteration();
  } catch (stash::schedule_error const& e) {
    what = e.what();
  }
  CAPTURE(what);
  CHECK(what.find("policy 'recompute_state'") != std::string::npos);
  CHECK(what.find("recompute entry 0: storage 0 'persistent#") != std::string::npos);
  CHECK(what.find("is persistent") != std::string::npos);
  CHECK(what.find("cannot be recomputed") != std::string::npos);
  CHECK(alloc.state() == stash::allocator_state::recording);
  backend.synchronize(s);
}

TEST_CASE("persistent swaps: an iteration that ends before the prefetch brings the tensor back")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator<host_caching, persistent_gaps_policy, void, stash::host_backend> alloc(backend,
                                                                                          pool);
  auto w    = alloc.allocate_async(4096, stash::storage_kind::param, "w", s);
  auto step = [&](bool whole) {
    alloc.begin_iteration();
    auto x = alloc.allocate_async(4096, stash::storage_kind::act, "x", s);
    (void)alloc.op("fwd", std::vector{w}, std::vector{x}, s);
    (void)alloc.op("mid", std::vector{x}, {}, s);  // w is offloaded here
    if (whole) { (void)alloc.op("bwd", std::vector{x, w}, {}, s); }
    alloc.deallocate_async(x);
    alloc.end_iteration();
  };
  step(true);
  REQUIRE(alloc.current_schedule().entries.size() == 1);
  step(true);
  CHECK(alloc.stats().persistent_offloads == 1);
  CHECK(alloc.stats().persistent_restores == 0);
  step(false);  // deviates: stops before w's prefetch
  CHECK(alloc.stats().persistent_offloads == 2);
  CHECK(alloc.stats().persistent_restores == 1);
  CHECK(alloc.stats().deviations == 1);
  CHECK(alloc.where(w) == stash::tensor_state::resident);
  alloc.synchronize();
  backend.synchronize(s);
}

}  // namespace STASH_UNITY_ID
