/**
 * @file swap_policy_conformance.hpp
 * @brief The conformance kit of the swap_policy concept: what any policy (stash's or yours) must
 * do, checked on an analysed trace at a list of budgets, with a report that names each failure.
 *
 * Framework-neutral: it returns a report instead of asserting, so one line of any test framework
 * runs it, e.g. with doctest:
 * @code
 * auto const r = stash::testing::check_swap_policy(my_policy{}, analysis);
 * CHECK_MESSAGE(r.ok(), r.summary());
 * @endcode
 * Checked, at every budget: plan() returns a schedule that validates against the trace
 * (stash::validate_schedule); it records the policy's name, the budget and the trace's peak;
 * its planned peak is at most the peak without swapping; the same call twice gives the same
 * schedule (deterministic); simulating it with the budget lifted accounts for every byte it moves;
 * and, with the budget enforced, an iteration that fits stays within the budget. At a budget at or
 * above the peak without swapping, the schedule runs without memory stalls.
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/swap_policy.hpp>
#include <stash/testing/conformance_report.hpp>

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace stash::testing {

namespace detail {

template <class S>
void check_one_budget(S const& policy, trace_analysis const& a, std::uint64_t budget,
                      conformance_report& r)
{
  auto const at = " (budget " + std::to_string(budget) + ")";
  schedule s;
  try {
    s = policy.plan(a, budget);
  } catch (std::exception const& e) {
    r.expect(false, std::string("plan threw: ") + e.what() + at);
    return;
  }
  try {
    validate_schedule(a, s);
    r.expect(true, "");
  } catch (schedule_error const& e) {
    r.expect(false, std::string("invalid schedule: ") + e.what() + at);
    return;
  }
  r.expect(s.policy == policy.name(), "schedule names policy '" + s.policy + "', not '" +
                                          std::string(policy.name()) + "'" + at);
  r.expect(s.budget == budget, "schedule records budget " + std::to_string(s.budget) + at);
  r.expect(s.device_peak <= s.baseline_peak, "planned peak " + std::to_string(s.device_peak) +
                                                 " above the peak without swapping" + at);
  r.expect(policy.plan(a, budget).entries == s.entries, "a second plan differs" + at);
  std::uint64_t wire = 0;  // what the schedule moves each way, after the modelled codec
  for (auto const& e : s.entries) { wire += a.model().wire_bytes(e.bytes, e.encoding); }
  auto const lifted = simulate(a, s, sim_options{false, sim_memory::unconstrained});
  r.expect(lifted.fits && lifted.d2h_bytes == wire && lifted.h2d_bytes == wire,
           "with the budget lifted the iteration does not complete, or moves other than the " +
               std::to_string(wire) + " B of its entries each way" + at);
  auto const enforced = simulate(a, s, sim_options{false});
  r.expect(!enforced.fits || enforced.device_peak <= budget,
           "a fitting iteration peaks at " + std::to_string(enforced.device_peak) + at);
  if (budget >= a.peak_live_bytes()) {
    r.expect(enforced.fits &&
                 enforced.stall_by_cause[static_cast<std::size_t>(stall_cause::memory)] == 0.0,
             "at a budget above the peak the iteration waits for memory" + at);
  }
}

}  // namespace detail

/// @brief Runs the swap_policy conformance checks (see the file comment) of `policy` on `a` at
/// `budgets`; by default at the peak without swapping and at 90%, 75% and 50% of it.
/// @tparam S a type satisfying stash::swap_policy
/// @param policy the policy object, with its settings
/// @param a the analysed trace (any trace: a recording of your own loop, or data/traces)
/// @param budgets device budgets in bytes; empty: the defaults above
/// @return The report (ok() when every check passed).
template <swap_policy S>
[[nodiscard]] conformance_report check_swap_policy(S const& policy, trace_analysis const& a,
                                                   std::vector<std::uint64_t> budgets = {})
{
  conformance_report r;
  r.subject = "swap policy '" + std::string(policy.name()) + "'";
  if (budgets.empty()) {
    auto const peak = a.peak_live_bytes();
    budgets         = {peak, peak / 10 * 9, peak / 4 * 3, peak / 2};
  }
  for (auto const budget : budgets) { detail::check_one_budget(policy, a, budget, r); }
  return r;
}

}  // namespace stash::testing
