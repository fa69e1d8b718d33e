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
 * Candidates are tried cheapest per byte first. Then swap re-runs (swap_rerun_candidates): a
 * swap entry of an activation or temporary whose re-run costs less than its prefetch becomes
 * that re-run, with the same cuts, and the plan is offered whatever the re-runs' total time (the
 * simulator weighs the re-run against the copy): the stem convolution's output, swapped twice
 * across the busy link at the end of the backward for a re-run that reads the input batch.
 * Deterministic: a fixed order and a step budget of candidates.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/curve_tree.hpp>
#include <stash/swap/detail/range_tree.hpp>
#include <stash/swap/detail/redrop_planner.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace stash::detail {

/// A storage gap whose re-run needs swap entries cut: the entry and the entries to cut.
struct cut_rerun_candidate {
  recompute_entry entry;
  std::vector<std::size_t> cuts;  ///< indices into the plan's swap entries
  double seconds{};               ///< the re-run's time
  /// The plan's swap entry of the same storage and gap that the re-run replaces (swap
  /// re-runs, swap_rerun_candidates), if any.
  std::optional<std::size_t> replaces;
};

// Fills `c.cuts` with the swap entries that keep a read of `chain` away at op v (v not an access
// of the read, the entry neither a wrap nor a redrop, its offload before v); false when a read
// cannot be brought back for the re-run (or a recompute entry drops it there).
[[nodiscard]] inline bool cut_reads(trace_analysis const& a, recompute_chain const& chain,
                                    std::uint64_t v, std::vector<swap_entry> const& swaps,
                                    std::vector<recompute_entry> const& recomputes,
                                    cut_rerun_candidate& c)
{
  auto const& life = a.lifetimes().storages;
  auto accessed_at = [&](storage_id r, std::uint64_t op) {
    auto const& acc = life[r].accesses;
    return std::any_of(acc.begin(), acc.end(), [&](auto const& x) { return x.op == op; });
  };
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
  return ok;
}

// Cheapest re-run per byte first (ties keep order).
inline void sort_cheapest_per_byte(std::vector<cut_rerun_candidate>& cands)
{
  std::stable_sort(cands.begin(), cands.end(), [](auto const& x, auto const& y) {
    return x.seconds * static_cast<double>(y.entry.bytes) <
           y.seconds * static_cast<double>(x.entry.bytes);
  });
}

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
  std::vector<cut_rerun_candidate> out;
  for (auto const& s : life) {
    if (s.bytes == 0 || (s.kind != storage_kind::act && s.kind != storage_kind::temp)) { continue; }
    for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
      auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
      if (v < u + 2 || (s.accesses[j + 1].write && !s.accesses[j + 1].read)) { continue; }
      if (covered(s.id, u, v)) { continue; }
      auto const chain = recompute_chain_of(a, s.id, u, v);
      if (!chain.valid()) { continue; }
      cut_rerun_candidate c{{s.id, u, v, v, s.bytes}, {}, chain.seconds, std::nullopt};
      if (cut_reads(a, chain, v, swaps, recomputes, c) && !c.cuts.empty()) {
        out.push_back(std::move(c));
      }
    }
  }
  sort_cheapest_per_byte(out);
  return out;
}

/// The re-run chain at `e.next_use` of swap entry `e` of `swaps`, where the swap may become that
/// re-run: `e` keeps an activation or temporary away inside the iteration (not a wrap), no later
/// redrop of the storage uses the host copy `e` makes, and the chain is valid and costs less than
/// `e`'s prefetch. Shared by the swap re-runs here and the chained ones (swap_rerun_chain.hpp).
[[nodiscard]] inline std::optional<recompute_chain> cheaper_rerun_of_swap(
    trace_analysis const& a, std::vector<swap_entry> const& swaps, swap_entry const& e)
{
  auto const kind = a.trace().storages()[e.id].kind;
  if (e.wrap || e.next_use >= a.op_count() ||
      (kind != storage_kind::act && kind != storage_kind::temp)) {
    return std::nullopt;
  }
  if (std::any_of(swaps.begin(), swaps.end(), [&](swap_entry const& d) {
        return d.redrop && d.id == e.id && d.last_use == e.next_use;
      })) {
    return std::nullopt;  // a later redrop sends back the host copy this entry makes
  }
  auto chain = recompute_chain_of(a, e.id, e.last_use, e.next_use);
  if (!chain.valid() || chain.seconds >= a.model().prefetch_time(e.bytes, e.encoding)) {
    return std::nullopt;
  }
  return chain;
}

/// Swap re-runs: a swap entry of an activation or temporary S over (u, v) whose re-run at v
/// costs less than the entry's prefetch (a copy the link must carry, often at the end of the
/// backward where it is busiest and the compute left to hide it is short) becomes a recompute
/// entry at v, first in its batch; the swap entries that keep its chain's reads away at v are cut
/// to end there (as the cut-swap re-runs'). Not for an entry whose host copy a later redrop of S
/// uses. Cheapest per byte first.
[[nodiscard]] inline std::vector<cut_rerun_candidate> swap_rerun_candidates(
    trace_analysis const& a, std::vector<swap_entry> const& swaps,
    std::vector<recompute_entry> const& recomputes)
{
  std::vector<cut_rerun_candidate> out;
  for (std::size_t k = 0; k < swaps.size(); ++k) {
    auto const& e    = swaps[k];
    auto const chain = cheaper_rerun_of_swap(a, swaps, e);
    if (!chain) { continue; }
    cut_rerun_candidate c{
        {e.id, e.last_use, e.next_use, e.next_use, e.bytes}, {}, chain->seconds, k};
    if (cut_reads(a, *chain, e.next_use, swaps, recomputes, c)) { out.push_back(std::move(c)); }
  }
  sort_cheapest_per_byte(out);
  return out;
}

/// Drops the entries of `order` ((key, entry), in that order) from `rc` while the planned peak
/// of (`sw`, rc) stays within `budget` and the schedule validates; the re-run chains from
/// `chains` when not null (a planner's memo: the same results).
inline void prune_in_order(trace_analysis const& a, std::uint64_t budget,
                           std::vector<swap_entry> const& sw, std::vector<recompute_entry>& rc,
                           std::vector<std::pair<double, recompute_entry>> const& order,
                           chain_memo* chains = nullptr)
{
  // The planned curve of (sw, rc), kept as entries go: dropping one raises it by its bytes over
  // its off run (recompute_off_run) and nowhere else, so where that puts it over the budget the
  // planned peak is over too, known without planned_peak's pass over the events.
  // (A curve planned_device_curve refuses: no shortcut, each entry as planned_peak finds it.)
  auto curve = curve_tree([&] { return planned_device_curve(a, sw, rc); });
  for (auto const& [key, e] : order) {
    // e's off run [from, through] where it has one and the curve is kept (plain values: an
    // optional read after the trials below draws g++'s -Wmaybe-uninitialized at -O2)
    std::uint64_t from = 1, through = 0;
    if (auto const run = curve ? recompute_off_run(a, e) : std::nullopt) {
      std::tie(from, through) = *run;
    }
    bool const rises = from <= through;
    auto const bytes = static_cast<std::int64_t>(e.bytes);
    if (rises && static_cast<std::uint64_t>(curve->max(from, through + 1) + bytes) > budget) {
      continue;
    }
    auto trial = rc;
    trial.erase(std::find(trial.begin(), trial.end(), e));
    auto const s = make_schedule_using(a, "", budget, sw, trial, chains);
    if (s.device_peak > budget) { continue; }
    try {
      if (chains == nullptr) {
        validate_schedule(a, s);
      } else {
        validate_schedule_but_peak(a, s, *chains);  // device_peak: the planned peak, just computed
      }
    } catch (schedule_error const&) {
      continue;
    }
    rc = std::move(trial);
    if (rises) { curve->add(from, through + 1, bytes); }
  }
}

// Candidate `c` applied to (`sw`, `rc`): its cuts (each cut swap prefetched as late as the
// nominal timeline allows), the swap it replaces gone, its recompute entry first in its batch.
inline void apply_cut(trace_analysis const& a, cut_rerun_candidate const& c,
                      std::vector<swap_entry>& sw, std::vector<recompute_entry>& rc)
{
  auto const v = c.entry.at;
  for (auto const j : c.cuts) {
    auto& e      = sw[j];
    auto const t = a.model().prefetch_time(e.bytes, e.encoding);
    e.next_use   = v;
    auto p       = v;
    while (p > e.offload_at + 1 && a.op_start(v) - a.op_start(p) < t) { --p; }
    e.prefetch_at = std::min(e.prefetch_at, p);
  }
  if (c.replaces) { sw.erase(sw.begin() + static_cast<std::ptrdiff_t>(*c.replaces)); }
  auto it = std::lower_bound(rc.begin(), rc.end(), v,
                             [](recompute_entry const& e, std::uint64_t at) { return e.at < at; });
  rc.insert(it, c.entry);
}

/// One pass of the moves of the file comment over the first `max_candidates` candidates, then
/// of the swap re-runs (swap_rerun_candidates) over as many; `offer(swaps, recomputes)` times a
/// plan and returns true when it was kept. A cut-swap re-run is offered when the re-runs' total
/// time drops after the prune; a swap re-run, unpruned (the swap it replaces had already made
/// its room), whatever that time (it adds re-run time to take a copy off the link: only the
/// simulation can tell). Returns whether one was kept (the pass stops there).
template <typename Offer>
bool cut_swap_reruns(trace_analysis const& a, std::uint64_t budget,
                     std::vector<swap_entry> const& swaps,
                     std::vector<recompute_entry> const& recomputes, std::size_t max_candidates,
                     Offer&& offer, chain_memo* chains = nullptr)
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
    auto sw = swaps;
    auto rc = recomputes;
    apply_cut(a, cands[k], sw, rc);
    prune_in_order(a, budget, sw, rc, order, chains);
    double after = cands[k].seconds;
    for (auto const& [key, e] : order) {
      if (std::find(rc.begin(), rc.end(), e) != rc.end()) {
        after -= key * static_cast<double>(std::max<std::uint64_t>(1, e.bytes));
      }
    }
    if (after >= before - 1e-12) { continue; }
    if (offer(std::move(sw), std::move(rc))) { return true; }
  }
  auto const replacing = swap_rerun_candidates(a, swaps, recomputes);
  for (std::size_t k = 0; k < replacing.size() && k < max_candidates; ++k) {
    auto sw = swaps;
    auto rc = recomputes;
    apply_cut(a, replacing[k], sw, rc);
    if (offer(std::move(sw), std::move(rc))) { return true; }
  }
  return false;
}

}  // namespace stash::detail
