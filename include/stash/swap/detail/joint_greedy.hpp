/**
 * @file joint_greedy.hpp
 * @brief Internal: `search`'s constructive step, a Capuchin-like greedy that chooses per gap
 * between swapping and recomputing by memory saved per second of overhead.
 *
 * Candidates are every gap (consecutive accesses u < v with an op between) of every storage as a
 * swap (offload issued right after u, prefetch as late as its transfer allows), and of every
 * activation or temporary whose writers may be re-run as a recompute right before v (or, when a
 * read of the re-runs is gone by v and cannot be rebuilt, before the last op that still holds
 * it: latest_rerun). Starting
 * from given swap and recompute entries (a checkpoint's, a swap plan's, or none), while the
 * planned bytes (schedule.hpp's curve, with each re-run's transient bytes) exceed the target,
 * it takes the candidate with the largest benefit / cost:
 *  - benefit: the excess it removes, sum over the events it keeps the storage away of
 *    min(bytes, excess there) (what counts is the overflow it covers, not its length);
 *  - cost of a recompute: its re-run time x (1 + bytes it pulls back / bytes), as DTR;
 *  - cost of a swap: `swap_weight` x its transfer time (a hidden transfer still loads the link),
 *    plus the part of its round trip the gap cannot hide, plus the part of the link time beyond
 *    what the iteration's compute can hide (summed over the swaps taken so far). With
 *    greedy_variant::link_slots instead: `swap_weight` x its transfer time, each transfer placed
 *    where its copy engine is still free (link_line.hpp; a swap with no such room in its gap is
 *    not a candidate), which sets the window it is away over.
 * Benefits only shrink as the excess does, so the choice is a lazy greedy over a heap (a
 * candidate is re-scored when it reaches the top). Then every entry, costliest first, is dropped
 * when the planned peak stays within the target (the greedy's early picks are often made
 * redundant by later ones). Deterministic: ties go to the lower candidate index. reinsert() is
 * the local search's insert-and-prune neighbourhood over the same candidates and pruning.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/clamped_sums.hpp>
#include <stash/swap/detail/curve_tree.hpp>
#include <stash/swap/detail/link_line.hpp>
#include <stash/swap/detail/range_tree.hpp>
#include <stash/swap/detail/recompute_set.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace stash::detail {

/// How one greedy construction weighs its choices.
struct greedy_variant {
  double target_share;  // plan to target_share x budget (< 1: a schedule for a tighter budget)
  double swap_weight;   // see the file comment; negative: no swaps
  bool recompute;       // recompute candidates allowed
  // Swaps only where the link can hide them: each offload and prefetch is placed where its copy
  // engine is still free (link_line.hpp), the prefetch before the next use on the nominal
  // timeline, so later-chosen swaps of a crowded stretch come back earlier (they hold memory)
  // instead of queueing behind the others (they stall). Otherwise each swap is placed alone.
  bool link_slots = false;
};

/// Swap and recompute entries a construction chose.
struct greedy_plan {
  std::vector<swap_entry> swaps;
  std::vector<recompute_entry> recomputes;
};

/// The candidates of one trace (built once, reused by every variant).
class joint_greedy {
 public:
  explicit joint_greedy(trace_analysis const& a) : a_(a), live_(planned_device_curve(a, {}, {}))
  {
    enumerate();
  }

  /// The entries of `start` plus those the greedy adds to bring the planned peak within
  /// `budget` x var.target_share (as close as it gets when nothing is left to add).
  /// Gaps in `no_swap` (storage, last use) are not swapped (a simulation saw them stall), gaps
  /// in `no_recompute` not recomputed (an exchange move took that entry out).
  [[nodiscard]] greedy_plan build(
      std::uint64_t budget, greedy_variant const& var, greedy_plan const& start,
      std::vector<std::pair<storage_id, std::uint64_t>> const& no_swap      = {},
      std::vector<std::pair<storage_id, std::uint64_t>> const& no_recompute = {}) const
  {
    auto const target = static_cast<std::uint64_t>(static_cast<double>(budget) * var.target_share);
    auto out          = construct(target, var, start, no_swap, no_recompute, {});
    prune(out, target);
    return out;
  }

  /// The fit repair of a construction: `missed`, what build(budget, var, start) returned, is
  /// over the target (pruning left it as constructed) where re-runs hold storages on the device
  /// that could otherwise leave (pinning_reruns), and, with `batches`, where a re-run's own batch
  /// is over (over_batches): it is constructed again from `start` with those re-runs banned (a
  /// start's too), up to max_repairs times, while the bans change the plan. Returns the one with
  /// the least excess over the target, pruned (`missed` when no rebuild does better).
  [[nodiscard]] greedy_plan repair(std::uint64_t budget, greedy_variant const& var,
                                   greedy_plan const& start, greedy_plan missed,
                                   bool batches = false) const
  {
    auto const target = static_cast<std::uint64_t>(static_cast<double>(budget) * var.target_share);
    std::set<std::size_t> banned;  // recompute gaps taken out
    auto ex      = excess_of(missed.swaps, missed.recomputes, target);
    auto least   = *std::max_element(ex.begin(), ex.end());
    auto kept    = missed;
    auto current = std::move(missed);
    for (std::size_t attempt = 0; least > 0 && attempt < max_repairs; ++attempt) {
      if (banned.size() >= max_banned ||
          !pinning_reruns(current, ex, banned, batches ? target : 0)) {
        break;
      }
      auto next = construct(target, var, start, {}, {}, banned);
      if (next.swaps == current.swaps && next.recomputes == current.recomputes) { break; }
      current          = std::move(next);
      ex               = excess_of(current.swaps, current.recomputes, target);
      auto const worst = *std::max_element(ex.begin(), ex.end());
      if (worst < least) {
        least = worst;
        kept  = current;
      }
    }
    prune(kept, target);
    return kept;
  }

  /// Rebuilds a plan left over the target at most this many times (pinning_reruns), and bans
  /// at most this many re-runs in all: each rebuild is a full construction.
  static constexpr std::size_t max_repairs = 3;
  static constexpr std::size_t max_banned  = 64;

  /// The chain of recompute entry `e` (recompute_chain_of) when a candidate's is that one (its
  /// gap, re-run where the candidate is), else nullptr: callers that check plans entry by entry
  /// (the local search's moves) skip recomputing it.
  [[nodiscard]] recompute_chain const* cached_chain(recompute_entry const& e) const
  {
    auto const it = gap_of_.find({e.id, e.last_use});
    if (it != gap_of_.end() && rerun_of_[it->second] < cands_.size()) {
      auto const& c = cands_[rerun_of_[it->second]];
      if (c.prefetch_at == e.at) { return &c.chain; }
    }
    return nullptr;
  }

  /// set.try_add(e), with e's chain cached where it is (cached_chain).
  bool add_to(recompute_set& set, recompute_entry const& e) const
  {
    auto const* c = cached_chain(e);
    return c ? set.try_add(e, *c) : set.try_add(e);
  }

  /// The re-runs' time of `e` (its chain's seconds, cached where cached_chain has it).
  [[nodiscard]] double seconds_of(recompute_entry const& e) const
  {
    auto const* c = cached_chain(e);
    return c ? c->seconds : recompute_chain_of(a_, e.id, e.last_use, e.at).seconds;
  }

  /// The planned peak of `p` (schedule.hpp's planned_peak, with cached chains).
  [[nodiscard]] std::uint64_t peak(greedy_plan const& p) const
  {
    auto const ex = excess_of(p.swaps, p.recomputes, 0);
    return ex.empty() ? 0 : *std::max_element(ex.begin(), ex.end());
  }

  /// The re-runs' total time in `p` (the compute stream's extra work; swaps cost none here).
  [[nodiscard]] double recompute_seconds(greedy_plan const& p) const
  {
    double sum = 0;
    for (auto const& e : p.recomputes) { sum += seconds_of(e); }
    return sum;
  }

  /// Insert and prune, a neighbourhood the greedy's moves do not reach: one recompute candidate
  /// not in `p` (cheapest per byte first, and cheaper per byte than `p`'s dearest re-run) is
  /// added, then `p`'s other recomputes are dropped, dearest per byte first, while the planned
  /// peak stays within `budget`; kept when the re-runs' total time drops. One large cheap
  /// re-run can so replace several small dear ones that the greedy took once the excess left was
  /// too narrow for it (its benefit counts only the excess it covers). The swaps stay as they
  /// are. Rounds over the candidates until none helps or `steps` trials (one prune each) are
  /// spent. Deterministic.
  [[nodiscard]] greedy_plan reinsert(std::uint64_t budget, greedy_plan p, std::size_t steps) const
  {
    double cur = recompute_seconds(p);
    for (bool better = true; better && steps > 0;) {
      better           = false;
      double const cap = dearest_rate(p);
      recompute_set set(a_, p.swaps);
      for (auto const& e : p.recomputes) {
        if (!set.try_add(e)) { return p; }
      }
      auto over = over_tree(p, budget);
      for (auto const k : by_rate_) {
        auto const& c = cands_[k];
        if (steps == 0 || c.seconds >= cap * static_cast<double>(c.bytes)) { break; }
        if (!any_droppable(over, p, c)) { continue; }  // the prune would drop nothing
        auto q = with_recompute(p, set, c);
        if (!q) { continue; }
        --steps;
        auto const n = q->recomputes.size();
        prune_dearest(*q, budget, c.id, c.u);
        double const now = recompute_seconds(*q);
        if (q->recomputes.size() < n && now < cur - 1e-9) {
          p      = std::move(*q);
          cur    = now;
          better = true;
          break;  // a new plan: its set and its dearest rate again
        }
      }
    }
    return p;
  }

 private:
  // Prunes q's recomputes (not its swaps) dearest per byte first, but the entry of gap
  // (id, u).
  void prune_dearest(greedy_plan& q, std::uint64_t budget, storage_id id, std::uint64_t u) const
  {
    std::vector<std::pair<double, std::size_t>> order;  // (-seconds per byte, index)
    for (std::size_t j = 0; j < q.recomputes.size(); ++j) {
      auto const& e = q.recomputes[j];
      if (e.id == id && e.last_use == u) { continue; }
      order.emplace_back(-seconds_of(e) / static_cast<double>(std::max<std::uint64_t>(1, e.bytes)),
                         q.swaps.size() + j);
    }
    std::stable_sort(order.begin(), order.end());
    prune_in_order(q, budget, order);
  }

  struct candidate {
    storage_id id{};
    std::uint64_t u{}, v{}, bytes{};
    std::uint64_t after{}, last{};  // away over events (after, last]
    bool swap{};
    double seconds{};             // recompute: the re-run; swap: the slower direction's transfer
    double exposed{};             // swap: the round trip the gap cannot hide
    std::uint64_t prefetch_at{};  // swap: its prefetch op; recompute: the op its re-runs precede
    std::size_t gap{};            // index of its (storage, u) gap: one entry per gap
    recompute_chain chain;
    double off_s{}, pre_s{};  // swap: each direction's transfer
  };

  struct state {
    state(trace_analysis const& a, std::vector<swap_entry> const& s, std::size_t gaps)
        : swaps(s), set(a, s), gap_taken(gaps, 0), swaps_of(a.trace().storages().size())
    {
      for (std::size_t k = 0; k < swaps.size(); ++k) { swaps_of[swaps[k].id].push_back(k); }
    }
    std::vector<swap_entry> swaps;
    std::vector<swap_entry> eff;  // swaps as the greedy counts them (effective), for the curve
    recompute_set set;
    std::vector<char> gap_taken;
    std::vector<std::vector<std::size_t>> swaps_of;  // per storage: its entries in `swaps`
    std::set<std::size_t> no_swap;                   // gaps not to swap
    std::set<std::size_t> no_recompute;              // gaps not to recompute
    double link_s{0};
    link_line d2h, h2d;  // greedy_variant::link_slots: the engines' reserved intervals
  };

  // A swap candidate as it would be added now: its entry, the events it is away over
  // (after, last], and (link_slots) the starts of its two transfers.
  struct placed_swap {
    swap_entry e;
    std::uint64_t after{}, last{};
    double off_start{}, pre_start{};
  };

  // The transient bytes of the recompute candidate of gap (id, u) (0 when there is none).
  [[nodiscard]] std::uint64_t transient_of(storage_id id, std::uint64_t u) const
  {
    auto const& list = transient_[id];
    auto const it = std::lower_bound(list.begin(), list.end(), std::make_pair(u, std::uint64_t{0}));
    return it != list.end() && it->first == u ? it->second : 0;
  }

  void enumerate()
  {
    transient_.resize(a_.trace().storages().size());
    auto const& model = a_.model();
    auto const& ev    = a_.ops().event;
    for (auto const& s : a_.lifetimes().storages) {
      if (s.bytes == 0) { continue; }
      for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
        auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
        if (v < u + 2) { continue; }
        auto const gap     = gap_count_++;
        gap_of_[{s.id, u}] = gap;
        candidate sw{s.id, u, v, s.bytes, ev[u], 0, true, 0, 0, 0, gap, {}};
        double const off = model.offload_time(s.bytes, swap_encoding::configured);
        double const pre = model.prefetch_time(s.bytes, swap_encoding::configured);
        sw.seconds       = std::max(off, pre);
        sw.off_s         = off;
        sw.pre_s         = pre;
        sw.exposed       = std::max(0.0, off + pre - (a_.op_start(v) - a_.op_start(u + 1)));
        sw.prefetch_at   = latest_prefetch(u + 1, v, pre);
        sw.last          = ev[sw.prefetch_at - 1];
        sw.after =
            ev[effective(swap_entry{s.id, u, v, u + 1, sw.prefetch_at, s.bytes}).offload_at - 1];
        cands_.push_back(std::move(sw));
        if (s.kind != storage_kind::act && s.kind != storage_kind::temp) { continue; }
        if (s.accesses[j + 1].write && !s.accesses[j + 1].read) { continue; }
        auto const at = latest_rerun(s.id, u, v);
        if (!at) { continue; }
        auto chain = recompute_chain_of(a_, s.id, u, *at);
        candidate rc{s.id,          u, v,   s.bytes, ev[u], ev[*at - 1], false,
                     chain.seconds, 0, *at, gap,     {}};
        transient_[s.id].emplace_back(u, chain.transient_bytes);
        rc.chain = std::move(chain);
        cands_.push_back(std::move(rc));
      }
    }
    rerun_of_.assign(gap_count_, cands_.size());
    for (std::size_t k = 0; k < cands_.size(); ++k) {
      if (!cands_[k].swap) {
        by_rate_.push_back(k);
        rerun_of_[cands_[k].gap] = k;
      }
    }
    std::stable_sort(by_rate_.begin(), by_rate_.end(), [&](std::size_t x, std::size_t y) {
      return cands_[x].seconds * static_cast<double>(cands_[y].bytes) <
             cands_[y].seconds * static_cast<double>(cands_[x].bytes);
    });
  }

  // The latest op `at` in (u, v] before which storage `id`, dropped after op u, can be
  // rematerialised: v itself, or, when a storage its re-runs read is freed or overwritten before
  // v (a BatchNorm output read by the activation after it, freed by its own backward), the last
  // op at which every read still holds the value the re-runs need (recompute_chain.hpp). Such a
  // storage comes back a few ops early instead of staying resident across the whole gap.
  [[nodiscard]] std::optional<std::uint64_t> latest_rerun(storage_id id, std::uint64_t u,
                                                          std::uint64_t v) const
  {
    if (recompute_chain_of(a_, id, u, v).valid()) { return v; }
    auto const loose = recompute_chain_of(a_, id, u, u + 1);
    if (!loose.valid()) { return std::nullopt; }
    auto const& life = a_.lifetimes().storages;
    auto const& ev   = a_.ops().event;
    auto at          = v;
    for (auto const w : loose.ops) {
      for (auto const r : a_.trace().ops()[w].reads) {
        if (r == id) { continue; }
        // Live at `at`: its end event comes after op at's event.
        auto const live_end = std::lower_bound(ev.begin(), ev.end(), life[r].end_event);
        at = std::min<std::uint64_t>(at, static_cast<std::uint64_t>(live_end - ev.begin()) - 1);
        for (auto const& x : life[r].accesses) {
          if (x.write && x.op > w) {
            at = std::min(at, x.op);
            break;
          }
        }
      }
    }
    if (at <= u || !recompute_chain_of(a_, id, u, at).valid()) { return std::nullopt; }
    return at;
  }

  // The latest op p in (lo, v] whose nominal start leaves `seconds` before op v starts.
  [[nodiscard]] std::uint64_t latest_prefetch(std::uint64_t lo, std::uint64_t v,
                                              double seconds) const
  {
    auto p = v;
    while (p > lo + 1 && a_.op_start(v) - a_.op_start(p) < seconds) { --p; }
    return p;
  }

  // `e` as the greedy counts it: away only once its offload has crossed the link (the op from
  // which it is, nominally), as the simulator releases it; the planned curve (schedule.hpp)
  // counts it away from its last use, so a plan within the target here is within it there too.
  [[nodiscard]] swap_entry effective(swap_entry e) const
  {
    auto const done = a_.op_start(e.offload_at) + a_.model().offload_time(e.bytes, e.encoding);
    auto p          = e.offload_at;
    while (p + 1 < e.prefetch_at && a_.op_start(p) < done) { ++p; }
    e.offload_at = std::max(e.offload_at, std::min(p, e.prefetch_at - 1));
    return e;
  }

  [[nodiscard]] static std::optional<placed_swap> nominal(candidate const& c)
  {
    return placed_swap{swap_entry{c.id, c.u, c.v, c.u + 1, c.prefetch_at, c.bytes}, c.after, c.last,
                       0, 0};
  }

  // The first op in [lo, hi) whose nominal start is at or after `t` (hi when none is).
  [[nodiscard]] std::uint64_t first_op_from(double t, std::uint64_t lo, std::uint64_t hi) const
  {
    while (lo < hi) {
      auto const mid = lo + (hi - lo) / 2;
      if (a_.op_start(mid) < t) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  // Swap candidate c with its offload issued at the first op from which the D2H engine is free
  // for it, and its prefetch at the last op whose start leaves the H2D engine free for it until
  // op v starts, both after what is reserved; nullopt when the gap has no such room.
  [[nodiscard]] std::optional<placed_swap> place(state const& st, candidate const& c) const
  {
    double const deadline = a_.op_start(c.v);
    auto q                = c.u + 1;
    double s              = a_.op_start(q);
    for (int tries = 0;; ++tries) {  // the offload starts at an op's start, into free room
      auto const fit = st.d2h.earliest_fit(s, c.off_s, deadline - c.pre_s - c.off_s);
      if (!fit || tries == 4) { return std::nullopt; }
      q = first_op_from(*fit, c.u + 1, c.v);
      if (q >= c.v) { return std::nullopt; }
      if (a_.op_start(q) == *fit) { break; }
      s = a_.op_start(q);
    }
    s             = a_.op_start(q);
    auto const ps = st.h2d.latest_fit(deadline, c.pre_s, s + c.off_s);
    if (!ps) { return std::nullopt; }
    auto const p = first_op_from(std::nextafter(*ps, std::numeric_limits<double>::infinity()),
                                 q + 1, c.v + 1) -
                   1;
    if (p <= q) { return std::nullopt; }
    swap_entry const e{c.id, c.u, c.v, q, p, c.bytes};
    auto const w = planned_off_window(effective(e), a_.ops());
    if (w.after >= w.last) { return std::nullopt; }
    return placed_swap{e, w.after, w.last, s, *ps};
  }

  // An entry given at the start, reserved where the engines run it (link_slots): each copy
  // from its issue op on, behind what is already reserved (one copy at a time, as simulated).
  void reserve_nominal(state& st, swap_entry const& e) const
  {
    auto const& m    = a_.model();
    double const inf = std::numeric_limits<double>::infinity();
    double const off = m.offload_time(e.bytes, e.encoding);
    double const pre = m.prefetch_time(e.bytes, e.encoding);
    auto const s =
        st.d2h.earliest_fit(a_.op_start(std::min(e.offload_at, a_.op_count())), off, inf);
    // A wrap's prefetch (the head of the iteration) comes before its offload (the tail).
    auto const after_off = s && !e.wrap ? *s + off : 0.0;
    auto const p = st.h2d.earliest_fit(std::max(a_.op_start(e.prefetch_at), after_off), pre, inf);
    if (s) { st.d2h.reserve(*s, *s + off); }
    if (p) { st.h2d.reserve(*p, *p + pre); }
  }

  // The effective curve of p less `target` at each event (negative: room under it).
  [[nodiscard]] range_tree over_tree(greedy_plan const& p, std::uint64_t target) const
  {
    auto const curve = effective_curve(p.swaps, p.recomputes);
    std::vector<std::int64_t> over(curve.size());
    for (std::size_t i = 0; i < curve.size(); ++i) {
      over[i] = static_cast<std::int64_t>(curve[i]) - static_cast<std::int64_t>(target);
    }
    return range_tree(over);
  }

  // Whether, with recompute candidate c added to p (`over`: p's over_tree), some other
  // recompute of p passes prune's quick test. Optimistic (c's window as enumerated, no pulls
  // or transients, which only shrink the room): when it says no, prune_dearest drops nothing.
  [[nodiscard]] bool any_droppable(range_tree& over, greedy_plan const& p, candidate const& c) const
  {
    auto const& ev = a_.ops().event;
    auto const by  = static_cast<std::int64_t>(c.bytes);
    over.add(c.after + 1, ev[c.prefetch_at - 1] + 1, -by);
    bool found = false;
    for (auto const& e : p.recomputes) {
      auto const after = ev[e.last_use], last = ev[e.at - 1];
      if (after >= last || over.max(after + 1, last + 1) <= -static_cast<std::int64_t>(e.bytes)) {
        found = true;
        break;
      }
    }
    over.add(c.after + 1, ev[c.prefetch_at - 1] + 1, by);
    return found;
  }

  // The highest re-run seconds per byte among p's recomputes (0 when it has none).
  [[nodiscard]] double dearest_rate(greedy_plan const& p) const
  {
    double rate = 0;
    for (auto const& e : p.recomputes) {
      rate =
          std::max(rate, seconds_of(e) / static_cast<double>(std::max<std::uint64_t>(1, e.bytes)));
    }
    return rate;
  }

  // `p` (whose recomputes are those of `set`) with recompute candidate c added after them (so
  // its batch pulls what it reads), or nullopt when it cannot be.
  [[nodiscard]] static std::optional<greedy_plan> with_recompute(greedy_plan const& p,
                                                                 recompute_set set,
                                                                 candidate const& c)
  {
    recompute_entry e{c.id, c.u, c.v, c.prefetch_at, c.bytes};
    if (auto const d = set.reader_deadline(e)) { e.at = std::min(e.at, *d); }
    if (!(e.at == c.prefetch_at ? set.try_add(e, c.chain) : set.try_add(e))) {
      return std::nullopt;
    }
    return greedy_plan{p.swaps, set.entries()};
  }

  // One construction: the entries of `start` (less the re-runs in `banned`), then the greedy.
  [[nodiscard]] greedy_plan construct(
      std::uint64_t target, greedy_variant const& var, greedy_plan const& start,
      std::vector<std::pair<storage_id, std::uint64_t>> const& no_swap,
      std::vector<std::pair<storage_id, std::uint64_t>> const& no_recompute,
      std::set<std::size_t> const& banned) const
  {
    state st(a_, start.swaps, gap_count_);
    for (auto const& [id, u] : no_swap) {
      auto const it = gap_of_.find({id, u});
      if (it != gap_of_.end()) { st.no_swap.insert(it->second); }
    }
    for (auto const& [id, u] : no_recompute) {
      auto const it = gap_of_.find({id, u});
      if (it != gap_of_.end()) { st.no_recompute.insert(it->second); }
    }
    st.no_recompute.insert(banned.begin(), banned.end());
    for (auto const& e : start.recomputes) {
      auto const it = gap_of_.find({e.id, e.last_use});
      if (it != gap_of_.end() && banned.count(it->second) != 0) { continue; }
      (void)add_to(st.set, e);
    }
    st.eff.reserve(st.swaps.size());
    for (auto const& e : st.swaps) {
      st.eff.push_back(effective(e));
      mark_gap(st, e.id, e.last_use);
      if (var.link_slots) { reserve_nominal(st, e); }
    }
    for (auto const& e : st.set.entries()) { mark_gap(st, e.id, e.last_use); }
    fill(st, target, var);
    return greedy_plan{st.swaps, st.set.entries()};
  }

  // The fit repair. A re-run (recompute entry x, at op x.at) reads storage r inside one of r's
  // gaps (u, v): r must then be on the device from x.at on, and when r has no entry in that gap,
  // over all of it (schedule.hpp: neither a swap nor a drop of r may keep it away across a
  // re-run that reads it). Where the plan is still over the target while r is held so, x's gap
  // is banned from recompute (true when one was): the fill then covers x otherwise (a swap, or
  // a re-run of the gap's other readers), and r becomes free to leave. When r's entry was only
  // pulled into x's batch, x counts only if it runs where it would alone (its own next use or
  // latest_rerun): one placed early was itself pulled by the culprit.
  // A re-run whose own batch is over the target (its storage back, with the reads its chain
  // pulls back and its transients: a large activation rebuilt from another one beside the
  // backward's large temporaries) is banned too when its storage is a good part of that excess:
  // the fill then swaps it (a long gap hides its transfers) or covers it otherwise, and what it
  // read may stay away (over_batches). Only with a `target` (0: pins only).
  bool pinning_reruns(greedy_plan const& p, std::vector<std::uint64_t> const& ex,
                      std::set<std::size_t>& banned, std::uint64_t target) const
  {
    auto const pins = pins_of(p, banned);
    // Held bytes per event, each storage once (its held runs merged).
    std::vector<std::int64_t> held(ex.size() + 1, 0);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;
    for (std::size_t j = 0; j < pins.size();) {
      auto k = j;
      runs.clear();
      for (; k < pins.size() && pins[k].r == pins[j].r; ++k) {
        runs.emplace_back(pins[k].from, pins[k].through);
      }
      std::sort(runs.begin(), runs.end());
      auto const bytes = static_cast<std::int64_t>(a_.lifetimes().storages[pins[j].r].bytes);
      for (std::size_t q = 0; q < runs.size();) {
        auto [from, through] = runs[q];
        for (++q; q < runs.size() && runs[q].first <= through + 1; ++q) {
          through = std::max(through, runs[q].second);
        }
        held[from] += bytes;
        held[through + 1] -= bytes;
      }
      j = k;
    }
    // Where what re-runs hold could not cover the excess even if it all left, banning them
    // cannot bring the plan within the target: no repair, unless a batch is over (its rebuild
    // changes what the fill covers elsewhere too).
    auto const over    = target > 0 ? over_batches(p, banned, target) : std::vector<std::size_t>{};
    std::int64_t level = 0;
    for (std::size_t i = 0; i < ex.size(); ++i) {
      level += held[i];
      if (over.empty() && ex[i] > static_cast<std::uint64_t>(level)) { return false; }
    }
    bool added = false;
    for (auto const g : over) { added = banned.insert(g).second || added; }
    for (auto const& h : pins) {
      std::uint64_t most = 0;  // the excess where r is held
      for (auto i = h.from; i <= h.through; ++i) { most = std::max(most, ex[i]); }
      // r leaving would matter there: it covers a good part of the excess.
      if (most == 0 || !eighth_of(a_.lifetimes().storages[h.r].bytes, most)) { continue; }
      added = banned.insert(h.gap).second || added;
    }
    return added;
  }

  // part * 8 >= whole, without the product (a storage near 2^61 bytes would wrap it).
  [[nodiscard]] static constexpr bool eighth_of(std::uint64_t part, std::uint64_t whole) noexcept
  {
    return part >= whole / 8 + (whole % 8 != 0 ? 1 : 0);
  }

  // The gaps of the re-runs of `p` not yet banned whose own run (recompute_run_bytes: the batch
  // back so far, its transients) is over `target` by at most 8x their storage's bytes. Entries
  // of the batch that ran before it and fit are not: they are what it pulled back, and may stay
  // (their own gaps are not at fault).
  [[nodiscard]] std::vector<std::size_t> over_batches(greedy_plan const& p,
                                                      std::set<std::size_t> const& banned,
                                                      std::uint64_t target) const
  {
    std::vector<std::size_t> out;
    auto const curve = effective_curve(p.swaps, p.recomputes);
    std::size_t k    = 0;
    for_each_run(
        p.recomputes, [&](std::uint64_t i) { return curve[i]; },
        [&](std::uint64_t, std::uint64_t run) {
          auto const& x = p.recomputes[k++];
          if (run <= target || !eighth_of(x.bytes, run - target)) { return; }
          auto const gx = gap_of_.find({x.id, x.last_use});
          if (gx != gap_of_.end() && banned.count(gx->second) == 0) { out.push_back(gx->second); }
        });
    return out;
  }

  // One storage held on the device by a re-run (pinning_reruns): r, over events [from, through],
  // by the re-run of gap `gap`.
  struct pin {
    storage_id r{};
    std::uint64_t from{}, through{};
    std::size_t gap{};
  };

  // The pins of `p`'s re-runs not yet banned, by storage.
  [[nodiscard]] std::vector<pin> pins_of(greedy_plan const& p,
                                         std::set<std::size_t> const& banned) const
  {
    auto const& ev   = a_.ops().event;
    auto const& life = a_.lifetimes().storages;
    std::vector<pin> out;
    for (auto const& x : p.recomputes) {
      auto const gx = gap_of_.find({x.id, x.last_use});
      if (gx == gap_of_.end() || banned.count(gx->second) != 0) { continue; }
      auto const own   = rerun_of_[gx->second];
      bool const alone = own < cands_.size() && cands_[own].prefetch_at == x.at;
      auto const reads =
          alone ? cands_[own].chain.reads : recompute_chain_of(a_, x.id, x.last_use, x.at).reads;
      for (auto const r : reads) {
        auto const& acc = life[r].accesses;
        auto const next =
            std::lower_bound(acc.begin(), acc.end(), x.at,
                             [](storage_access const& y, std::uint64_t op) { return y.op < op; });
        if (next == acc.begin() || next == acc.end()) { continue; }
        auto const u = std::prev(next)->op, v = next->op;
        if (v < u + 2) { continue; }
        auto const its =
            std::find_if(p.recomputes.begin(), p.recomputes.end(),
                         [&](recompute_entry const& y) { return y.id == r && y.last_use == u; });
        if (its != p.recomputes.end() && (its->at != x.at || !alone)) { continue; }
        auto const from = its != p.recomputes.end() ? ev[x.at - 1] : ev[u] + 1;
        if (from <= ev[v - 1]) { out.push_back(pin{r, from, ev[v - 1], gx->second}); }
      }
    }
    std::stable_sort(out.begin(), out.end(), [](pin const& x, pin const& y) { return x.r < y.r; });
    return out;
  }

  void mark_gap(state& st, storage_id id, std::uint64_t u) const
  {
    auto const it = gap_of_.find({id, u});
    if (it != gap_of_.end()) { st.gap_taken[it->second] = 1; }
  }

  // Planned bytes over `target` at each event (0 where within), re-runs' transients included.
  [[nodiscard]] std::vector<std::uint64_t> excess_of(std::vector<swap_entry> const& swaps,
                                                     std::vector<recompute_entry> const& rcs,
                                                     std::uint64_t target) const
  {
    return excess_from(effective_curve(swaps, rcs), rcs, target);
  }

  // excess_of given the curve.
  [[nodiscard]] std::vector<std::uint64_t> excess_from(std::vector<std::uint64_t> const& curve,
                                                       std::vector<recompute_entry> const& rcs,
                                                       std::uint64_t target) const
  {
    std::vector<std::uint64_t> ex;
    excess_into(curve, rcs, target, ex);
    return ex;
  }

  // excess_from into `ex`.
  void excess_into(std::vector<std::uint64_t> const& curve, std::vector<recompute_entry> const& rcs,
                   std::uint64_t target, std::vector<std::uint64_t>& ex) const
  {
    ex.resize(curve.size());
    for (std::size_t i = 0; i < curve.size(); ++i) {
      ex[i] = curve[i] > target ? curve[i] - target : 0;
    }
    for_each_run(
        rcs, [&](std::uint64_t i) { return curve[i]; },
        [&](std::uint64_t event, std::uint64_t run) {
          if (run > target) { ex[event] = std::max(ex[event], run - target); }
        });
  }

  // Calls f(event, bytes) for each entry of `rcs` (sorted as recompute_set::entries sorts them):
  // the planned bytes while its re-run runs (recompute_run_bytes, with cached transients), the
  // curve read through curve_at.
  template <class CurveAt, class F>
  void for_each_run(std::vector<recompute_entry> const& rcs, CurveAt&& curve_at, F&& f) const
  {
    std::uint64_t still = 0, level = 0;
    for (std::size_t k = 0; k < rcs.size(); ++k) {
      auto const& e    = rcs[k];
      auto const event = a_.ops().event[e.at - 1];
      if (k == 0 || rcs[k - 1].at != e.at) {
        level = stash::level_after_end_frees(a_, curve_at, e.at - 1);
        still = 0;
        for (auto j = k; j < rcs.size() && rcs[j].at == e.at; ++j) { still += rcs[j].bytes; }
      }
      still -= e.bytes;
      // The level counts the whole batch (planned_device_curve brings it back with the end frees
      // of op at - 1), so still <= level; a curve that does not count it is clamped, not wrapped.
      f(event, (level > still ? level - still : 0) + transient_of(e.id, e.last_use));
    }
  }

  // The entry candidate c would add now: a recompute runs before its next use, or earlier when
  // an entry already planned reads it before then (it must be back for that re-run).
  [[nodiscard]] static recompute_entry entry_of(state const& st, candidate const& c)
  {
    recompute_entry e{c.id, c.u, c.v, c.prefetch_at, c.bytes};
    if (auto const d = st.set.reader_deadline(e)) { e.at = std::min(e.at, *d); }
    return e;
  }

  // The planned curve under range adds, read one event at a time (refresh): a Fenwick tree over
  // its differences, built in one pass (a range tree kept maxima no one asked for, three times
  // the memory to build at every reset).
  class point_curve {
   public:
    void assign(std::vector<std::uint64_t> const& values)
    {
      n_ = values.size();
      t_.resize(n_);
      diff_.resize(n_);
      std::int64_t prev = 0;
      for (std::size_t i = 0; i < n_; ++i) {
        auto const v = static_cast<std::int64_t>(values[i]);
        t_[i]        = v - prev;
        diff_[i]     = v - prev;
        prev         = v;
      }
      for (std::size_t i = 0; i < n_; ++i) {
        auto const up = i | (i + 1);
        if (up < n_) { t_[up] += t_[i]; }
      }
    }
    // Adds d to the values in [l, r).
    void add(std::size_t l, std::size_t r, std::int64_t d)
    {
      r = std::min(r, n_);
      if (l >= r) { return; }
      bump(l, d);
      if (r < n_) { bump(r, -d); }
    }
    [[nodiscard]] std::int64_t at(std::size_t i) const
    {
      std::int64_t sum = 0;
      for (auto k = i + 1; k > 0; k &= k - 1) { sum += t_[k - 1]; }
      return sum;
    }
    // Calls f(i, value) for each i in [l, r), in order: one read, then the differences.
    template <class F>
    void walk(std::size_t l, std::size_t r, F&& f) const
    {
      if (l >= r) { return; }
      auto v = at(l);
      f(l, v);
      for (auto i = l + 1; i < r; ++i) {
        v += diff_[i];
        f(i, v);
      }
    }
    [[nodiscard]] std::size_t size() const noexcept { return n_; }

   private:
    void bump(std::size_t i, std::int64_t d)
    {
      diff_[i] += d;
      for (; i < n_; i |= i + 1) { t_[i] += d; }
    }
    std::size_t n_{0};
    std::vector<std::int64_t> t_;     // t_[i]: the sum of the differences at (i & (i + 1)) .. i
    std::vector<std::int64_t> diff_;  // the differences themselves (value i less value i - 1)
  };

  // The excess per event as the greedy lowers it between recomputations: the events with excess
  // (`over`, ascending) and their excess, each take subtracting its bytes (clamped at 0) over its
  // window; a window's benefit is a query, not a walk over the window (clamped_sums.hpp). Beside
  // it the planned curve, lowered by the same takes, and the events of the re-run batches when
  // the excess was last made exact (refresh).
  struct excess_index {
    std::vector<std::uint64_t> over;
    // Per event e (and one past the last): the events of `over` before e, so that a window's
    // positions in `over` are two reads, not two binary searches per benefit.
    std::vector<std::uint32_t> upto;
    clamped_sums sums;
    point_curve curve;
    std::vector<std::uint64_t> runs_at;
    std::vector<std::uint64_t> values;  // assign's and refresh's scratch
    // Range adds [from, to) of `bytes` that make `curve` the planned curve of the plan as it is
    // now (note_take), since the last reset.
    struct fix {
      std::uint64_t from, to;
      std::int64_t bytes;
    };
    std::vector<fix> fixes;
    // pull_reset's and refresh's scratch: the fixes' ends, the runs of events recomputed (refresh:
    // the batches' events at the last one), the batches' excess, the positions and values set.
    std::vector<std::pair<std::uint64_t, std::int64_t>> ends;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> now;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> dirty;  // refresh's
    std::vector<std::size_t> set_at;
    std::vector<std::uint64_t> set_to;

    // Records a range add of `bytes` over [from, to) as curve.add would apply it.
    void fix_curve(std::uint64_t from, std::uint64_t to, std::int64_t bytes)
    {
      to = std::min<std::uint64_t>(to, values_n);
      if (from < to) { fixes.push_back(fix{from, to, bytes}); }
    }
    std::uint64_t values_n{0};  // the curve's size

    void assign(std::vector<std::uint64_t> const& ex)
    {
      STASH_EXPECTS(
          ex.size() < std::size_t{0xFFFFFFFFU},  // `upto` counts in 4 bytes
          "joint_greedy: " + std::to_string(ex.size()) + " events exceed the limit of 2^32 - 2");
      over.resize(ex.size());  // at most every event, cut to those over below
      values.resize(ex.size());
      upto.resize(ex.size() + 1);
      std::uint32_t m = 0;
      for (std::uint64_t i = 0; i < ex.size(); ++i) {
        upto[i]   = m;
        over[m]   = i;
        values[m] = ex[i];
        m += ex[i] > 0 ? 1 : 0;
      }
      upto[ex.size()] = m;
      over.resize(m);
      values.resize(m);
      sums.assign(values);
    }
    // The excess recomputed: where it differs from the lowered one the values are set
    // (clamped_sums::update); an event newly over assigns them all.
    void refresh(std::vector<std::uint64_t> const& ex)
    {
      std::size_t j = 0;
      for (std::uint64_t i = 0; i < ex.size(); ++i) {
        if (j < over.size() && over[j] == i) {
          ++j;
        } else if (ex[i] > 0) {
          assign(ex);
          return;
        }
      }
      values.resize(over.size());
      for (j = 0; j < over.size(); ++j) { values[j] = ex[over[j]]; }
      sums.update(values);
    }
    // Takes `bytes` off the events in (after, last].
    void lower(std::uint64_t after, std::uint64_t last, std::uint64_t bytes)
    {
      auto const [lo, hi] = range(after, last);
      sums.subtract(lo, hi, bytes);
      curve.add(after + 1, last + 1, -static_cast<std::int64_t>(bytes));
    }
    [[nodiscard]] bool none() const { return over.empty() || sums.all_zero(); }
    // Positions in `over` of the events in (after, last].
    [[nodiscard]] std::pair<std::size_t, std::size_t> range(std::uint64_t after,
                                                            std::uint64_t last) const
    {
      auto const lo = from(after + 1);
      return {lo, std::max(lo, from(last + 1))};
    }
    // The position in `over` of the first event at or after e (over.size() when none is).
    [[nodiscard]] std::size_t from(std::uint64_t e) const
    {
      return upto[std::min<std::uint64_t>(e, upto.size() - 1)];
    }
  };

  // The excess of the plan in `st`, from scratch (O(events)).
  void reset(excess_index& ex, state const& st, std::uint64_t target, bool fresh) const
  {
    auto const rcs = st.set.entries();
    auto& curve    = curve_;
    curve_into(st.eff, rcs, curve);
    auto& exact = exact_;
    excess_into(curve, rcs, target, exact);
    if (fresh) {
      ex.assign(exact);
    } else {
      ex.refresh(exact);
    }
    ex.curve.assign(curve);
    ex.values_n = curve.size();
    ex.fixes.clear();
    ex.runs_at.clear();
    for_each_run(
        rcs, [&](std::uint64_t i) { return curve[i]; },
        [&](std::uint64_t event, std::uint64_t) {
          if (ex.runs_at.empty() || ex.runs_at.back() != event) { ex.runs_at.push_back(event); }
        });
  }

  // The excess made exact again without a pass over the events. The lowered excess is exact
  // wherever it is the curve's (a clamped subtraction of the curve's own decrease; entries only
  // leave the device once taken, and a pull, which brings some back, resets) except at the events
  // of re-run batches, now or at the last refresh: those are recomputed, the curve read from
  // ex.curve, exactly as excess_of does.
  void refresh(excess_index& ex, state const& st, std::uint64_t target) const
  {
    auto const rcs      = st.set.entries();
    auto const curve_at = [&](std::uint64_t i) {
      return static_cast<std::uint64_t>(ex.curve.at(i));
    };
    auto const over_target = [&](std::uint64_t x) { return x > target ? x - target : 0; };
    auto& now              = ex.now;  // (event, exact excess there)
    now.clear();
    for_each_run(rcs, curve_at, [&](std::uint64_t event, std::uint64_t run) {
      if (now.empty() || now.back().first != event) {
        now.emplace_back(event, over_target(curve_at(event)));
      }
      now.back().second = std::max(now.back().second, over_target(run));
    });
    auto& last = ex.spans;  // the batches' events at the last refresh, with their excess now
    last.clear();
    for (auto const event : ex.runs_at) { last.emplace_back(event, over_target(curve_at(event))); }
    // Both ascend (entries() sorts by op): merged, `now` first at a tie (std::merge is stable).
    auto& dirty = ex.dirty;
    dirty.clear();
    std::merge(now.begin(), now.end(), last.begin(), last.end(), std::back_inserter(dirty),
               [](auto const& x, auto const& y) { return x.first < y.first; });
    ex.set_at.clear();
    ex.set_to.clear();
    for (std::size_t k = 0; k < dirty.size(); ++k) {
      if (k > 0 && dirty[k - 1].first == dirty[k].first) { continue; }  // `now` came first
      auto const [event, value] = dirty[k];
      auto const j              = ex.from(event);
      if (j < ex.over.size() && ex.over[j] == event) {
        ex.set_at.push_back(j);
        ex.set_to.push_back(value);
      } else if (value > 0) {
        reset(ex, st, target, true);  // newly over: `over` changes
        return;
      }
    }
    ex.sums.update_at(ex.set_at, ex.set_to);  // (the values that differ, a block re-sorted once)
    ex.runs_at.clear();
    for (auto const& [event, value] : now) { ex.runs_at.push_back(event); }
  }

  // Records in ex.fixes what lower() left inexact in ex.curve after taking candidate c (entry
  // `e` for a recompute) over (after, last]: the planned curve counts it off over its runs
  // instead (for_each_planned_off_run, recompute_off_run: until its return's end frees, from
  // its last use's step on an early departure), and the entries it pulled back (`pulled`, as
  // they were) are off until e.at now.
  void note_take(excess_index& ex, state const& st, candidate const& c, recompute_entry const& e,
                 std::uint64_t after, std::uint64_t last,
                 std::vector<recompute_entry> const& pulled) const
  {
    auto const bytes = static_cast<std::int64_t>(c.bytes);
    ex.fix_curve(after + 1, last + 1, bytes);
    if (c.swap) {
      for_each_planned_off_run(a_, st.eff.back(), [&](std::uint64_t f, std::uint64_t t) {
        ex.fix_curve(f, t + 1, -bytes);
      });
    } else if (auto const run = recompute_off_run(a_, e)) {
      ex.fix_curve(run->first, run->second + 1, -bytes);
    }
    for (auto x : pulled) {
      auto const b = static_cast<std::int64_t>(x.bytes);
      if (auto const run = recompute_off_run(a_, x)) {
        ex.fix_curve(run->first, run->second + 1, b);
      }
      x.at = e.at;
      if (auto const run = recompute_off_run(a_, x)) {
        ex.fix_curve(run->first, run->second + 1, -b);
      }
    }
  }

  // The runs [from, to) of the events where pull_reset recomputes the excess, ascending and
  // apart, into ex.spans: where the sum of ex.fixes is not 0, and the events of `now` and of
  // ex.runs_at (the re-run batches now and at the last reset or refresh).
  static void dirty_spans(excess_index& ex)
  {
    auto& ends = ex.ends;
    ends.clear();
    for (auto const& f : ex.fixes) {
      ends.emplace_back(f.from, f.bytes);
      ends.emplace_back(f.to, -f.bytes);
    }
    std::sort(ends.begin(), ends.end());
    auto& spans = ex.spans;
    spans.clear();
    std::int64_t sum = 0;
    for (std::size_t k = 0; k + 1 < ends.size(); ++k) {
      sum += ends[k].second;
      if (sum != 0 && ends[k].first < ends[k + 1].first) {
        spans.emplace_back(ends[k].first, ends[k + 1].first);
      }
    }
    for (auto const event : ex.runs_at) { spans.emplace_back(event, event + 1); }
    for (auto const& [event, value] : ex.now) { spans.emplace_back(event, event + 1); }
    std::sort(spans.begin(), spans.end());
    std::size_t m = 0;  // merged in place
    for (auto const& sp : spans) {
      if (m > 0 && sp.first <= spans[m - 1].second) {
        spans[m - 1].second = std::max(spans[m - 1].second, sp.second);
      } else {
        spans[m++] = sp;
      }
    }
    spans.resize(m);
  }

  // reset(ex, st, target, false) after a take that pulled entries back, without passes over
  // every event: ex.curve becomes the planned curve (its fixes applied) and the excess is made
  // exact where it may differ from the lowered one: where the fixes changed the curve, and at
  // the re-run batches' events now and at the last reset or refresh (everywhere else the lowered
  // excess is the curve's, as refresh() argues). An event newly over takes the full reset, as
  // excess_index::refresh does.
  void pull_reset(excess_index& ex, state const& st, std::uint64_t target) const
  {
    for (auto const& f : ex.fixes) { ex.curve.add(f.from, f.to, f.bytes); }
    auto const rcs      = st.set.entries();
    auto const curve_at = [&](std::uint64_t i) {
      return static_cast<std::uint64_t>(ex.curve.at(i));
    };
    auto const over_target = [&](std::uint64_t x) { return x > target ? x - target : 0; };
    auto& now              = ex.now;  // (event, exact excess there) of each batch
    now.clear();
    for_each_run(rcs, curve_at, [&](std::uint64_t event, std::uint64_t run) {
      if (now.empty() || now.back().first != event) {
        now.emplace_back(event, over_target(curve_at(event)));
      }
      now.back().second = std::max(now.back().second, over_target(run));
    });
    dirty_spans(ex);
    ex.set_at.clear();
    ex.set_to.clear();
    std::size_t r   = 0;  // a cursor into `now`
    bool newly_over = false;
    for (auto const& [from, to] : ex.spans) {
      ex.curve.walk(from, std::min<std::uint64_t>(to, ex.curve.size()),
                    [&](std::uint64_t event, std::int64_t level) {
                      while (r < now.size() && now[r].first < event) { ++r; }
                      auto const value = r < now.size() && now[r].first == event
                                             ? now[r].second
                                             : over_target(static_cast<std::uint64_t>(level));
                      auto const j     = ex.from(event);
                      if (j < ex.over.size() && ex.over[j] == event) {
                        if (ex.sums.at(j) != value) {  // (update_at skips the others anyway)
                          ex.set_at.push_back(j);
                          ex.set_to.push_back(value);
                        }
                      } else if (value > 0) {
                        newly_over = true;
                      }
                    });
      if (newly_over) {
        reset(ex, st, target, false);  // `over` changes
        return;
      }
    }
    ex.sums.update_at(ex.set_at, ex.set_to);
    ex.runs_at.clear();
    for (auto const& [event, value] : now) { ex.runs_at.push_back(event); }
    ex.fixes.clear();
  }

  // The excess c would remove: sum over its window of min(bytes, excess).
  // A swap is counted over the window where it is placed (greedy_variant::link_slots).
  [[nodiscard]] double benefit(state const& st, candidate const& c, excess_index const& ex,
                               greedy_variant const& var) const
  {
    auto const [first, end] = ex.range(c.after, c.last);
    if (first == end) { return 0; }  // c.last bounds either kind's window
    auto after = c.after;
    auto last  = c.swap ? c.last : a_.ops().event[entry_of(st, c).at - 1];
    if (c.swap && var.link_slots) {
      auto const p = place(st, c);
      if (!p) { return 0; }
      after = p->after;
      last  = p->last;
    }
    auto const [lo, hi] = ex.range(after, last);
    return static_cast<double>(ex.sums.sum_min(lo, hi, c.bytes));
  }

  // Cost of candidate k now; negative when it may not be added.
  [[nodiscard]] double cost(state const& st, std::size_t k, greedy_variant const& var) const
  {
    auto const& c = cands_[k];
    if (st.gap_taken[c.gap] != 0) { return -1; }
    if (c.swap) {
      if (var.swap_weight < 0 || st.no_swap.count(c.gap) != 0) { return -1; }
      auto const p = var.link_slots ? place(st, c) : nominal(c);
      if (!p || !st.set.swap_allowed(p->e) || !apart(st, p->e)) { return -1; }
      if (var.link_slots) { return var.swap_weight * c.seconds + 1e-9; }  // the line hides it
      double const over = std::max(0.0, st.link_s + c.seconds - a_.compute_seconds());
      return var.swap_weight * c.seconds + c.exposed + std::min(over, c.seconds) + 1e-9;
    }
    if (!var.recompute || st.no_recompute.count(c.gap) != 0) { return -1; }
    auto const pulled = st.set.pulled_bytes(entry_of(st, c), c.chain);
    if (!pulled) { return -1; }
    return c.seconds * (1.0 + static_cast<double>(*pulled) / static_cast<double>(c.bytes)) + 1e-9;
  }

  // `e` and the swaps of its storage do not overlap (schedule.hpp: a later entry's offload starts
  // at or after an earlier one's next use; a start's offload may come before its last use).
  [[nodiscard]] static bool apart(state const& st, swap_entry const& e)
  {
    for (auto const k : st.swaps_of[e.id]) {
      auto const& x = st.swaps[k];
      bool const ok = x.last_use < e.last_use
                          ? e.offload_at >= x.next_use
                          : x.last_use > e.last_use && x.offload_at >= e.next_use;
      if (!ok) { return false; }
    }
    return true;
  }

  bool take(state& st, std::size_t k, std::optional<placed_swap> const& p,
            std::vector<recompute_entry>& pulled) const
  {
    auto const& c = cands_[k];
    if (c.swap) {
      st.swaps_of[c.id].push_back(st.swaps.size());
      st.swaps.push_back(p->e);
      st.eff.push_back(effective(p->e));
      st.set.add_swap(st.swaps.back());
      st.link_s += c.seconds;
      st.d2h.reserve(p->off_start, p->off_start + c.off_s);
      st.h2d.reserve(p->pre_start, p->pre_start + c.pre_s);
    } else if (!st.set.try_add(entry_of(st, c), c.chain, &pulled)) {
      return false;
    }
    st.gap_taken[c.gap] = 1;
    return true;
  }

  // The lazy greedy of the file comment; stops when the excess is gone or nothing helps.
  void fill(state& st, std::uint64_t target, greedy_variant const& var) const
  {
    for (int round = 0; round < 3; ++round) {
      auto& ex = ex_;
      reset(ex, st, target, true);
      if (ex.over.empty()) { return; }
      heap_t heap;
      for (std::size_t k = 0; k < cands_.size(); ++k) {
        if (st.gap_taken[cands_[k].gap] != 0) { continue; }
        auto const b = benefit(st, cands_[k], ex, var);
        auto const c = b > 0 ? cost(st, k, var) : -1.0;
        if (c > 0) { heap.emplace(b / c, k); }
      }
      if (!drain(st, heap, ex, target, var)) { return; }
      auto const rcs = st.set.entries();
      curve_into(st.eff, rcs, curve_);
      excess_into(curve_, rcs, target, exact_);
      if (none_over(exact_)) { return; }
    }
  }

  using heap_item = std::pair<double, std::size_t>;  // (score, candidate)
  static bool worse(heap_item const& x, heap_item const& y)
  {
    return x.first != y.first ? x.first < y.first : x.second > y.second;  // ties: lower index
  }
  struct worse_t {  // a type, not a function pointer: the heap's comparisons inline
    bool operator()(heap_item const& x, heap_item const& y) const { return worse(x, y); }
  };
  using heap_t = std::priority_queue<heap_item, std::vector<heap_item>, worse_t>;

  [[nodiscard]] static bool none_over(std::vector<std::uint64_t> const& ex)
  {
    return std::all_of(ex.begin(), ex.end(), [](std::uint64_t x) { return x == 0; });
  }

  // Takes candidates off the heap (lazily re-scored) until the excess is gone; true when it took
  // any. The excess is updated in place over the taken entry's window, made exact after a pull
  // (other entries come back earlier: pull_reset, where the curve changed since the last reset)
  // and every few takes (re-run transients).
  bool drain(state& st, heap_t& heap, excess_index& ex, std::uint64_t target,
             greedy_variant const& var) const
  {
    bool progress     = false;
    std::size_t since = 0;
    std::vector<recompute_entry> pulled;  // what a take pulled back, as it was
    while (!heap.empty()) {
      auto const k = heap.top().second;
      heap.pop();
      double const c = cost(st, k, var);
      double const b = c > 0 ? benefit(st, cands_[k], ex, var) : 0.0;
      if (b <= 0) { continue; }
      if (!heap.empty() && b / c < heap.top().first) {
        heap.emplace(b / c, k);
        continue;
      }
      auto const& cand = cands_[k];
      auto const e     = entry_of(st, cand);
      bool const pulls = !cand.swap && st.set.pulled_bytes(e, cand.chain).value_or(0) > 0;
      auto const p = !cand.swap ? std::nullopt : var.link_slots ? place(st, cand) : nominal(cand);
      pulled.clear();
      if ((cand.swap && !p) || !take(st, k, p, pulled)) { continue; }
      progress         = true;
      auto const after = p ? p->after : cand.after;
      auto const last  = p ? p->last : a_.ops().event[e.at - 1];
      ex.lower(after, last, cand.bytes);
      note_take(ex, st, cand, e, after, last, pulled);
      if (pulls || ++since >= 8 || ex.sums.all_zero()) {
        if (pulls) {
          pull_reset(ex, st, target);  // entries came back: the curve rose
        } else {
          refresh(ex, st, target);
        }
        since = 0;
        if (ex.none()) { return true; }
      }
    }
    return progress;
  }

  // Drops entries, costliest first, while the planned peak stays within `target`.
  void prune(greedy_plan& p, std::uint64_t target) const
  {
    if (peak_over(p, target)) { return; }
    std::vector<std::pair<double, std::size_t>> order;  // (-cost, index): swaps then recomputes
    for (std::size_t k = 0; k < p.swaps.size(); ++k) {
      auto const bytes = p.swaps[k].bytes;
      order.emplace_back(-a_.model().prefetch_time(bytes, swap_encoding::configured), k);
    }
    for (std::size_t k = 0; k < p.recomputes.size(); ++k) {
      auto const& e = p.recomputes[k];
      order.emplace_back(-seconds_of(e), p.swaps.size() + k);
    }
    std::stable_sort(order.begin(), order.end());
    prune_in_order(p, target, order);
  }

  // Drops the entries of `order` ((key, index); an index counts the swaps, then the
  // recomputes), in that order, while the planned peak stays within `target`.
  void prune_in_order(greedy_plan& p, std::uint64_t target,
                      std::vector<std::pair<double, std::size_t>> const& order) const
  {
    // Bytes over the target at each event (negative: room under it), a range tree; an entry
    // whose window lacks room for its bytes stays (a quick test before the exact one, which also
    // counts the re-runs' transient bytes).
    auto over_target = over_tree(p, target);
    std::vector<char> gone(p.swaps.size() + p.recomputes.size(), 0);
    // The effective curve of p less the entries gone, for the exact test (over_without); none
    // when curve_into refuses p (then peak_over, which refuses it as before).
    auto curve = curve_tree([&] { return effective_curve(p.swaps, p.recomputes); });
    std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;
    std::vector<recompute_entry> left;
    for (auto const& [key, k] : order) {
      bool const swap  = k < p.swaps.size();
      auto const w     = swap ? planned_off_window(effective(p.swaps[k]), a_.ops())
                              : off_window{a_.ops().event[p.recomputes[k - p.swaps.size()].last_use],
                                       a_.ops().event[p.recomputes[k - p.swaps.size()].at - 1]};
      auto const bytes = static_cast<std::int64_t>(swap ? p.swaps[k].bytes
                                                        : p.recomputes[k - p.swaps.size()].bytes);
      if (w.after < w.last && over_target.max(w.after + 1, w.last + 1) > -bytes) { continue; }
      gone[k] = 1;
      if (curve) {
        runs_off(p, k, runs);
        if (over_without(p, gone, *curve, runs, bytes, target, left)) {
          gone[k] = 0;
          continue;
        }
        for (auto const& [from, through] : runs) { curve->add(from, through + 1, bytes); }
      } else if (peak_over(without(p, gone), target)) {
        gone[k] = 0;
        continue;
      }
      over_target.add(w.after + 1, w.last + 1, bytes);
    }
    p = without(p, gone);
  }

  // The runs of events [from, through] over which the effective curve (curve_into) counts entry
  // k of p (its swaps, then its recomputes) off the device: planned_off_steps' own.
  void runs_off(greedy_plan const& p, std::size_t k,
                std::vector<std::pair<std::uint64_t, std::uint64_t>>& out) const
  {
    out.clear();
    if (k < p.swaps.size()) {
      for_each_planned_off_run(a_, effective(p.swaps[k]),
                               [&](std::uint64_t f, std::uint64_t t) { out.emplace_back(f, t); });
      return;
    }
    if (auto const run = recompute_off_run(a_, p.recomputes[k - p.swaps.size()])) {
      out.push_back(*run);
    }
  }

  // peak_over(without(p, gone), target), given `curve`, the effective curve of p without the
  // entries gone but the last one marked (of `bytes`, off over `runs`): its removal raises the
  // curve by its bytes over its runs and nowhere else, and the re-run batches read the curve at
  // one event each (for_each_run). O(log n) per batch instead of a pass over the events.
  // `left` is scratch.
  [[nodiscard]] bool over_without(greedy_plan const& p, std::vector<char> const& gone,
                                  max_tree const& curve,
                                  std::vector<std::pair<std::uint64_t, std::uint64_t>> const& runs,
                                  std::int64_t bytes, std::uint64_t target,
                                  std::vector<recompute_entry>& left) const
  {
    auto top = curve.max(0, curve.size());
    for (auto const& [from, through] : runs) {
      top = std::max(top, curve.max(from, through + 1) + bytes);
    }
    if (top > 0 && static_cast<std::uint64_t>(top) > target) { return true; }
    auto const curve_at = [&](std::uint64_t i) {
      auto v = curve.at(i);
      for (auto const& [from, through] : runs) { v += from <= i && i <= through ? bytes : 0; }
      return static_cast<std::uint64_t>(v);
    };
    left.clear();
    for (std::size_t j = 0; j < p.recomputes.size(); ++j) {
      if (gone[p.swaps.size() + j] == 0) { left.push_back(p.recomputes[j]); }
    }
    bool over = false;
    for_each_run(left, curve_at, [&](std::uint64_t, std::uint64_t run) { over |= run > target; });
    return over;
  }

  [[nodiscard]] std::vector<std::uint64_t> effective_curve(
      std::vector<swap_entry> const& swaps, std::vector<recompute_entry> const& rcs) const
  {
    std::vector<swap_entry> eff;
    eff.reserve(swaps.size());
    for (auto const& e : swaps) { eff.push_back(effective(e)); }
    std::vector<std::uint64_t> curve;
    curve_into(eff, rcs, curve);
    return curve;
  }

  // planned_device_curve(a_, swaps, rcs) into `out`: the same bytes off the device
  // (planned_off_steps) taken from the curve of no entries (live_, built once), and the same
  // refusal of bytes away beyond those live. A construction computes it at every reset.
  void curve_into(std::span<swap_entry const> swaps, std::span<recompute_entry const> rcs,
                  std::vector<std::uint64_t>& out) const
  {
    // (assign before the steps: nothing between them and their drain throws; resize calls memset)
    if (out.size() != live_.size()) { out.assign(live_.size(), 0); }
    planned_off_steps(a_, swaps, rcs, steps_);
    if (!curve_from_steps(live_, steps_, out)) { exact_curve(a_, swaps, rcs, out); }
  }

  [[nodiscard]] bool peak_over(greedy_plan const& p, std::uint64_t target) const
  {
    auto const ex = excess_of(p.swaps, p.recomputes, target);
    return std::any_of(ex.begin(), ex.end(), [](std::uint64_t x) { return x > 0; });
  }

  [[nodiscard]] static greedy_plan without(greedy_plan const& p, std::vector<char> const& gone)
  {
    greedy_plan out;
    for (std::size_t k = 0; k < p.swaps.size(); ++k) {
      if (gone[k] == 0) { out.swaps.push_back(p.swaps[k]); }
    }
    for (std::size_t k = 0; k < p.recomputes.size(); ++k) {
      if (gone[p.swaps.size() + k] == 0) { out.recomputes.push_back(p.recomputes[k]); }
    }
    return out;
  }

  trace_analysis const& a_;
  // The fill's excess, reused by every construction of this greedy (its buffers keep their
  // capacity; reset() assigns every field): scratch, not state, so `mutable` (one greedy is
  // built per plan, and a plan runs on one thread).
  mutable excess_index ex_;
  std::vector<std::uint64_t> live_;  // the planned curve of no entries: the bytes live per event
  // curve_into's steps, and the curve and excess of each reset (scratch, as ex_).
  mutable off_steps steps_;
  mutable std::vector<std::uint64_t> curve_, exact_;
  std::vector<candidate> cands_;
  std::vector<std::size_t> by_rate_;   // recompute candidates, cheapest re-run per byte first
  std::vector<std::size_t> rerun_of_;  // per gap: its recompute candidate (cands_.size(): none)
  std::size_t gap_count_{0};
  std::map<std::pair<storage_id, std::uint64_t>, std::size_t> gap_of_;
  // Per storage, (u, transient bytes) of its recompute candidates by u: looked up per re-run at
  // every refresh of the excess, so not a map.
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> transient_;
};

}  // namespace stash::detail
