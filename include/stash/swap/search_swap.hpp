/**
 * @file search_swap.hpp
 * @brief stash's own swap planner: the fastest schedule it finds that fits the budget, timed by
 * the simulator with the budget enforced.
 *
 * Method (deterministic: work is counted in simulations, never in wall time; ties keep order):
 *  1. Candidates are every gap (consecutive accesses u < v with an op between) of every
 *     activation, and in a second pass of every storage kind.
 *  2. Construction (detail::gap_planner), in a fixed list of variants: while some op's planned
 *     bytes exceed a target (the budget, or the budget less a margin toward the swap bound),
 *     choose for the worst op the best-scoring gap that spans it (scores: bytes covered x time
 *     covered per byte moved; bytes x gap time; AutoSwap's slack); drop choices the target no
 *     longer needs; issue offloads at the earliest legal op or right after the last use; pack
 *     the prefetches backwards from their deadlines on the one H2D engine, each as late as the
 *     queue allows and never where it would raise the planned bytes above the budget. Each
 *     variant is planned on the stall-free timeline, then once more on its simulated timeline.
 *  3. Seeds: the schedules of vdnn_conv, vdnn_all, vdnn_dyn and AutoSwap (four scores), simulated
 *     the same way, compete with the variants, so search_swap is never slower than any of them
 *     where they fit.
 *  4. Local search on the fastest: take the largest stall; for a late prefetch issue it earlier
 *     (halfway to its earliest op); for a memory stall issue later the prefetch holding memory
 *     there whose next use is furthest. A move is kept when the planned peak stays within the
 *     budget and the simulated time drops.
 *  5. With `wrap` set, wrap entries too (sim/schedule.hpp: a persistent storage off the device
 *     from its last access of one iteration to its first of the next, the only way out for
 *     optimizer state used once per step): three choices of wraps (detail::wrap_planner: only
 *     where gaps inside the iteration cannot make room, wherever an op is over the target, or
 *     every one), each followed by every variant of step 2 over gaps of any kind against the
 *     bytes the wraps leave ("variant_wrap").
 * A schedule whose planned (instantaneous-copy) peak is within the budget always completes under
 * the enforced simulator (offloads never wait for memory, and the prefetches holding memory at an
 * op are among those the planned curve counts there), so construction plans feasibility exactly
 * and simulation ranks by time. The schedule's note names what won ("seed:vdnn_all", "variant",
 * "variant_any_kind", with "+refined" when local search improved it). Below the any-kind swap
 * bound (swap_bounds.hpp; with `wrap`, the bound with wrap gaps) no schedule fits: the schedule
 * that moves every gap is returned at once, as the search would end there, with nothing timed.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/auto_swap.hpp>
#include <stash/swap/detail/gap_planner.hpp>
#include <stash/swap/detail/range_tree.hpp>
#include <stash/swap/detail/wrap_planner.hpp>
#include <stash/swap/encoding_choice.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/swap/vdnn.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stash {

/// @brief What one search_swap::plan did.
struct search_swap_stats {
  /// Schedules timed (the search's unit of work); a variant's schedule equal to one timed before
  /// in the same pass counts again, its simulation's result reused.
  std::size_t simulations{0};
  std::string winner;  ///< what the returned schedule came from
};

namespace detail {

/// The best fitting schedule so far and its simulation.
struct swap_incumbent {
  std::optional<schedule> best;
  std::optional<sim_result> sim;
  std::optional<encoding_options> encodings;  // per-entry encodings chosen before timing

  [[nodiscard]] double time() const noexcept
  {
    return sim ? sim->iteration_s : std::numeric_limits<double>::infinity();
  }
  // Simulates `s`; keeps it when it fits and is faster. The planner's own schedules are valid
  // by construction; seeds from other policies are validated.
  bool offer(trace_analysis const& a, schedule s, std::string const& who, bool validate,
             search_swap_stats& stats)
  {
    ++stats.simulations;
    if (encodings) { s = with_encodings(a, std::move(s), *encodings); }
    auto r = simulate(a, s, sim_options{false, sim_memory::enforce_budget, validate});
    if (!r.fits || r.iteration_s >= time()) { return false; }
    s.note       = who;
    stats.winner = who;
    best         = std::move(s);
    sim          = std::move(r);
    return true;
  }
};

// A variant's schedule as run_variants timed it: its entries (before make_schedule), whether
// it fit, and its simulated op starts (the timeline of the re-plan). About a third of the
// variants' plans repeat one planned before for the same budget (variants that differ only in a
// margin or a score pick the same gaps; a re-plan on the simulated timeline often changes
// nothing): the same entries make the same schedule and simulation, which is not faster than
// the incumbent it was offered to, so only its fit and timeline are needed again.
struct timed_plan {
  std::vector<swap_entry> entries;
  bool fits{};
  std::vector<double> op_start;  // when it fits
};

[[nodiscard]] inline timed_plan const* timed_before(std::vector<timed_plan> const& timed,
                                                    std::vector<swap_entry> const& entries)
{
  for (auto const& t : timed) {
    if (t.entries == entries) { return &t; }
  }
  return nullptr;
}

// The selections (gap_planner::select_gaps) of one planner's variants on the nominal timeline,
// by score and target: variants that differ only in their offload point or releases select the
// same gaps there (three of the nine), so each is selected once per budget and scope.
class nominal_selections {
 public:
  [[nodiscard]] gap_planner::selection of(gap_planner const& planner, gap_variant const& var,
                                          std::uint64_t target, std::vector<double> const& nominal)
  {
    for (auto const& k : kept_) {
      if (k.score == var.score && k.target == target) { return k.sel; }
    }
    kept_.push_back({var.score, target, planner.select_gaps(var, target, nominal)});
    return kept_.back().sel;
  }

 private:
  struct kept {
    gap_score score;
    std::uint64_t target;
    gap_planner::selection sel;
  };
  std::vector<kept> kept_;
};

// The vDNN seeds of a sweep of budgets (search_swap::plan_budgets): no_swap's, vdnn_conv's and
// vdnn_all's plans do not depend on the budget but for the one they record, so a sweep plans
// them once; and each is validated at its first offer only (validation does not read the
// budget, and these are the same entries every time).
struct vdnn_seeds {
  std::array<schedule, 3> plans;    // no_swap, vdnn_conv, vdnn_all (vdnn_dyn::choice's order)
  std::array<bool, 3> validated{};  // offered with validation once
  explicit vdnn_seeds(trace_analysis const& a)
      : plans{no_swap{}.plan(a, 0), vdnn_conv{}.plan(a, 0), vdnn_all{}.plan(a, 0)}
  {
  }
  // The three plans for `budget`: the same as planned for it.
  [[nodiscard]] std::array<schedule, 3> at(std::uint64_t budget) const
  {
    auto out = plans;
    for (auto& s : out) { s.budget = budget; }
    return out;
  }
  // Whether plan k's offer validates it (its first), marking it validated.
  [[nodiscard]] bool validate(std::size_t k) { return !std::exchange(validated[k], true); }
};

// search_swap's gap planners of the two scopes, kept across a sweep of budgets (plan_budgets):
// their gaps, size classes and sorted fixed-score indexes do not depend on the budget.
struct swap_planners {
  std::optional<gap_planner> narrow, wide;
};

inline constexpr std::array<gap_variant, 9> search_swap_variants = {{
    {0.00, gap_score::coverage, offload_point::earliest, false},
    {0.00, gap_score::coverage, offload_point::after_last_use, false},
    {0.00, gap_score::long_gap, offload_point::earliest, false},
    {0.10, gap_score::coverage, offload_point::earliest, false},
    {0.25, gap_score::coverage, offload_point::earliest, false},
    {0.10, gap_score::long_gap, offload_point::earliest, false},
    {0.00, gap_score::coverage, offload_point::earliest, true},
    {0.00, gap_score::slack, offload_point::after_last_use, false},
    {0.00, gap_score::slack, offload_point::earliest, false},
}};

inline void sort_by_prefetch(std::vector<swap_entry>& entries)
{
  std::stable_sort(entries.begin(), entries.end(), [](swap_entry const& x, swap_entry const& y) {
    return x.prefetch_at != y.prefetch_at ? x.prefetch_at < y.prefetch_at : x.next_use < y.next_use;
  });
}

// One local-search move for `stall` on `entries`; false when there is none to make.
[[nodiscard]] inline bool move_for_stall(std::vector<swap_entry>& entries,
                                         stall_record const& stall)
{
  std::optional<std::size_t> k;
  if (stall.cause != stall_cause::memory) {  // the prefetch it waited for: issue it earlier
    for (std::size_t j = 0; j < entries.size(); ++j) {
      if (entries[j].next_use == stall.op) { k = j; }
    }
    if (!k) { return false; }
    auto& e       = entries[*k];
    auto const lo = std::max(e.last_use, e.offload_at) + 1;
    if (e.prefetch_at <= lo) { return false; }
    e.prefetch_at = lo + (e.prefetch_at - lo) / 2;
  } else {  // memory: issue later the prefetch holding memory here with the furthest next use
    for (std::size_t j = 0; j < entries.size(); ++j) {
      auto const& e = entries[j];
      if (e.prefetch_at <= stall.op && stall.op < e.next_use &&
          (!k || e.next_use > entries[*k].next_use)) {
        k = j;
      }
    }
    if (!k) { return false; }
    entries[*k].prefetch_at = stall.op + 1;
  }
  sort_by_prefetch(entries);
  return true;
}

// The incumbent's stalls in the order refine_swap tries them: the longest first, the first in
// op order among equals, one per (op, memory move) key, the final step left out. Sorting once
// per incumbent replaces a rescan of every stall and of the keys tried per move, which grew as
// stalls x moves at tight budgets (issue 24, item 4); the order is the one the rescan gave.
[[nodiscard]] inline std::vector<stall_record> stalls_to_try(trace_analysis const& a,
                                                             sim_result const& sim)
{
  std::vector<stall_record> order;
  for (auto const& x : sim.stalls) {
    if (x.op < a.op_count()) { order.push_back(x); }
  }
  std::stable_sort(order.begin(), order.end(), [](stall_record const& x, stall_record const& y) {
    return x.seconds > y.seconds;
  });
  // Keep each key's first stall in that order: sort (key, place) pairs, mark each key's first.
  std::vector<std::pair<std::pair<std::uint64_t, bool>, std::size_t>> keys(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    keys[k] = {{order[k].op, order[k].cause == stall_cause::memory}, k};
  }
  std::sort(keys.begin(), keys.end());
  std::vector<char> first(order.size(), 0);
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (k == 0 || keys[k].first != keys[k - 1].first) { first[keys[k].second] = 1; }
  }
  std::vector<stall_record> out;
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (first[k] != 0) { out.push_back(order[k]); }
  }
  return out;
}

// The incumbent as refine_swap tries moves on it: which entry move_for_stall would move and
// where, and the planned peak after the move, without copying the entries or recomputing the
// curve. Most moves are refused (no move, or over the budget), and each refusal used to copy the
// entries and rebuild the planned curve: O(entries + events) per stall tried, quadratic at tight
// budgets where the stalls grow with the trace (issue 24, item 4). Built once per incumbent.
class refine_view {
 public:
  refine_view(trace_analysis const& a, std::vector<swap_entry> const& entries)
      : a_(a), entries_(entries)
  {
    auto const curve = planned_device_curve(a, entries);
    curve_.assign(std::vector<std::int64_t>(curve.begin(), curve.end()));
    by_use_.resize(entries.size());
    by_prefetch_.resize(entries.size());
    for (std::size_t j = 0; j < entries.size(); ++j) {
      by_use_[j]      = {entries[j].next_use, j};
      by_prefetch_[j] = {entries[j].prefetch_at, j};
    }
    std::sort(by_use_.begin(), by_use_.end());
    std::sort(by_prefetch_.begin(), by_prefetch_.end());
    furthest_.resize(entries.size());  // over by_prefetch_'s prefix: largest next use, lowest j
    for (std::size_t m = 0; m < entries.size(); ++m) {
      auto const j = by_prefetch_[m].second;
      furthest_[m] = j;
      if (m > 0) {
        auto const f = furthest_[m - 1];
        if (entries[f].next_use > entries[j].next_use ||
            (entries[f].next_use == entries[j].next_use && f < j)) {
          furthest_[m] = f;
        }
      }
    }
  }

  /// The entry move_for_stall moves for `stall` and its new prefetch_at (none: no move).
  [[nodiscard]] std::optional<std::pair<std::size_t, std::uint64_t>> move(
      stall_record const& stall) const
  {
    if (stall.cause != stall_cause::memory) {  // the last entry whose next use is the stall's op
      auto const it =
          std::upper_bound(by_use_.begin(), by_use_.end(),
                           std::pair{stall.op, std::numeric_limits<std::size_t>::max()});
      if (it == by_use_.begin() || std::prev(it)->first != stall.op) { return std::nullopt; }
      auto const k  = std::prev(it)->second;
      auto const& e = entries_[k];
      auto const lo = std::max(e.last_use, e.offload_at) + 1;
      if (e.prefetch_at <= lo) { return std::nullopt; }
      return std::pair{k, lo + (e.prefetch_at - lo) / 2};
    }
    auto const m = static_cast<std::size_t>(
        std::upper_bound(by_prefetch_.begin(), by_prefetch_.end(),
                         std::pair{stall.op, std::numeric_limits<std::size_t>::max()}) -
        by_prefetch_.begin());
    if (m == 0 || entries_[furthest_[m - 1]].next_use <= stall.op) { return std::nullopt; }
    return std::pair{furthest_[m - 1], stall.op + 1};
  }

  /// The planned peak (make_schedule's device_peak) with entry k's prefetch_at set to `p`.
  [[nodiscard]] std::uint64_t peak_with(std::size_t k, std::uint64_t p) const
  {
    auto moved        = entries_[k];
    moved.prefetch_at = p;
    std::vector<std::pair<std::uint64_t, std::int64_t>> steps;  // (event, change from there on)
    auto const b = static_cast<std::int64_t>(moved.bytes);
    off_intervals(entries_[k], [&](std::uint64_t from, std::uint64_t through) {
      steps.push_back({from, b});  // back on the device
      steps.push_back({through + 1, -b});
    });
    off_intervals(moved, [&](std::uint64_t from, std::uint64_t through) {
      steps.push_back({from, -b});
      steps.push_back({through + 1, b});
    });
    std::sort(steps.begin(), steps.end());
    std::int64_t peak = curve_.max(0, curve_.size()), change = 0;
    if (steps.empty()) { return static_cast<std::uint64_t>(peak); }
    peak = curve_.max(0, steps.front().first);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      change += steps[i].second;
      auto const to = i + 1 < steps.size() ? steps[i + 1].first : curve_.size();
      if (steps[i].first < to) { peak = std::max(peak, curve_.max(steps[i].first, to) + change); }
    }
    return static_cast<std::uint64_t>(peak);
  }

 private:
  // The event runs planned_device_curve counts `e` off the device over.
  template <class F>
  void off_intervals(swap_entry const& e, F&& f) const
  {
    for_each_planned_off_run(a_, e, std::forward<F>(f));
  }

  trace_analysis const& a_;
  std::vector<swap_entry> const& entries_;
  max_tree curve_;
  std::vector<std::pair<std::uint64_t, std::size_t>> by_use_, by_prefetch_;
  std::vector<std::size_t> furthest_;
};

// Local search on the incumbent (see the file comment), at most `max_simulations` simulations.
// A move is tried on a copy only once refine_view says it is one and keeps the planned peak
// within the budget; make_schedule's peak still decides.
inline void refine_swap(trace_analysis const& a, std::uint64_t budget, swap_incumbent& inc,
                        std::size_t max_simulations, search_swap_stats& stats)
{
  if (!inc.best) { return; }
  auto order      = stalls_to_try(a, *inc.sim);
  std::size_t pos = 0;
  std::optional<refine_view> view(std::in_place, a, inc.best->entries);
  for (std::size_t sims = 0; sims < max_simulations && pos < order.size();) {
    auto const pick = order[pos++];
    auto const mv   = view->move(pick);
    if (!mv || view->peak_with(mv->first, mv->second) > budget) { continue; }
    auto entries = inc.best->entries;
    if (!move_for_stall(entries, pick)) { continue; }
    auto s = make_schedule(a, inc.best->policy, budget, std::move(entries));
    if (s.device_peak > budget) { continue; }  // keeps the fit guarantee
    ++sims;
    auto const who =
        inc.best->note.ends_with("+refined") ? inc.best->note : inc.best->note + "+refined";
    if (inc.offer(a, std::move(s), who, false, stats)) {  // a new incumbent: its stalls afresh
      order = stalls_to_try(a, *inc.sim);
      pos   = 0;
      view.emplace(a, inc.best->entries);
    }
  }
}

}  // namespace detail

/// @brief stash's swap planner (see the file comment): an object with its settings and defaults.
struct search_swap {
  /// Candidates of the first pass: activations only (the storages vDNN, cDMA and Gist move).
  swap_scope scope = swap_scope::activations;
  /// Also run every variant over gaps of any kind (parameters, gradients, temporaries).
  bool also_any_kind = true;
  /// Let the other policies' schedules compete (guarantees search_swap is never slower).
  bool seed_with_policies = true;
  /// Storages below this size are never swapped.
  std::uint64_t min_bytes = 0;
  /// Simulations spent on local search after construction.
  std::size_t max_refinements = 24;
  /// Also plan wrap entries (persistent storages off the device across the iteration boundary;
  /// see the file comment). Off by default: only for an executor that runs them (the simulator
  /// does; stash::allocator on the host backend does).
  bool wrap = false;
  /// Per-entry encodings (encoding_choice.hpp) chosen for every candidate before it is timed;
  /// none by default: every entry travels as the allocator's Codec slot sends it.
  std::optional<encoding_options> encodings;

  /// @brief Registry name.
  /// @return "search_swap".
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "search_swap"; }

  /// @brief The fastest schedule found that fits `budget` under the enforced simulator; when
  /// none fits, the schedule that moves every gap (its note says it does not fit).
  /// @param analysis The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    search_swap_stats ignored;
    return plan(analysis, budget, ignored);
  }

  /// @brief As plan(analysis, budget), reporting the work done into `stats`.
  /// @param analysis The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @param stats Filled with the search's counters when not null.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget,
                              search_swap_stats& stats) const
  {
    return plan_seeded(analysis, budget, stats, nullptr);
  }

  /// @brief plan(analysis, b) for every b of `budgets`, in their order: the same schedules, with
  /// the AutoSwap seeds of every budget from one greedy run per score (auto_swap::plan_budgets),
  /// which a sweep of budgets (stash-plan --frontier) would otherwise repeat per budget.
  /// @param analysis The recorded iteration's facts.
  /// @param budgets Device bytes the iteration must fit in, one plan each (any order).
  /// @param sweeps AutoSwap's sweeps over the same budgets, shared with other askers (planned
  /// here, and kept there, on first use); when null or over other budgets, planned here.
  /// @return The schedules, one per budget in the order of `budgets`.
  [[nodiscard]] std::vector<schedule> plan_budgets(trace_analysis const& analysis,
                                                   std::span<std::uint64_t const> budgets,
                                                   auto_swap_sweeps* sweeps = nullptr) const;

 private:
  friend class search_swap_sweep;

  /// The note of the schedule returned when nothing fits.
  static constexpr char const* does_not_fit =
      "does not fit: even moving every gap leaves an op over the budget";

  /// The AutoSwap scores whose schedules seed the search, in the order they are offered.
  static constexpr std::array<auto_swap_score, 4> seed_scores = {
      auto_swap_score::swdoa, auto_swap_score::doa, auto_swap_score::aoa, auto_swap_score::wdoa};

  // plan(), with the AutoSwap seeds (by seed_scores) given, or planned here when null, and the
  // gap planners and vDNN seeds of a sweep reused when given.
  [[nodiscard]] schedule plan_seeded(trace_analysis const& analysis, std::uint64_t budget,
                                     search_swap_stats& stats,
                                     std::array<schedule, seed_scores.size()>* auto_seeds,
                                     detail::swap_planners* kept = nullptr,
                                     detail::vdnn_seeds* vdnn    = nullptr) const
  {
    stats = search_swap_stats{};
    if (analysis.peak_live_bytes() <= budget) {
      stats.winner = "no_swap";
      return make_schedule(analysis, std::string(name()), budget, {});
    }
    detail::swap_planners local;
    auto& planners    = kept != nullptr ? *kept : local;
    auto planner_with = [&](std::optional<detail::gap_planner>& slot,
                            swap_scope sc) -> detail::gap_planner const& {
      if (!slot) {
        slot.emplace(analysis, budget, sc, min_bytes);
      } else {
        slot->set_budget(budget);
      }
      return *slot;
    };
    auto const& planner = planner_with(planners.narrow, scope);
    auto const nominal  = nominal_starts(analysis);
    // Below the least budget any swap schedule fits under the enforced simulator (swap_bounds.hpp:
    // exact, and checked by brute force; with wraps, the bound with wrap gaps), no seed, variant
    // or refinement can fit, nor the schedule that moves every gap: the search would end as
    // below, after every one of them was timed and refused (issue 24, item 4: the frontier's
    // lowest budgets, a few s each at 200k storages).
    if (budget <
        swap_bound_bytes(analysis, wrap ? swap_scope::any_kind_wrap : swap_scope::any_kind)) {
      auto s = make_schedule(analysis, std::string(name()), budget, planner.all_gaps(nominal));
      s.note = does_not_fit;
      return s;
    }
    detail::swap_incumbent inc;
    inc.encodings = encodings;
    if (seed_with_policies) { offer_seeds(analysis, budget, inc, stats, auto_seeds, vdnn); }
    run_variants(analysis, budget, planner, scope, "variant", inc, stats);
    if (scope == swap_scope::activations && also_any_kind) {
      auto const& wide = planner_with(planners.wide, swap_scope::any_kind);
      run_variants(analysis, budget, wide, swap_scope::any_kind, "variant_any_kind", inc, stats);
    }
    if (wrap && (scope != swap_scope::activations || also_any_kind)) {
      run_wrap_variants(analysis, budget, inc, stats);
    }
    detail::refine_swap(analysis, budget, inc, max_refinements, stats);
    if (!inc.best) {
      inc.offer(analysis,
                make_schedule(analysis, std::string(name()), budget, planner.all_gaps(nominal)),
                "all_gaps", false, stats);
    }
    if (!inc.best) {
      auto s = make_schedule(analysis, std::string(name()), budget, planner.all_gaps(nominal));
      s.note = does_not_fit;
      return s;
    }
    inc.best->policy = std::string(name());
    return std::move(*inc.best);
  }

  static void offer_seeds(trace_analysis const& a, std::uint64_t budget,
                          detail::swap_incumbent& inc, search_swap_stats& stats,
                          std::array<schedule, seed_scores.size()>* auto_seeds,
                          detail::vdnn_seeds* vdnn)
  {
    auto seed = [&](auto const& policy) {
      inc.offer(a, policy.plan(a, budget), "seed:" + std::string(policy.name()), true, stats);
    };
    if (vdnn == nullptr) {
      seed(vdnn_conv{});
      seed(vdnn_all{});
      seed(vdnn_dyn{});
    } else {  // the same schedules, planned once per sweep
      auto plans = vdnn->at(budget);
      inc.offer(a, plans[1], "seed:" + std::string(vdnn_conv::name()), vdnn->validate(1), stats);
      inc.offer(a, plans[2], "seed:" + std::string(vdnn_all::name()), vdnn->validate(2), stats);
      auto const [k, fits] = vdnn_dyn::choice(a, plans);
      inc.offer(a, vdnn_dyn::chosen(std::move(plans[k]), fits),
                "seed:" + std::string(vdnn_dyn::name()), vdnn->validate(k), stats);
    }
    for (std::size_t k = 0; k < seed_scores.size(); ++k) {
      auto const policy = auto_swap{.score = seed_scores[k]};
      if (auto_seeds == nullptr) {
        seed(policy);
      } else {
        inc.offer(a, std::move((*auto_seeds)[k]), "seed:" + std::string(policy.name()), true,
                  stats);
      }
    }
  }

  [[nodiscard]] static std::vector<double> nominal_starts(trace_analysis const& a)
  {
    std::vector<double> start(a.op_count());
    for (std::size_t i = 0; i < start.size(); ++i) { start[i] = a.op_start(i); }
    return start;
  }

  // Step 5 of the file comment: each choice of wraps, then the variants around them.
  void run_wrap_variants(trace_analysis const& a, std::uint64_t budget, detail::swap_incumbent& inc,
                         search_swap_stats& stats) const
  {
    auto const cands = detail::wrap_candidates(a, min_bytes);
    if (cands.empty()) { return; }
    auto const nominal = nominal_starts(a);
    for (auto const choice :
         {detail::wrap_choice::needed, detail::wrap_choice::first, detail::wrap_choice::all}) {
      auto const wraps = detail::choose_wraps(a, cands, budget, choice, nominal);
      if (wraps.empty()) { continue; }
      detail::gap_planner const planner(a, budget, swap_scope::any_kind, min_bytes,
                                        detail::wrap_off_bytes(a, wraps));
      run_variants(a, budget, planner, swap_scope::any_kind_wrap, "variant_wrap", inc, stats,
                   wraps);
    }
  }

  static void run_variants(trace_analysis const& a, std::uint64_t budget,
                           detail::gap_planner const& planner, swap_scope scope,
                           std::string const& tag, detail::swap_incumbent& inc,
                           search_swap_stats& stats, std::vector<swap_entry> const& wraps = {})
  {
    auto const bound   = swap_bound_bytes(a, scope);
    auto const span    = budget > bound ? budget - bound : 0;
    auto const nominal = nominal_starts(a);
    std::vector<detail::timed_plan> timed;
    detail::nominal_selections selections;
    for (auto const& var : detail::search_swap_variants) {
      auto const target =
          budget - static_cast<std::uint64_t>(var.margin * static_cast<double>(span));
      auto timeline = nominal;
      for (int feedback = 0; feedback < 2; ++feedback) {  // plan, then re-plan on its timeline
        auto entries = detail::with_wraps(
            feedback == 0 ? planner.plan(var, selections.of(planner, var, target, nominal), nominal)
                          : planner.plan(var, target, timeline),
            wraps);
        ++stats.simulations;
        if (auto const* seen = detail::timed_before(timed, entries)) {
          if (!seen->fits) { break; }
          timeline = seen->op_start;  // not faster than the incumbent it was offered to
          continue;
        }
        auto s = make_schedule(a, std::string(name()), budget, entries);
        if (inc.encodings) { s = with_encodings(a, std::move(s), *inc.encodings); }
        auto r = simulate(a, s, sim_options{false, sim_memory::enforce_budget, false});
        timed.push_back({std::move(entries), r.fits, r.fits ? r.op_start : std::vector<double>{}});
        if (!r.fits) { break; }
        timeline = r.op_start;
        if (r.iteration_s < inc.time()) {
          s.note       = tag;
          stats.winner = tag;
          inc.best     = std::move(s);
          inc.sim      = std::move(r);
        }
      }
    }
  }
};

/// @brief search_swap::plan_budgets one budget at a time, in any order: the planning state a
/// sweep keeps across its budgets (the gap planners of both scopes, the vDNN seeds), with the
/// AutoSwap seeds read from sweeps planned beforehand. Single-threaded, like the planner; several
/// of these over the same analysis and AutoSwap sweeps may plan on different threads at once
/// (stash-plan --frontier --threads), each owning its state: a budget's schedule is the same
/// whichever of them plans it, and after whichever budgets (plan_budgets' schedules are plan()'s).
class search_swap_sweep {
 public:
  /// @brief A sweep of `policy` over `budgets`.
  /// @param policy The planner's settings (copied).
  /// @param analysis The recorded iteration's facts (outlives the sweep).
  /// @param budgets Device bytes the iteration must fit in, one plan each (any order; copied).
  /// @param sweeps AutoSwap's sweeps over the same budgets with every score planned
  /// (auto_swap_sweeps::of), read only (outlives the sweep); unused, and may be null, when
  /// `policy.seed_with_policies` is off. stash::logic_error when needed and missing or over
  /// other budgets.
  search_swap_sweep(search_swap policy, trace_analysis const& analysis,
                    std::span<std::uint64_t const> budgets, auto_swap_sweeps const* sweeps)
      : policy_(policy),
        analysis_(analysis),
        budgets_(budgets.begin(), budgets.end()),
        sweeps_(sweeps)
  {
    if (policy_.seed_with_policies) {
      STASH_EXPECTS(sweeps_ != nullptr && std::ranges::equal(sweeps_->budgets(), budgets_),
                    "search_swap_sweep: the AutoSwap sweeps must be over the same budgets");
      vdnn_.emplace(analysis_);
    }
  }

  /// @brief The budgets of the sweep.
  /// @return Them, in the order given.
  [[nodiscard]] std::span<std::uint64_t const> budgets() const noexcept { return budgets_; }

  /// @brief search_swap::plan(analysis, budgets()[b]) with the policy's settings.
  /// @param b The budget's place in budgets(); stash::logic_error when out of range.
  /// @return The schedule.
  [[nodiscard]] schedule plan(std::size_t b)
  {
    STASH_EXPECTS(b < budgets_.size(), "search_swap_sweep::plan: no budget " + std::to_string(b));
    std::array<schedule, search_swap::seed_scores.size()> seeds;
    if (policy_.seed_with_policies) {
      for (std::size_t k = 0; k < seeds.size(); ++k) {
        seeds[k] = sweeps_->planned(search_swap::seed_scores[k])[b];
      }
    }
    search_swap_stats ignored;
    return policy_.plan_seeded(analysis_, budgets_[b], ignored,
                               policy_.seed_with_policies ? &seeds : nullptr, &planners_,
                               vdnn_ ? &*vdnn_ : nullptr);
  }

 private:
  search_swap policy_;
  trace_analysis const& analysis_;
  std::vector<std::uint64_t> budgets_;
  auto_swap_sweeps const* sweeps_;
  detail::swap_planners planners_;
  std::optional<detail::vdnn_seeds> vdnn_;
};

// search_swap::plan_budgets (declared in the class): the seed scores' sweeps planned first, then
// one search_swap_sweep over the budgets in order.
inline std::vector<schedule> search_swap::plan_budgets(trace_analysis const& analysis,
                                                       std::span<std::uint64_t const> budgets,
                                                       auto_swap_sweeps* sweeps) const
{
  if (budgets.empty()) { return {}; }
  std::optional<auto_swap_sweeps> own;
  if (seed_with_policies) {
    if (sweeps == nullptr || !std::ranges::equal(sweeps->budgets(), budgets)) {
      sweeps = &own.emplace(analysis, budgets);
    }
    for (auto const score : seed_scores) { (void)sweeps->of(score); }
  }
  search_swap_sweep sweep(*this, analysis, budgets, sweeps);
  std::vector<schedule> out;
  out.reserve(budgets.size());
  for (std::size_t b = 0; b < budgets.size(); ++b) { out.push_back(sweep.plan(b)); }
  return out;
}

}  // namespace stash
