// search_swap and the swap bounds: dominance over every other policy (on a sample here; every
// recorded trace, every hardware preset and budgets from 100% of the peak down to the swap bound
// in tests/sweep), fits at every budget >= 1.05 x the bound, determinism. Every time here is
// predicted by the cost model.
#include "support/data.hpp"
#include "support/dominance.hpp"

#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/swap/swap_policy.hpp>
#include <stash/trace/trace_reader.hpp>
#include "support/tiny_trace.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

static_assert(stash::swap_policy<stash::search_swap>);

namespace {

stash::trace load(char const* name)
{
  return stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
}

}  // namespace

TEST_CASE("swap bounds on a hand-made trace")
{
  auto const t = stash::parse_trace(stash::test::tiny_trace_text, "tiny");
  stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset("pcie3_x16")));
  // a (4000 B, act; accessed by op0, op1, op3) has one gap, op1 -> op3: it may be away during
  // op2, whose start holds x + a + b + c = 12000 B; without a 8000. b (act) has no gap.
  auto const off = stash::offloadable_bytes(a);
  REQUIRE(off.size() == 4);
  CHECK(off[0] == 0);
  CHECK(off[1] == 0);
  CHECK(off[2] == 4000);
  CHECK(off[3] == 0);
  CHECK(stash::swap_bound_bytes(a) == 8000);
  // The all-gaps schedule reaches the bound and completes under enforcement.
  auto const at_bound = stash::search_swap{}.plan(a, 8000);
  CHECK(stash::simulate(a, at_bound).fits);
  // Below the bound nothing fits, and the time bound says so.
  auto const below = stash::search_swap{}.plan(a, 7999);
  CHECK_FALSE(stash::simulate(a, below, stash::sim_options{false}).fits);
  CHECK(stash::iteration_time_lower_bound(a, 7999) == std::numeric_limits<double>::infinity());
  CHECK(stash::iteration_time_lower_bound(a, 12000) == doctest::Approx(a.compute_seconds()));
  CHECK(stash::iteration_time_lower_bound(a, 8000) >= a.compute_seconds());
  CHECK(stash::memory_lower_bound_bytes(a) ==
        stash::swap_bound_bytes(a, stash::swap_scope::any_kind));
}

TEST_CASE("search_swap is deterministic and names what won")
{
  auto const t = load("resnet18_b32");
  stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset("pcie4_x16")));
  // 70% of the peak: above the any-kind swap bound (55% on resnet18), so something fits.
  auto const budget = a.peak_live_bytes() / 10 * 7;
  REQUIRE(budget >= stash::swap_bound_bytes(a, stash::swap_scope::any_kind));
  stash::search_swap_stats first_stats, second_stats;
  auto const first  = stash::search_swap{}.plan(a, budget, first_stats);
  auto const second = stash::search_swap{}.plan(a, budget, second_stats);
  CHECK(first.entries == second.entries);
  CHECK(first.note == second.note);
  CHECK(first_stats.simulations == second_stats.simulations);
  CHECK(first_stats.simulations > 0);
  CHECK_FALSE(first.note.empty());
  CHECK(first.policy == "search_swap");
  CHECK_NOTHROW(stash::validate_schedule(a, first));
  // Through the registry too.
  CHECK(stash::plan_by_name("search_swap", a, budget).entries == first.entries);
  // Below the bound nothing can fit (swap_bounds.hpp): the schedule that moves every gap, with
  // its note, and nothing timed.
  stash::search_swap_stats below_stats;
  auto const below_budget = stash::swap_bound_bytes(a, stash::swap_scope::any_kind) - 1;
  auto const below        = stash::search_swap{}.plan(a, below_budget, below_stats);
  CHECK(below.note == "does not fit: even moving every gap leaves an op over the budget");
  CHECK(below.device_peak > below_budget);
  CHECK(below_stats.simulations == 0);
  CHECK_FALSE(stash::simulate(a, below, stash::sim_options{false}).fits);
}

// The sweep over every trace and preset is tests/sweep (stash_sweep_tests, built plain: it
// checks results); here one trace on every preset at 20% steps of the peak down to the bound
// (20 points, ~0.15 CPU s plain), through the same check, so that ASan + UBSan see that code.
TEST_CASE("search_swap's dominance sweep, a sample: squeezenet1_1_b64 on every preset")
{
  int budgets_checked = 0, search_better = 0;
  auto const t = load("squeezenet1_1_b64");
  for (auto const& hw : stash::hardware_presets) {
    CAPTURE(hw.name);
    stash::trace_analysis const a(t, stash::cost_model(hw));
    auto const bound = stash::swap_bound_bytes(a);
    CHECK(bound <= a.peak_live_bytes());
    for (auto const budget : stash::test::swap_sweep_budgets(a.peak_live_bytes(), bound, 20)) {
      CAPTURE(budget);
      search_better += stash::test::check_search_swap_point(a, budget, bound) ? 1 : 0;
      ++budgets_checked;
    }
  }
  CHECK(budgets_checked > 4 * 3);
  CHECK(search_better > 0);
}

TEST_CASE(
    "search_swap's local moves: a memory stall pushes a prefetch past the op, a late one earlier")
{
  using stash::swap_entry;
  // Both prefetches hold memory at op 5 (issued at or before it, next use after it).
  std::vector<swap_entry> const entries{swap_entry{1, 1, 9, 2, 3, 1000},
                                        swap_entry{2, 1, 6, 2, 4, 1000}};
  // Memory: the one with the furthest next use (id 1) is issued right after the stalled op, so
  // its bytes are not back while op 5 runs; the list stays ordered by prefetch.
  auto moved = entries;
  REQUIRE(
      stash::detail::move_for_stall(moved, {5, 1e-6, std::nullopt, stash::stall_cause::memory}));
  REQUIRE(moved.size() == 2);
  CHECK(moved[0] == entries[1]);
  CHECK(moved[1].id == 1);
  CHECK(moved[1].prefetch_at == 6);
  // Nothing holds memory at op 1 (no prefetch issued yet): no move.
  auto none = entries;
  CHECK_FALSE(
      stash::detail::move_for_stall(none, {1, 1e-6, std::nullopt, stash::stall_cause::memory}));
  CHECK(none == entries);
  // A transfer stall at id 2's next use: its prefetch goes halfway to the earliest op it may
  // take (3, after its offload at 2), and ties with id 1 there, ordered by next use.
  auto earlier = entries;
  REQUIRE(stash::detail::move_for_stall(earlier, {6, 1e-6, 2, stash::stall_cause::transfer}));
  CHECK(earlier[0].id == 2);
  CHECK(earlier[0].prefetch_at == 3);
  CHECK(earlier[1] == entries[0]);
}

TEST_CASE("search_swap at a budget of exactly the peak moves nothing and simulates nothing")
{
  auto const t = stash::parse_trace(stash::test::tiny_trace_text, "tiny");
  stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset("pcie3_x16")));
  REQUIRE(a.peak_live_bytes() == 12000);
  stash::search_swap_stats stats;
  auto const at_peak = stash::search_swap{}.plan(a, 12000, stats);
  CHECK(at_peak.entries.empty());
  CHECK(stats.winner == "no_swap");
  CHECK(stats.simulations == 0);
  // One byte less and a has to leave over op2.
  auto const below = stash::search_swap{}.plan(a, 11999, stats);
  REQUIRE(below.entries.size() == 1);
  CHECK(below.entries[0].id == 1);
  CHECK(stats.simulations > 0);
}

}  // namespace STASH_UNITY_ID
