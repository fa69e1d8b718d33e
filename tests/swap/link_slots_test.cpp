// search's greedy construction with its swaps placed on the copy engines' free intervals
// (swap/detail/link_line.hpp, greedy_variant::link_slots): the line's searches, and on a hand
// trace whose two swaps both want the last stretch before their next uses, the placed prefetches
// take turns on the H2D engine instead of queueing into a stall.
#include <stash/sim/hardware.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/swap/detail/joint_greedy.hpp>
#include <stash/swap/detail/link_line.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/link_bound_model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// A and B (8000 B each, written by ops that may not be re-run) are read again only at the end
// of the backward; H makes the peak, and the budget (peak - 16000) needs both away then. After H
// the backward has room for both. The ten padding ops before their uses (21 us) hold both 8 us
// prefetches one after the other, but the last five (10.5 us) hold only one: a prefetch placed
// alone, as late as its own transfer allows, lands there for both, and they queue.
std::string const tail = R"(# stash-trace v1 model=tail dtype=float32
t 0 1000 input x
t 1 20000 param V
t 2 8 temp z
p forward
t 3 8000 act A
o my::fwd 0 3
t 4 8000 act B
o my::fwd 0 4
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
t 5 30000 act H
o aten::mm 0,1 5
p backward
t 6 1000 temp g
o my::bwd 5 6
f 5
o my::bwd 1,6 2
o my::bwd 1,6 2
o my::bwd 1,6 2
o my::bwd 1,6 2
o my::bwd 1,6 2
o my::bwd 1,6 2
o my::bwd 1,6 2
o my::bwd 1,6 2
o my::bwd 1,6 2
o my::bwd 1,6 2
o my::bwd 4,6 6
f 4
o my::bwd 3,6 6
f 3
f 6
f 2
)";

// As `tail` with a third such storage C and longer paddings (15 ops each way): A's and B's
// swaps are given, both offloads issued at op 3, so the D2H engine runs them one after the other
// (16 us); the budget (peak - 24000) needs C away at H too.
std::string const queued = R"(# stash-trace v1 model=queued dtype=float32
t 0 1000 input x
t 1 20000 param V
t 2 8 temp z
p forward
t 3 8000 act A
o my::fwd 0 3
t 4 8000 act B
o my::fwd 0 4
t 5 8000 act C
o my::fwd 0 5
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
o aten::mm 0,1 2
t 6 30000 act H
o aten::mm 0,1 6
p backward
t 7 1000 temp g
o my::bwd 6 7
f 6
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 1,7 2
o my::bwd 5,7 7
f 5
o my::bwd 4,7 7
f 4
o my::bwd 3,7 7
f 3
f 7
f 2
)";

// 1 GB/s each way over the link, 10 GB/s device memory, memory-bound ops.
stash::cost_model link_bound_model() { return stash::test::link_bound_model(1e10); }

// Seconds the compute stream waited for prefetches (any cause but memory).
double link_stall(stash::sim_result const& r)
{
  double s = 0;
  for (auto const& st : r.stalls) {
    if (st.cause != stash::stall_cause::memory) { s += st.seconds; }
  }
  return s;
}

}  // namespace

TEST_CASE("a link line finds the latest and the earliest free room and merges what it reserves")
{
  stash::detail::link_line line;
  CHECK(line.latest_fit(10.0, 2.0, 0.0) == doctest::Approx(8.0));
  CHECK(line.earliest_fit(1.0, 2.0, 100.0) == doctest::Approx(1.0));
  line.reserve(6.0, 9.0);
  line.reserve(2.0, 4.0);
  CHECK(line.size() == 2);
  CHECK(line.latest_fit(10.0, 2.0, 0.0) == doctest::Approx(4.0));  // [9, 10) is too short
  CHECK(line.latest_fit(10.0, 1.0, 0.0) == doctest::Approx(9.0));
  CHECK(!line.latest_fit(10.0, 3.0, 1.0).has_value());                // [1, 2) too short as well
  CHECK(line.earliest_fit(1.0, 2.0, 100.0) == doctest::Approx(4.0));  // [1, 2) is too short
  CHECK(line.earliest_fit(3.0, 3.0, 100.0) == doctest::Approx(9.0));
  CHECK(!line.earliest_fit(3.0, 3.0, 8.0).has_value());
  line.reserve(4.0, 6.0);  // touches both: one interval [2, 9)
  CHECK(line.size() == 1);
  CHECK(line.latest_fit(9.5, 1.0, 0.0) == doctest::Approx(1.0));
}

TEST_CASE("swaps placed on the copy engines' free room take turns instead of stalling")
{
  auto const t = stash::parse_trace(tail, "tail");
  stash::trace_analysis const a(t, link_bound_model());
  stash::detail::joint_greedy const greedy(a);
  auto const budget = a.peak_live_bytes() - 16000;
  auto plan_for     = [&](bool link) {
    auto p = greedy.build(budget, {1.0, 0.0, false, link}, {});
    return stash::make_schedule(a, "greedy", budget, std::move(p.swaps), std::move(p.recomputes));
  };
  // Placed alone, both prefetches land in the last five ops and the second waits for the first.
  auto const alone = plan_for(false);
  REQUIRE(alone.entries.size() == 2);
  auto const r_alone = stash::simulate(a, alone);
  REQUIRE(r_alone.fits);
  CHECK(link_stall(r_alone) > 1e-6);
  // On the line, one prefetch goes first: nothing waits for the link, and the plan still fits.
  auto const placed = plan_for(true);
  CHECK_NOTHROW(stash::validate_schedule(a, placed));
  REQUIRE(placed.entries.size() == 2);
  CHECK(placed.device_peak <= budget);
  auto const r = stash::simulate(a, placed);
  REQUIRE(r.fits);
  CHECK(link_stall(r) == doctest::Approx(0.0));
  CHECK(r.iteration_s < r_alone.iteration_s);
  auto const& e0 = placed.entries[0];
  auto const& e1 = placed.entries[1];
  CHECK(e0.prefetch_at != e1.prefetch_at);
  // The earlier prefetch ends before the later one is issued (8 us each on the nominal timeline).
  auto const first = std::min(e0.prefetch_at, e1.prefetch_at);
  auto const later = std::max(e0.prefetch_at, e1.prefetch_at);
  CHECK(a.op_start(later) - a.op_start(first) >= 8000.0 / 1e9 - 1e-12);
}

// A start's swaps occupy the engines one copy at a time, as the simulator runs them: two offloads
// issued at the same op hold the D2H engine for both transfers, not for the longer one.
TEST_CASE(
    "swaps given at the start queue on their copy engine, and what the greedy adds goes behind")
{
  auto const t = stash::parse_trace(queued, "queued");
  stash::trace_analysis const a(t, link_bound_model());
  stash::detail::joint_greedy const greedy(a);
  auto const budget = a.peak_live_bytes() - 24000;
  std::vector<stash::swap_entry> const start{{3, 0, 37, 3, 30, 8000}, {4, 1, 36, 3, 26, 8000}};
  auto p = greedy.build(budget, {1.0, 0.0, false, true}, {start, {}});
  auto const c =
      std::find_if(p.swaps.begin(), p.swaps.end(), [](auto const& e) { return e.id == 5; });
  REQUIRE(c != p.swaps.end());
  CHECK(a.op_start(c->offload_at) >= a.op_start(3) + 2 * 8000.0 / 1e9 - 1e-12);
  auto const s = stash::make_schedule(a, "greedy", budget, p.swaps, p.recomputes);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  CHECK(s.device_peak <= budget);
  auto const r = stash::simulate(a, s);
  REQUIRE(r.fits);
  CHECK(link_stall(r) == doctest::Approx(0.0));
}

}  // namespace STASH_UNITY_ID
