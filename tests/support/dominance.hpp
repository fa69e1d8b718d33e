// One point of the planners' dominance sweeps: at a (trace, hardware, budget), `search` (keep /
// swap / recompute) and `search_swap` (swap only) fit wherever a rival policy fits and are never
// slower than the fastest that does. The full sweeps over data/traces are tests/sweep, built plain
// in stash_sweep_tests (they check planner results, and take ~10x longer under ASan); stash_tests
// runs a few points of each through these same functions, so the sanitizer sees their code.
#pragma once

#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/joint_search.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/swap_bounds.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace stash::test {

/// What one point of search's sweep found.
struct search_point_result {
  bool compared;    ///< some rival policy fits, so search was held to it
  bool recomputes;  ///< search's plan re-runs something (not only its swap seed)
};

/// Checks `search` at one budget against every other registered policy: where one fits, search
/// fits and is at most 0.5% slower than the fastest; every fitting plan's peak is at least the
/// memory lower bound.
/// @param a The trace under its cost model.
/// @param budget Device bytes.
/// @return What the point found.
inline search_point_result check_search_point(trace_analysis const& a, std::uint64_t budget)
{
  auto const least = memory_lower_bound_bytes(a);
  double best      = std::numeric_limits<double>::infinity();
  std::string best_name;
  for (auto const policy : swap_policy_names()) {
    if (policy == "search") { continue; }
    auto const r = simulate(a, plan_by_name(policy, a, budget), {false});
    if (r.fits) { CHECK(r.device_peak >= least); }  // the bound is one
    if (r.fits && r.iteration_s < best) {
      best      = r.iteration_s;
      best_name = policy;
    }
  }
  auto const s = joint_search{}.plan(a, budget);
  auto const r = simulate(a, s, {false});
  // search may plan wrap entries (joint_search::wrap): its floor is the bound with them.
  CHECK((!r.fits || r.device_peak >= memory_lower_bound_bytes(a, true)));
  CAPTURE(best_name);
  CAPTURE(s.note);
  bool const compared = best < std::numeric_limits<double>::infinity();
  if (compared) {
    REQUIRE(r.fits);
    CHECK(r.iteration_s <= best * 1.005);
  }
  return {compared, !s.recomputes.empty()};
}

/// search_swap's budgets for a trace: from 100% of the peak down to the swap bound in `step_pct`
/// steps of the peak, then 1.05x and 1x the bound.
/// @param peak The trace's peak live bytes.
/// @param bound Its swap bound (swap_bound_bytes).
/// @param step_pct The step, in percent of the peak.
/// @return The budgets, largest first.
inline std::vector<std::uint64_t> swap_sweep_budgets(std::uint64_t peak, std::uint64_t bound,
                                                     int step_pct)
{
  std::vector<std::uint64_t> budgets;
  for (int pct = 100; pct > 0; pct -= step_pct) {
    auto const b = static_cast<std::uint64_t>(static_cast<double>(peak) * pct / 100.0);
    if (b < bound) { break; }
    budgets.push_back(b);
  }
  budgets.push_back(bound + bound / 20);
  budgets.push_back(bound);
  return budgets;
}

/// Checks `search_swap` at one budget against the other swap-only policies: where one fits,
/// search_swap fits and is never slower; it fits at every budget >= 1.05x the swap bound; a
/// fitting plan holds the budget and the swap-only time bound.
/// @param a The trace under its cost model.
/// @param budget Device bytes.
/// @param bound The trace's swap bound (swap_bound_bytes).
/// @return True when search_swap is strictly faster than every other swap-only policy.
inline bool check_search_swap_point(trace_analysis const& a, std::uint64_t budget,
                                    std::uint64_t bound)
{
  double best_other = std::numeric_limits<double>::infinity();
  for (auto const policy : swap_policy_names()) {
    // search_swap is the swap-only form: the policies that recompute are search's rivals.
    if (policy == "search_swap" || policy == "search" || policy == "checkpoint" ||
        policy == "dtr") {
      continue;
    }
    auto const r = simulate(a, plan_by_name(policy, a, budget), {false});
    if (r.fits) { best_other = std::min(best_other, r.iteration_s); }
  }
  auto const s = search_swap{}.plan(a, budget);
  auto const r = simulate(a, s, {false});
  bool better  = false;
  if (best_other < std::numeric_limits<double>::infinity()) {
    CHECK(r.fits);
    CHECK(r.iteration_s <= best_other * (1 + 1e-12));
    better = r.iteration_s < best_other * (1 - 1e-9);
  }
  if (budget >= bound + bound / 20) { CHECK(r.fits); }
  if (r.fits) {
    CHECK(r.device_peak <= budget);
    // search_swap only swaps: the swap-only bound holds, and the one with recompute too.
    auto const swap_only = time_bound_options{std::nullopt, false};
    CHECK(r.iteration_s >= iteration_time_lower_bound(a, budget, swap_only) * (1 - 1e-12));
  }
  return better;
}

}  // namespace stash::test
