// search_swap and the swap bounds: dominance over every other policy on every recorded trace,
// every hardware preset and budgets from 100% of the peak down to the swap bound, fits at every
// budget >= 1.05 x the bound, determinism. Every time here is predicted by the cost model.
#include "support/data.hpp"
#include "support/sanitizer.hpp"

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

char const* const traces[] = {
    "alexnet_b128",           "vgg16_b32",         "resnet18_b32",           "mobilenet_v2_b32",
    "transformer_encoder_b8", "squeezenet1_1_b64", "shufflenet_v2_x1_0_b64", "efficientnet_b0_b32",
    "regnet_y_400mf_b64"};

stash::trace load(char const* name)
{
  return stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
}

// Budgets from 100% of the peak down to the swap bound in 5% steps of the peak (10% under a
// sanitizer: support/sanitizer.hpp), then 1.05x and 1x the bound.
std::vector<std::uint64_t> sweep_budgets(std::uint64_t peak, std::uint64_t bound)
{
  std::vector<std::uint64_t> budgets;
  int const step = stash::test::sanitizer_build ? 10 : 5;
  for (int pct = 100; pct > 0; pct -= step) {
    auto const b = static_cast<std::uint64_t>(static_cast<double>(peak) * pct / 100.0);
    if (b < bound) { break; }
    budgets.push_back(b);
  }
  budgets.push_back(bound + bound / 20);
  budgets.push_back(bound);
  return budgets;
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
  CHECK_FALSE(stash::simulate(a, below).fits);
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
  auto const budget = a.peak_live_bytes() / 2;
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
}

TEST_CASE("search_swap fits wherever any policy fits, never slower, down to 1.05x the bound")
{
  int budgets_checked = 0, search_better = 0;
  for (auto const* name : traces) {
    auto const t = load(name);
    for (auto const& hw : stash::hardware_presets) {
      CAPTURE(name);
      CAPTURE(hw.name);
      stash::trace_analysis const a(t, stash::cost_model(hw));
      auto const bound = stash::swap_bound_bytes(a);
      CHECK(bound <= a.peak_live_bytes());
      for (auto const budget : sweep_budgets(a.peak_live_bytes(), bound)) {
        CAPTURE(budget);
        double best_other = std::numeric_limits<double>::infinity();
        for (auto const policy : stash::swap_policy_names()) {
          // search_swap is the swap-only form: the policies that recompute are search's rivals
          // (joint_search_test.cpp).
          if (policy == "search_swap" || policy == "search" || policy == "checkpoint" ||
              policy == "dtr") {
            continue;
          }
          auto const r = stash::simulate(a, stash::plan_by_name(policy, a, budget), {false});
          if (r.fits) { best_other = std::min(best_other, r.iteration_s); }
        }
        auto const s = stash::search_swap{}.plan(a, budget);
        auto const r = stash::simulate(a, s, {false});
        if (best_other < std::numeric_limits<double>::infinity()) {
          CHECK(r.fits);
          CHECK(r.iteration_s <= best_other * (1 + 1e-12));
          if (r.iteration_s < best_other * (1 - 1e-9)) { ++search_better; }
        }
        if (budget >= bound + bound / 20) { CHECK(r.fits); }
        if (r.fits) {
          CHECK(r.device_peak <= budget);
          // search_swap only swaps: the swap-only bound holds, and the one with recompute too.
          auto const swap_only = stash::time_bound_options{std::nullopt, false};
          CHECK(r.iteration_s >=
                stash::iteration_time_lower_bound(a, budget, swap_only) * (1 - 1e-12));
        }
        ++budgets_checked;
      }
    }
  }
  MESSAGE(budgets_checked << " (trace, preset, budget) points; search_swap strictly faster than "
                          << "every other policy at " << search_better);
  CHECK(budgets_checked > 9 * 4 * 3);
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
