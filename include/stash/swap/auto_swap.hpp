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
 *    every pick. The integral is exact: op durations in fixed point (within 2^-62 of the
 *    iteration's time), load x duration summed in integers (detail/area_sums.hpp), rounded once.
 *  - Selection: while the planned peak exceeds the budget, pick the best-scoring candidate whose
 *    absence covers the event where the peak is; stop when none does (the schedule then does not
 *    fit, and its note says so).
 *  - Just-in-time swap-in with one H2D stream: swap-ins are packed backwards from their deadlines
 *    (latest next use first) so that each ends before its next use and before the slot of the
 *    one after it; each is issued at the latest op that starts no later than its slot.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/area_sums.hpp>
#include <stash/swap/detail/range_tree.hpp>
#include <stash/swap/detail/stab_index.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/op_index.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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

// The steps of plan_auto_swap over one analysis: the op times, the candidates and their scores,
// the just-in-time swap-ins of a selection, and the pick that covers the peak.
class auto_swap_planner {
 public:
  auto_swap_planner(trace_analysis const& analysis, auto_swap_score score, std::uint64_t min_bytes)
      : analysis_(analysis), score_(score), n_(analysis.trace().ops().size())
  {
    start_.resize(n_);
    end_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      start_[i] = analysis.op_start(i);
      end_[i]   = analysis.op_start(i + 1);
    }
    find_candidates(min_bytes);
    find_areas();
    taken_.assign(cands_.size(), false);
    scores_.resize(cands_.size());
  }

  // Picks candidates until the planned peak fits each budget of `budgets` (or none covers the
  // peak); returns per budget the swap entries of the selection and, when it does not fit, why.
  // Each pick updates the planned curve only where the just-in-time chain moved (see
  // chain_insert), so the loop costs O(log n) per moved swap-in instead of a rebuild of every
  // entry and the whole curve; the picks, and so the schedule, are the ones the rebuild gave.
  // One greedy run serves every budget: the picks do not depend on the budget, which only says
  // when to stop (the first time the planned peak is within it), so the selection for b is the
  // prefix of the run to the smallest budget taken until then.
  std::vector<std::pair<std::vector<swap_entry>, std::string>> select_many(
      std::span<std::uint64_t const> budgets)
  {
    std::vector<std::pair<std::vector<swap_entry>, std::string>> out(budgets.size());
    std::vector<std::size_t> pending(budgets.size());  // by budget, largest last
    std::iota(pending.begin(), pending.end(), std::size_t{0});
    std::stable_sort(pending.begin(), pending.end(),
                     [&](std::size_t x, std::size_t y) { return budgets[x] < budgets[y]; });
    std::vector<std::size_t> chosen;
    auto const base = planned_device_curve(analysis_, {});
    start_areas(base);
    for (std::size_t k = 0; k < cands_.size(); ++k) { scores_[k] = score_of(k); }
    cached_.resize(cands_.size());
    for (std::size_t k = 0; k < cands_.size(); ++k) {
      cached_[k] = {scores_[k], 0.0, static_cast<double>(cands_[k].bytes), cands_[k].doa < 0};
    }
    if (base.empty()) {
      for (auto& o : out) { o.first = build(chosen); }
      return out;
    }
    start_selection(base);
    bool const dynamic = score_ == auto_swap_score::swdoa;
    bool const sorted  = !dynamic && std::none_of(scores_.begin(), scores_.end(),
                                                  [](double x) { return std::isnan(x); });
    if (sorted) {
      covering_->sort([&](std::size_t x, std::size_t y) { return ranks_before(x, y); });
    }
    std::string note;
    for (;;) {
      auto const peak_event = curve_.first_max();
      auto const peak       = static_cast<std::uint64_t>(curve_.at(peak_event));
      for (; !pending.empty() && peak <= budgets[pending.back()]; pending.pop_back()) {
        out[pending.back()].first = build(chosen);
      }
      if (pending.empty()) { break; }
      auto const pick = sorted
                            ? covering_->best_at(
                                  peak_event, [&](std::size_t k) { return taken_[k]; },
                                  [&](std::size_t x, std::size_t y) { return ranks_before(x, y); })
                            : best_covering(peak_event, dynamic);
      if (!pick) {
        note = "cannot reach the budget: no candidate's absence covers the peak of " +
               format_bytes(peak) + " at event " + std::to_string(peak_event);
        break;
      }
      taken_[*pick] = true;
      chosen.push_back(*pick);
      chain_insert(*pick);
    }
    auto const rest = build(chosen);
    for (auto const k : pending) { out[k] = {rest, note}; }
    return out;
  }

 private:
  // A candidate's place in the just-in-time chain, with the fields of the candidate that the
  // walk of chain_insert reads (so that it reads links by rank, forward through memory).
  struct chain_link {
    std::size_t k;              // the candidate
    std::uint64_t u, v, bytes;  // its gap and size (cands_[k])
    double in_s;
    double start_v;          // its next use's start
    double due;              // its swap-in slot end, once chained
    std::uint64_t prefetch;  // its swap-in op, once chained
  };

  // Per storage of at least min_bytes: its longest gap between two accesses with an op between.
  void find_candidates(std::uint64_t min_bytes)
  {
    auto const& model = analysis_.model();
    for (auto const& s : analysis_.lifetimes().storages) {
      if (s.bytes < min_bytes) { continue; }
      std::optional<auto_swap_candidate> best;
      for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
        auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
        if (v < u + 2) { continue; }
        double const gap = start_[v] - end_[u];
        if (best && gap <= start_[best->v] - end_[best->u]) { continue; }
        double const out = model.offload_time(s.bytes), in = model.prefetch_time(s.bytes);
        best = auto_swap_candidate{s.id, u, v, s.bytes, out, in, gap - out - in};
      }
      if (best) { cands_.push_back(*best); }
    }
  }

  // The latest op in [u + 2, v] that starts no later than `when` (u + 2 if none does).
  [[nodiscard]] std::uint64_t issue_op(auto const& c, double when) const
  {
    auto const it = std::upper_bound(start_.begin() + static_cast<std::ptrdiff_t>(c.u + 2),
                                     start_.begin() + static_cast<std::ptrdiff_t>(c.v + 1), when);
    auto const p  = static_cast<std::uint64_t>(it - start_.begin());
    return p == c.u + 2 ? p : p - 1;
  }

  // The swap entries of `chosen`: swap-ins packed backwards from their deadlines on one H2D
  // stream (latest next use first), in prefetch order.
  [[nodiscard]] std::vector<swap_entry> build(std::vector<std::size_t> chosen) const
  {
    std::sort(chosen.begin(), chosen.end(), [&](std::size_t a, std::size_t b) {
      return cands_[a].v != cands_[b].v ? cands_[a].v > cands_[b].v : a < b;
    });
    std::vector<swap_entry> entries;
    double free_until = std::numeric_limits<double>::infinity();
    for (auto const k : chosen) {
      auto const& c    = cands_[k];
      double const due = std::min(start_[c.v], free_until) - c.in_s;
      entries.push_back(swap_entry{c.id, c.u, c.v, c.u + 1, issue_op(c, due), c.bytes});
      free_until = due;
    }
    std::sort(entries.begin(), entries.end(), [](swap_entry const& a, swap_entry const& b) {
      return a.prefetch_at != b.prefetch_at ? a.prefetch_at < b.prefetch_at
                                            : a.next_use < b.next_use;
    });
    return entries;
  }

  // The load per op without swapping and its exact areas, for the weighted scores.
  void start_areas(std::vector<std::uint64_t> const& curve)
  {
    auto const& ops = analysis_.ops();
    std::vector<std::uint64_t> load(n_);
    for (std::size_t i = 0; i < n_; ++i) { load[i] = curve.empty() ? 0 : curve[ops.event[i]]; }
    areas_.emplace(analysis_.op_seconds(), load);
  }

  [[nodiscard]] double score_of(std::size_t k) const
  {
    auto const& c     = cands_[k];
    double const size = static_cast<double>(c.bytes);
    if (c.doa < 0) { return c.doa / size; }
    if (score_ == auto_swap_score::doa) { return c.doa; }
    if (score_ == auto_swap_score::aoa) { return size * c.doa; }
    auto const [first, last] = area_ops_[k];
    double const area        = areas_->seconds(areas_->area(first, last));
    return size * area / static_cast<double>(analysis_.lifetimes().peak_live_bytes);
  }

  // The ops [first, last) of each candidate's weighted area: those that fit wholly between the
  // end of its swap-out and the start of its swap-in.
  void find_areas()
  {
    area_ops_.resize(cands_.size());
    for (std::size_t k = 0; k < cands_.size(); ++k) {
      auto const& c     = cands_[k];
      double const from = end_[c.u] + c.out_s, to = start_[c.v] - c.in_s;
      auto const first = std::lower_bound(start_.begin(), start_.end(), from) - start_.begin();
      auto const last  = std::upper_bound(end_.begin(), end_.end(), to) - end_.begin();
      area_ops_[k]     = {static_cast<std::size_t>(first), static_cast<std::size_t>(last)};
    }
  }

  // Before the first pick: the curve with nothing swapped, the candidates indexed by the events
  // their just-in-time absence covers, an empty swap-in chain.
  void start_selection(std::vector<std::uint64_t> const& base)
  {
    auto const& ops = analysis_.ops();
    std::vector<std::int64_t> values(base.begin(), base.end());
    curve_.assign(values);
    std::vector<std::pair<std::size_t, std::size_t>> windows(cands_.size());
    for (std::size_t k = 0; k < cands_.size(); ++k) {
      auto const& c = cands_[k];
      auto const p  = issue_op(c, start_[c.v] - c.in_s);
      windows[k]    = {ops.event[c.u] + 1, ops.event[p - 1] + 1};
    }
    covering_.emplace(base.size(), windows, [](std::size_t) { return true; });
    start_chain();
  }

  // The chain in build()'s order (latest next use first, then index): each candidate's rank in
  // it, its data by rank (so that the walk of chain_insert reads forward through memory), and an
  // empty set of chained ranks.
  void start_chain()
  {
    std::vector<std::size_t> order(cands_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), later_use_first{&cands_});
    rank_.resize(cands_.size());
    links_.resize(cands_.size());
    for (std::size_t r = 0; r < order.size(); ++r) {
      rank_[order[r]] = r;
      auto const& c   = cands_[order[r]];
      links_[r]       = chain_link{order[r], c.u, c.v, c.bytes, c.in_s, start_[c.v], 0.0, 0};
    }
    chained_.assign(cands_.size() / 64 + 1, 0);
  }

  // The first chained rank at least r (none: npos).
  [[nodiscard]] std::size_t next_chained(std::size_t r) const
  {
    auto w = r / 64;
    if (w >= chained_.size()) { return npos; }
    auto bits = chained_[w] & (~std::uint64_t{0} << (r % 64));
    while (bits == 0) {
      if (++w == chained_.size()) { return npos; }
      bits = chained_[w];
    }
    return w * 64 + static_cast<std::size_t>(std::countr_zero(bits));
  }

  // The last chained rank below r (none: npos).
  [[nodiscard]] std::size_t prev_chained(std::size_t r) const
  {
    if (r == 0) { return npos; }
    auto w    = (r - 1) / 64;
    auto bits = chained_[w] & (~std::uint64_t{0} >> (63 - (r - 1) % 64));
    while (bits == 0) {
      if (w-- == 0) { return npos; }
      bits = chained_[w];
    }
    return w * 64 + 63 - static_cast<std::size_t>(std::countl_zero(bits));
  }

  // Candidate x ranks before y: the higher score, the lower index among equals (no NaN).
  [[nodiscard]] bool ranks_before(std::size_t x, std::size_t y) const
  {
    return scores_[x] != scores_[y] ? scores_[x] > scores_[y] : x < y;
  }

  // Adds `d` bytes to the planned curve over the absence of `link`'s candidate with swap-in at op
  // p (deferred: chain_insert flushes the curve).
  void shift_window(chain_link const& link, std::uint64_t p, std::int64_t d)
  {
    auto const& ops = analysis_.ops();
    auto const u    = link.u;
    curve_.add_deferred(ops.event[u] + 1, ops.event[p - 1] + 1, d);      // p >= u + 2: not empty
    if (score_ == auto_swap_score::swdoa) { areas_->add(u + 1, p, d); }  // d < 0
  }

  // issue_op(c, when) is still `p` (saves the search for the swap-ins a pick barely moves).
  [[nodiscard]] bool still_issues(auto const& c, std::uint64_t p, double when) const
  {
    return (p == c.v || start_[p + 1] > when) && (p == c.u + 2 || start_[p] <= when);
  }

  // issue_op(c, when) for a swap-in issued at op p before, when it moves (!still_issues): a
  // search from p outward in growing steps, since a pick moves the swap-ins behind it by a few
  // ops. The same op: the last in [u + 2, v] starting no later than `when`, else u + 2.
  [[nodiscard]] std::uint64_t issue_op_near(auto const& c, std::uint64_t p, double when) const
  {
    auto const lo = c.u + 2;
    if (p == lo || start_[p] <= when) { return issue_op(c, when); }  // later (or at the floor)
    auto last = [&](std::uint64_t from, std::uint64_t to) {          // start_[to] > when
      auto const it = std::upper_bound(start_.begin() + static_cast<std::ptrdiff_t>(from),
                                       start_.begin() + static_cast<std::ptrdiff_t>(to), when);
      auto const q  = static_cast<std::uint64_t>(it - start_.begin());
      return q == lo ? lo : q - 1;
    };
    std::uint64_t hi = p;  // start_[hi] > when: the op is below hi
    for (std::uint64_t step = 1;; step *= 2) {
      if (hi - lo <= step) { return last(lo, hi); }
      auto const m = hi - step;
      if (start_[m] <= when) { return last(m, hi); }
      hi = m;
    }
  }

  // The swap-in of `link`'s candidate moves from op `from` to op `to`: its absence ends there
  // instead (deferred: chain_insert flushes the curve).
  void move_window_end(chain_link const& link, std::uint64_t from, std::uint64_t to)
  {
    auto const& ops = analysis_.ops();
    auto const b    = static_cast<std::int64_t>(link.bytes);
    if (to < from) {
      curve_.add_deferred(ops.event[to - 1] + 1, ops.event[from - 1] + 1, b);
    } else {
      curve_.add_deferred(ops.event[from - 1] + 1, ops.event[to - 1] + 1, -b);
    }
    if (score_ != auto_swap_score::swdoa) { return; }
    if (to < from) {
      areas_->add(to, from, b);
      raised(link.bytes, to, from);
    } else {
      areas_->add(from, to, -b);
    }
  }

  // Adds pick k to the just-in-time chain (latest next use first, as build() packs it): its
  // swap-in and those after it in the chain move while their slots change; the first one
  // whose slot is unchanged leaves every later one unchanged too.
  void chain_insert(std::size_t k)
  {
    auto r = rank_[k];
    chained_[r / 64] |= std::uint64_t{1} << (r % 64);
    auto const before = prev_chained(r);
    double free = before == npos ? std::numeric_limits<double>::infinity() : links_[before].due;
    for (bool first = true; r != npos; r = next_chained(r + 1), first = false) {
      auto& link       = links_[r];
      double const due = std::min(link.start_v, free) - link.in_s;
      if (!first && due == link.due) { break; }
      if (first) {
        link.prefetch = issue_op(link, due);
        shift_window(link, link.prefetch, -static_cast<std::int64_t>(link.bytes));
      } else if (!still_issues(link, link.prefetch, due)) {
        if (auto const p = issue_op_near(link, link.prefetch, due); p != link.prefetch) {
          move_window_end(link, link.prefetch, p);
          link.prefetch = p;
        }
      }
      link.due = due;
      free     = due;
    }
    curve_.flush();
  }

  // SWDOA: the load rose by `bytes` over ops [first, last). raised_ grows by at least the area
  // it gained (rounded up twice), so that no candidate's area grew by more since its score was
  // cached (see bound_of).
  void raised(std::uint64_t bytes, std::size_t first, std::size_t last)
  {
    constexpr double up = std::numeric_limits<double>::infinity();
    auto const gain     = static_cast<area_sums::wide>(bytes) * areas_->duration(first, last);
    raised_             = std::nextafter(raised_ + std::nextafter(areas_->seconds(gain), up), up);
  }

  // SWDOA: candidate k's score on the current load, cached with the rise it has seen.
  [[nodiscard]] double rescore(std::size_t k)
  {
    auto& cached = cached_[k];
    if (cached.fixed) { return cached.score; }  // not weighted: scores_[k] for good
    cached.score = score_of(k);
    cached.at    = raised_;
    return cached.score;
  }

  // SWDOA: a score no less than rescore(k): the cached one plus the most the load's rises since
  // could have added to its area. The difference of the two raised_ is taken up by raised_ x
  // 2^-52 (more than its rounding), and 2^-48 covers the roundings of both sides.
  [[nodiscard]] double bound_of(std::size_t k) const
  {
    auto const& cached = cached_[k];
    if (cached.fixed || cached.at == raised_) { return cached.score; }
    double const rise = (raised_ - cached.at) + raised_ * 0x1p-52;
    double const peak = static_cast<double>(analysis_.lifetimes().peak_live_bytes);
    return (cached.score + cached.bytes * rise / peak) * (1 + 0x1p-48);
  }

  // SWDOA's pick among `found` (candidate, bound_of): the highest bound rescored first, then
  // only those whose bounds could still beat the best score (higher, or equal with a lower
  // index), in decreasing order of their bounds until none left can: the pick is the one
  // rescoring all of them gives.
  [[nodiscard]] std::optional<std::size_t> best_by_bounds(
      std::vector<std::pair<std::size_t, double>>& found)
  {
    auto const lower = [](auto const& a, auto const& b) {
      return a.second != b.second ? a.second < b.second : a.first > b.first;
    };
    if (found.empty()) { return std::nullopt; }
    auto const first = *std::max_element(found.begin(), found.end(), lower);
    std::pair<std::size_t, double> best{first.first, rescore(first.first)};
    auto const may_beat = [&](auto const& f) {
      return f.second > best.second || (f.second == best.second && f.first < best.first);
    };
    std::erase_if(found, [&](auto const& f) { return f.first == first.first || !may_beat(f); });
    std::make_heap(found.begin(), found.end(), lower);
    while (!found.empty() && may_beat(found.front())) {
      std::pop_heap(found.begin(), found.end(), lower);
      auto const k   = found.back().first;
      double const s = rescore(k);
      found.pop_back();
      if (s > best.second || (s == best.second && k < best.first)) { best = {k, s}; }
    }
    return best.first;
  }

  // The best-scoring untaken candidate whose absence covers `peak_event` (the first of equals
  // by index, the first one met when scores are not comparable), rescored on the current load
  // when `dynamic` (SWDOA).
  [[nodiscard]] std::optional<std::size_t> best_covering(std::uint64_t peak_event, bool dynamic)
  {
    auto& found = found_;
    found.clear();
    covering_->for_each_at(
        peak_event, [&](std::size_t k) { return taken_[k]; },
        [&](std::size_t k) { found.emplace_back(k, dynamic ? bound_of(k) : scores_[k]); });
    auto const is_nan = [](auto const& f) { return std::isnan(f.second); };
    bool nan          = std::any_of(found.begin(), found.end(), is_nan);
    if (dynamic && !nan) { return best_by_bounds(found); }
    if (dynamic) {  // not comparable: every score, as a scan would
      for (auto& f : found) { f.second = rescore(f.first); }
      nan = std::any_of(found.begin(), found.end(), is_nan);
    }
    if (nan) { std::sort(found.begin(), found.end()); }  // the scan's order: by index
    std::optional<std::pair<std::size_t, double>> pick;
    for (auto const& f : found) {
      if (!pick) {
        pick = f;
        continue;
      }
      bool const better =
          f.second > pick->second || (!nan && f.second == pick->second && f.first < pick->first);
      if (better) { pick = f; }
    }
    if (!pick) { return std::nullopt; }
    return pick->first;
  }

  trace_analysis const& analysis_;
  auto_swap_score score_;
  std::size_t n_;
  std::vector<double> start_, end_;  // each op's start and end without swapping
  std::vector<auto_swap_candidate> cands_;
  std::vector<bool> taken_;
  std::vector<double> scores_;
  std::vector<std::pair<std::size_t, std::size_t>> area_ops_;  // see find_areas()
  std::optional<area_sums> areas_;  // the load's areas over ops (start_areas)
  // SWDOA, per candidate in one place (the scan of the covering candidates reads one line each):
  // its score and raised_ when cached, its bytes, whether its score is fixed (negative DOA).
  struct score_cache {
    double score, at, bytes;
    bool fixed;
  };
  std::vector<score_cache> cached_;
  double raised_ = 0;  // SWDOA: see raised()
  // The selection's state (start_selection): the planned curve over the events, the candidates
  // by covered events, the chain.
  max_tree curve_;
  std::optional<stab_index> covering_;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::vector<std::size_t> rank_;       // each candidate's place in the chain's order
  std::vector<chain_link> links_;       // by rank
  std::vector<std::uint64_t> chained_;  // bit r: the candidate of rank r is chained
  struct later_use_first {
    std::vector<auto_swap_candidate> const* cands;
    bool operator()(std::size_t a, std::size_t b) const
    {
      auto const& c = *cands;
      return c[a].v != c[b].v ? c[a].v > c[b].v : a < b;
    }
  };
  std::vector<std::pair<std::size_t, double>> found_;
};

// plan_auto_swap at every budget of `budgets`, from one greedy run (select_many).
[[nodiscard]] inline std::vector<schedule> plan_auto_swap_budgets(
    trace_analysis const& analysis, std::span<std::uint64_t const> budgets, auto_swap_score score,
    std::string_view name, std::uint64_t min_bytes)
{
  std::vector<schedule> out(budgets.size());
  std::vector<std::uint64_t> over;  // the budgets below the peak, which need a selection
  for (auto const b : budgets) {
    if (analysis.lifetimes().peak_live_bytes > b) { over.push_back(b); }
  }
  std::vector<std::pair<std::vector<swap_entry>, std::string>> picked;
  if (!over.empty()) { picked = auto_swap_planner(analysis, score, min_bytes).select_many(over); }
  for (std::size_t i = 0, j = 0; i < budgets.size(); ++i) {
    if (analysis.lifetimes().peak_live_bytes <= budgets[i]) {
      out[i] = make_schedule(analysis, std::string(name), budgets[i], {});
      continue;
    }
    out[i] = make_schedule(analysis, std::string(name), budgets[i], std::move(picked[j].first));
    out[i].note = std::move(picked[j].second);
    ++j;
  }
  return out;
}

[[nodiscard]] inline schedule plan_auto_swap(trace_analysis const& analysis, std::uint64_t budget,
                                             auto_swap_score score, std::string_view name,
                                             std::uint64_t min_bytes)
{
  std::uint64_t const one[] = {budget};
  return std::move(plan_auto_swap_budgets(analysis, one, score, name, min_bytes).front());
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
  /// @return The name its score variant is registered under (auto_swap, auto_swap_doa, ...).
  [[nodiscard]] constexpr std::string_view name() const noexcept
  {
    return detail::auto_swap_name(score);
  }
  /// @brief Picks swaps until the planned peak fits `budget` (or no candidate helps).
  /// @param analysis The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    return detail::plan_auto_swap(analysis, budget, score, name(), min_bytes);
  }
  /// @brief plan(analysis, b) for every b of `budgets`, in their order, from one greedy run:
  /// AutoSwap's picks do not depend on the budget, which only says when to stop, so a sweep of
  /// budgets (stash-plan --frontier) costs one selection to the smallest instead of one each.
  /// @param analysis The recorded iteration's facts.
  /// @param budgets Device bytes the iteration must fit in, one plan each (any order).
  /// @return The schedules, one per budget in the order of `budgets`.
  [[nodiscard]] std::vector<schedule> plan_budgets(trace_analysis const& analysis,
                                                   std::span<std::uint64_t const> budgets) const
  {
    return detail::plan_auto_swap_budgets(analysis, budgets, score, name(), min_bytes);
  }
};

/// @brief AutoSwap's plans over one sweep of budgets, one greedy run per score
/// (auto_swap::plan_budgets), planned on first use and kept. search_swap's seeds and stash-plan's
/// AutoSwap policies plan the same sweeps at every frontier budget (stash-plan --frontier): shared,
/// each greedy runs once instead of once per asker (issue 24, item 4). Not thread-safe, but for
/// this: of() for different scores may run on different threads at once (each writes its own
/// slot only), and once a score is planned, planned() may be read from any number of threads.
class auto_swap_sweeps {
 public:
  /// @brief An empty cache for `budgets` on `analysis` (both must outlive it).
  /// @param analysis The recorded iteration's facts.
  /// @param budgets Device bytes of the sweep, one plan each (any order).
  auto_swap_sweeps(trace_analysis const& analysis, std::span<std::uint64_t const> budgets)
      : analysis_(analysis), budgets_(budgets.begin(), budgets.end())
  {
  }

  /// @brief The budgets of the sweep.
  /// @return Them, in the order given.
  [[nodiscard]] std::span<std::uint64_t const> budgets() const noexcept { return budgets_; }

  /// @brief auto_swap{.score = score}.plan_budgets(analysis, budgets), planned on first use.
  /// @param score The AutoSwap score.
  /// @return The schedules, one per budget in the order of budgets().
  [[nodiscard]] std::vector<schedule> const& of(auto_swap_score score)
  {
    auto& slot = plans_[static_cast<std::size_t>(score)];
    if (!slot) { slot = auto_swap{.score = score}.plan_budgets(analysis_, budgets_); }
    return *slot;
  }

  /// @brief The schedules of `score` planned by of(); stash::logic_error when not planned yet.
  /// @param score The AutoSwap score.
  /// @return The schedules, one per budget in the order of budgets().
  [[nodiscard]] std::vector<schedule> const& planned(auto_swap_score score) const
  {
    auto const& slot = plans_[static_cast<std::size_t>(score)];
    STASH_EXPECTS(slot.has_value(), "auto_swap_sweeps::planned: this score's sweep is not planned");
    return *slot;
  }

 private:
  trace_analysis const& analysis_;
  std::vector<std::uint64_t> budgets_;
  std::array<std::optional<std::vector<schedule>>, 4> plans_;  // by auto_swap_score
};

}  // namespace stash
