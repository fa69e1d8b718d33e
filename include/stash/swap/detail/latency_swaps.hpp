/**
 * @file latency_swaps.hpp
 * @brief Internal: `search`'s latency-bound swap drops, a local improvement of a finished plan
 * that swaps many small storages, each paying the link's fixed cost per transfer.
 *
 * Every copy costs the link's latency (cost_model: hardware::pcie_latency_s, 10 us on the
 * presets) on top of its bytes. The greedy (joint_greedy.hpp) prices a swap by its transfer time
 * against the excess it covers, so a small storage across the fullest stretch of the iteration
 * is a cheap pick, and the moves after it (the splits, the cut and chained re-runs) change the
 * plan without pruning what became redundant. regnet_y_400mf at 33% of the peak ends with ~340
 * swaps of parameters and gradients (17 MiB in all, most under 2 KB) whose prefetches come back
 * in the optimizer one per 10 us: 4.1 ms of H2D engine time for ~2.1 ms of optimizer ops, a
 * third of what the plan spends over no_swap on pcie4_x16 (predicted). One move, in tiers: the
 * swap entries whose wire time is at most a share of the latency (latency_swap_limits::shares,
 * each tier dropping more) are taken out of the plan (their storages stay on the device), and
 * the greedy (joint_greedy::build from what is left, weights 0, 0.3 and 1) covers what that
 * leaves over the budget, with larger entries or re-runs, and prunes the entries that became
 * redundant. Each plan is offered to the simulator, which weighs the fewer transfers against
 * what covers their bytes. Wrap entries and redrops stay, and so does an entry whose host copy a
 * redrop reuses. Deterministic: fixed tiers and weightings, one construction each.
 */
#pragma once

#include <stash/sim/cost_model.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/joint_greedy.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace stash::detail {

/// Tiers and weightings of the latency-bound swap drops.
struct latency_swap_limits {
  /// An entry is dropped in a tier when its H2D wire time (its transfer less the latency) is at
  /// most this share of the latency; ascending.
  std::array<double, 4> shares = {1.0 / 32, 1.0 / 8, 0.5, 2.0};
  /// The greedy's weightings that cover what a tier leaves over the budget.
  std::array<greedy_variant, 3> cover = {greedy_variant{1.0, 0.0, true},
                                         greedy_variant{1.0, 0.3, true},
                                         greedy_variant{1.0, 1.0, true}};
};

/// Which entries of `sw` may be dropped: not a wrap or a redrop, and no redrop of its storage
/// reuses its host copy (a redrop whose last use is the entry's next use). The redrops are looked
/// up in a sorted list (a deep trace's plan holds tens of thousands of entries).
[[nodiscard]] inline std::vector<bool> droppable_swaps(std::vector<swap_entry> const& sw)
{
  std::vector<std::pair<storage_id, std::uint64_t>> reused;  // (storage, last use) of redrops
  for (auto const& r : sw) {
    if (r.redrop) { reused.emplace_back(r.id, r.last_use); }
  }
  std::sort(reused.begin(), reused.end());
  std::vector<bool> out(sw.size(), false);
  for (std::size_t k = 0; k < sw.size(); ++k) {
    auto const& e = sw[k];
    out[k]        = !e.wrap && !e.redrop &&
             !std::binary_search(reused.begin(), reused.end(), std::pair{e.id, e.next_use});
  }
  return out;
}

/// The latency-bound swap drops of the file comment on the plan `sw` / `rc`: calls
/// `offer(swaps, recomputes)` for each tier and weighting whose construction changes the plan
/// (once per distinct construction); true when an offer returned true.
template <typename Offer>
bool drop_latency_swaps(trace_analysis const& a, std::uint64_t budget, joint_greedy const& greedy,
                        std::vector<swap_entry> const& sw, std::vector<recompute_entry> const& rc,
                        latency_swap_limits const& limits, Offer&& offer)
{
  auto const& model    = a.model();
  double const latency = model.hw().pcie_latency_s;
  if (latency <= 0) { return false; }
  // Each droppable entry's wire time as a share of the latency.
  std::vector<double> share(sw.size(), -1.0);
  auto const droppable = droppable_swaps(sw);
  for (std::size_t k = 0; k < sw.size(); ++k) {
    if (droppable[k]) {
      share[k] = (model.h2d_time(sw[k].bytes, sw[k].encoding) - latency) / latency;
    }
  }
  bool kept            = false;
  std::size_t previous = 0;       // entries the tier before dropped
  std::vector<greedy_plan> made;  // the constructions offered (a weighting may repeat another)
  for (double const s : limits.shares) {
    std::vector<swap_entry> rest;
    rest.reserve(sw.size());
    for (std::size_t k = 0; k < sw.size(); ++k) {
      if (share[k] < 0 || share[k] > s) { rest.push_back(sw[k]); }
    }
    auto const dropped = sw.size() - rest.size();
    if (dropped == previous) { continue; }
    previous = dropped;
    for (auto const& var : limits.cover) {
      auto p = greedy.build(budget, var, greedy_plan{rest, rc});
      if (p.swaps == sw && p.recomputes == rc) { continue; }
      if (std::any_of(made.begin(), made.end(), [&](greedy_plan const& q) {
            return q.swaps == p.swaps && q.recomputes == p.recomputes;
          })) {
        continue;
      }
      made.push_back(p);
      if (offer(std::move(p.swaps), std::move(p.recomputes))) { kept = true; }
    }
  }
  return kept;
}

}  // namespace stash::detail
