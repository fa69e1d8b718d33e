/**
 * @file time_bound.hpp
 * @brief The per-op relaxation behind iteration_time_lower_bound (swap/swap_bounds.hpp): at
 * each op over the budget, which storages could be away, what restoring each by a re-run costs
 * at least, and the least iteration time that lets enough of them be away.
 *
 * At op i over the budget by x bytes, at the moment tau its start step peaks, x bytes of the
 * storages live then are away, each inside a gap (u, v) of its accesses with u < i < v, or (with
 * wrap gaps) a persistent storage before its first access (head) or after its last (tail). A
 * storage away by a swap crossed D2H before tau and crosses H2D after it (a head wrap entry:
 * H2D after tau and its offload, after its last access, also after tau; a tail wrap entry: D2H
 * and its prefetch, before its first access, both before tau, as the simulator runs wrap
 * entries). A storage S away by a drop is restored after tau by re-running S's writers up to u
 * (recompute_chain.hpp), on the compute stream, and, for each read r of those writers whose
 * value as read is gone at every re-run after op i (r overwritten after that read and before op
 * i + 1, or no longer live at op i + 1: recompute_chain_of then rebuilds it as a transient
 * input, or refuses), r's writers before that read: S's chain at op i. A re-run of op p
 * restores at most the storages whose chains hold p (a batch shares one BatchNorm between a
 * `clone` and the output it feeds, shared_reruns_of), so charging op p's time to them in
 * proportion to their bytes (b_S / B_p, B_p their bytes at op i) never charges more than the
 * re-runs cost: S costs at least b_S x sum over p in its chain of t_p / B_p. Recomputing y bytes
 * then costs at least R(y), the cheapest-first fractional knapsack over those per-byte costs
 * (convex, piecewise linear), and only act / temp storages whose writers are recomputable can be
 * dropped (a relaxation of recompute_chain_of's rules). Then, with tau in [C_<i, T - C_>=i]: the
 * swapped bytes are at most what the links carry in their windows, the dropped ones at most R^-1(T
 * - tau - C_>=i), and T is feasible only if some tau covers x. Every constraint is one any schedule
 * the simulator runs meets, relaxed (which storages, their own windows, link latency, codec time,
 * transient reads are left out), so the least feasible T is a lower bound on its iteration time.
 * Coverage is concave in tau, so its maximum is at an end, a kink of R^-1 or a crossing of the link
 * terms; the least feasible T is found by bisection, and the largest T found infeasible is returned
 * (never above the least feasible one).
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/recompute_semantics.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

namespace stash::detail {

/// One gap (u, v) of one storage's accesses with an op inside: the storage may be away at the
/// ops u < i < v.
struct bound_gap {
  std::uint64_t u{}, v{}, bytes{};
  std::uint32_t chain_begin{}, chain_end{};  ///< its re-runs, in bound_gaps::chain
  bool recomputable{};                       ///< whether a drop could restore it (relaxed)
};

/// One op a gap's re-run runs when the storage is away at op i >= from.
struct chain_op {
  std::uint64_t op{}, from{};
};

/// Every gap of every storage, ordered by u, and the re-runs of each.
struct bound_gaps {
  std::vector<bound_gap> gaps;
  std::vector<chain_op> chain;
};

/// The indices of `values`, the least value first, equal values in index order (deterministic).
template <class Index, class T>
[[nodiscard]] std::vector<Index> least_first(std::span<T const> values)
{
  std::vector<Index> order(values.size());
  std::iota(order.begin(), order.end(), Index{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](Index x, Index y) { return values[x] < values[y]; });
  return order;
}

/// Whether storage `s`'s gap after op `u` might be dropped and re-run: a relaxation of
/// recompute_chain_of (kind act or temp, a writer up to u, the first not reading it, every
/// writer's class recomputable; reads and other writes are not checked).
[[nodiscard]] inline bool may_rerun(trace_analysis const& a, storage_lifetime const& s,
                                    std::uint64_t u)
{
  if (s.kind != storage_kind::act && s.kind != storage_kind::temp) { return false; }
  bool first = true;
  for (auto const& x : s.accesses) {
    if (x.op > u) { break; }
    if (!x.write) { continue; }
    if ((first && x.read) || !recomputable(a.recompute_classes()[x.op])) { return false; }
    first = false;
  }
  return !first;
}

/// The least op i from which the value of `r` that op `w` read is gone for every re-run after
/// op i (at >= i + 1): overwritten by an op x with w < x < at, or no longer live at op at
/// (recompute_chain.hpp's check_read); n when it never is.
[[nodiscard]] inline std::uint64_t value_gone_from(trace_analysis const& a, std::uint64_t w,
                                                   storage_lifetime const& r)
{
  auto const n  = a.op_count();
  auto const& e = a.ops().event;
  // the first op at which it is no longer live: gone for at >= that op, i >= that op - 1
  auto const dead =
      static_cast<std::uint64_t>(std::lower_bound(e.begin(), e.end(), r.end_event) - e.begin());
  std::uint64_t gone = dead >= n ? n : (dead == 0 ? 0 : dead - 1);
  for (auto const& x : r.accesses) {
    if (x.write && x.op > w) {
      gone = std::min(gone, x.op);
      break;
    }
  }
  return gone;
}

/// Appends the re-runs of storage `s` dropped after its access j: its writers up to it, and for
/// each of their reads whose value is gone once the storage is away at op i >= from, that read's
/// writers before it (the transient input the chain rebuilds); each op once, its least from.
inline void append_chain(trace_analysis const& a, storage_lifetime const& s, std::size_t j,
                         std::vector<chain_op>& chain)
{
  auto const begin = chain.size();
  auto add         = [&](std::uint64_t op, std::uint64_t from) {
    for (auto k = begin; k < chain.size(); ++k) {
      if (chain[k].op == op) {
        chain[k].from = std::min(chain[k].from, from);
        return;
      }
    }
    chain.push_back({op, from});
  };
  auto const& life = a.lifetimes().storages;
  for (std::size_t k = 0; k <= j; ++k) {
    if (!s.accesses[k].write) { continue; }
    auto const w = s.accesses[k].op;
    add(w, 0);
    for (auto const r : a.trace().ops()[w].reads) {
      if (r == s.id) { continue; }
      auto const& rl = life[r];
      if (rl.kind != storage_kind::act && rl.kind != storage_kind::temp) { continue; }
      auto const from = value_gone_from(a, w, rl);
      for (auto const& x : rl.accesses) {
        if (x.op >= w) { break; }
        if (x.write) { add(x.op, from); }
      }
    }
  }
}

/// The gaps of every storage (any kind), with their chains when `recompute`.
[[nodiscard]] inline bound_gaps collect_bound_gaps(trace_analysis const& a, bool recompute)
{
  bound_gaps out;
  for (auto const& s : a.lifetimes().storages) {
    for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
      auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
      if (v < u + 2) { continue; }
      bound_gap g{u, v, s.bytes, static_cast<std::uint32_t>(out.chain.size()), 0, false};
      g.recomputable = recompute && may_rerun(a, s, u);
      if (g.recomputable) { append_chain(a, s, j, out.chain); }
      g.chain_end = static_cast<std::uint32_t>(out.chain.size());
      out.gaps.push_back(g);
    }
  }
  std::stable_sort(out.gaps.begin(), out.gaps.end(),
                   [](bound_gap const& x, bound_gap const& y) { return x.u < y.u; });
  return out;
}

/// R at one op: the cheapest-first cumulative (bytes, seconds) of re-running its droppable
/// storages; point 0 is (0, 0).
struct rerun_curve {
  std::vector<double> bytes, seconds;

  /// The most bytes re-run within `budget` seconds (R^-1).
  [[nodiscard]] double bytes_within(double budget) const
  {
    if (budget < 0) { return -1; }
    auto const k = static_cast<std::size_t>(
        std::upper_bound(seconds.begin(), seconds.end(), budget) - seconds.begin() - 1);
    if (k + 1 >= bytes.size()) { return bytes.back(); }
    double const slope = (seconds[k + 1] - seconds[k]) / (bytes[k + 1] - bytes[k]);
    return std::min(bytes[k + 1], bytes[k] + (budget - seconds[k]) / slope);
  }
};

/// Builds R from the gaps `active` at op i (see the file comment); `share` is scratch, one
/// entry per op, all zero on entry and on return.
inline void build_rerun_curve(trace_analysis const& a, bound_gaps const& g, std::uint64_t i,
                              std::span<std::uint32_t const> active, std::vector<double>& share,
                              rerun_curve& curve)
{
  std::vector<std::pair<double, double>> items;  // (seconds per byte, bytes)
  auto each = [&](std::uint32_t k, auto&& f) {
    for (auto c = g.gaps[k].chain_begin; c < g.gaps[k].chain_end; ++c) {
      if (g.chain[c].from <= i) { f(g.chain[c].op); }
    }
  };
  for (auto const k : active) {
    each(k, [&](std::uint64_t op) { share[op] += static_cast<double>(g.gaps[k].bytes); });
  }
  for (auto const k : active) {
    auto const& gap = g.gaps[k];
    if (!gap.recomputable || gap.bytes == 0) { continue; }
    double per_byte = 0;
    each(k, [&](std::uint64_t op) { per_byte += a.op_seconds()[op] / share[op]; });
    items.emplace_back(per_byte, static_cast<double>(gap.bytes));
  }
  for (auto const k : active) {
    each(k, [&](std::uint64_t op) { share[op] = 0; });
  }
  std::sort(items.begin(), items.end());
  curve.bytes.assign(1, 0.0);
  curve.seconds.assign(1, 0.0);
  for (auto const& [per_byte, bytes] : items) {
    curve.bytes.push_back(curve.bytes.back() + bytes);
    curve.seconds.push_back(curve.seconds.back() + per_byte * bytes);
  }
}

/// One op's figures: compute before and from it, its excess, the wrap bytes that may be away
/// there (head: before their first access; tail: after their last), the link's seconds per byte.
struct op_window {
  double before{}, after{}, excess{}, head{}, tail{}, d2h{}, h2d{};
};

/// The most bytes away at op i for an iteration of `t` seconds with op i's peak at `tau`, tau in
/// [C_<i, t - C_>=i] (feasible clamps it there). At tau = t - C_>=i computed in floating point,
/// t - tau may fall an ulp short of C_>=i: that counts as no time for re-runs, not as outside the
/// range (where the link terms peak at that end, rejecting it made feasibility depend on the
/// rounding of t, and the bisection could end above the least feasible time).
[[nodiscard]] inline double coverage_at(op_window const& w, rerun_curve const& r, double t,
                                        double tau)
{
  double const rerun = r.bytes_within(std::max(0.0, t - tau - w.after));
  double const a = tau / w.d2h, b = (t - tau) / w.h2d;  // the links' windows, in bytes
  double const head = std::min(w.head, (t - tau) / w.d2h), tail = std::min(w.tail, tau / w.h2d);
  return rerun + std::min({a + head, b + tail, a + b, t / w.d2h, t / w.h2d});
}

/// An upper bound on coverage_at(w, r, t, tau) over tau in [tau_min, tau_max], in floating
/// point: each term at the end of the range where it is largest (every operation is monotone in
/// its operands under rounding to nearest), so no tau in the range covers when it is below.
[[nodiscard]] inline double coverage_bound(op_window const& w, rerun_curve const& r, double t,
                                           double tau_min, double tau_max)
{
  double const rerun = r.bytes_within(std::max(0.0, t - tau_min - w.after));
  double const a = tau_max / w.d2h, b = (t - tau_min) / w.h2d;
  double const head = std::min(w.head, (t - tau_min) / w.d2h);
  double const tail = std::min(w.tail, tau_max / w.h2d);
  return rerun + std::min({a + head, b + tail, a + b, t / w.d2h, t / w.h2d});
}

/// Whether any of R's kinks [first, last) covers, at tau = hi - seconds[k] (all at or above lo):
/// what trying each in turn answers, skipping the runs of kinks whose coverage_bound is below the
/// excess (at a tight t, all but a few near the best tau).
template <class Covers>
[[nodiscard]] bool any_kink_covers(op_window const& w, rerun_curve const& r, double t, double hi,
                                   std::size_t first, std::size_t last, Covers const& covers)
{
  constexpr std::size_t leaf = 8;
  if (last - first <= leaf) {
    for (auto k = first; k < last; ++k) {
      if (covers(hi - r.seconds[k])) { return true; }
    }
    return false;
  }
  if (coverage_bound(w, r, t, hi - r.seconds[last - 1], hi - r.seconds[first]) < w.excess) {
    return false;
  }
  auto const mid = first + (last - first) / 2;
  return any_kink_covers(w, r, t, hi, first, mid, covers) ||
         any_kink_covers(w, r, t, hi, mid, last, covers);
}

/// Whether some tau lets `t` cover op w's excess (coverage is concave in tau: its maximum is at
/// a candidate below).
[[nodiscard]] inline bool feasible(op_window const& w, rerun_curve const& r, double t)
{
  double const lo = w.before, hi = t - w.after;
  if (hi < lo) { return false; }
  // The link terms as lines c0 + c1 tau (a + head, b + tail, a + b and the whole iteration's
  // link time, coverage_at); their crossings are the kinks of their minimum.
  double const id = 1 / w.d2h, ih = 1 / w.h2d;
  std::array<std::array<double, 2>, 5> const lines{
      {{w.head, id}, {t * id, 0}, {t * ih + w.tail, -ih}, {t * ih, 0}, {t * ih, id - ih}}};
  auto covers = [&](double tau) {
    return coverage_at(w, r, t, std::clamp(tau, lo, hi)) >= w.excess;
  };
  if (covers(lo) || covers(hi)) { return true; }
  // The few crossings before the kinks, one per point of R (the answer is the same in any
  // order; this one rarely reaches the long loop).
  for (std::size_t p = 0; p < lines.size(); ++p) {
    for (std::size_t q = p + 1; q < lines.size(); ++q) {
      double const ds = lines[p][1] - lines[q][1];
      if (ds != 0 && covers((lines[q][0] - lines[p][0]) / ds)) { return true; }
    }
  }
  // R's seconds do not decrease (sums of non-negative terms), so neither does hi - s: from the
  // first kink below lo on, every one clamps to lo, which does not cover.
  auto const kinks =
      static_cast<std::size_t>(std::partition_point(r.seconds.begin(), r.seconds.end(),
                                                    [&](double s) { return hi - s >= lo; }) -
                               r.seconds.begin());
  return any_kink_covers(w, r, t, hi, 0, kinks, covers);
}

/// The least iteration time op w's relaxation allows, or `floor` when that is feasible already:
/// the largest time the bisection found infeasible (never above the least feasible one).
[[nodiscard]] inline double op_time_bound(op_window const& w, rerun_curve const& r, double floor)
{
  if (feasible(w, r, floor)) { return floor; }
  // Swapping all of the excess, each link beside its half of the compute, is feasible.
  double hi =
      std::max(floor, std::max(w.before, w.excess * w.d2h) + std::max(w.after, w.excess * w.h2d));
  for (int k = 0; k < 64 && !feasible(w, r, hi); ++k) { hi *= 2; }
  double lo = floor;
  for (int k = 0; k < 100 && hi - lo > 1e-13 * hi; ++k) {
    double const mid                = lo + (hi - lo) / 2;
    (feasible(w, r, mid) ? hi : lo) = mid;
  }
  return lo;
}

/// Bytes of the wrappable storages (may_wrap) that may be away at each op through a wrap entry:
/// head[i] before their first access, tail[i] after their last. Zero without `wrap`.
struct wrap_room {
  std::vector<double> head, tail;
};

[[nodiscard]] inline wrap_room wrap_room_of(trace_analysis const& a, bool wrap)
{
  auto const n = a.op_count();
  wrap_room out{std::vector<double>(n + 1, 0.0), std::vector<double>(n + 1, 0.0)};
  if (!wrap) { return out; }
  for (auto const& s : a.lifetimes().storages) {
    if (!may_wrap(a, s.id)) { continue; }
    out.head[0] += static_cast<double>(s.bytes);
    out.head[s.accesses.front().op] -= static_cast<double>(s.bytes);
    out.tail[s.accesses.back().op + 1] += static_cast<double>(s.bytes);
  }
  for (std::size_t i = 1; i <= n; ++i) {
    out.head[i] += out.head[i - 1];
    out.tail[i] += out.tail[i - 1];
  }
  return out;
}

/// R swept over the ops in order (per_op_time_bounds): the gaps active at the current op whose
/// drop could restore bytes, each op's share, each gap's cost per byte and the items sorted by
/// it, kept up to date from one op to the next; R is rebuilt only when something changed, by
/// merging the unchanged items with the changed ones. The same curve as build_rerun_curve's from
/// the same gaps, bit for bit: a share is a sum of whole bytes (exact in a double, in any order),
/// a cost sums the same terms in its chain's order, and the items are the same pairs in the same
/// non-decreasing order. What changes at an op is only the gaps that start or end there, the
/// chain entries whose `from` is reached, and the gaps sharing an op with them, so the sweep does
/// no work per active gap per op beyond the merge, a pass of sequential adds.
class rerun_sweep {
 public:
  /// @param a The recorded iteration's facts.
  /// @param g Its gaps (collect_bound_gaps with recompute).
  rerun_sweep(trace_analysis const& a, bound_gaps const& g)
      : a_(a), g_(g), share_(a.op_count(), 0.0), users_(a.op_count()), state_(g.gaps.size())
  {
    for (std::uint32_t k = 0; k < g.gaps.size(); ++k) {
      auto const& x = g.gaps[k];
      if (!x.recomputable || x.bytes == 0) { continue; }
      events_.push_back({x.u + 1, k, none_});  // x.v >= x.u + 2: active at u + 1
      events_.push_back({x.v, k, none_});
      for (auto c = x.chain_begin; c < x.chain_end; ++c) {
        if (g.chain[c].from > x.u + 1 && g.chain[c].from < x.v) {
          events_.push_back({g.chain[c].from, k, c});
        }
      }
    }
    std::sort(events_.begin(), events_.end(), [](event const& x, event const& y) {
      return std::tie(x.op, x.gap, x.entry) < std::tie(y.op, y.gap, y.entry);
    });
  }

  /// Brings the state to op i (i not below the last call's).
  void advance_to(std::uint64_t i)
  {
    for (; next_ < events_.size() && events_[next_].op <= i; ++next_) {
      auto const& e = events_[next_];
      auto& st      = state_[e.gap];
      if (e.entry != none_) {
        add_entry(e.gap, g_.chain[e.entry].op);
      } else if (!st.active) {
        st.active = true;
        for (auto c = g_.gaps[e.gap].chain_begin; c < g_.gaps[e.gap].chain_end; ++c) {
          if (g_.chain[c].from <= e.op) { add_entry(e.gap, g_.chain[c].op); }
        }
        mark(e.gap);
      } else {
        end_gap(e.gap);
      }
    }
    at_ = i;
  }

  /// Brings `curve` to R at the current op; it must hold what the last call left in it.
  void update(rerun_curve& curve)
  {
    fresh_.clear();
    for (auto const k : dirty_) {
      auto& st = state_[k];
      st.dirty = false;
      if (!st.active) { continue; }
      double per_byte = 0;
      for (auto c = g_.gaps[k].chain_begin; c < g_.gaps[k].chain_end; ++c) {
        if (g_.chain[c].from <= at_) {
          per_byte += a_.op_seconds()[g_.chain[c].op] / share_[g_.chain[c].op];
        }
      }
      if (st.listed && st.per_byte == per_byte) { continue; }
      if (st.listed) { unlist(k); }
      st.per_byte = per_byte;
      st.listed   = true;
      fresh_.push_back({per_byte, static_cast<double>(g_.gaps[k].bytes), k});
    }
    dirty_.clear();
    if (fresh_.empty() && first_stale_ == none_) { return; }  // the same costs: the same R
    merge(curve);
  }

 private:
  static constexpr std::uint32_t none_ = static_cast<std::uint32_t>(-1);
  struct event {
    std::uint64_t op{};
    std::uint32_t gap{}, entry{};  ///< entry: a chain entry whose `from` is reached, or none_
  };
  struct gap_state {
    double per_byte{};  ///< its item's cost per byte while listed
    bool active{}, dirty{}, listed{};
  };
  struct item {
    double per_byte{}, bytes{};
    std::uint32_t gap{};  ///< none_: gone since the last update (merge drops it)
  };
  [[nodiscard]] static bool less(item const& x, item const& y)
  {
    return std::pair(x.per_byte, x.bytes) < std::pair(y.per_byte, y.bytes);
  }

  void mark(std::uint32_t k)
  {
    if (!state_[k].dirty) {
      state_[k].dirty = true;
      dirty_.push_back(k);
    }
  }

  void add_entry(std::uint32_t k, std::uint64_t op)
  {
    share_[op] += static_cast<double>(g_.gaps[k].bytes);
    for (auto const other : users_[op]) { mark(other); }
    users_[op].push_back(k);
    mark(k);
  }

  void end_gap(std::uint32_t k)
  {
    auto& st = state_[k];
    if (st.listed) { unlist(k); }
    st.active     = false;
    st.listed     = false;
    auto const& x = g_.gaps[k];
    for (auto c = x.chain_begin; c < x.chain_end; ++c) {
      if (g_.chain[c].from >= x.v) { continue; }
      auto const op = g_.chain[c].op;
      share_[op] -= static_cast<double>(x.bytes);
      auto& u = users_[op];
      u.erase(std::find(u.begin(), u.end(), k));
      for (auto const other : u) { mark(other); }
    }
  }

  /// Marks listed gap k's item in items_ gone, found by its key among the sorted items (a
  /// search per change instead of each item's index rewritten on every merge).
  void unlist(std::uint32_t k)
  {
    item const key{state_[k].per_byte, static_cast<double>(g_.gaps[k].bytes), k};
    auto it = std::lower_bound(items_.begin(), items_.end(), key, less);
    while (it->gap != k) { ++it; }  // among the items of the same key
    it->gap      = none_;
    first_stale_ = std::min(first_stale_, static_cast<std::uint32_t>(it - items_.begin()));
  }

  /// items_ less the stale ones, merged with fresh_, and R's cumulative sums over them, redone
  /// only from the first item that changes (the sums before it are the same).
  void merge(rerun_curve& curve)
  {
    std::sort(fresh_.begin(), fresh_.end(), less);
    std::size_t start = std::min<std::size_t>(first_stale_, items_.size());
    if (!fresh_.empty()) {
      start = std::min(start, static_cast<std::size_t>(
                                  std::lower_bound(items_.begin(), items_.end(), fresh_[0], less) -
                                  items_.begin()));
    }
    first_stale_ = none_;
    merged_.assign(items_.begin() + static_cast<std::ptrdiff_t>(start), items_.end());
    items_.resize(start);
    std::size_t f = 0;
    for (auto const& x : merged_) {
      if (x.gap == none_) { continue; }
      for (; f < fresh_.size() && less(fresh_[f], x); ++f) { items_.push_back(fresh_[f]); }
      items_.push_back(x);
    }
    items_.insert(items_.end(), fresh_.begin() + static_cast<std::ptrdiff_t>(f), fresh_.end());
    // The sums from `start` on, in the items' order: the same adds as one push at a time.
    curve.bytes.resize(items_.size() + 1);
    curve.seconds.resize(items_.size() + 1);
    double bytes = curve.bytes[start], seconds = curve.seconds[start];
    for (std::size_t j = start; j < items_.size(); ++j) {
      bytes += items_[j].bytes;
      seconds += items_[j].per_byte * items_[j].bytes;
      curve.bytes[j + 1]   = bytes;
      curve.seconds[j + 1] = seconds;
    }
  }

  trace_analysis const& a_;
  bound_gaps const& g_;
  std::vector<double> share_;
  std::vector<std::vector<std::uint32_t>> users_;  ///< per op: the active gaps whose R counts it
  std::vector<gap_state> state_;
  std::vector<event> events_;
  std::size_t next_          = 0;
  std::uint64_t at_          = 0;
  std::uint32_t first_stale_ = none_;  ///< the least index of an item gone since the last update
  std::vector<std::uint32_t> dirty_;
  std::vector<item> items_, fresh_, merged_;
};

/// For each budget b, the largest op_time_bound over the ops whose start step's peak exceeds
/// budgets[b], and floors[b], the ops taken in order (each op's bound starts from the best so
/// far), as one pass per budget would: one pass for all, each op's R built once (it does not
/// depend on the budget) and only when some budget is below the op's peak.
[[nodiscard]] inline std::vector<double> per_op_time_bounds(trace_analysis const& a,
                                                            std::span<std::uint64_t const> budgets,
                                                            double d2h, double h2d, bool recompute,
                                                            bool wrap, std::vector<double> best)
{
  auto const steps = a.memory_steps();
  auto const n     = a.op_count();
  auto const g     = collect_bound_gaps(a, recompute);
  auto const room  = wrap_room_of(a, wrap);
  auto const order = least_first<std::size_t>(budgets);
  rerun_sweep sweep(a, g);
  rerun_curve curve{{0.0}, {0.0}};  // without recompute, R is this point alone at every op
  for (std::size_t i = 0; i < n && !order.empty(); ++i) {
    if (recompute) { sweep.advance_to(i); }
    if (steps[i].live_peak <= budgets[order.front()]) { continue; }
    if (recompute) { sweep.update(curve); }
    double const before = a.op_start(i);
    for (auto const b : order) {
      if (steps[i].live_peak <= budgets[b]) { break; }
      op_window const w{before,
                        a.compute_seconds() - before,
                        static_cast<double>(steps[i].live_peak - budgets[b]),
                        room.head[i],
                        room.tail[i],
                        d2h,
                        h2d};
      best[b] = op_time_bound(w, curve, best[b]);
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Per-storage encodings (time_bound_options::encodings): the same relaxation with each link's
// time counted per storage. Each gap (and each wrap entry) of each storage occupies a link for at
// least its bytes x that link's seconds per byte at the best encoding a schedule may give its
// entry there (link_pools_of): wire bytes / link bytes/s, plus the codec kernel's time per byte
// where it has one (the simulator runs encode then D2H on the D2H engine, H2D then decode on the
// H2D engine; the kernels' launch and the links' latency are per entry, left out). So the swapped
// bytes a link window of w seconds can hold are at most carried(w): the pool's bytes of the
// fewest seconds per byte first (the most removable bytes per link second first), a concave,
// piecewise linear function of w. At op i with its peak at tau (see the file comment):
//   non-wrap and tail entries use the D2H engine before tau:  X + Tl <= carried_d2h_{N+Tl}(tau)
//   head entries use the H2D engine after tau:                Hd <= carried_h2d_{Hd}(T - tau)
//   and D2H after tau, or before it beside the others (an offload_at before its prefetch):
//     X + Tl + Hd <= carried_d2h_{all}(tau) + min(carried_d2h_{Hd}, carried_h2d_{Hd})(T - tau)
//   non-wrap and head entries use the H2D engine after tau:   X + Hd <= carried_h2d_{N+Hd}(T - tau)
//   tail entries use both engines before tau:  Tl <= min(carried_d2h_{Tl}, carried_h2d_{Tl})(tau)
//   every entry uses each engine once:  X + Hd + Tl <= min(carried_d2h, carried_h2d)_{all}(T)
// so the swapped bytes are at most the least of these sums, each concave in tau, and the
// re-run bytes at most R^-1(T - tau - C_>=i) as before. A pool's bytes are whole storages
// (wire_bytes rounds up: never fewer wire bytes than bytes / ratio).
// ---------------------------------------------------------------------------------------------

/// What may cross the links at each op, per class of storages alike on the links: each class's
/// seconds per byte on the D2H and on the H2D engine, each engine's classes in order (least
/// seconds per byte first), and the changes of each pool's bytes per class, ordered by op. Pools:
/// 0 the gaps u < i < v, 1 the wrap heads (i < first), 2 the wrap tails (i > last).
struct link_pools {
  struct change {
    std::uint64_t op{};
    std::uint32_t cls{};
    std::uint32_t pool{};
    std::int64_t bytes{};
  };
  std::vector<double> d2h, h2d, ratio;  ///< per class (ratio: the largest its encodings reach)
  std::vector<std::uint32_t> d2h_order, h2d_order;
  std::vector<change> changes;
};

/// A gap's best figures: its seconds per byte on each engine, and the largest ratio of the
/// encodings allowed to it (for the figures that take one ratio for every storage).
struct link_cost {
  double d2h{}, h2d{}, ratio{};
};

/// The pools of `a`'s gaps (and with `wrap`, of its wrappable storages' wrap entries), each at
/// `cost_of(entry)`: the entry a schedule would move there (id, last_use, next_use, bytes; wrap
/// set for a wrap entry), its other fields unset.
template <class CostOf>
[[nodiscard]] link_pools link_pools_of(trace_analysis const& a, bool wrap, CostOf const& cost_of)
{
  link_pools out;
  auto class_of = [&](link_cost const& c) {
    for (std::uint32_t k = 0; k < out.d2h.size(); ++k) {
      if (out.d2h[k] == c.d2h && out.h2d[k] == c.h2d) {
        out.ratio[k] = std::max(out.ratio[k], c.ratio);
        return k;
      }
    }
    out.d2h.push_back(c.d2h);
    out.h2d.push_back(c.h2d);
    out.ratio.push_back(c.ratio);
    return static_cast<std::uint32_t>(out.d2h.size() - 1);
  };
  for (auto const& s : a.lifetimes().storages) {
    auto const b = static_cast<std::int64_t>(s.bytes);
    for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
      auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
      if (v < u + 2) { continue; }
      swap_entry e{};
      e.id         = s.id;
      e.last_use   = u;
      e.next_use   = v;
      e.bytes      = s.bytes;
      auto const c = class_of(cost_of(e));
      out.changes.push_back({u + 1, c, 0, b});
      out.changes.push_back({v, c, 0, -b});
    }
    if (wrap && may_wrap(a, s.id)) {
      swap_entry e{};
      e.id         = s.id;
      e.last_use   = s.accesses.back().op;
      e.next_use   = s.accesses.front().op;
      e.bytes      = s.bytes;
      e.wrap       = true;
      auto const c = class_of(cost_of(e));
      out.changes.push_back({0, c, 1, b});
      out.changes.push_back({s.accesses.front().op, c, 1, -b});
      out.changes.push_back({s.accesses.back().op + 1, c, 2, b});
    }
  }
  out.d2h_order = least_first<std::uint32_t>(std::span<double const>(out.d2h));
  out.h2d_order = least_first<std::uint32_t>(std::span<double const>(out.h2d));
  std::stable_sort(
      out.changes.begin(), out.changes.end(),
      [](link_pools::change const& x, link_pools::change const& y) { return x.op < y.op; });
  return out;
}

/// The pools at one op, bytes per class: the gaps and tails (which use the D2H engine before the
/// peak), the wrap heads, the gaps and heads (the H2D engine after it), the tails, all.
struct op_pools {
  std::vector<double> gaps_tails, heads, gaps_heads, tails, all;
};

/// The most bytes of `bytes` (per class) that one engine can move in `seconds`, at `cost`
/// seconds per byte per class, the classes in `order` (least seconds per byte first), the last
/// one in part.
[[nodiscard]] inline double carried(std::span<double const> cost,
                                    std::span<std::uint32_t const> order,
                                    std::span<double const> bytes, double seconds)
{
  double moved = 0;
  for (auto const c : order) {
    double const need = bytes[c] * cost[c];
    if (seconds < need) { return moved + seconds / cost[c]; }
    moved += bytes[c];
    seconds -= need;
  }
  return moved;
}

/// One op's figures for the encoded relaxation: compute before and from it, its excess.
struct op_window_enc {
  double before{}, after{}, excess{};
};

/// The most bytes away at op i for an iteration of `t` seconds with op i's peak at `tau`, tau in
/// [C_<i, t - C_>=i] (as coverage_at).
[[nodiscard]] inline double coverage_enc(op_window_enc const& w, link_pools const& lp,
                                         op_pools const& p, rerun_curve const& r, double t,
                                         double tau)
{
  auto d = [&](std::vector<double> const& bytes, double seconds) {
    return carried(lp.d2h, lp.d2h_order, bytes, seconds);
  };
  auto h = [&](std::vector<double> const& bytes, double seconds) {
    return carried(lp.h2d, lp.h2d_order, bytes, seconds);
  };
  double const rerun = r.bytes_within(std::max(0.0, t - tau - w.after));
  // A head entry's offload may be issued before tau (offload_at is not bound to follow its
  // prefetch: its D2H then runs before the storage is back, as the simulator times it), so
  // either its D2H is left out (first) or the part before tau shares the window with the
  // others' (first_all).
  double const late      = std::min(d(p.heads, t - tau), h(p.heads, t - tau));
  double const first     = d(p.gaps_tails, tau) + h(p.heads, t - tau);
  double const first_all = d(p.all, tau) + late;
  double const second    = h(p.gaps_heads, t - tau) + std::min(d(p.tails, tau), h(p.tails, tau));
  return rerun + std::min({first, first_all, second, d(p.all, t), h(p.all, t)});
}

/// Whether some tau lets `t` cover op w's excess. Coverage is concave in tau (sums and minima of
/// concave functions), so its maximum over [C_<i, t - C_>=i] is found by golden-section search;
/// a maximum within 1e-12 of the excess counts as covering, so that rounding can only make the
/// bound lower.
[[nodiscard]] inline bool feasible_enc(op_window_enc const& w, link_pools const& lp,
                                       op_pools const& p, rerun_curve const& r, double t)
{
  double lo = w.before, hi = t - w.after;
  if (hi < lo) { return false; }
  double const need = w.excess * (1 - 1e-12);
  auto f            = [&, a = lo, b = hi](double tau) {
    return coverage_enc(w, lp, p, r, t, std::clamp(tau, a, b));
  };
  if (f(lo) >= need || f(hi) >= need) { return true; }
  double const g = 0.5 * (std::sqrt(5.0) - 1);  // 0.618...
  double c = hi - g * (hi - lo), d = lo + g * (hi - lo);
  double fc = f(c), fd = f(d);
  for (int k = 0; k < 200; ++k) {
    if (fc >= need || fd >= need) { return true; }
    if (!(hi - lo > 1e-15 * hi)) { break; }
    if (fc < fd) {
      lo = c;
      c  = d;
      fc = fd;
      d  = lo + g * (hi - lo);
      fd = f(d);
    } else {
      hi = d;
      d  = c;
      fd = fc;
      c  = hi - g * (hi - lo);
      fc = f(c);
    }
  }
  return false;
}

/// op_time_bound for the encoded relaxation.
[[nodiscard]] inline double op_time_bound_enc(op_window_enc const& w, link_pools const& lp,
                                              op_pools const& p, rerun_curve const& r, double floor)
{
  if (feasible_enc(w, lp, p, r, floor)) { return floor; }
  // Swapping all of the excess at the dearest class, each engine beside its half of the compute.
  double const dd = *std::max_element(lp.d2h.begin(), lp.d2h.end());
  double const hh = *std::max_element(lp.h2d.begin(), lp.h2d.end());
  double hi = std::max(floor, std::max(w.before, w.excess * dd) + std::max(w.after, w.excess * hh));
  for (int k = 0; k < 64 && !feasible_enc(w, lp, p, r, hi); ++k) { hi *= 2; }
  double lo = floor;
  for (int k = 0; k < 100 && hi - lo > 1e-13 * hi; ++k) {
    double const mid                           = lo + (hi - lo) / 2;
    (feasible_enc(w, lp, p, r, mid) ? hi : lo) = mid;
  }
  return lo;
}

/// Brings `bytes` (per pool and class, pool-major) to op `i`, applying `lp.changes[next...]` up
/// to op i.
inline void advance_pools(link_pools const& lp, std::uint64_t i, std::size_t& next,
                          std::vector<std::int64_t>& bytes)
{
  auto const k = lp.d2h.size();
  for (; next < lp.changes.size() && lp.changes[next].op <= i; ++next) {
    auto const& c = lp.changes[next];
    bytes[c.pool * k + c.cls] += c.bytes;
  }
}

/// The pools at the current op from `bytes` (advance_pools).
inline void pools_at(std::size_t k, std::vector<std::int64_t> const& bytes, op_pools& p)
{
  for (auto* v : {&p.gaps_tails, &p.heads, &p.gaps_heads, &p.tails, &p.all}) { v->resize(k); }
  for (std::size_t c = 0; c < k; ++c) {
    auto const g = bytes[c], h = bytes[k + c], t = bytes[2 * k + c];
    p.gaps_tails[c] = static_cast<double>(g + t);
    p.heads[c]      = static_cast<double>(h);
    p.gaps_heads[c] = static_cast<double>(g + h);
    p.tails[c]      = static_cast<double>(t);
    p.all[c]        = static_cast<double>(g + h + t);
  }
}

/// per_op_time_bounds with per-storage encodings (the pools `lp`, link_pools_of with the same
/// `wrap`): for each budget the largest op_time_bound_enc over the ops over it, and best[b].
[[nodiscard]] inline std::vector<double> per_op_time_bounds_enc(
    trace_analysis const& a, std::span<std::uint64_t const> budgets, link_pools const& lp,
    bool recompute, std::vector<double> best)
{
  auto const steps = a.memory_steps();
  auto const n     = a.op_count();
  auto const g     = collect_bound_gaps(a, recompute);
  auto const order = least_first<std::size_t>(budgets);
  rerun_sweep sweep(a, g);
  rerun_curve curve{{0.0}, {0.0}};
  std::vector<std::int64_t> bytes(3 * lp.d2h.size(), 0);
  std::size_t next = 0;
  op_pools pools;
  for (std::size_t i = 0; i < n && !order.empty(); ++i) {
    if (recompute) { sweep.advance_to(i); }
    advance_pools(lp, i, next, bytes);
    if (steps[i].live_peak <= budgets[order.front()]) { continue; }
    if (recompute) { sweep.update(curve); }
    pools_at(lp.d2h.size(), bytes, pools);
    double const before = a.op_start(i);
    for (auto const b : order) {
      if (steps[i].live_peak <= budgets[b]) { break; }
      op_window_enc const w{before, a.compute_seconds() - before,
                            static_cast<double>(steps[i].live_peak - budgets[b])};
      best[b] = op_time_bound_enc(w, lp, pools, curve, best[b]);
    }
  }
  return best;
}

}  // namespace stash::detail
