/**
 * @file gap_planner.hpp
 * @brief search_swap's constructive step: choose gaps that bring every op under a target, then
 * place their offloads and pack their prefetches backwards on the one H2D engine without ever
 * raising the planned device bytes above the budget.
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/range_tree.hpp>
#include <stash/swap/detail/stab_index.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
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
  // `held_off`: bytes per op kept off the device by entries planned elsewhere (search_swap's
  // wrap entries), taken from the live bytes the gaps must bring under the target.
  gap_planner(trace_analysis const& analysis, std::uint64_t budget, swap_scope scope,
              std::uint64_t min_bytes, std::vector<std::int64_t> const& held_off = {})
      : a_(analysis),
        budget_(budget),
        n_(analysis.op_count()),
        gaps_(enumerate_gaps(analysis, scope, min_bytes))
  {
    windows_.resize(gaps_.size());
    for (std::size_t g = 0; g < gaps_.size(); ++g) { windows_[g] = {gaps_[g].u + 1, gaps_[g].v}; }
    find_classes();
    auto const steps = analysis.memory_steps();
    base_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      base_[i] = static_cast<std::int64_t>(steps[i].live_peak) -
                 (i < held_off.size() ? held_off[i] : std::int64_t{0});
    }
    scratch_.assign(base_);
    nominal_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) { nominal_[i] = analysis.op_start(i); }
    auto const& hw = analysis.model().hw();
    lat_bytes_     = hw.pcie_latency_s * hw.pcie_d2h_bytes_per_s;
  }

  /// The budget later plans keep within (a planner reused across a sweep of budgets keeps its
  /// gaps, classes and the sorted indexes of its fixed scores on the nominal timeline).
  void set_budget(std::uint64_t budget) noexcept { budget_ = budget; }

  /// The gaps a plan's selection keeps: which are chosen, and the picks in their order.
  struct selection {
    std::vector<char> chosen;
    std::vector<std::size_t> picks;
  };

  /// The greedy cover of `target` on op start times `start`, pruned (plan()'s first step). It
  /// depends on the variant's score only: variants that differ in their offload point or
  /// releases share it (search_swap plans it once for them).
  [[nodiscard]] selection select_gaps(gap_variant const& var, std::uint64_t target,
                                      std::vector<double> const& start) const
  {
    auto const end = ends_of(start);
    selection out{std::vector<char>(gaps_.size(), 0), {}};
    scratch_use const use(scratch_);
    auto& cur = scratch_;  // planned bytes per op, every chosen gap off over [u + 1, v - 1]
    select(var, static_cast<std::int64_t>(target), start, end, cur, out.chosen, out.picks);
    prune(static_cast<std::int64_t>(target), cur, out.chosen, out.picks);
    return out;
  }

  /// Entries bringing every op under `target`, timed on op start times `start`.
  [[nodiscard]] std::vector<swap_entry> plan(gap_variant const& var, std::uint64_t target,
                                             std::vector<double> const& start) const
  {
    return plan(var, select_gaps(var, target, start), start);
  }

  /// plan(var, target, start) given its selection, select_gaps(var, target, start).
  [[nodiscard]] std::vector<swap_entry> plan(gap_variant const& var, selection sel,
                                             std::vector<double> const& start) const
  {
    auto const end = ends_of(start);
    auto& chosen   = sel.chosen;
    auto& picks    = sel.picks;
    std::vector<swap_entry> entries;
    for (int round = 0; round < 4; ++round) {
      entries             = build(var, start, end, chosen);
      auto const per_op   = planned_bytes(entries);
      auto const cap      = static_cast<std::int64_t>(budget_);
      auto const over_cap = [&](std::int64_t x) { return x > cap; };
      if (std::none_of(per_op.begin(), per_op.end(), over_cap)) { break; }
      // Packing never exceeds the budget, so selection fell short: select against the exact
      // curve (its tree built only then: most plans fit here, and the tree is the costlier).
      range_tree planned(per_op);
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
    std::vector<std::int64_t> delta(n_ + 1, 0);
    for (auto const& e : entries) {
      auto const from = std::max(e.last_use + 1, e.offload_at);
      if (from < e.prefetch_at) {
        delta[from] -= static_cast<std::int64_t>(e.bytes);
        delta[e.prefetch_at] += static_cast<std::int64_t>(e.bytes);
      }
    }
    return minus_windows(delta);
  }

  // How well gap `c` helps the worst op (over-target run [lo, hi], `excess` bytes over).
  [[nodiscard]] double score(gap_variant const& var, swap_gap const& c, std::size_t lo,
                             std::size_t hi, std::int64_t excess, std::vector<double> const& start,
                             std::vector<double> const& end) const
  {
    auto const bytes = static_cast<double>(c.bytes);
    if (var.score == gap_score::coverage) {
      auto const from = std::max<std::uint64_t>(c.u + 1, lo);
      auto const to   = std::min<std::uint64_t>(c.v - 1, hi);
      return coverage(bytes, excess, end[to] - start[from]);
    }
    if (var.score == gap_score::long_gap) { return bytes * (start[c.v] - end[c.u]); }
    // AutoSwap's AOA over every gap: hideable transfers by bytes x slack; the others in (-1, 0),
    // the least time short per byte first.
    double const doa = start[c.v] - end[c.u] - a_.model().offload_time(c.bytes) -
                       a_.model().prefetch_time(c.bytes);
    return doa >= 0 ? bytes * doa : -1.0 / (1.0 - doa / bytes);
  }

  // The coverage score of a gap of `bytes` covering `covered` seconds of the over-target run.
  [[nodiscard]] double coverage(double bytes, std::int64_t excess, double covered) const
  {
    return std::min(bytes, static_cast<double>(excess)) * covered / (bytes + lat_bytes_);
  }

  struct size_class {
    std::uint64_t bytes;
    std::vector<std::size_t> gaps;  // by u, then index
    std::vector<std::uint64_t> us;  // their u
  };

  // best_by_class's running best: the largest score, then the earliest u, then the lowest index
  // (the rule of best_spanning's scan).
  struct running_best {
    std::optional<std::size_t> gap;
    double score = -1;
  };
  void offer(running_best& best, std::size_t g, double s) const
  {
    if (s > best.score || (s == best.score && best.gap && before(s, g, best.score, *best.gap))) {
      best.score = s;
      best.gap   = g;
    }
  }

  // The coverage score of gap g for the worst op's over-target run [lo, hi].
  [[nodiscard]] double run_score(std::size_t g, std::size_t lo, std::size_t hi, std::int64_t excess,
                                 std::vector<double> const& start,
                                 std::vector<double> const& end) const
  {
    auto const& x = gaps_[g];
    return coverage(
        static_cast<double>(x.bytes), excess,
        end[std::min<std::uint64_t>(x.v - 1, hi)] - start[std::max<std::uint64_t>(x.u + 1, lo)]);
  }

  // Class c's best live gap spanning `worst` with u < lo (its positions [0, pa)), in O(log^2 n):
  // each covers [lo, min(v - 1, hi)], so its score grows with v (rounding is monotone, the
  // timeline sorted); the winner is the first by u of those scoring as the largest v does.
  void best_before_run(max_tree const& live, size_class const& cls, std::size_t pa,
                       std::size_t worst, std::size_t lo, std::size_t hi, std::int64_t excess,
                       std::vector<double> const& start, std::vector<double> const& end,
                       running_best& best) const
  {
    auto const vmax = pa == 0 ? std::int64_t{-1} : live.max(0, pa);
    if (vmax <= static_cast<std::int64_t>(worst)) { return; }
    auto const bytes = static_cast<double>(cls.bytes);
    auto score_at    = [&](std::uint64_t v) {
      return coverage(bytes, excess, end[std::min<std::uint64_t>(v - 1, hi)] - start[lo]);
    };
    auto const top  = score_at(static_cast<std::uint64_t>(vmax));
    std::uint64_t l = worst + 1, r = static_cast<std::uint64_t>(vmax);  // least v scoring top
    while (l < r) {
      auto const m = l + (r - l) / 2;
      if (score_at(m) == top) {
        r = m;
      } else {
        l = m + 1;
      }
    }
    auto const pos = live.first_above(0, pa, static_cast<std::int64_t>(l) - 1);
    offer(best, cls.gaps[pos], top);
  }

  // The best gap by coverage spanning `worst`, as best_spanning finds it, by size class: a gap
  // of b bytes covers at most the whole run, so it scores at most coverage(b, excess, run) (a
  // bound the floating-point score obeys too: rounding is monotone, and the timeline is
  // sorted), which gaps covering the whole run reach. Classes are visited by bound, best
  // first, twice: first for the gaps with u < lo (best_before_run) and the first by u past lo
  // that covers the run to hi (the best of those that do), both O(log^2 n); then for the rest,
  // each gap of a class spanning `worst` from lo on in the order of u (then index), a class
  // stopping at the first gap reaching its bound or whose u leaves too little of the run to
  // reach the best. Each pass stops at the first class whose bound is below the best score
  // found; the first pass's best makes the second stop early. The winner is the largest score,
  // then the earliest u, then the lowest index, as the scan of every spanning gap finds it.
  // `live[c]` holds the next use of class c's gaps, or less than any op once chosen; the pick
  // is marked there.
  [[nodiscard]] std::optional<std::size_t> best_by_class(std::vector<max_tree>& live,
                                                         std::size_t worst, std::size_t lo,
                                                         std::size_t hi, std::int64_t excess,
                                                         std::vector<double> const& start,
                                                         std::vector<double> const& end) const
  {
    double const run = end[hi] - start[lo];
    std::vector<std::pair<double, std::size_t>> bounds(classes_.size());
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      bounds[c] = {coverage(static_cast<double>(classes_[c].bytes), excess, run), c};
    }
    std::sort(bounds.begin(), bounds.end(), std::greater<>());
    running_best best;
    auto const stop = [&](double bound) {
      return bound < best.score || (!best.gap && !(bound > best.score));
    };
    auto const after = static_cast<std::int64_t>(worst);
    for (auto const& [bound, c] : bounds) {
      if (stop(bound)) { break; }
      auto const& cls = classes_[c];
      auto const pa   = first_u_at_least(cls, lo);
      auto const span = first_u_at_least(cls, worst);  // u < worst
      best_before_run(live[c], cls, pa, worst, lo, hi, excess, start, end, best);
      auto const whole = live[c].first_above(pa, span, static_cast<std::int64_t>(hi));
      if (whole != range_tree::npos) {
        offer(best, cls.gaps[whole], run_score(cls.gaps[whole], lo, hi, excess, start, end));
      }
    }
    for (auto const& [bound, c] : bounds) {
      if (stop(bound)) { break; }
      auto const& cls  = classes_[c];
      auto const bytes = static_cast<double>(cls.bytes);
      auto const span  = first_u_at_least(cls, worst);
      // Only the gaps whose v exceeds every v met before them in the class can win: a later one
      // (u no earlier, index higher) with v no larger covers no more of the run, so it scores
      // no more and loses the tie. Raising the threshold to the largest v met skips them.
      auto floor = after;
      for (auto pos = live[c].first_above(first_u_at_least(cls, lo), span, floor);
           pos != range_tree::npos; pos = live[c].first_above(pos + 1, span, floor)) {
        auto const g = cls.gaps[pos];
        // From u >= lo on, a gap covers at most [u + 1, hi], less for each later u: stop once
        // that cannot reach the best.
        if (best.gap && coverage(bytes, excess, end[hi] - start[gaps_[g].u + 1]) < best.score) {
          break;
        }
        double const s = run_score(g, lo, hi, excess, start, end);
        offer(best, g, s);
        if (s == bound || gaps_[g].v > hi) { break; }  // the rest of the class scores no more
        floor = static_cast<std::int64_t>(gaps_[g].v);
      }
    }
    if (best.gap) {
      live[class_of_[*best.gap]].add(rank_[*best.gap], rank_[*best.gap] + 1, -chosen_mark);
    }
    return best.gap;
  }

  // The first position of class `cls` whose u is at least `u`.
  [[nodiscard]] static std::size_t first_u_at_least(size_class const& cls, std::uint64_t u)
  {
    return static_cast<std::size_t>(std::lower_bound(cls.us.begin(), cls.us.end(), u) -
                                    cls.us.begin());
  }

  // Per size class, the next use of each gap (by u, then index), unchosen ones only.
  [[nodiscard]] std::vector<max_tree> live_classes(std::vector<char> const& chosen) const
  {
    std::vector<max_tree> live(classes_.size());
    std::vector<std::int64_t> values;
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      values.clear();
      for (auto const g : classes_[c].gaps) {
        values.push_back(static_cast<std::int64_t>(gaps_[g].v) - (chosen[g] ? chosen_mark : 0));
      }
      live[c].assign(values);
    }
    return live;
  }

  // Groups the gaps by size, each group by u then index (the classes of best_by_class).
  void find_classes()
  {
    std::vector<std::size_t> by_size(gaps_.size());
    std::iota(by_size.begin(), by_size.end(), std::size_t{0});
    std::sort(by_size.begin(), by_size.end(), [&](std::size_t x, std::size_t y) {
      auto const& a = gaps_[x];
      auto const& b = gaps_[y];
      if (a.bytes != b.bytes) { return a.bytes < b.bytes; }
      return a.u != b.u ? a.u < b.u : x < y;
    });
    class_of_.resize(gaps_.size());
    rank_.resize(gaps_.size());
    for (auto const g : by_size) {
      if (classes_.empty() || classes_.back().bytes != gaps_[g].bytes) {
        classes_.push_back(size_class{gaps_[g].bytes, {}, {}});
      }
      auto& cls    = classes_.back();
      class_of_[g] = classes_.size() - 1;
      rank_[g]     = cls.gaps.size();
      cls.gaps.push_back(g);
      cls.us.push_back(gaps_[g].u);
    }
  }

  // base_ plus the running sums of `delta` (a difference array over the ops).
  [[nodiscard]] std::vector<std::int64_t> minus_windows(
      std::vector<std::int64_t> const& delta) const
  {
    auto out         = base_;
    std::int64_t run = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      run += delta[i];
      out[i] += run;
    }
    return out;
  }

  // The best-scoring unchosen gap spanning `worst` (over-target run [lo, hi]): the largest score
  // above -1, the first by u (then index) among equals, as a scan of the gaps by u finds it.
  [[nodiscard]] std::optional<std::size_t> best_spanning(gap_variant const& var, stab_index& index,
                                                         std::vector<double> const& fixed,
                                                         std::size_t worst, std::size_t lo,
                                                         std::size_t hi, std::int64_t excess,
                                                         std::vector<double> const& start,
                                                         std::vector<double> const& end,
                                                         std::vector<char> const& chosen) const
  {
    auto const dead = [&](std::size_t g) { return chosen[g] != 0; };
    if (var.score != gap_score::coverage) {  // fixed scores: each node's best is its first live
      return index.best_at(worst, dead, [&](std::size_t x, std::size_t y) {
        return before(fixed[x], x, fixed[y], y);
      });
    }
    std::optional<std::size_t> best;
    double best_score = -1;
    index.for_each_at(worst, dead, [&](std::size_t g) {
      double const s = score(var, gaps_[g], lo, hi, excess, start, end);
      if (s > best_score || (s == best_score && best && before(s, g, best_score, *best))) {
        best_score = s;
        best       = g;
      }
    });
    return best;
  }

  // Gap x with score sx ranks before gap y with score sy: higher score, then earlier u, then
  // lower index (the order in which the old scan met them).
  [[nodiscard]] bool before(double sx, std::size_t x, double sy, std::size_t y) const
  {
    if (sx != sy) { return sx > sy; }
    return gaps_[x].u != gaps_[y].u ? gaps_[x].u < gaps_[y].u : x < y;
  }

  // Greedy cover: while some op exceeds `target`, take the first op with the largest excess and
  // pick the best-scoring unchosen gap that spans it ([u + 1, v - 1] contains the op).
  void select(gap_variant const& var, std::int64_t target, std::vector<double> const& start,
              std::vector<double> const& end, range_tree& cur, std::vector<char>& chosen,
              std::vector<std::size_t>& picks) const
  {
    if (n_ == 0 || cur.max(0, n_) <= target) { return; }
    if (var.score == gap_score::coverage && std::is_sorted(start.begin(), start.end()) &&
        std::is_sorted(end.begin(), end.end())) {
      auto live = live_classes(chosen);
      cover(target, cur, chosen, picks, [&](std::size_t worst, std::size_t lo, std::size_t hi) {
        return best_by_class(live, worst, lo, hi, cur.at(worst) - target, start, end);
      });
      return;
    }
    if (var.score != gap_score::coverage && std::ranges::equal(start, nominal_) &&
        std::none_of(chosen.begin(), chosen.end(), [](char c) { return c != 0; })) {
      auto& cached      = nominal_fixed(var, start, end);
      auto const& fixed = cached.first;
      auto& index       = *cached.second;
      index.rewind();
      cover(target, cur, chosen, picks, [&](std::size_t worst, std::size_t lo, std::size_t hi) {
        return best_spanning(var, index, fixed, worst, lo, hi, cur.at(worst) - target, start, end,
                             chosen);
      });
      return;
    }
    std::vector<double> fixed;  // scores that do not depend on the worst op
    if (var.score != gap_score::coverage) { fixed = fixed_scores(var, start, end); }
    // Only scores above -1 are ever picked (the scan starts from -1): fixed ones below never are.
    stab_index index(n_, windows_, [&](std::size_t g) {
      return chosen[g] == 0 && (fixed.empty() || fixed[g] > -1.0);
    });
    if (!fixed.empty()) {
      index.sort([&](std::size_t x, std::size_t y) { return before(fixed[x], x, fixed[y], y); });
    }
    cover(target, cur, chosen, picks, [&](std::size_t worst, std::size_t lo, std::size_t hi) {
      return best_spanning(var, index, fixed, worst, lo, hi, cur.at(worst) - target, start, end,
                           chosen);
    });
  }

  // Every gap's fixed score (long_gap, slack) on the timeline `start`.
  [[nodiscard]] std::vector<double> fixed_scores(gap_variant const& var,
                                                 std::vector<double> const& start,
                                                 std::vector<double> const& end) const
  {
    std::vector<double> fixed(gaps_.size());
    for (std::size_t g = 0; g < gaps_.size(); ++g) {
      fixed[g] = score(var, gaps_[g], 0, 0, 0, start, end);
    }
    return fixed;
  }

  // A fixed score's scores and sorted index on the nominal timeline with nothing chosen, as
  // select() builds them there: the same for every variant with that score and every budget of
  // a reused planner, so built once and rewound per plan instead of rebuilt (issue 24, item 4).
  [[nodiscard]] std::pair<std::vector<double>, std::optional<stab_index>>& nominal_fixed(
      gap_variant const& var, std::vector<double> const& start,
      std::vector<double> const& end) const
  {
    auto& cached = nominal_fixed_[var.score == gap_score::long_gap ? 0 : 1];
    if (!cached.second) {
      auto const& fixed = cached.first = fixed_scores(var, start, end);
      cached.second.emplace(n_, windows_, [&](std::size_t g) { return fixed[g] > -1.0; });
      cached.second->sort(
          [&](std::size_t x, std::size_t y) { return before(fixed[x], x, fixed[y], y); });
    }
    return cached;
  }

  // The greedy loop of select(): `best(worst, lo, hi)` names the gap to pick for the first op of
  // the largest excess, `worst`, in its over-target run [lo, hi].
  template <class Best>
  void cover(std::int64_t target, range_tree& cur, std::vector<char>& chosen,
             std::vector<std::size_t>& picks, Best&& best) const
  {
    for (;;) {
      auto const worst = cur.first_max();
      if (cur.at(worst) <= target) { return; }
      auto const left      = cur.last_at_most(0, worst, target);  // the over-target run
      auto const right     = cur.first_at_most(worst + 1, n_, target);
      std::size_t const lo = left == range_tree::npos ? 0 : left + 1;
      std::size_t const hi = right == range_tree::npos ? n_ - 1 : right - 1;
      auto const g         = best(worst, lo, hi);
      if (!g) { return; }  // nothing spans it: the target is out of reach
      chosen[*g] = 1;
      picks.push_back(*g);
      cur.add(gaps_[*g].u + 1, gaps_[*g].v, -static_cast<std::int64_t>(gaps_[*g].bytes));
    }
  }

  // Drops picks (latest first) that the target no longer needs.
  void prune(std::int64_t target, range_tree& cur, std::vector<char>& chosen,
             std::vector<std::size_t>& picks) const
  {
    std::vector<char> dropped(picks.size(), 0);
    for (std::size_t k = picks.size(); k-- > 0;) {
      auto const& c = gaps_[picks[k]];
      auto const b  = static_cast<std::int64_t>(c.bytes);
      if (c.u + 1 < c.v && cur.max(c.u + 1, c.v) + b > target) { continue; }  // still needed
      cur.add(c.u + 1, c.v, b);
      chosen[picks[k]] = 0;
      dropped[k]       = 1;
    }
    std::size_t kept = 0;
    for (std::size_t k = 0; k < picks.size(); ++k) {
      if (dropped[k] == 0) { picks[kept++] = picks[k]; }
    }
    picks.resize(kept);
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
    scratch_use const use(scratch_);
    auto& cur = scratch_;  // base_ less every entry from its release to its next use
    for (std::size_t k = 0; k < entries.size(); ++k) {
      cur.add(rel[k], entries[k].next_use, -static_cast<std::int64_t>(entries[k].bytes));
    }
    std::vector<std::size_t> by_use(entries.size());
    std::iota(by_use.begin(), by_use.end(), std::size_t{0});
    std::stable_sort(by_use.begin(), by_use.end(), [&](std::size_t x, std::size_t y) {
      return entries[x].next_use > entries[y].next_use;
    });
    bool const sorted_ends = std::is_sorted(end.begin(), end.end());
    auto const cap         = static_cast<std::int64_t>(budget_);
    double free_from       = std::numeric_limits<double>::infinity();  // H2D busy from here on
    for (auto const k : by_use) {
      auto& e          = entries[k];
      auto const b     = static_cast<std::int64_t>(e.bytes);
      double const due = std::min(start[e.next_use], free_from) - a_.model().prefetch_time(e.bytes);
      auto const lo    = std::max(e.last_use, e.offload_at) + 1;
      auto p           = latest_issue(e.next_use, lo, due, end, sorted_ends);
      // Back over [p, v - 1]: stay within the budget where the bytes count (from rel on).
      auto const from = std::max(p, rel[k]);
      auto const over = cur.last_above(from, e.next_use, cap - b);
      if (over != range_tree::npos) { p = over + 1; }
      cur.add(std::max(p, rel[k]), e.next_use, b);
      e.prefetch_at = p;
      free_from     = std::max(end[p - 1], due);
    }
  }

  // The latest op p in [lo, v] issued (end of p - 1) by `due`: v when end[v - 1] <= due, else
  // lo or the last p with end[p - 1] <= due. A binary search when the ends are sorted (always
  // so on a timeline, where each op ends before the next starts).
  [[nodiscard]] static std::uint64_t latest_issue(std::uint64_t v, std::uint64_t lo, double due,
                                                  std::vector<double> const& end, bool sorted)
  {
    if (!sorted) {
      std::uint64_t p = v;
      while (p > lo && end[p - 1] > due) { --p; }
      return p;
    }
    auto const q =
        static_cast<std::uint64_t>(std::upper_bound(end.begin(), end.end(), due) - end.begin());
    return std::min(v, std::max(lo, q));
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
  std::vector<std::pair<std::size_t, std::size_t>> windows_;  // ops [u + 1, v) of each gap
  std::vector<size_class> classes_;                           // by bytes
  std::vector<std::size_t> class_of_, rank_;                  // each gap's class and place in it
  static constexpr std::int64_t chosen_mark = std::int64_t{1} << 62;  // sinks a chosen gap's v
  std::vector<std::int64_t> base_;  // live bytes at each op's start peak, nothing swapped
  // base_ as a tree, the scratch curve of select/prune and of the packing: each use rolls its
  // adds back (scratch_use), instead of building or copying a tree of every op per plan.
  mutable range_tree scratch_;
  struct scratch_use {
    explicit scratch_use(range_tree& t) : tree(t) { tree.checkpoint(); }
    ~scratch_use() { tree.rollback(); }
    scratch_use(scratch_use const&)            = delete;
    scratch_use& operator=(scratch_use const&) = delete;
    range_tree& tree;
  };
  std::vector<double> nominal_;  // each op's start without swapping
  // nominal_fixed()'s scores and index, for long_gap and slack. Not thread-safe.
  mutable std::array<std::pair<std::vector<double>, std::optional<stab_index>>, 2> nominal_fixed_;
  double lat_bytes_;  // bytes the link would carry during one latency
};

}  // namespace stash::detail
