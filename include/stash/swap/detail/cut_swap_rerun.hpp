/**
 * @file cut_swap_rerun.hpp
 * @brief Internal: `search`'s cut-swap re-runs, a local improvement of a finished plan that
 * re-runs a storage whose chain reads a swapped one, by bringing that one back for the re-run.
 *
 * The greedy (joint_greedy.hpp) and recompute_set accept a re-run only where every storage it
 * reads is resident, so a swap over a read's whole gap excludes it: the input batch swapped
 * across the iteration keeps the first convolution's output (large, cheap to re-run per byte)
 * resident from the forward to the end of the backward. A re-run use splits the read's gap
 * (sim/schedule.hpp, re-run uses): its swap entry may end at the re-run (next_use = the re-run's
 * op; the batch waits for its prefetch) and the storage stays resident after it. One move:
 * storage S, with a gap (u, v) no entry covers, whose chain at v reads a storage r that a swap
 * entry keeps away at v (v not an access of r, r not dropped by a recompute entry there), gets
 * a recompute entry at v, first in its batch; each such swap entry is cut to end at v
 * (prefetched as late as the nominal timeline allows); then the plan's other recomputes, dearest
 * per byte first, are dropped while the planned peak stays within the budget and the schedule
 * validates. When the re-runs' total time drops, the plan is offered (timed by the simulator).
 * Candidates are tried cheapest per byte first. Deterministic: a fixed order and a step budget
 * of candidates.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace stash::detail {

/// A storage gap whose re-run needs swap entries cut: the entry and the entries to cut.
struct cut_rerun_candidate {
  recompute_entry entry;
  std::vector<std::size_t> cuts;  ///< indices into the plan's swap entries
  double seconds{};               ///< the re-run's time
};

/// The candidates of the file comment in `swaps` / `recomputes`, cheapest per byte first.
[[nodiscard]] inline std::vector<cut_rerun_candidate> cut_rerun_candidates(
    trace_analysis const& a, std::vector<swap_entry> const& swaps,
    std::vector<recompute_entry> const& recomputes)
{
  auto const& life = a.lifetimes().storages;
  auto covered     = [&](storage_id id, std::uint64_t u, std::uint64_t v) {
    auto over = [&](auto const& e) { return e.id == id && e.last_use < v && u < e.next_use; };
    return std::any_of(swaps.begin(), swaps.end(), over) ||
           std::any_of(recomputes.begin(), recomputes.end(), over);
  };
  auto accessed_at = [&](storage_id r, std::uint64_t op) {
    auto const& acc = life[r].accesses;
    return std::any_of(acc.begin(), acc.end(), [&](auto const& x) { return x.op == op; });
  };
  std::vector<cut_rerun_candidate> out;
  for (auto const& s : life) {
    if (s.bytes == 0 || (s.kind != storage_kind::act && s.kind != storage_kind::temp)) { continue; }
    for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
      auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
      if (v < u + 2 || (s.accesses[j + 1].write && !s.accesses[j + 1].read)) { continue; }
      if (covered(s.id, u, v)) { continue; }
      auto const chain = recompute_chain_of(a, s.id, u, v);
      if (!chain.valid()) { continue; }
      cut_rerun_candidate c{{s.id, u, v, v, s.bytes}, {}, chain.seconds};
      bool ok = true;
      for (auto const r : chain.reads) {
        for (std::size_t k = 0; k < swaps.size() && ok; ++k) {
          auto const& e = swaps[k];
          if (e.id != r || !(e.last_use < v && v <= e.next_use)) { continue; }
          ok = !e.wrap && !e.redrop && e.offload_at < v && !accessed_at(r, v);
          c.cuts.push_back(k);
        }
        ok = ok && std::none_of(recomputes.begin(), recomputes.end(), [&](auto const& e) {
               return e.id == r && e.last_use < v && v <= e.next_use;
             });
      }
      if (ok && !c.cuts.empty()) { out.push_back(std::move(c)); }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](auto const& x, auto const& y) {
    return x.seconds * static_cast<double>(y.entry.bytes) <
           y.seconds * static_cast<double>(x.entry.bytes);
  });
  return out;
}

/// Drops the entries of `order` ((key, entry), in that order) from `rc` while the planned peak
/// of (`sw`, rc) stays within `budget` and the schedule validates.
inline void prune_in_order(trace_analysis const& a, std::uint64_t budget,
                           std::vector<swap_entry> const& sw, std::vector<recompute_entry>& rc,
                           std::vector<std::pair<double, recompute_entry>> const& order)
{
  for (auto const& [key, e] : order) {
    auto trial = rc;
    trial.erase(std::find(trial.begin(), trial.end(), e));
    if (planned_peak(a, sw, trial) > budget) { continue; }
    try {
      validate_schedule(a, make_schedule(a, "", budget, sw, trial));
    } catch (schedule_error const&) {
      continue;
    }
    rc = std::move(trial);
  }
}

/// One pass of the moves of the file comment over the first `max_candidates` candidates;
/// `offer(swaps, recomputes)` times a plan and returns true when it was kept. Returns whether
/// one was kept (the pass stops there).
template <typename Offer>
bool cut_swap_reruns(trace_analysis const& a, std::uint64_t budget,
                     std::vector<swap_entry> const& swaps,
                     std::vector<recompute_entry> const& recomputes, std::size_t max_candidates,
                     Offer&& offer)
{
  // The plan's re-runs, dearest per byte first (the prune's order), and their total time.
  std::vector<std::pair<double, recompute_entry>> order;
  double before = 0;
  for (auto const& e : recomputes) {
    double const sec = recompute_chain_of(a, e.id, e.last_use, e.at).seconds;
    before += sec;
    order.emplace_back(-sec / static_cast<double>(std::max<std::uint64_t>(1, e.bytes)), e);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](auto const& x, auto const& y) { return x.first < y.first; });
  auto const cands = cut_rerun_candidates(a, swaps, recomputes);
  for (std::size_t k = 0; k < cands.size() && k < max_candidates; ++k) {
    auto const& c = cands[k];
    auto sw       = swaps;
    auto const v  = c.entry.at;
    for (auto const j : c.cuts) {
      auto& e      = sw[j];
      auto const t = a.model().prefetch_time(e.bytes, e.encoding);
      e.next_use   = v;
      auto p       = v;
      while (p > e.offload_at + 1 && a.op_start(v) - a.op_start(p) < t) { --p; }
      e.prefetch_at = std::min(e.prefetch_at, p);
    }
    auto rc = recomputes;
    auto it =
        std::lower_bound(rc.begin(), rc.end(), v,
                         [](recompute_entry const& e, std::uint64_t at) { return e.at < at; });
    rc.insert(it, c.entry);
    prune_in_order(a, budget, sw, rc, order);
    double after = c.seconds;
    for (auto const& [key, e] : order) {
      if (std::find(rc.begin(), rc.end(), e) != rc.end()) {
        after -= key * static_cast<double>(std::max<std::uint64_t>(1, e.bytes));
      }
    }
    if (after >= before - 1e-12) { continue; }
    if (offer(std::move(sw), std::move(rc))) { return true; }
  }
  return false;
}

}  // namespace stash::detail
