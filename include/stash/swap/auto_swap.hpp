/**
 * @file auto_swap.hpp
 * @brief SINGA AutoSwap (Zhang et al., arXiv:1903.06631): swap the variables whose access gaps
 * best hide the transfers, until the planned peak load fits the budget.
 *
 * Our reading of the paper, on a trace timed by the cost model without any swapping:
 *  - Candidates: storages of at least `min_bytes` (SINGA: about 1 MB), any kind, each with its
 *    longest gap between two consecutive accesses u and v (at least one op between them). The
 *    swap-out is issued right after u (offload_at = u + 1); the swap-in just in time for v.
 *  - Scores (higher is picked first). DOA = gap time - swap-out time - swap-in time.
 *    AOA = bytes x DOA if DOA >= 0, else DOA / bytes. WDOA = bytes x (the integral of the device
 *    load over the ops that fit wholly between the end of the swap-out and the start of the
 *    swap-in) / (the baseline peak), i.e. AOA weighted by how loaded the absence is; negative
 *    DOA scores DOA / bytes as in AOA. SWDOA recomputes WDOA on the current planned load after
 *    every pick.
 *  - Selection: while the planned peak exceeds the budget, pick the best-scoring candidate whose
 *    absence covers the event where the peak is; stop when none does (the schedule then does not
 *    fit, and its note says so).
 *  - Just-in-time swap-in with one H2D stream: swap-ins are packed backwards from their deadlines
 *    (latest next use first) so that each ends before its next use and before the slot of the
 *    one after it; each is issued at the latest op that starts no later than its slot.
 */
#pragma once

#include <stash/core/units.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/op_index.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stash {

/// @brief Which AutoSwap score ranks the candidates.
enum class auto_swap_score : std::uint8_t { doa, aoa, wdoa, swdoa };

namespace detail {

struct auto_swap_candidate {
  storage_id id;
  std::uint64_t u, v, bytes;
  double out_s, in_s, doa;
};

[[nodiscard]] inline schedule plan_auto_swap(trace_analysis const& analysis, std::uint64_t budget,
                                             auto_swap_score score, std::string_view name,
                                             std::uint64_t min_bytes)
{
  auto const& t     = analysis.trace();
  auto const& life  = analysis.lifetimes();
  auto const& model = analysis.model();
  if (life.peak_live_bytes <= budget) {
    return make_schedule(analysis, std::string(name), budget, {});
  }
  auto const& ops = analysis.ops();
  auto const n    = t.ops().size();
  auto const dur  = analysis.op_seconds();
  std::vector<double> start(n), end(n);
  for (std::size_t i = 0; i < n; ++i) {
    start[i] = analysis.op_start(i);
    end[i]   = analysis.op_start(i + 1);
  }

  std::vector<auto_swap_candidate> cands;
  for (auto const& s : life.storages) {
    if (s.bytes < min_bytes) { continue; }
    std::optional<auto_swap_candidate> best;
    for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
      auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
      if (v < u + 2) { continue; }
      double const gap = start[v] - end[u];
      if (best && gap <= start[best->v] - end[best->u]) { continue; }
      double const out = model.offload_time(s.bytes), in = model.prefetch_time(s.bytes);
      best = auto_swap_candidate{s.id, u, v, s.bytes, out, in, gap - out - in};
    }
    if (best) { cands.push_back(*best); }
  }

  // The latest op in [u + 2, v] that starts no later than `when` (u + 2 if none does).
  auto issue_op = [&](auto_swap_candidate const& c, double when) {
    auto const it = std::upper_bound(start.begin() + static_cast<std::ptrdiff_t>(c.u + 2),
                                     start.begin() + static_cast<std::ptrdiff_t>(c.v + 1), when);
    auto const p  = static_cast<std::uint64_t>(it - start.begin());
    return p == c.u + 2 ? p : p - 1;
  };
  auto build = [&](std::vector<std::size_t> chosen) {
    std::sort(chosen.begin(), chosen.end(), [&](std::size_t a, std::size_t b) {
      return cands[a].v != cands[b].v ? cands[a].v > cands[b].v : a < b;
    });
    std::vector<swap_entry> entries;
    double free_until = std::numeric_limits<double>::infinity();
    for (auto const k : chosen) {
      auto const& c    = cands[k];
      double const due = std::min(start[c.v], free_until) - c.in_s;
      entries.push_back(swap_entry{c.id, c.u, c.v, c.u + 1, issue_op(c, due), c.bytes});
      free_until = due;
    }
    std::sort(entries.begin(), entries.end(), [](swap_entry const& a, swap_entry const& b) {
      return a.prefetch_at != b.prefetch_at ? a.prefetch_at < b.prefetch_at
                                            : a.next_use < b.next_use;
    });
    return entries;
  };

  auto const peak_load = static_cast<double>(life.peak_live_bytes);
  std::vector<double> weighted(n + 1);  // prefix sums of load x duration over ops
  auto reweigh = [&](std::vector<std::uint64_t> const& curve) {
    for (std::size_t i = 0; i < n; ++i) {
      weighted[i + 1] = weighted[i] + static_cast<double>(curve[ops.event[i]]) * dur[i];
    }
  };
  auto score_of = [&](auto_swap_candidate const& c) {
    double const size = static_cast<double>(c.bytes);
    if (c.doa < 0) { return c.doa / size; }
    if (score == auto_swap_score::doa) { return c.doa; }
    if (score == auto_swap_score::aoa) { return size * c.doa; }
    double const from = end[c.u] + c.out_s, to = start[c.v] - c.in_s;
    auto const first  = std::lower_bound(start.begin(), start.end(), from) - start.begin();
    auto const last   = std::upper_bound(end.begin(), end.end(), to) - end.begin();
    double const area = last > first ? weighted[static_cast<std::size_t>(last)] -
                                           weighted[static_cast<std::size_t>(first)]
                                     : 0.0;
    return size * area / peak_load;
  };

  std::vector<std::size_t> chosen;
  std::vector<bool> taken(cands.size(), false);
  std::vector<double> scores(cands.size());
  std::string note;
  reweigh(planned_device_curve(analysis, {}));
  for (std::size_t k = 0; k < cands.size(); ++k) { scores[k] = score_of(cands[k]); }
  for (;;) {
    auto const entries = build(chosen);
    auto const curve   = planned_device_curve(analysis, entries);
    auto const peak_it = std::max_element(curve.begin(), curve.end());
    if (peak_it == curve.end() || *peak_it <= budget) { break; }
    auto const peak_event = static_cast<std::uint64_t>(peak_it - curve.begin());
    if (score == auto_swap_score::swdoa) {
      reweigh(curve);
      for (std::size_t k = 0; k < cands.size(); ++k) {
        if (!taken[k]) { scores[k] = score_of(cands[k]); }
      }
    }
    std::optional<std::size_t> pick;
    for (std::size_t k = 0; k < cands.size(); ++k) {
      if (taken[k]) { continue; }
      auto const& c = cands[k];
      auto const p  = issue_op(c, start[c.v] - c.in_s);
      if (!(ops.event[c.u] < peak_event && peak_event <= ops.event[p - 1])) { continue; }
      if (!pick || scores[k] > scores[*pick]) { pick = k; }
    }
    if (!pick) {
      note = "cannot reach the budget: no candidate's absence covers the peak of " +
             format_bytes(*peak_it) + " at event " + std::to_string(peak_event);
      break;
    }
    taken[*pick] = true;
    chosen.push_back(*pick);
  }
  auto s = make_schedule(analysis, std::string(name), budget, build(chosen));
  s.note = note;
  return s;
}

[[nodiscard]] constexpr std::string_view auto_swap_name(auto_swap_score score) noexcept
{
  switch (score) {
    case auto_swap_score::doa:
      return "auto_swap_doa";
    case auto_swap_score::aoa:
      return "auto_swap_aoa";
    case auto_swap_score::wdoa:
      return "auto_swap_wdoa";
    case auto_swap_score::swdoa:
      return "auto_swap";
  }
  return "auto_swap";
}

}  // namespace detail

/// @brief AutoSwap (see the file comment): an object with its settings and their defaults.
struct auto_swap {
  /// Which score ranks the candidates (SWDOA, the one SINGA found best, by default).
  auto_swap_score score = auto_swap_score::swdoa;
  /// Smallest storage worth a swap (SINGA: about 1 MB; smaller ones cost latency for nothing).
  std::uint64_t min_bytes = MiB;

  /// @brief Registry name: "auto_swap" for SWDOA, "auto_swap_<score>" otherwise.
  [[nodiscard]] constexpr std::string_view name() const noexcept
  {
    return detail::auto_swap_name(score);
  }
  /// @brief Picks swaps until the planned peak fits `budget` (or no candidate helps).
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    return detail::plan_auto_swap(analysis, budget, score, name(), min_bytes);
  }
};

}  // namespace stash
