/**
 * @file swap_rerun_chain.hpp
 * @brief Internal: `search`'s chained swap re-runs, a local improvement of a finished plan that
 * turns swaps into re-runs whose reads other entries of the plan keep away, bringing those reads
 * back for the re-run: swaps cut, later re-runs moved forward.
 *
 * The swap re-runs of cut_swap_rerun.hpp replace a swap whose re-run costs less than its
 * prefetch, but only when no recompute entry drops one of the re-run's reads at its op. A
 * dropout's product (softmax x mask, relu x mask) reads a storage that is re-run itself a few
 * ops later (the softmax, the relu, for their own backward) and a mask that cannot be re-run
 * (random) and is swapped anyway: the plan swaps the product, a copy as large as the mask, while
 * its re-run is one elementwise op once the softmax's re-run runs a few ops earlier and the
 * mask's prefetch ends a few ops earlier. On a link-bound plan that copy is what the iteration
 * waits for (the forward waits for offloads to free memory, the backward for prefetches).
 * One chained swap re-run: a swap entry of an activation or temporary S over (u, v) whose re-run
 * at v costs less than its prefetch becomes a recompute entry at v; each read of its chain that a
 * swap entry keeps away at v has that entry cut to end at v (prefetched as late as the nominal
 * timeline allows), and each read that a recompute entry drops at v with its batch at or after v
 * has that entry moved to v, its own chain's reads brought back likewise (nested up to a depth);
 * the moved entries run first in the batch, reads before readers, then S's. Every such swap of a
 * plan is turned, cheapest re-run per byte first, each kept only when the schedule still
 * validates; the caller times the result (and covers with the greedy what it leaves over the
 * budget: a moved re-run holds its storage from v on). Deterministic: a fixed order and step
 * budgets.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/cut_swap_rerun.hpp>
#include <stash/swap/detail/joint_greedy.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace stash::detail {

/// How much work the chained swap re-runs may do on one plan.
struct swap_rerun_chain_limits {
  std::size_t depth   = 8;   ///< nesting of recompute entries moved forward for one re-run
  std::size_t entries = 64;  ///< swap entries tried (each one validation of the plan)
};

// Brings every read of `chain` back at op v in (sw, rc), see the file comment; `moved` gets the
// ids of the recompute entries moved to v, reads before readers. False when a read cannot come
// back: a wrap or redrop keeps it away, its offload is not before v, a recompute entry's batch
// before v drops it (its gap would be split by the re-run's use), or the nesting is too deep.
[[nodiscard]] inline bool bring_back_reads(trace_analysis const& a, recompute_chain const& chain,
                                           std::uint64_t v, std::vector<swap_entry>& sw,
                                           std::vector<recompute_entry>& rc, std::size_t depth,
                                           std::vector<storage_id>& moved)
{
  auto const& life = a.lifetimes().storages;
  auto accessed_at = [&](storage_id r) {
    auto const& acc = life[r].accesses;
    return std::any_of(acc.begin(), acc.end(), [&](auto const& x) { return x.op == v; });
  };
  for (auto const r : chain.reads) {
    if (std::find(moved.begin(), moved.end(), r) != moved.end() || accessed_at(r)) { continue; }
    for (auto& e : sw) {
      if (e.id != r || !(e.last_use < v && v <= e.next_use)) { continue; }
      if (e.wrap || e.redrop || e.offload_at >= v) { return false; }
      auto const t = a.model().prefetch_time(e.bytes, e.encoding);
      e.next_use   = v;
      auto p       = v;
      while (p > e.offload_at + 1 && a.op_start(v) - a.op_start(p) < t) { --p; }
      e.prefetch_at = std::min(e.prefetch_at, p);
    }
    for (auto& e : rc) {
      if (e.id != r || !(e.last_use < v && v <= e.next_use)) { continue; }
      if (e.at < v || depth == 0) { return false; }
      e.at             = v;
      auto const inner = recompute_chain_of(a, r, e.last_use, v);
      if (!inner.valid() || !bring_back_reads(a, inner, v, sw, rc, depth - 1, moved)) {
        return false;
      }
      moved.push_back(r);
      break;
    }
  }
  return true;
}

// Swap entry `k` of `sw` turned into a re-run at its next use (see the file comment), in place;
// false (the plan as it may be half edited: the caller restores it) when it does not apply.
[[nodiscard]] inline bool chain_one_swap(trace_analysis const& a, std::size_t k,
                                         std::vector<swap_entry>& sw,
                                         std::vector<recompute_entry>& rc, std::size_t depth)
{
  auto const e     = sw[k];
  auto const chain = recompute_chain_of(a, e.id, e.last_use, e.next_use);
  if (!chain.valid() || chain.seconds >= a.model().prefetch_time(e.bytes, e.encoding)) {
    return false;
  }
  auto const v = e.next_use;
  std::vector<storage_id> moved;
  if (!bring_back_reads(a, chain, v, sw, rc, depth, moved)) { return false; }
  sw.erase(sw.begin() + static_cast<std::ptrdiff_t>(k));
  // The moved entries out, then back at the front of v's batch, reads first, then S's entry.
  std::vector<recompute_entry> front;
  for (auto const id : moved) {
    auto const it = std::find_if(rc.begin(), rc.end(), [&](recompute_entry const& x) {
      return x.id == id && x.at == v && x.last_use < v && v <= x.next_use;
    });
    front.push_back(*it);
    rc.erase(it);
  }
  front.push_back(recompute_entry{e.id, e.last_use, v, v, e.bytes});
  auto const at =
      std::lower_bound(rc.begin(), rc.end(), v,
                       [](recompute_entry const& x, std::uint64_t op) { return x.at < op; });
  rc.insert(at, front.begin(), front.end());
  return true;
}

/// The plan (`swaps`, `recomputes`) with every chained swap re-run of the file comment that
/// applies, cheapest re-run per byte first, each kept only where the schedule validates; nothing
/// when none applies. Only swap entries of activations and temporaries inside the iteration, not
/// one whose host copy a later redrop of the storage uses.
[[nodiscard]] inline std::optional<greedy_plan> chained_swap_reruns(
    trace_analysis const& a, std::uint64_t budget, std::vector<swap_entry> const& swaps,
    std::vector<recompute_entry> const& recomputes, swap_rerun_chain_limits const& limits)
{
  std::vector<std::pair<double, swap_entry>> order;  // (re-run seconds per byte, entry)
  for (auto const& e : swaps) {
    if (e.redrop) { continue; }
    auto const chain = cheaper_rerun_of_swap(a, swaps, e);
    if (!chain) { continue; }
    order.emplace_back(chain->seconds / static_cast<double>(std::max<std::uint64_t>(1, e.bytes)),
                       e);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](auto const& x, auto const& y) { return x.first < y.first; });
  greedy_plan p{swaps, recomputes};
  bool applied = false;
  for (std::size_t j = 0; j < order.size() && j < limits.entries; ++j) {
    auto const it = std::find(p.swaps.begin(), p.swaps.end(), order[j].second);
    if (it == p.swaps.end()) { continue; }  // cut by an earlier one: its read, now shorter
    auto trial = p;
    if (!chain_one_swap(a, static_cast<std::size_t>(it - p.swaps.begin()), trial.swaps,
                        trial.recomputes, limits.depth)) {
      continue;
    }
    try {
      validate_schedule(a, make_schedule(a, "", budget, trial.swaps, trial.recomputes));
    } catch (schedule_error const&) {
      continue;
    }
    p       = std::move(trial);
    applied = true;
  }
  if (!applied) { return std::nullopt; }
  return p;
}

}  // namespace stash::detail
