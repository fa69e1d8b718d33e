/**
 * @file hold_split.hpp
 * @brief Internal: `search`'s held re-run splits, a local improvement of a finished plan whose
 * re-run batch rematerialises a storage long before its next use.
 *
 * The greedy (joint_greedy.hpp) and the batch sharing (schedule::shared_reruns) put a recompute
 * entry's re-run into an earlier batch when another entry of that batch reads it there: the
 * storage is then held on the device from that batch to its next use. Where that stretch is
 * the tightest of the iteration (the end of a CNN's backward, where the largest feature maps
 * are read), the plan makes room for the hold with swaps over the same stretch, and those
 * stall: regnet_y_400mf at 33% of the peak holds a 147 MiB BatchNorm output from its batch to
 * its next use 35 ops later and, to make room, swaps the 147 MiB convolution output that
 * BatchNorm reads out right after the batch and back before its next use, across a link that
 * cannot carry it in time (6 ms of stall on pcie4_x16, predicted). One move:
 * recompute entry e held from its batch at `at` to its next use v (at < v) is split: it is
 * re-run at `at` for the batch's other re-runs and leaves right after them (an early departure,
 * sim/schedule.hpp), and re-run again at v; or, when no re-run of its batch reads it, it moves
 * to v. The swap entries whose prefetch stalled and whose gap starts inside [at, v) are dropped
 * (the room the hold took is back), and what the plan is then over the budget is covered late
 * (late_cover): a prefetch landing before an op over the budget is issued right after that op
 * instead, or an idle activation across that op is swapped with its prefetch right after it.
 * Each candidate, largest held bytes first (a step budget of them), is offered to the
 * simulator, which weighs the second re-run and the late prefetches against the stalls saved.
 * Deterministic: a fixed order, a step budget of candidates and of cover steps.
 */
#pragma once

#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/recompute_set.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

namespace stash::detail {

/// Step budgets of the held re-run splits.
struct hold_split_limits {
  std::size_t candidates  = 6;   ///< plans offered per call
  std::size_t cover_steps = 48;  ///< late_cover's changes per plan
};

// The op whose start step, run or end frees hold event `ev` (the first op at or after it; the
// frees after op i - 1 are counted with op i, one op late, which only delays a prefetch more).
[[nodiscard]] inline std::optional<std::uint64_t> op_at_event(trace_analysis const& a,
                                                              std::uint64_t ev)
{
  auto const& e = a.ops().event;
  auto const it = std::lower_bound(e.begin(), e.end(), ev);
  if (it == e.end()) { return std::nullopt; }
  return static_cast<std::uint64_t>(it - e.begin());
}

/// The gaps (storage, last_use, next_use) of `sw` and `rc`, sorted: looked up per storage, so
/// that late_cover's scan of the storages is not storages x entries.
[[nodiscard]] inline std::vector<std::array<std::uint64_t, 3>> covered_gaps(
    std::vector<swap_entry> const& sw, std::vector<recompute_entry> const& rc)
{
  std::vector<std::array<std::uint64_t, 3>> out;
  out.reserve(sw.size() + rc.size());
  for (auto const& e : sw) { out.push_back({e.id, e.last_use, e.next_use}); }
  for (auto const& e : rc) { out.push_back({e.id, e.last_use, e.next_use}); }
  std::sort(out.begin(), out.end());
  return out;
}

/// Whether a gap of `gaps` (covered_gaps) of storage `id` overlaps its gap (u, v).
[[nodiscard]] inline bool covers_gap(std::vector<std::array<std::uint64_t, 3>> const& gaps,
                                     storage_id id, std::uint64_t u, std::uint64_t v)
{
  auto it = std::lower_bound(gaps.begin(), gaps.end(), std::array<std::uint64_t, 3>{id, 0, 0});
  for (; it != gaps.end() && (*it)[0] == id; ++it) {
    if ((*it)[1] < v && u < (*it)[2]) { return true; }
  }
  return false;
}

/// Covers what `sw` / `rc` leave over `budget` on the planned curve, the first event over it
/// first: a swap entry back before the op i there and not needed until after it (the one needed
/// last first) is prefetched at op i + 1 instead; else an activation or temporary idle across op
/// i (accessed before and after it, no entry covering it, a swap allowed by the recomputes) is
/// swapped with its offload after its last access and its prefetch at op i + 1 (the one with the
/// most nominal time left for its prefetch first). Stops when nothing is over, nothing applies,
/// or after `steps` changes. The simulator prices the late prefetches.
inline void late_cover(trace_analysis const& a, std::uint64_t budget, std::vector<swap_entry>& sw,
                       std::vector<recompute_entry> const& rc, std::size_t steps)
{
  auto const& life = a.lifetimes().storages;
  auto const n     = a.op_count();
  std::optional<recompute_set> set;
  for (std::size_t step = 0; step < steps; ++step) {
    auto const curve = planned_device_curve(a, sw, rc);
    auto const over  = std::find_if(curve.begin(), curve.end(), [&](auto b) { return b > budget; });
    if (over == curve.end()) { return; }
    auto const ev = static_cast<std::uint64_t>(over - curve.begin());
    auto const i  = op_at_event(a, ev);
    if (!i || *i + 1 >= n) { return; }
    auto const p = *i + 1;
    // A prefetch that lands by then: issued after op i instead.
    std::optional<std::size_t> late;
    for (std::size_t k = 0; k < sw.size(); ++k) {
      auto const& e = sw[k];
      if (e.wrap || e.redrop || e.prefetch_at > *i || e.next_use <= p || e.last_use >= *i ||
          e.offload_at >= p) {
        continue;
      }
      if (!late || e.next_use > sw[*late].next_use) { late = k; }
    }
    if (late) {
      sw[*late].prefetch_at = p;
      continue;
    }
    // An idle activation across op i, swapped with its prefetch after op i.
    std::optional<swap_entry> best;
    double best_slack = 0.0;
    if (!set) {  // the recomputes' reads, which a swap must leave resident (swaps added later
                 // change none of them)
      set.emplace(a, sw);
      for (auto const& e : rc) { (void)set->try_add(e); }
    }
    auto const gaps = covered_gaps(sw, rc);
    for (auto const& s : life) {
      if (s.bytes == 0 || (s.kind != storage_kind::act && s.kind != storage_kind::temp)) {
        continue;
      }
      if (s.alloc_event > ev || ev >= s.end_event) { continue; }
      auto const& acc = s.accesses;
      auto const next = std::upper_bound(acc.begin(), acc.end(), *i,
                                         [](std::uint64_t op, auto const& x) { return op < x.op; });
      if (next == acc.begin() || next == acc.end()) { continue; }
      auto const u = std::prev(next)->op, v = next->op;
      if (u >= *i || v <= p) { continue; }
      if (covers_gap(gaps, s.id, u, v)) { continue; }
      swap_entry const c{s.id, u, v, u + 1, p, s.bytes};
      if (!set->swap_allowed(c)) { continue; }
      auto const slack =
          (a.op_start(v) - a.op_start(p)) - a.model().prefetch_time(s.bytes, c.encoding);
      if (!best || slack > best_slack) {
        best       = c;
        best_slack = slack;
      }
    }
    if (!best) { return; }
    sw.push_back(*best);
  }
}

/// The held re-run splits of the file comment on the plan `sw` / `rc` and its simulation `sim`:
/// calls `offer(swaps, recomputes)` for each candidate, largest held bytes first, at most
/// `limits.candidates` times; true when an offer returned true.
template <typename Offer>
bool split_holds(trace_analysis const& a, std::uint64_t budget, std::vector<swap_entry> const& sw,
                 std::vector<recompute_entry> const& rc, sim_result const& sim,
                 hold_split_limits const& limits, Offer&& offer)
{
  std::vector<std::size_t> held;
  for (std::size_t k = 0; k < rc.size(); ++k) {
    if (rc[k].at < rc[k].next_use) { held.push_back(k); }
  }
  std::stable_sort(held.begin(), held.end(),
                   [&](std::size_t x, std::size_t y) { return rc[x].bytes > rc[y].bytes; });
  // The (storage, op) of the stalls waiting for a storage (not for memory), sorted.
  std::vector<std::pair<storage_id, std::uint64_t>> stalled;
  for (auto const& st : sim.stalls) {
    if (st.cause != stall_cause::memory && st.storage) { stalled.emplace_back(*st.storage, st.op); }
  }
  std::sort(stalled.begin(), stalled.end());
  bool kept         = false;
  std::size_t tries = 0;
  for (auto const k : held) {
    if (tries >= limits.candidates) { break; }
    auto const e = rc[k];
    // Whether another re-run of its batch reads it there (then it is split, else moved).
    bool reread = false;
    for (std::size_t j = 0; j < rc.size() && !reread; ++j) {
      if (j == k || rc[j].at != e.at) { continue; }
      auto const reads = recompute_chain_of(a, rc[j].id, rc[j].last_use, rc[j].at).reads;
      reread           = std::find(reads.begin(), reads.end(), e.id) != reads.end();
    }
    auto out = rc;
    if (reread) {
      out[k].next_use = e.at;
    } else {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(k));
    }
    // The re-run at its next use, first in that batch (the batch's other re-runs may read it).
    recompute_entry const again{e.id, reread ? e.at : e.last_use, e.next_use, e.next_use, e.bytes};
    auto const pos = std::find_if(out.begin(), out.end(),
                                  [&](recompute_entry const& x) { return x.at >= e.next_use; });
    out.insert(pos, again);
    // The swaps that stalled and start inside the hold go: the room it took is back.
    auto swaps = sw;
    std::erase_if(swaps, [&](swap_entry const& s) {
      if (s.wrap || s.last_use < e.at || s.last_use >= e.next_use) { return false; }
      return std::binary_search(stalled.begin(), stalled.end(), std::pair{s.id, s.next_use});
    });
    late_cover(a, budget, swaps, out, limits.cover_steps);
    ++tries;
    if (offer(std::move(swaps), std::move(out))) { kept = true; }
  }
  return kept;
}

}  // namespace stash::detail
