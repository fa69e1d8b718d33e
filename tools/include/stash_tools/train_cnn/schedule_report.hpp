// The schedule line both train_cnn builds print after the recorded step, and the peak it reports:
// the schedule's device peak in the order the run's budget (budget_guard) counts bytes, the same
// order on a GPU and on the CPU, so the two builds say the same thing for the same schedule.
#pragma once

#include <stash/core/units.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace train_cnn {

/// @brief The device peak of schedule `s` over the recorded step `t` in the order this run's
/// emulated device (budget_guard) counts bytes: an op's end frees before the next op's prefetches
/// and allocations, a prefetch's bytes taken when op prefetch_at starts, an offload's bytes free
/// once it is queued (the pool orders their reuse after the copy: the compute stream waits, a
/// memory stall, not an error). It is the planner's simulator with copies and codec kernels
/// taking no time (sim_memory::unconstrained), and it is what the replayed steps' enforced peak
/// is: a schedule whose run-order peak is within the budget runs within it, one over it stops at
/// the first replayed step's allocation past it. stash::schedule::device_peak (the planned curve)
/// counts a prefetch before the frees that end the op before it, and search_swap's timed
/// simulation holds an offload's bytes until its copy would have crossed PCIe: both may exceed a
/// budget this run holds (resnet at 40% of its peak: planned 18.7 MiB, run order 16.5 MiB).
/// A device codec's scratch is not in it: stash::allocator plans for the budget less that
/// scratch (schedule::budget), so compare this figure with schedule::budget.
/// @param t The recorded step.
/// @param s The schedule in force (its encodings do not change device bytes).
/// @return Bytes.
[[nodiscard]] inline std::uint64_t run_order_peak(stash::trace const& t, stash::schedule s)
{
  stash::hardware instant      = stash::hardware_preset("pcie4_x16");
  instant.pcie_d2h_bytes_per_s = 1e300;  // a copy takes no time next to any op
  instant.pcie_h2d_bytes_per_s = 1e300;
  instant.pcie_latency_s       = 0;
  for (auto& e : s.entries) { e.encoding = stash::swap_encoding::raw; }  // no codec kernel time
  stash::trace_analysis const a(t, stash::cost_model(instant));
  return stash::simulate(a, s, stash::sim_options{false, stash::sim_memory::unconstrained, true})
      .device_peak;
}

/// @brief Whether a schedule whose run-order peak is `run_order` runs within the budget it was
/// planned for (schedule::budget: the device budget less a device codec's scratch); nullopt
/// without a budget.
/// @param s The schedule in force.
/// @param run_order Its run_order_peak.
/// @return Whether it fits, or nullopt when there is no budget.
[[nodiscard]] inline std::optional<bool> run_order_fits(stash::schedule const& s,
                                                        std::uint64_t run_order)
{
  if (s.budget == std::numeric_limits<std::uint64_t>::max()) { return std::nullopt; }
  return run_order <= s.budget;
}

/// @brief The line both builds print for the schedule in force: entries, the run-order peak
/// (the figure the fit is decided on) with the planner's curve beside it, the no-offload peak,
/// and whether it fits.
/// @param s The schedule in force.
/// @param run_order Its run_order_peak over the recorded step.
/// @return The line, newline included.
[[nodiscard]] inline std::string schedule_line(stash::schedule const& s, std::uint64_t run_order)
{
  auto const fits = run_order_fits(s, run_order);
  return "  schedule (" + s.policy + "): " + std::to_string(s.entries.size()) +
         " tensors leave the device; peak " + stash::format_bytes(run_order) +
         " in this run's order (planner's curve " + stash::format_bytes(s.device_peak) +
         "), no-offload peak " + stash::format_bytes(s.baseline_peak) + ", " +
         (!fits ? "no budget" : (*fits ? "fits the budget" : "DOES NOT FIT the budget")) + "\n";
}

}  // namespace train_cnn
