// search's prefetch advances (swap/detail/prefetch_advance.hpp) on a hand trace where two
// swapped storages come back one op apart: A (20 kB) is issued first but read last, B (4 kB)
// queues behind it on the H2D engine and the op that reads B waits (h2d_busy). Issuing a
// prefetch a few ops earlier, one entry at a time, kept only when the simulation is faster,
// removes that wait; every time is the cost model's prediction.
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/swap/detail/prefetch_advance.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/link_bound_model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// Ops: 0 writes A, 1 writes B, 2-6 padding, 7 writes H (the forward's peak), 8 reads H (then
// freed), 9-13 padding, 14 reads B, 15 reads A, 16 the last.
std::string const queue = R"(# stash-trace v1 model=queue dtype=float32
t 0 8000 input x
t 1 8 temp z
p forward
t 2 20000 act A
o aten::relu 0 2
t 3 4000 act B
o aten::relu 0 3
o aten::mm 0 1
o aten::mm 0 1
o aten::mm 0 1
o aten::mm 0 1
o aten::mm 0 1
t 4 30000 act H
o aten::mm 0 4
p backward
t 5 1000 temp g
o my::bwd 4 5
f 4
o my::bwd 0,5 1
o my::bwd 0,5 1
o my::bwd 0,5 1
o my::bwd 0,5 1
o my::bwd 0,5 1
o my::bwd 3,5 5
f 3
o my::bwd 2,5 5
f 2
o my::bwd 0,5 5
f 5
)";

constexpr std::uint64_t a_id = 2, b_id = 3, b_use = 14, a_use = 15;

// A prefetched at op 12, B at op 13: B's copy queues behind A's.
std::vector<stash::swap_entry> late_plan(stash::trace const& t)
{
  return {{a_id, 0, a_use, 1, 12, t.storages()[a_id].bytes},
          {b_id, 1, b_use, 2, 13, t.storages()[b_id].bytes}};
}

// The offer callable: simulates each plan offered and keeps it when faster than the best so far.
struct kept_plans {
  kept_plans(stash::trace_analysis const& analysis, double time) : a(analysis), best(time) {}

  stash::trace_analysis const& a;
  double best;
  std::size_t offers = 0, kept = 0;
  std::vector<stash::swap_entry> entries;

  bool operator()(stash::schedule s)
  {
    ++offers;
    CHECK(s.device_peak <= s.budget);  // only plans whose planned peak fits are offered
    auto const r = stash::simulate(a, s);
    if (!r.fits || r.iteration_s >= best) { return false; }
    best    = r.iteration_s;
    entries = s.entries;
    ++kept;
    return true;
  }
};

}  // namespace

TEST_CASE("a prefetch queued behind one needed later is issued earlier, kept when faster")
{
  auto const t = stash::parse_trace(queue, "queue");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e9));
  auto const budget = a.peak_live_bytes() - 24000;  // A and B both away at op 7
  auto const plan   = stash::make_schedule(a, "hand", budget, late_plan(t));
  REQUIRE(plan.fits());
  stash::validate_schedule(a, plan);
  auto const before = stash::simulate(a, plan);
  REQUIRE(before.fits);
  double b_wait = 0;
  for (auto const& st : before.stalls) {
    if (st.op == b_use && st.cause == stash::stall_cause::h2d_busy) { b_wait += st.seconds; }
  }
  REQUIRE(b_wait > 4e-6);  // B's 4 us copy queued behind A's 20 us one
  CHECK(stash::detail::waited_for_copies(before));

  // The stall's queue: B (the entry waited for), then A (whose copy ran right before it).
  auto timed = stash::simulate(a, plan, stash::sim_options{true});
  CHECK(stash::detail::queued_before_stalls(plan.entries, timed) == std::vector<std::size_t>{1, 0});

  kept_plans offer{a, before.iteration_s};
  std::size_t work = 0;
  bool const kept  = stash::detail::advance_prefetches(
       a, budget, "hand", plan.entries, plan.recomputes, false, before, {}, work, offer);
  REQUIRE(kept);
  CHECK(offer.kept > 0);
  CHECK(offer.best <= before.iteration_s - b_wait * (1 - 1e-9));  // B's wait is gone
  REQUIRE(offer.entries.size() == 2);
  CHECK(offer.entries[1].prefetch_at < 13);  // B is issued earlier
  auto const after = stash::make_schedule(a, "hand", budget, offer.entries);
  stash::validate_schedule(a, after);
  CHECK(after.fits());
  auto const r = stash::simulate(a, after);
  CHECK(r.iteration_s == doctest::Approx(offer.best).epsilon(1e-12));
  for (auto const& st : r.stalls) {
    CHECK_FALSE((st.op == b_use && st.cause == stash::stall_cause::h2d_busy));
  }
  // Deterministic: the same calls give the same plan.
  kept_plans again{a, before.iteration_s};
  std::size_t work2 = 0;
  (void)stash::detail::advance_prefetches(a, budget, "hand", plan.entries, plan.recomputes, false,
                                          before, {}, work2, again);
  CHECK(again.entries == offer.entries);
  CHECK(work2 == work);
}

TEST_CASE("prefetch advances: nothing offered without a copy stall or without work left")
{
  auto const t = stash::parse_trace(queue, "queue");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e9));
  auto const budget = a.peak_live_bytes() - 24000;
  SUBCASE("the work budget is spent")
  {
    auto const plan   = stash::make_schedule(a, "hand", budget, late_plan(t));
    auto const before = stash::simulate(a, plan);
    kept_plans offer{a, before.iteration_s};
    stash::detail::prefetch_advance_limits limits;
    limits.work      = a.op_count() + plan.entries.size();  // one trial's worth: the timing only
    std::size_t work = 0;
    CHECK_FALSE(stash::detail::advance_prefetches(a, budget, "hand", plan.entries, {}, false,
                                                  before, limits, work, offer));
    CHECK(offer.offers == 0);
    CHECK(work <= limits.work);
  }
  SUBCASE("the prefetches arrive in time: no copy stall, nothing to advance")
  {
    // Both issued right after H is freed, B first: each is back long before its use.
    std::vector<stash::swap_entry> early{{b_id, 1, b_use, 2, 9, t.storages()[b_id].bytes},
                                         {a_id, 0, a_use, 1, 9, t.storages()[a_id].bytes}};
    auto const plan   = stash::make_schedule(a, "hand", budget, early);
    auto const before = stash::simulate(a, plan);
    REQUIRE(before.fits);
    CHECK_FALSE(stash::detail::waited_for_copies(before));
    kept_plans offer{a, before.iteration_s};
    std::size_t work = 0;
    CHECK_FALSE(stash::detail::advance_prefetches(a, budget, "hand", plan.entries, {}, false,
                                                  before, {}, work, offer));
    CHECK(offer.offers == 0);
    CHECK(work == 0);
  }
}

TEST_CASE("prefetch advances: a trial's prefetch stays after the entry's offload")
{
  // A and B both prefetched at op 12, B's copy behind A's (B waits at op 14); B offloaded at op
  // 4, 8 ops before its prefetch: the trials advance it 1, 2 and 4 ops (to 8 at most: 8 ops
  // earlier would be op 4, no longer after its offload). The budget is the peak, so no trial is
  // cut short by the planned peak; every trial offered is a valid schedule (simulate validates).
  auto const t = stash::parse_trace(queue, "queue");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e9));
  auto const budget = a.peak_live_bytes();
  std::vector<stash::swap_entry> const plan{{a_id, 0, a_use, 1, 12, t.storages()[a_id].bytes},
                                            {b_id, 1, b_use, 4, 12, t.storages()[b_id].bytes}};
  auto const s = stash::make_schedule(a, "hand", budget, plan);
  stash::validate_schedule(a, s);
  auto const before = stash::simulate(a, s);
  REQUIRE(stash::detail::waited_for_copies(before));
  std::uint64_t earliest = b_use;
  std::size_t offers     = 0;
  auto offer             = [&](stash::schedule const& trial) {
    ++offers;
    CHECK_NOTHROW(stash::validate_schedule(a, trial));
    REQUIRE(trial.entries.size() == 2);
    earliest = std::min(earliest, trial.entries[1].prefetch_at);
    return false;
  };
  std::size_t work = 0;
  CHECK_FALSE(stash::detail::advance_prefetches(a, budget, "hand", plan, {}, false, before, {},
                                                work, offer));
  CHECK(offers > 0);
  CHECK(earliest == 8);
}

TEST_CASE("prefetch advances: a stall's queue ends at a gap on the H2D engine")
{
  // Three prefetches on the H2D engine: entry 0's copy, a gap, then entry 1's and entry 2's back
  // to back; the op reading entry 2's storage waited. Its queue is entry 2 and entry 1 (whose
  // copy ended as entry 2's began), not entry 0.
  std::vector<stash::swap_entry> const sw{
      {10, 0, 5, 1, 2, 100}, {11, 0, 6, 1, 3, 100}, {12, 0, 7, 1, 4, 100}};
  stash::sim_result sim;
  using span   = stash::timeline_span;
  sim.timeline = {span{span::kind_t::prefetch, stash::sim_resource::h2d, 0.0, 1.0, 0},
                  span{span::kind_t::prefetch, stash::sim_resource::h2d, 2.0, 3.0, 1},
                  span{span::kind_t::prefetch, stash::sim_resource::h2d, 3.0, 4.0, 2}};
  sim.stalls   = {stash::stall_record{7, 0.5, stash::storage_id{12}, stash::stall_cause::transfer}};
  CHECK(stash::detail::queued_before_stalls(sw, sim) == std::vector<std::size_t>{2, 1});
}

}  // namespace STASH_UNITY_ID
