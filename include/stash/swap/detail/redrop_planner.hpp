/**
 * @file redrop_planner.hpp
 * @brief Internal: second departures after a re-run's read (issue 22, "one entry per gap"; see
 * sim/schedule.hpp, re-run uses), for `search` (joint_search::redrop).
 *
 * A recompute entry whose re-runs, before op p, read a storage R that is used before p (at u)
 * and next at q > p (an access, or another re-run's read) keeps R resident from p to q, even
 * where the planned curve exceeds the budget. R's use at p splits its gap: R may leave again
 * right after the batch at p. with_redrops repairs a schedule whose planned peak exceeds its
 * budget, one candidate (storage, p) at a time, largest first, taking among its options the one
 * that cuts the budget's excess most (ties: the cheaper on the cost model), while the excess
 * drops and its step budget (schedules built) lasts:
 *  - a swap entry over (p, q) with its own copy, leaving right after the batch (offload_at = p;
 *    p + 1 when the batch itself rebuilt R), prefetched at the later of the op the nominal
 *    timeline gives the copy and the op after the last op over the budget in [p, q);
 *  - when a swap entry of R ends at p, a redrop of its host copy instead (no copy);
 *  - when ops between u and p are over the budget too and nothing covers (u, p), R also leaves
 *    after u (a swap entry over (u, p), back for the re-run) and the second departure is a
 *    redrop;
 *  - for an activation or temporary, one more re-run before q (a recompute entry over (p, q)
 *    at q, first in its batch).
 * A recompute entry of R over p that rebuilt it by then is cut to end at p. Candidates with
 * another entry after p are left alone, and with `activations_only` only activations and
 * temporaries move. A schedule is taken only once validated (a re-run whose read the move takes
 * away is not a choice). Deterministic: a fixed order and at most `max_steps` schedules built.
 */
#pragma once

#include <stash/core/radix_sort.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

namespace stash::detail {

/// A storage a re-run reads at p, next used at q (an access or a re-run use) and last used
/// before p at u: it may leave after p.
struct redrop_candidate {
  storage_id id{};
  std::uint64_t u{}, p{}, q{}, bytes{};
  std::optional<std::size_t> prior_swap;       ///< its swap entry ending at p (a host copy)
  std::optional<std::size_t> prior_recompute;  ///< its recompute entry over p (to end at p)
};

/// Each storage's uses in `s` after a re-run read that is not an access of it, with no entry
/// of it over the sub-gap that follows (at most a swap ending there or a recompute over it that
/// rebuilt it by then), largest first (ties: by id, then p).
/// The chains come from `chains`: with_redrops lists the candidates again after every step,
/// over recompute entries that mostly stay the same.
[[nodiscard]] inline std::vector<redrop_candidate> redrop_candidates(trace_analysis const& a,
                                                                     schedule const& s,
                                                                     bool activations_only,
                                                                     chain_memo& chains)
{
  auto const& life = a.lifetimes().storages;
  std::vector<std::pair<storage_id, std::uint64_t>> reads;  // (storage, re-run op)
  for (auto const& rc : s.recomputes) {
    for (auto const r : chains(rc.id, rc.last_use, rc.at).reads) {
      auto const kind = a.trace().storages()[r].kind;
      if (activations_only && kind != storage_kind::act && kind != storage_kind::temp) { continue; }
      reads.emplace_back(r, rc.at);
    }
  }
  // Sorted as std::sort sorts them (equal pairs are alike): by op, then stably by storage.
  if (reads.size() >= 64) {
    std::vector<std::pair<storage_id, std::uint64_t>> scratch;
    stable_radix_sort(reads, scratch, [](auto const& x) { return x.second; });
  }
  sort_by_first(reads);
  reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
  std::vector<redrop_candidate> out;
  for (std::size_t j = 0; j < reads.size(); ++j) {
    auto const [r, p] = reads[j];
    auto const& acc   = life[r].accesses;
    auto const next =
        std::upper_bound(acc.begin(), acc.end(), p,
                         [](std::uint64_t o, storage_access const& x) { return o < x.op; });
    if (next == acc.begin() || next == acc.end() || (next - 1)->op == p) { continue; }
    auto q = next->op;
    if (j + 1 < reads.size() && reads[j + 1].first == r) { q = std::min(q, reads[j + 1].second); }
    auto u = (next - 1)->op;
    if (j > 0 && reads[j - 1].first == r) { u = std::max(u, reads[j - 1].second); }
    out.push_back({r, u, p, q, life[r].bytes, {}, {}});
  }
  // Each storage's entries, by (storage, index): a candidate looks at its own only.
  auto by_id = [](auto const& list) {
    std::vector<std::pair<storage_id, std::size_t>> index;
    index.reserve(list.size());
    for (std::size_t k = 0; k < list.size(); ++k) { index.emplace_back(list[k].id, k); }
    sort_by_first(index);
    return index;
  };
  auto const swaps_by = by_id(s.entries), recomputes_by = by_id(s.recomputes);
  auto of = [](std::vector<std::pair<storage_id, std::size_t>> const& index, storage_id id) {
    auto const lo =
        std::lower_bound(index.begin(), index.end(), std::make_pair(id, std::size_t{0}));
    auto hi = lo;
    while (hi != index.end() && hi->first == id) { ++hi; }
    return std::span(lo, hi);
  };
  std::erase_if(out, [&](redrop_candidate& c) {
    for (auto const& item : of(swaps_by, c.id)) {
      auto const k  = item.second;
      auto const& e = s.entries[k];
      if (e.wrap || e.last_use >= c.q || e.next_use <= c.u) { continue; }
      if (e.next_use > c.p) { return true; }
      if (e.next_use == c.p) { c.prior_swap = k; }
    }
    for (auto const& item : of(recomputes_by, c.id)) {
      auto const k  = item.second;
      auto const& e = s.recomputes[k];
      if (e.last_use >= c.q || e.next_use <= c.p) { continue; }
      if (e.last_use >= c.p || e.at > c.p) { return true; }
      c.prior_recompute = k;
    }
    return c.q < c.p + 1;
  });
  std::stable_sort(out.begin(), out.end(), [](auto const& x, auto const& y) {
    return std::tie(y.bytes, x.id, x.p) < std::tie(x.bytes, y.id, y.p);
  });
  return out;
}

/// The last op in (lo, hi] whose step or event the planned `curve` puts over `budget`, if any.
[[nodiscard]] inline std::optional<std::uint64_t> last_op_over(trace_analysis const& a,
                                                               std::span<std::uint64_t const> curve,
                                                               std::uint64_t budget,
                                                               std::uint64_t lo, std::uint64_t hi)
{
  auto const& ev = a.ops().event;
  for (auto i = hi; i > lo; --i) {
    for (auto e = ev[i - 1] + 1; e <= ev[i]; ++e) {
      if (curve[e] > budget) { return i; }
    }
  }
  return std::nullopt;
}

/// The bytes by which `curve` exceeds `budget`, summed over its events.
[[nodiscard]] inline std::uint64_t excess_of(std::span<std::uint64_t const> curve,
                                             std::uint64_t budget)
{
  std::uint64_t sum = 0;
  for (auto const c : curve) { sum += c > budget ? c - budget : 0; }
  return sum;
}

/// One way to move a candidate: the schedule's entries and recomputes after it, and its price
/// on the cost model (link or re-run seconds), to break ties between equal excesses.
struct redrop_option {
  std::vector<swap_entry> entries;
  std::vector<recompute_entry> recomputes;
  double seconds{};
};

/// The ways to take candidate `c` off the device after p (see the file comment); none when no
/// op over the budget lies in (p, q). The re-run chains from `chains`.
[[nodiscard]] inline std::vector<redrop_option> redrop_options(trace_analysis const& a,
                                                               schedule const& s,
                                                               std::span<std::uint64_t const> curve,
                                                               redrop_candidate const& c,
                                                               chain_memo& chains)
{
  auto const over = last_op_over(a, curve, s.budget, c.p - 1, c.q - 1);  // op p's step too
  if (!over) { return {}; }
  auto const& model = a.model();
  auto const time   = model.prefetch_time(c.bytes, swap_encoding::configured);
  auto place        = [&](std::uint64_t lo, std::uint64_t hi, std::uint64_t after) {
    auto p = hi;
    while (p > lo + 1 && a.op_start(hi) - a.op_start(p) < time) { --p; }
    return std::clamp<std::uint64_t>(std::max(p, after + 1), lo + 1, hi);
  };
  auto base_rc = s.recomputes;
  bool rebuilt = false;  // by the batch at p: its copy may not start before it
  if (c.prior_recompute) {
    base_rc[*c.prior_recompute].next_use = c.p;
    rebuilt                              = base_rc[*c.prior_recompute].at == c.p;
  }
  std::vector<redrop_option> out;
  auto with_swaps = [&](std::vector<swap_entry> const& added, double seconds) {
    auto entries = s.entries;
    entries.insert(entries.end(), added.begin(), added.end());
    out.push_back({std::move(entries), base_rc, seconds});
  };
  swap_entry second{c.id, c.p, c.q, rebuilt ? c.p + 1 : c.p, 0, c.bytes};
  second.prefetch_at = place(second.offload_at, c.q, *over);
  if (second.prefetch_at > second.offload_at) {
    if (c.prior_swap) {  // its host copy is still valid: leave without a copy
      auto redrop     = second;
      redrop.encoding = s.entries[*c.prior_swap].encoding;
      redrop.redrop   = true;
      with_swaps({redrop}, time);
    }
    with_swaps({second}, time + model.offload_time(c.bytes, swap_encoding::configured));
    auto const first_over = last_op_over(a, curve, s.budget, c.u + 1, c.p - 1);
    if (!c.prior_swap && !c.prior_recompute && first_over && c.p >= c.u + 2) {
      swap_entry const first{c.id, c.u, c.p, c.u + 1, place(c.u + 1, c.p, *first_over), c.bytes};
      auto redrop       = second;
      redrop.offload_at = c.p;
      redrop.redrop     = true;
      with_swaps({first, redrop},
                 2 * time + model.offload_time(c.bytes, swap_encoding::configured));
    }
  }
  auto const kind = a.trace().storages()[c.id].kind;
  if (kind == storage_kind::act || kind == storage_kind::temp) {  // re-run it again before q
    auto const& chain = chains(c.id, c.p, c.q);
    if (chain.valid()) {
      auto rc = base_rc;
      // first in its batch: a re-run there may read it
      auto it =
          std::lower_bound(rc.begin(), rc.end(), c.q,
                           [](recompute_entry const& e, std::uint64_t at) { return e.at < at; });
      rc.insert(it, recompute_entry{c.id, c.p, c.q, c.q, c.bytes});
      out.push_back({s.entries, std::move(rc), chain.seconds});
    }
  }
  return out;
}

/// planned_peak(a, entries, recomputes) given their planned curve, the chains from `chains`.
[[nodiscard]] inline std::uint64_t peak_of(trace_analysis const& a,
                                           std::vector<std::uint64_t> const& curve,
                                           std::vector<swap_entry> const& entries,
                                           std::vector<recompute_entry> const& recomputes,
                                           chain_memo& chains)
{
  return peak_with(a, curve, entries, recomputes, [&](std::size_t k) {
    auto const& e = recomputes[k];
    return chains(e.id, e.last_use, e.at).transient_bytes;
  });
}

/// make_schedule(a, policy, budget, entries, recomputes), the re-run chains from `chains` when
/// not null (peak_of: the same planned peak).
[[nodiscard]] inline schedule make_schedule_using(trace_analysis const& a, std::string policy,
                                                  std::uint64_t budget,
                                                  std::vector<swap_entry> entries,
                                                  std::vector<recompute_entry> recomputes,
                                                  chain_memo* chains)
{
  if (chains == nullptr) {
    return make_schedule(a, std::move(policy), budget, std::move(entries), std::move(recomputes));
  }
  schedule s;
  s.policy        = std::move(policy);
  s.budget        = budget;
  s.baseline_peak = a.peak_live_bytes();
  s.device_peak =
      peak_of(a, planned_device_curve(a, entries, recomputes), entries, recomputes, *chains);
  s.entries    = std::move(entries);
  s.recomputes = std::move(recomputes);
  return s;
}

/// with_redrops, the re-run chains taken from `chains` (a planner's, kept across calls).
[[nodiscard]] inline schedule with_redrops_using(trace_analysis const& a, schedule s,
                                                 bool activations_only, chain_memo& chains,
                                                 std::size_t max_steps = 16)
{
  if (s.device_peak <= s.budget || s.recomputes.empty()) { return s; }
  auto curve  = planned_device_curve(a, s.entries, s.recomputes);
  auto excess = excess_of(curve, s.budget);
  std::vector<std::pair<storage_id, std::uint64_t>> tried;
  std::size_t steps = 0;
  while (steps < max_steps && s.device_peak > s.budget) {
    std::optional<schedule> next;
    std::vector<std::uint64_t> next_curve;
    std::uint64_t next_excess = excess;
    for (auto const& c : redrop_candidates(a, s, activations_only, chains)) {
      auto const key = std::make_pair(c.id, c.p);
      if (std::find(tried.begin(), tried.end(), key) != tried.end()) { continue; }
      tried.push_back(key);
      // The options that cut the excess, by (excess, price, order): the first of them that
      // validates is taken. Validating only down to it (a validation is the costly part) takes
      // what keeping the best validated option in order took.
      auto options = redrop_options(a, s, curve, c, chains);
      std::vector<std::tuple<std::uint64_t, double, std::size_t>> better;
      std::vector<std::vector<std::uint64_t>> curves(options.size());
      for (std::size_t k = 0; k < options.size(); ++k) {
        if (++steps > max_steps) { break; }
        // The curve first (as make_schedule). An option whose entries take more bytes away than
        // are live somewhere is invalid: planned_device_curve refuses it (schedule_error), and
        // it is skipped as one that does not validate (stash-plan --frontier on the transformer,
        // pcie4_x16, met one from the chained swap re-runs' plan and stopped).
        try {
          curves[k] = planned_device_curve(a, options[k].entries, options[k].recomputes);
        } catch (schedule_error const&) {
          continue;
        }
        auto const cand_excess = excess_of(curves[k], s.budget);
        if (cand_excess < excess) { better.emplace_back(cand_excess, options[k].seconds, k); }
      }
      std::sort(better.begin(), better.end());
      for (auto const& item : better) {
        auto const k = std::get<2>(item);
        auto& o      = options[k];
        schedule cand;
        cand.policy        = s.policy;
        cand.budget        = s.budget;
        cand.baseline_peak = a.peak_live_bytes();
        cand.device_peak   = peak_of(a, curves[k], o.entries, o.recomputes, chains);
        cand.entries       = std::move(o.entries);
        cand.recomputes    = std::move(o.recomputes);
        try {  // another re-run use inside the first half, a read away for the re-run, ...
          // validate_schedule: device_peak is planned_peak, computed so just above
          validate_schedule_but_peak(a, cand, chains);
        } catch (schedule_error const&) {
          continue;
        }
        cand.note   = s.note;
        next        = std::move(cand);
        next_curve  = std::move(curves[k]);
        next_excess = std::get<0>(item);
        break;
      }
      if (next) { break; }
    }
    if (!next) { break; }
    s      = std::move(*next);
    curve  = std::move(next_curve);
    excess = next_excess;
  }
  return s;
}

/// `s` with second departures after re-run reads where they cut its excess over its budget (see
/// the file comment); `s` itself when it fits or nothing helps.
[[nodiscard]] inline schedule with_redrops(trace_analysis const& a, schedule s,
                                           bool activations_only, std::size_t max_steps = 16)
{
  if (s.device_peak <= s.budget || s.recomputes.empty()) { return s; }
  chain_memo chains(a);
  return with_redrops_using(a, std::move(s), activations_only, chains, max_steps);
}

}  // namespace stash::detail
