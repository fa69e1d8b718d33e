/**
 * @file gap_planner.hpp
 * @brief search_swap's constructive step: choose gaps that bring every op under a target, then
 * place their offloads and pack their prefetches backwards on the one H2D engine without ever
 * raising the planned device bytes above the budget.
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace stash::detail {

inline constexpr std::size_t no_gap = static_cast<std::size_t>(-1);

/// One gap of one storage: consecutive accesses u < v with at least one op between.
struct swap_gap {
  storage_id id{};
  std::uint64_t u{}, v{}, bytes{};
  std::uint64_t earliest{};  // earliest legal offload_at: after the allocation and the last write
  std::size_t prev{};        // the same storage's previous gap, or no_gap
};

/// Every gap of the storages in `scope` of at least `min_bytes`.
[[nodiscard]] inline std::vector<swap_gap> enumerate_gaps(trace_analysis const& analysis,
                                                          swap_scope scope, std::uint64_t min_bytes)
{
  std::vector<swap_gap> gaps;
  auto const& ev = analysis.ops().event;
  for (auto const& s : analysis.lifetimes().storages) {
    if (scope == swap_scope::activations && s.kind != storage_kind::act) { continue; }
    if (s.bytes == 0 || s.bytes < min_bytes) { continue; }
    auto const first_op = static_cast<std::uint64_t>(
        std::upper_bound(ev.begin(), ev.end(), s.alloc_event) - ev.begin());
    std::uint64_t after_write = first_op;
    std::size_t prev          = no_gap;
    for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
      if (s.accesses[j].write) { after_write = std::max(after_write, s.accesses[j].op + 1); }
      auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
      if (v < u + 2) { continue; }
      gaps.push_back(swap_gap{s.id, u, v, s.bytes, after_write, prev});
      prev = gaps.size() - 1;
    }
  }
  return gaps;
}

enum class offload_point : std::uint8_t { earliest, after_last_use };
enum class gap_score : std::uint8_t { coverage, long_gap, slack };

/// One way of building a schedule; search_swap tries a fixed list of them.
struct gap_variant {
  double margin;          // target = budget - margin x (budget - bound)
  gap_score score;        // how the gap covering the worst op is chosen
  offload_point offload;  // where offloads are issued
  bool timed_release;     // plan releases at the estimated D2H end rather than at u + 1
};

/// The planner for one trace, budget and candidate set (reused across variants).
class gap_planner {
 public:
  gap_planner(trace_analysis const& analysis, std::uint64_t budget, swap_scope scope,
              std::uint64_t min_bytes)
      : a_(analysis),
        budget_(budget),
        n_(analysis.op_count()),
        gaps_(enumerate_gaps(analysis, scope, min_bytes))
  {
    order_.resize(gaps_.size());
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    std::stable_sort(order_.begin(), order_.end(),
                     [&](std::size_t x, std::size_t y) { return gaps_[x].u < gaps_[y].u; });
    auto const steps = analysis.memory_steps();
    base_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      base_[i] = static_cast<std::int64_t>(steps[i].live_peak);
    }
    auto const& hw = analysis.model().hw();
    lat_bytes_     = hw.pcie_latency_s * hw.pcie_d2h_bytes_per_s;
  }

  /// Entries bringing every op under `target`, timed on op start times `start`.
  [[nodiscard]] std::vector<swap_entry> plan(gap_variant const& var, std::uint64_t target,
                                             std::vector<double> const& start) const
  {
    auto const end = ends_of(start);
    std::vector<char> chosen(gaps_.size(), 0);
    std::vector<std::size_t> picks;
    auto cur = base_;  // planned bytes per op with every chosen gap off over [u + 1, v - 1]
    select(var, static_cast<std::int64_t>(target), start, end, cur, chosen, picks);
    prune(static_cast<std::int64_t>(target), cur, chosen, picks);
    std::vector<swap_entry> entries;
    for (int round = 0; round < 4; ++round) {
      entries         = build(var, start, end, chosen);
      auto planned    = planned_bytes(entries);
      bool const over = std::any_of(planned.begin(), planned.end(), [&](std::int64_t b) {
        return b > static_cast<std::int64_t>(budget_);
      });
      if (!over) { break; }
      // Packing never exceeds the budget, so selection fell short: select against the exact
      // curve.
      auto const before = picks.size();
      select(var, static_cast<std::int64_t>(budget_), start, end, planned, chosen, picks);
      if (picks.size() == before) { break; }
    }
    return entries;
  }

  /// Every gap offloaded after its last use and fetched at its next use: the slowest schedule,
  /// and one that fits down to the swap bound of the planner's scope.
  [[nodiscard]] std::vector<swap_entry> all_gaps(std::vector<double> const& start) const
  {
    std::vector<char> chosen(gaps_.size(), 1);
    return build(gap_variant{0, gap_score::coverage, offload_point::after_last_use, false}, start,
                 ends_of(start), chosen);
  }

 private:
  [[nodiscard]] std::vector<double> ends_of(std::vector<double> const& start) const
  {
    std::vector<double> end(n_);
    for (std::size_t i = 0; i < n_; ++i) { end[i] = start[i] + a_.op_seconds()[i]; }
    return end;
  }

  // Planned bytes per op under `entries` with instantaneous releases.
  [[nodiscard]] std::vector<std::int64_t> planned_bytes(
      std::vector<swap_entry> const& entries) const
  {
    auto planned = base_;
    for (auto const& e : entries) {
      auto const from = std::max(e.last_use + 1, e.offload_at);
      for (auto j = from; j < e.prefetch_at; ++j) {
        planned[j] -= static_cast<std::int64_t>(e.bytes);
      }
    }
    return planned;
  }

  // How well gap `c` helps the worst op (over-target run [lo, hi], `excess` bytes over).
  [[nodiscard]] double score(gap_variant const& var, swap_gap const& c, std::size_t lo,
                             std::size_t hi, std::int64_t excess, std::vector<double> const& start,
                             std::vector<double> const& end) const
  {
    auto const bytes = static_cast<double>(c.bytes);
    if (var.score == gap_score::coverage) {
      auto const from      = std::max<std::uint64_t>(c.u + 1, lo);
      auto const to        = std::min<std::uint64_t>(c.v - 1, hi);
      double const covered = end[to] - start[from];
      return std::min(bytes, static_cast<double>(excess)) * covered / (bytes + lat_bytes_);
    }
    if (var.score == gap_score::long_gap) { return bytes * (start[c.v] - end[c.u]); }
    // AutoSwap's AOA over every gap: hideable transfers by bytes x slack; the others in (-1, 0),
    // the least time short per byte first.
    double const doa = start[c.v] - end[c.u] - a_.model().offload_time(c.bytes) -
                       a_.model().prefetch_time(c.bytes);
    return doa >= 0 ? bytes * doa : -1.0 / (1.0 - doa / bytes);
  }

  // Greedy cover: while some op exceeds `target`, take the first op with the largest excess and
  // pick the best-scoring unchosen gap that spans it ([u + 1, v - 1] contains the op).
  void select(gap_variant const& var, std::int64_t target, std::vector<double> const& start,
              std::vector<double> const& end, std::vector<std::int64_t>& cur,
              std::vector<char>& chosen, std::vector<std::size_t>& picks) const
  {
    while (n_ > 0) {
      auto const worst =
          static_cast<std::size_t>(std::max_element(cur.begin(), cur.end()) - cur.begin());
      if (cur[worst] <= target) { return; }
      std::size_t lo = worst, hi = worst;  // the over-target run around `worst`
      while (lo > 0 && cur[lo - 1] > target) { --lo; }
      while (hi + 1 < n_ && cur[hi + 1] > target) { ++hi; }
      std::size_t best  = no_gap;
      double best_score = -1;
      for (auto const g : order_) {
        auto const& c = gaps_[g];
        if (c.u >= worst) { break; }
        if (c.v <= worst || chosen[g]) { continue; }
        double const s = score(var, c, lo, hi, cur[worst] - target, start, end);
        if (s > best_score) {
          best_score = s;
          best       = g;
        }
      }
      if (best == no_gap) { return; }  // nothing spans it: the target is out of reach
      chosen[best] = 1;
      picks.push_back(best);
      for (auto j = gaps_[best].u + 1; j < gaps_[best].v; ++j) {
        cur[j] -= static_cast<std::int64_t>(gaps_[best].bytes);
      }
    }
  }

  // Drops picks (latest first) that the target no longer needs.
  void prune(std::int64_t target, std::vector<std::int64_t>& cur, std::vector<char>& chosen,
             std::vector<std::size_t>& picks) const
  {
    for (std::size_t k = picks.size(); k-- > 0;) {
      auto const& c = gaps_[picks[k]];
      auto const b  = static_cast<std::int64_t>(c.bytes);
      bool needed   = false;
      for (auto j = c.u + 1; j < c.v && !needed; ++j) { needed = cur[j] + b > target; }
      if (needed) { continue; }
      for (auto j = c.u + 1; j < c.v; ++j) { cur[j] += b; }
      chosen[picks[k]] = 0;
      picks.erase(picks.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }

  // Entries of the chosen gaps with their offload points (prefetch_at = next_use for now).
  [[nodiscard]] std::vector<swap_entry> place_offloads(gap_variant const& var,
                                                       std::vector<char> const& chosen) const
  {
    std::vector<swap_entry> entries;
    for (std::size_t g = 0; g < gaps_.size(); ++g) {
      if (!chosen[g]) { continue; }
      auto const& c    = gaps_[g];
      std::uint64_t lo = c.earliest;  // not before the previous chosen gap's next use
      for (auto p = c.prev; p != no_gap; p = gaps_[p].prev) {
        if (chosen[p]) {
          lo = std::max(lo, gaps_[p].v);
          break;
        }
      }
      std::uint64_t const at = var.offload == offload_point::earliest ? lo : c.u + 1;
      entries.push_back(
          swap_entry{c.id, c.u, c.v, std::clamp<std::uint64_t>(at, lo, c.u + 1), c.v, c.bytes});
    }
    return entries;
  }

  // The op from which each entry's bytes count as released: u + 1, or (timed) the first op that
  // starts after its estimated D2H end, the D2H engine running in offload order.
  [[nodiscard]] std::vector<std::uint64_t> release_ops(gap_variant const& var,
                                                       std::vector<swap_entry> const& entries,
                                                       std::vector<double> const& start,
                                                       std::vector<double> const& end) const
  {
    std::vector<std::size_t> by_offload(entries.size());
    std::iota(by_offload.begin(), by_offload.end(), std::size_t{0});
    std::stable_sort(by_offload.begin(), by_offload.end(), [&](std::size_t x, std::size_t y) {
      return entries[x].offload_at < entries[y].offload_at;
    });
    std::vector<std::uint64_t> rel(entries.size());
    double d2h_free = 0;
    for (auto const k : by_offload) {
      auto const& e      = entries[k];
      rel[k]             = std::max(e.last_use + 1, e.offload_at);
      double const issue = e.offload_at == 0 ? 0.0 : end[e.offload_at - 1];
      d2h_free           = std::max(issue, d2h_free) + a_.model().offload_time(e.bytes);
      if (!var.timed_release) { continue; }
      double const done = std::max(d2h_free, end[e.last_use]);
      auto const r = static_cast<std::uint64_t>(std::lower_bound(start.begin(), start.end(), done) -
                                                start.begin());
      rel[k]       = std::clamp<std::uint64_t>(r, rel[k], e.next_use);
    }
    return rel;
  }

  // Packs prefetches backwards from their deadlines, latest first, on the one H2D engine: each at
  // the latest op whose issue still lets it finish before its next use and before the engine is
  // needed by the one after it, moved later wherever bringing it back would exceed the budget.
  void pack_prefetches(std::vector<swap_entry>& entries, std::vector<std::uint64_t> const& rel,
                       std::vector<double> const& start, std::vector<double> const& end) const
  {
    auto cur = base_;
    for (std::size_t k = 0; k < entries.size(); ++k) {
      for (auto j = rel[k]; j < entries[k].next_use; ++j) {
        cur[j] -= static_cast<std::int64_t>(entries[k].bytes);
      }
    }
    std::vector<std::size_t> by_use(entries.size());
    std::iota(by_use.begin(), by_use.end(), std::size_t{0});
    std::stable_sort(by_use.begin(), by_use.end(), [&](std::size_t x, std::size_t y) {
      return entries[x].next_use > entries[y].next_use;
    });
    auto const cap   = static_cast<std::int64_t>(budget_);
    double free_from = std::numeric_limits<double>::infinity();  // H2D busy from here on
    for (auto const k : by_use) {
      auto& e          = entries[k];
      auto const b     = static_cast<std::int64_t>(e.bytes);
      double const due = std::min(start[e.next_use], free_from) - a_.model().prefetch_time(e.bytes);
      auto const lo    = std::max(e.last_use, e.offload_at) + 1;
      std::uint64_t p  = e.next_use;  // latest op in [lo, v] issued (end of p - 1) by `due`
      while (p > lo && end[p - 1] > due) { --p; }
      for (auto j = e.next_use; j-- > p;) {  // back over [p, v - 1]: stay within the budget
        if (j >= rel[k] && cur[j] + b > cap) {
          p = j + 1;
          break;
        }
      }
      for (auto j = std::max(p, rel[k]); j < e.next_use; ++j) { cur[j] += b; }
      e.prefetch_at = p;
      free_from     = std::max(end[p - 1], due);
    }
  }

  [[nodiscard]] std::vector<swap_entry> build(gap_variant const& var,
                                              std::vector<double> const& start,
                                              std::vector<double> const& end,
                                              std::vector<char> const& chosen) const
  {
    auto entries   = place_offloads(var, chosen);
    auto const rel = release_ops(var, entries, start, end);
    pack_prefetches(entries, rel, start, end);
    std::stable_sort(entries.begin(), entries.end(), [](swap_entry const& x, swap_entry const& y) {
      return x.prefetch_at != y.prefetch_at ? x.prefetch_at < y.prefetch_at
                                            : x.next_use < y.next_use;
    });
    return entries;
  }

  trace_analysis const& a_;
  std::uint64_t budget_;
  std::size_t n_;
  std::vector<swap_gap> gaps_;
  std::vector<std::size_t> order_;  // gap indices by u
  std::vector<std::int64_t> base_;  // live bytes at each op's start peak, nothing swapped
  double lat_bytes_;                // bytes the link would carry during one latency
};

}  // namespace stash::detail
