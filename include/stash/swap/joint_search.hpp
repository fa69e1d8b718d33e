/**
 * @file joint_search.hpp
 * @brief `search`: stash's planner that chooses, per storage and per gap, between keeping it,
 * swapping it (with an encoding) and recomputing it, timed by the simulator with the budget
 * enforced. search_swap (search_swap.hpp) is its swap-only form.
 *
 * Method (deterministic: work is counted in simulations, never in wall time; ties keep order):
 *  1. Seeds, each simulated: search_swap's schedule (itself never slower than vdnn_* and
 *     AutoSwap where they fit), checkpoint's, dtr's, and hybrids: search_swap's schedule for a
 *     larger budget (1.15x, 1.35x, 1.7x this one, below the peak) with DTR's greedy evictions on
 *     top of its swaps down to this budget. Then the greedy constructions of
 *     detail::joint_greedy (Capuchin-like: per gap, swap or recompute by excess removed per
 *     second of overhead, then redundant entries dropped), each from a start: nothing;
 *     checkpoint's recomputes for ceil(sqrt(n)), 32, 64 and 128 segments (so segment inputs can
 *     be swapped instead of kept); and each hybrid's swaps; with swap weights 0, 0.3 and 1, and
 *     weights 0.05 and 0.1 with each swap's transfers placed where its copy engine is free (so
 *     only what the link can hide is swapped: greedy_variant::link_slots). The
 *     budget-independent starts are also built for 90% (and 80%) of the budget: a schedule that
 *     fits a tighter budget fits this one, which keeps the plan from getting slower as the budget
 *     grows. Up to seven constructions that did not fit (in turns over the weightings and
 *     targets, swaps placed alone) are rebuilt with the greedy's fit repair
 *     (detail::joint_greedy::repair: the re-runs that hold the storages they read on the device
 *     where the plan is still over, and those whose own batch is over, are banned). The
 *     winning construction is rebuilt without the swaps whose prefetch stalled. The fastest
 *     that fits is the incumbent, so `search` is never slower than search_swap, checkpoint or
 *     dtr wherever they fit. With `wrap` (on by default), where gaps inside the iteration cannot
 *     bring some op within the budget (detail::wrap_choice::needed is not empty: optimizer
 *     state used once per step, weights allocated long before their first use), search_swap's
 *     seed plans wrap entries too and the greedy also starts from the needed wraps and from
 *     every wrap (its pruning drops the redundant ones). Elsewhere, below the swap bound of
 *     activations (swap_bound_bytes: where persistent storages leave in every swap schedule),
 *     search_swap's seed with wraps is offered too and the greedy also starts from every wrap
 *     ("seed:search_swap+wrap", "greedy+wrap:optional"): gaps inside the iteration can make
 *     room, but a storage used only in the optimizer step (SGD's
 *     momentum) costs no transfer on the busy links of forward and backward when it wraps,
 *     where taking weights off inside the iteration does (convnext_tiny, batch 8, at 33% on
 *     pcie4_x16: +36.9% -> +24.9%, predicted). Those constructions have a runner of their own
 *     (step 2) and are neither repaired nor fed back: they add options, not competitors for the
 *     other constructions' runners and repairs.
 *  2. Local search from the fastest seed of each kind (policies' seeds and hybrids; greedy with
 *     swaps placed alone; greedy on the link's free room; greedy from the optional wraps: the
 *     fastest seed's neighbourhood is not always the best one), one simulation per move, a
 *     move kept when the planned peak stays within the budget and the simulated time drops:
 *     (a) a swap whose prefetch stalled the compute stream becomes a recompute right before its
 *     next use; (b) a recompute, most expensive first, is dropped (the storage stays); (c) it
 *     becomes a swap (offload after its last use, prefetch as late as the nominal timeline
 *     allows); (d) a recompute, dearest per byte first, is exchanged: the greedy covers what its
 *     removal leaves over the budget with other entries. From each start until no move helps
 *     or `max_simulations` are spent. Then, from each start's result, insert and prune
 *     (detail::joint_greedy::reinsert): a recompute not in the plan, cheapest per byte first, is
 *     added and the plan's other recomputes are dropped, dearest per byte first, while the planned
 *     peak stays within the budget, kept when the re-runs' total time drops (a step budget of
 *     prunes); the moves (a)-(d) again from what it gives when it is faster. The greedy, whose
 *     benefit counts only the excess a candidate covers, takes several small re-runs dear per
 *     byte where the excess left is narrow; a large cheap one can replace them.
 *     With `share_reruns` (on by default), a last move (e) on each local search's result: a
 *     recompute whose chain rebuilds, as a transient input, a storage another recompute entry
 *     rematerialises in another batch joins that batch (the later of the two runs at the
 *     earlier's op) when the planned peak stays within the budget, so one re-run serves both
 *     (schedule::shared_reruns: the clone of a pre-activation and the activation's output,
 *     one BatchNorm for the two).
 *  3. Polish of each local search's result within polish_ratio of the fastest of them (the polish
 *     moves change plans more than the local moves: a runner 1.5x slower after step 2 can end
 *     fastest after polish, GPT-like decoder at 50% on h100_sxm: +26.8% -> +10.5%), the fastest
 *     result wins; each polish in rounds while either keeps a faster plan (the moves (a)-(e) again
 *     after): the link exchange (detail/link_exchange.hpp: a recompute entry dear per transfer
 *     second becomes a swap, the swaps that save the fewest re-run seconds per transfer second make
 *     room for it on the link, the greedy covers the rest) and the cut-swap re-runs
 *     (detail/cut_swap_rerun.hpp: a storage whose re-run reads a swapped one is re-run, that swap
 *     ending at the re-run, and dearer re-runs are dropped; then a swap whose re-run costs less
 *     than its prefetch becomes that re-run, its reads' swaps cut likewise) and the chained swap
 *     re-runs (detail/swap_rerun_chain.hpp: the same where a recompute entry drops one of the
 *     re-run's reads there, that entry's batch moved forward to it; every one of the plan at once,
 *     the greedy covering what it leaves over the budget: a dropout's product re-run from its
 *     softmax's re-run and its prefetched mask instead of crossing the link) and the held re-run
 *     splits (detail/hold_split.hpp: a recompute entry whose batch runs before its next use, held
 *     on the device in between, is re-run again at that use instead, the swaps that stalled inside
 *     the hold dropped and what is left over the budget covered by later prefetches) and the
 *     prefetch advances (detail/prefetch_advance.hpp: where the plan waited for copies, a swap
 *     entry's prefetch issued 1 to 64 ops earlier, one entry at a time, so that a storage needed
 *     first does not queue behind one needed later on the H2D engine), each plan simulated, with
 *     step budgets of constructions, candidates and work.
 *     Last, on what those rounds and the moves after them left (so that no plan they reach gets
 *     slower), the latency-bound swap drops (detail/latency_swaps.hpp: the swaps whose wire time is
 *     a small share of the link's latency per copy leave the plan, in four tiers, and the greedy
 *     covers and prunes the rest; the moves (a)-(e) again from what is kept).
 * With `encodings` set, every swap entry gets the encoding encoding_choice allows (lossy
 * precision only where the options opt in) before it is timed, and search_swap searches with
 * them. Encodings change which plans the incumbents keep, so that search alone can end on a
 * slower plan than the search without them (alexnet at 50% on h100_sxm, predicted: 30.11 vs
 * 29.53 ms). So the search without encodings runs first, then the one with them, and the faster
 * plan of the two is returned (a plan without encodings is one with each entry as the Codec slot
 * sends, marked raw where the cost model has no codec; its note starts with "raw:"): never
 * slower than either alone. The second shares the first's work where it is the same
 * (detail::seed_memo): the greedy's constructions and fit repairs from equal starts, the redrop
 * repairs of plans equal but for their encodings (the repair reads no encodings:
 * detail::encode_redropped); its own work is its search_swap seeds (and the constructions from
 * their hybrids' swaps), its simulations and its local search.
 * With `threads` above 1, the work of steps 1 and 2 that reads no incumbent runs on worker
 * threads (stash::run_tasks): the greedy's constructions but the feedback's, their fit repairs,
 * each one's schedule timed as an offer times it (encodings, redrop repair, simulation:
 * joint_incumbent::prepare), and the local searches and polishes from the runners, each with
 * its own incumbent. The results are offered and compared in the order of one thread, so the
 * plan, the simulations counted and the winner are the same for any count; the constructions are
 * built and offered a few per thread at a time (one at a time with one thread), which bounds the
 * schedules held, and one whose offer would drop it as a repeat is not timed
 * (joint_search::seeding). Each polish (one plan, each move reading the last) and the seeds of
 * the other policies stay on one thread.
 */
#pragma once

#include <stash/core/parallel_tasks.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/checkpoint.hpp>
#include <stash/swap/detail/cut_swap_rerun.hpp>
#include <stash/swap/detail/hold_split.hpp>
#include <stash/swap/detail/joint_greedy.hpp>
#include <stash/swap/detail/latency_swaps.hpp>
#include <stash/swap/detail/link_exchange.hpp>
#include <stash/swap/detail/prefetch_advance.hpp>
#include <stash/swap/detail/recompute_set.hpp>
#include <stash/swap/detail/redrop_planner.hpp>
#include <stash/swap/detail/swap_rerun_chain.hpp>
#include <stash/swap/detail/wrap_planner.hpp>
#include <stash/swap/dtr.hpp>
#include <stash/swap/encoding_choice.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/swap_bounds.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace stash {

/// @brief What one joint_search::plan did.
struct joint_search_stats {
  std::size_t simulations{0};  ///< simulations run (the search's unit of work)
  std::string winner;          ///< what the returned schedule came from
};

namespace detail {

// recompute_chain_of(a, e.id, e.last_use, e.at), from `memo` when not null (`own` holds it
// otherwise).
[[nodiscard]] inline recompute_chain const& chain_from(trace_analysis const& a,
                                                       recompute_entry const& e, chain_memo* memo,
                                                       std::optional<recompute_chain>& own)
{
  if (memo != nullptr) { return (*memo)(e.id, e.last_use, e.at); }
  return own.emplace(recompute_chain_of(a, e.id, e.last_use, e.at));
}

// Whether recompute entry j of `rc` may run before entries [k, j) of its batch: none of them
// rematerialises a storage j's re-runs read, and j's storage is not one they read.
[[nodiscard]] inline bool may_run_before(trace_analysis const& a,
                                         std::vector<recompute_entry> const& rc,
                                         std::vector<storage_id> const& reads, std::size_t k,
                                         std::size_t j, chain_memo* memo)
{
  for (std::size_t m = k; m < j; ++m) {
    if (std::binary_search(reads.begin(), reads.end(), rc[m].id)) { return false; }
    std::optional<recompute_chain> own;
    auto const& other = chain_from(a, rc[m], memo, own).reads;
    if (std::binary_search(other.begin(), other.end(), rc[j].id)) { return false; }
  }
  return true;
}

// `s` marked for shared re-runs (schedule::shared_reruns), each batch ordered for them: an entry
// whose chain rebuilds a storage as a transient input runs right before that storage's own entry
// of the batch (which adopts the rebuild) when it ran after it and may run earlier; the planned
// peak recomputed. The chains from `memo` when not null (the same chains).
[[nodiscard]] inline schedule sharing_order(trace_analysis const& a, schedule s,
                                            chain_memo* memo = nullptr)
{
  auto& rc   = s.recomputes;
  bool moved = false;
  for (std::size_t j = 0; j < rc.size(); ++j) {
    std::optional<recompute_chain> own;
    auto const& chain = chain_from(a, rc[j], memo, own);
    for (auto const r : chain.transients) {
      for (std::size_t k = j; k-- > 0 && rc[k].at == rc[j].at;) {
        if (rc[k].id != r) { continue; }
        if (may_run_before(a, rc, chain.reads, k, j, memo)) {
          auto const e = rc[j];
          rc.erase(rc.begin() + static_cast<std::ptrdiff_t>(j));
          rc.insert(rc.begin() + static_cast<std::ptrdiff_t>(k), e);
          moved = true;
        }
        break;
      }
    }
  }
  s.shared_reruns = true;
  if (moved && memo != nullptr) {
    s.device_peak = peak_of(a, planned_device_curve(a, s.entries, s.recomputes), s.entries,
                            s.recomputes, *memo);
  } else if (moved) {
    s.device_peak = planned_peak(a, s.entries, s.recomputes);
  }
  return s;
}

// `r` (a redrop repair's result, its first `n` entries those of the plan repaired) with the
// encodings `enc` allows: the plan's own entries chosen (choose_encoding), the entries the repair
// added as it made them (own copies as the Codec slot sends), each redrop with the encoding of
// the entry whose host copy it keeps (the one ending at its gap's start). The repair's choices
// do not read encodings, so this is the repair of the encoded plan.
[[nodiscard]] inline schedule encode_redropped(trace_analysis const& a, schedule r, std::size_t n,
                                               encoding_options const& enc)
{
  auto& es = r.entries;
  for (std::size_t i = 0; i < es.size(); ++i) {
    if (i < n) {
      es[i].encoding = choose_encoding(a, es[i], enc);
      continue;
    }
    if (!es[i].redrop) { continue; }
    for (std::size_t j = 0; j < i; ++j) {
      if (es[j].id == es[i].id && !es[j].wrap && es[j].next_use == es[i].last_use) {
        es[i].encoding = es[j].encoding;
        break;
      }
    }
  }
  return r;
}

// What joint_search's two searches with encodings (without them first, then with them) share:
// the greedy's constructions, by start, variant, banned swaps and the plan a fit repair rebuilt;
// and the redrop repairs, by the repaired plan's entries without their encodings. (The starts
// are kept whatever their size: a few per search.)
struct seed_memo {
  using banned = std::vector<std::pair<storage_id, std::uint64_t>>;
  struct construction {
    std::size_t start;
    greedy_variant var;
    banned no_swap;
    std::optional<greedy_plan> missed;
    bool batches;
    greedy_plan plan;
  };
  std::vector<greedy_plan> starts;
  std::vector<construction> constructions;
  std::vector<std::pair<std::pair<std::uint64_t, std::uint64_t>, schedule>> redrops;  // sorted
  // Entries and recomputes kept in all (plans of a deep trace hold tens of thousands): past
  // max_items, what is built is no longer kept (the second search builds it again).
  std::size_t items                      = 0;
  static constexpr std::size_t max_items = std::size_t{1} << 20;

  // Whether `n` more entries and recomputes may be kept (counted when so).
  bool room(std::size_t n)
  {
    if (items + n > max_items) { return false; }
    items += n;
    return true;
  }

  // The index of start `p` (equal plans share one).
  std::size_t start_id(greedy_plan const& p)
  {
    for (std::size_t k = 0; k < starts.size(); ++k) {
      if (starts[k].swaps == p.swaps && starts[k].recomputes == p.recomputes) { return k; }
    }
    starts.push_back(p);
    return starts.size() - 1;
  }

  // The construction kept for this key, or null.
  [[nodiscard]] greedy_plan const* find(std::size_t start, greedy_variant const& var,
                                        banned const& no_swap, greedy_plan const* missed,
                                        bool batches) const
  {
    auto const same_var = [&](greedy_variant const& v) {
      return v.target_share == var.target_share && v.swap_weight == var.swap_weight &&
             v.recompute == var.recompute && v.link_slots == var.link_slots;
    };
    for (auto const& c : constructions) {
      if (c.start != start || c.batches != batches || !same_var(c.var) || c.no_swap != no_swap ||
          c.missed.has_value() != (missed != nullptr)) {
        continue;
      }
      if (missed &&
          (c.missed->swaps != missed->swaps || c.missed->recomputes != missed->recomputes)) {
        continue;
      }
      return &c.plan;
    }
    return nullptr;
  }

  // make()'s construction for this key, made once.
  template <typename Make>
  greedy_plan construct(std::size_t start, greedy_variant const& var, banned const& no_swap,
                        greedy_plan const* missed, bool batches, Make&& make)
  {
    if (auto const* kept = find(start, var, no_swap, missed, batches)) { return *kept; }
    auto p = make();
    keep(start, var, no_swap, missed, batches, p);
    return p;
  }

  // What construct() keeps of `p`, made for this key elsewhere (on a worker thread): kept when
  // the key is new and there is room.
  void keep(std::size_t start, greedy_variant const& var, banned const& no_swap,
            greedy_plan const* missed, bool batches, greedy_plan const& p)
  {
    if (find(start, var, no_swap, missed, batches) != nullptr ||
        !room(p.swaps.size() + p.recomputes.size() +
              (missed ? missed->swaps.size() + missed->recomputes.size() : 0))) {
      return;
    }
    constructions.push_back(
        construction{start, var, no_swap,
                     missed ? std::optional<greedy_plan>(*missed) : std::nullopt, batches, p});
  }
};

/// The notes of the constructions from wraps none of which is needed (joint_search::seed): the
/// greedy's start from every wrap and search_swap's seed with wraps. They share a runner.
inline constexpr std::string_view optional_wrap_start = "greedy+wrap:optional";
inline constexpr std::string_view optional_wrap_seed  = "seed:search_swap+wrap";

/// The fastest fitting schedule so far (joint search).
struct joint_incumbent {
  std::optional<schedule> best;
  std::optional<sim_result> sim;
  std::optional<schedule> smallest;  // lowest planned peak seen, for "does not fit"
  bool activations_only = false;     // joint_search::also_any_kind off: only act / temp move
  bool redrop           = false;     // joint_search::redrop: repair with second departures
  bool share            = false;     // joint_search::share_reruns: priced shared in a batch
  seed_memo* memo       = nullptr;   // with encodings: the work both searches share
  // The re-run chains of the schedules planned and validated (chains_for), kept for the whole
  // plan() call (both searches with encodings): the same entries come back in many plans.
  chain_memo* chains                      = nullptr;
  static constexpr std::size_t max_chains = std::size_t{1} << 16;  // then forgotten, kept anew

  // `chains`, emptied first when it holds max_chains (no reference into it is held between
  // calls), or null.
  [[nodiscard]] chain_memo* chains_for() noexcept
  {
    if (chains != nullptr && chains->size() >= max_chains) { chains->clear(); }
    return chains;
  }

  [[nodiscard]] double time() const noexcept
  {
    return sim ? sim->iteration_s : std::numeric_limits<double>::infinity();
  }

  bool offer(trace_analysis const& a, schedule s, std::string const& who,
             std::optional<encoding_options> const& enc, joint_search_stats& stats)
  {
    if (repeated(s, family_of(who))) { return false; }
    auto p = prepare(a, std::move(s), enc, chains_for(), !best, false);
    keep_redrop(p);
    return finish(a, std::move(p), who, stats);
  }

  // What offer() computes of a schedule from the memo alone, not the incumbent: the schedule as
  // timed (encodings, redrop repair, sharing order) and its simulation. prepare() makes it
  // (several at once on worker threads while nothing is offered: it only reads `memo`), and
  // offer_prepared() does with it what offer() would have done at that point.
  struct prepared {
    std::optional<schedule> given;     // the schedule offered (kept for offer_prepared)
    schedule timed;                    // as timed
    std::optional<schedule> repaired;  // a redrop repair memo->redrops lacked, to keep there
    std::pair<std::uint64_t, std::uint64_t> key{};  // the memo's key for it (memo_used)
    bool memo_used = false;                         // the repair was looked up in memo->redrops
    bool memo_hit  = false;                         // ... and found there
    bool simulated = false;
    bool failed    = false;  // validation refused it
    sim_result sim;
  };

  // `s` prepared for offer(), its chains from `from` when not null; simulated unless it moves
  // state with activations_only, or its planned peak is over the budget and not `simulate_over`
  // (an incumbent exists: offer() does not simulate such a plan); `keep` keeps a copy of `s`.
  [[nodiscard]] prepared prepare(trace_analysis const& a, schedule s,
                                 std::optional<encoding_options> const& enc, chain_memo* from,
                                 bool simulate_over, bool keep) const
  {
    prepared p;
    if (keep) { p.given = s; }
    if (auto const key = repair_key(s)) {
      // with_redrops(with_encodings(s)), taken from `memo` where a plan with the same entries but
      // for their encodings was repaired before (encode_redropped).
      p.memo_used   = true;
      p.key         = *key;
      auto const n  = s.entries.size();
      auto const it = redrop_at(p.key);
      if (it != memo->redrops.end() && it->first == p.key) {
        p.memo_hit = true;
        s          = enc ? encode_redropped(a, it->second, n, *enc) : it->second;
      } else {
        if (enc) { s = with_encodings(a, std::move(s), *enc); }
        s          = redrops(a, std::move(s), from);
        p.repaired = s;
      }
    } else {
      if (enc) { s = with_encodings(a, std::move(s), *enc); }
      if (redrop && s.device_peak > s.budget) { s = redrops(a, std::move(s), from); }
    }
    if (share) { s = sharing_order(a, std::move(s), from); }
    if (!(activations_only && moves_state(a, s)) && (s.device_peak <= s.budget || simulate_over)) {
      time_it(a, s, from, p);
    }
    p.timed = std::move(s);
    return p;
  }

  // `s` validated and simulated into `p`, the chains from `from` when not null.
  static void time_it(trace_analysis const& a, schedule const& s, chain_memo* from, prepared& p)
  {
    p.simulated = true;
    try {
      if (from != nullptr) {  // validate_schedule, the chains kept
        validate_schedule_with(a, s, *from);
        p.sim = simulate_unvalidated(a, s, sim_options{false, sim_memory::enforce_budget, false},
                                     *from);
      } else {
        p.sim = simulate(a, s, sim_options{false, sim_memory::enforce_budget, true});
      }
    } catch (schedule_error const&) {
      p.failed = true;
    }
  }

  // What offer(a, *p.given, who, enc, stats) does, `p` made by prepare(..., keep = true) since the
  // last offer or from a memo where this plan's repair is as it was then (else offered again);
  // `print` is fingerprint(*p.given, family_of(who)).
  bool offer_prepared(trace_analysis const& a, prepared p, std::string const& who,
                      std::pair<std::uint64_t, std::uint64_t> const& print,
                      std::optional<encoding_options> const& enc, joint_search_stats& stats)
  {
    if (p.memo_used && repair_kept(p.key) != p.memo_hit) {
      return offer(a, std::move(*p.given), who, enc, stats);
    }
    if (repeated(print)) { return false; }
    keep_redrop(p);
    return finish(a, std::move(p), who, stats);
  }

  // The key under which prepare() looks up the redrop repair of `s` in memo->redrops, or none
  // where it does not (no memo, no redrops, or `s` within its budget).
  [[nodiscard]] std::optional<std::pair<std::uint64_t, std::uint64_t>> repair_key(
      schedule const& s) const noexcept
  {
    if (!memo || !redrop || s.device_peak <= s.budget) { return std::nullopt; }
    return fingerprint(s, 0, false);
  }

  // Whether memo->redrops holds a repair under `key` (then prepare() finds it there; the memo
  // only grows).
  [[nodiscard]] bool repair_kept(std::pair<std::uint64_t, std::uint64_t> const& key) const
  {
    auto const it = redrop_at(key);
    return it != memo->redrops.end() && it->first == key;
  }

  // Where `key` is or goes in memo->redrops (sorted by key).
  [[nodiscard]] decltype(seed_memo::redrops)::iterator redrop_at(
      std::pair<std::uint64_t, std::uint64_t> const& key) const
  {
    return std::lower_bound(memo->redrops.begin(), memo->redrops.end(), key,
                            [](auto const& x, auto const& k) { return x.first < k; });
  }

  // The redrop repair `p` computed, kept in memo->redrops where there is room.
  void keep_redrop(prepared const& p)
  {
    if (!p.repaired) { return; }
    auto const& s = *p.repaired;
    if (memo->room(s.entries.size() + s.recomputes.size())) {
      memo->redrops.emplace(redrop_at(p.key), p.key, s);
    }
  }

  // offer()'s last steps on `p`, prepared for it: the smallest plan kept, the runners and the
  // incumbent.
  bool finish(trace_analysis const& a, prepared p, std::string const& who,
              joint_search_stats& stats)
  {
    auto& s = p.timed;
    if (activations_only && moves_state(a, s)) { return false; }  // a seed's any-kind variant
    if (!smallest || s.device_peak < smallest->device_peak) { smallest = s; }
    if (s.device_peak > s.budget && best) { return false; }  // cannot fit: save the simulation
    if (!p.simulated) { time_it(a, s, chains_for(), p); }    // (prepared without: not reached)
    ++stats.simulations;
    if (p.failed || !p.sim.fits) { return false; }
    s.note = who;
    keep_runner(s, p.sim);
    if (p.sim.iteration_s >= time()) { return false; }
    stats.winner = who;
    best         = std::move(s);
    sim          = std::move(p.sim);
    return true;
  }
  // The fastest fitting schedule of each kind of construction (the policies' seeds and hybrids;
  // the greedy with each swap placed alone; the greedy with swaps on the link's free room; the
  // constructions from optional wraps), where the local search starts from: the fastest seed's
  // neighbourhood is not always the best one.
  std::array<std::optional<std::pair<schedule, sim_result>>, 4> runners;

  // with_redrops(s), the chains from `from` when not null (the same chains).
  [[nodiscard]] schedule redrops(trace_analysis const& a, schedule s, chain_memo* from) const
  {
    if (from == nullptr) { return with_redrops(a, std::move(s), activations_only); }
    return with_redrops_using(a, std::move(s), activations_only, *from);
  }

  // The runner slot of a construction named `who`: 0 the policies' seeds and hybrids, 1 the
  // greedy with swaps placed alone, 2 the greedy on the link's free room, 3 the constructions
  // from optional wraps (optional_wrap_start, optional_wrap_seed).
  [[nodiscard]] static std::size_t family_of(std::string const& who) noexcept
  {
    if (who.starts_with(optional_wrap_start) || who.starts_with(optional_wrap_seed)) { return 3; }
    return !who.starts_with("greedy") ? 0 : who.find("/link") == std::string::npos ? 1 : 2;
  }

  void keep_runner(schedule const& s, sim_result const& r)
  {
    auto& slot = runners[family_of(s.note)];
    if (!slot || r.iteration_s < slot->second.iteration_s) { slot.emplace(s, r); }
  }

  // Fingerprints of the schedules offered so far, as given (before encodings, redrops, sharing
  // order): many constructions return the same plan (starts whose checkpoint recomputes the
  // greedy prunes, weightings that agree), and each non-fitting one costs a redrop repair.
  // Offering one again changes nothing (the same repair and simulation, a time not below the
  // incumbent's or its runner's), so a repeat of the same runner family is skipped. Two
  // independent 64-bit hashes of every field, not copies: a plan of a deep trace holds tens of
  // thousands of entries and a search offers hundreds of plans (two distinct plans would have
  // to agree on both hashes, about 2^-128 per pair, for one to be skipped).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> seen;  // sorted

  // (`encodings` false: the entries' encodings left out.)
  [[nodiscard]] static std::pair<std::uint64_t, std::uint64_t> fingerprint(
      schedule const& s, std::size_t family, bool encodings = true) noexcept
  {
    std::uint64_t h1 = 0xcbf29ce484222325ULL ^ family, h2 = 0x9e3779b97f4a7c15ULL + family;
    auto const mix = [&](std::uint64_t x) {
      h1 = (h1 ^ x) * 0x100000001b3ULL;  // FNV-1a style, word at a time
      x += h2 + 0x9e3779b97f4a7c15ULL;   // splitmix64 over a running sum
      x  = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
      x  = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
      h2 = x ^ (x >> 31);
    };
    mix(s.budget);
    mix(s.shared_reruns ? 1 : 0);
    mix(s.entries.size());
    for (auto const& e : s.entries) {
      for (auto const x :
           {std::uint64_t{e.id}, e.last_use, e.next_use, e.offload_at, e.prefetch_at, e.bytes}) {
        mix(x);
      }
      mix((encodings ? static_cast<std::uint64_t>(e.encoding) : 0U) | (e.wrap ? 256U : 0U) |
          (e.redrop ? 512U : 0U));
    }
    mix(s.recomputes.size());
    for (auto const& e : s.recomputes) {
      for (auto const x : {std::uint64_t{e.id}, e.last_use, e.next_use, e.at, e.bytes}) { mix(x); }
    }
    return {h1, h2};
  }

  // Whether fingerprint `f` (fingerprint(s, family)) is in `seen`: then repeated(s, family) is
  // true now and after (`seen` only grows).
  [[nodiscard]] bool offered(std::pair<std::uint64_t, std::uint64_t> const& f) const
  {
    return std::binary_search(seen.begin(), seen.end(), f);
  }

  // True when `s` was offered before for `family` (see `seen`); else it is remembered.
  bool repeated(schedule const& s, std::size_t family) { return repeated(fingerprint(s, family)); }

  // repeated(s, family), given f = fingerprint(s, family).
  bool repeated(std::pair<std::uint64_t, std::uint64_t> const& f)
  {
    auto const it = std::lower_bound(seen.begin(), seen.end(), f);
    if (it != seen.end() && *it == f) {
      ++repeats;
      return true;
    }
    seen.insert(it, f);
    return false;
  }
  std::size_t repeats = 0;

  [[nodiscard]] static bool moves_state(trace_analysis const& a, schedule const& s) noexcept
  {
    auto const storages = a.trace().storages();
    return std::any_of(s.entries.begin(), s.entries.end(), [&](swap_entry const& e) {
      return storages[e.id].kind != storage_kind::act && storages[e.id].kind != storage_kind::temp;
    });
  }
};

// The chains of a plan's recompute entries (recompute_chain_of each), those the greedy cached
// taken from it as joint_greedy::add_to takes them: the local search's moves build a set of the
// same entries for each move, and computed each chain again for each.
class entry_chains {
 public:
  entry_chains(trace_analysis const& a, joint_greedy const& greedy,
               std::vector<recompute_entry> const& rcs)
  {
    own_.reserve(rcs.size());  // never reallocated: chains_ points into it
    for (auto const& e : rcs) {
      auto const* c = greedy.cached_chain(e);
      if (c == nullptr) {
        own_.push_back(recompute_chain_of(a, e.id, e.last_use, e.at));
        c = &own_.back();
      }
      chains_.push_back(c);
    }
  }

  [[nodiscard]] recompute_chain const& operator[](std::size_t k) const { return *chains_[k]; }

 private:
  std::vector<recompute_chain> own_;
  std::vector<recompute_chain const*> chains_;
};

// `set` made a recompute set over `swaps` holding every entry of `keep` but the one at `skip`
// (valid together already), in order, each with its chain from `chains`.
inline void fill_set(recompute_set& set, std::span<swap_entry const> swaps,
                     std::vector<recompute_entry> const& keep, entry_chains const& chains,
                     std::size_t skip = std::numeric_limits<std::size_t>::max())
{
  set.reset(swaps);
  for (std::size_t k = 0; k < keep.size(); ++k) {
    if (k != skip) { (void)set.try_add(keep[k], chains[k]); }
  }
}

// The latest op p in (lo, v] whose nominal start leaves `seconds` before op v starts (lo + 1 if
// none does).
[[nodiscard]] inline std::uint64_t prefetch_op(trace_analysis const& a, std::uint64_t lo,
                                               std::uint64_t v, double seconds)
{
  auto p = v;
  while (p > lo + 1 && a.op_start(v) - a.op_start(p) < seconds) { --p; }
  return p;
}

// joint_search's worker threads (joint_search::threads) and what each owns: worker 0, the calling
// thread, the plan's greedy and chain memo; each other worker a copy of the greedy (its
// constructions write scratch buffers, so one object serves one thread) and a chain memo of its
// own. A memo returns what computing again would, so which worker ran a task changes nothing.
// The copies are made here, before any task runs.
class search_workers {
 public:
  search_workers(trace_analysis const& a, joint_greedy const& greedy, chain_memo& chains,
                 std::size_t threads)
      : greedy_(greedy), chains_(chains), threads_(std::max<std::size_t>(threads, 1))
  {
    greedies_.reserve(threads_ - 1);
    memos_.reserve(threads_ - 1);
    for (std::size_t w = 1; w < threads_; ++w) {
      greedies_.push_back(greedy);
      memos_.emplace_back(a);
    }
  }

  // The greedy worker `w` uses.
  [[nodiscard]] joint_greedy const& greedy(std::size_t w) const noexcept
  {
    return w == 0 ? greedy_ : greedies_[w - 1];
  }

  // Worker `w`'s chain memo, emptied first when it holds joint_incumbent::max_chains.
  [[nodiscard]] chain_memo* chains(std::size_t w) noexcept
  {
    auto& m = w == 0 ? chains_ : memos_[w - 1];
    if (m.size() >= joint_incumbent::max_chains) { m.clear(); }
    return &m;
  }

  // task(i, worker) for each i in [0, count) on the workers (stash::run_tasks): the tasks must
  // write only their own results.
  template <typename Task>
  void run(std::size_t count, Task&& task) const
  {
    run_tasks(threads_, count, std::forward<Task>(task));
  }

  // How many tasks a caller that holds each task's result until it consumes it in order hands
  // out at a time: chunk_per_thread per worker, one with one thread (then task and consumer
  // alternate, as without workers).
  [[nodiscard]] std::size_t chunk_size() const noexcept
  {
    return threads_ == 1 ? 1 : chunk_per_thread * threads_;
  }
  static constexpr std::size_t chunk_per_thread = 4;

 private:
  joint_greedy const& greedy_;
  chain_memo& chains_;
  std::size_t threads_;
  std::vector<joint_greedy> greedies_;
  std::vector<chain_memo> memos_;
};

}  // namespace detail

/// @brief stash's keep / swap / recompute planner (see the file comment).
struct joint_search {
  /// Per-entry encodings for swap entries (encoding_choice.hpp); none: as the Codec slot sends.
  std::optional<encoding_options> encodings;
  /// Simulations spent on local search after the seeds.
  std::size_t max_simulations = 120;
  /// Let the search_swap seeds also swap storages of any kind (parameters, gradients, optimizer
  /// state: search_swap::also_any_kind); off for a loop whose persistent storages cannot leave.
  bool also_any_kind = true;
  /// With also_any_kind, also plan wrap entries (sim/schedule.hpp: a persistent storage off the
  /// device from its last access of one iteration to its first of the next, the only way out
  /// for optimizer state used once per step): search_swap's seed plans them
  /// (search_swap::wrap), and the greedy also starts from wraps (detail::wrap_planner's choices
  /// `first` and `all`; its pruning drops those the budget does not need). On by default, as
  /// also_any_kind: a loop whose persistent storages cannot leave sets
  /// allocator_options::keep_persistent (which drops wraps with the other persistent entries)
  /// or turns both off.
  bool wrap = true;
  /// Let a storage that a re-run reads leave the device again after that read (sim/schedule.hpp,
  /// re-run uses; detail::with_redrops): a construction whose planned peak exceeds the budget is
  /// repaired with swap entries over the sub-gap after the re-run (a redrop of the host copy
  /// when the storage is also swapped before it) before it is timed. On by default:
  /// stash::allocator runs such entries (early departures right after the re-runs; a redrop gives
  /// the device bytes back to the host copy its prefetch kept, offload_manager's
  /// host_copy_mode::keep). stash-plan's --no-redrop turns it off.
  bool redrop = true;
  /// Share re-runs inside a batch (schedule::shared_reruns, shared_reruns_of): where a re-run
  /// rebuilds a storage as a transient input (the BatchNorm output a pre-activation `clone`
  /// read before an in-place activation overwrote it) and that storage is recomputed in the same
  /// batch, the rebuild goes into the storage's own bytes and its entry re-runs only the ops
  /// after it: one BatchNorm serves both. Every schedule offered is timed so (each batch ordered
  /// for it: detail::sharing_order), and each local search ends with the (e) moves, which bring
  /// such a pair into one batch where the planned peak allows. stash::allocator executes it
  /// (recompute_step::hands); off, every chain runs alone, as before.
  bool share_reruns = true;
  /// Worker threads for the search's independent work: the greedy's constructions from the
  /// seeds' starts (each built and its planned peak computed on a worker, then offered to the
  /// incumbent in the order of one thread) and the local searches from the fastest seed of each
  /// kind (each with its own incumbent, compared in order after). Every task writes only its own
  /// result and the results are consumed in the sequential order, so the plan is the same for
  /// every count, on any machine and load (work is counted in steps, never in time). 1, the
  /// default: everything on the calling thread (stash::allocator plans at run time, inside a
  /// training process that owns its threads; a tool opts in, as stash-plan's --threads does).
  /// The CPU seconds do not drop with more threads (the same work, spread); the wall time does.
  unsigned threads = 1;

  /// @brief Registry name.
  /// @return "search".
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "search"; }

  /// @brief The fastest schedule found that fits `budget`; when none fits, the one with the
  /// lowest planned peak (its note says it does not fit).
  /// @param a The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& a, std::uint64_t budget) const
  {
    joint_search_stats ignored;
    return plan(a, budget, ignored);
  }

  /// @brief As plan(a, budget), reporting the work done into `stats`.
  /// @param a The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @param stats Filled with the search's counters when not null.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& a, std::uint64_t budget,
                              joint_search_stats& stats) const
  {
    stats = joint_search_stats{};
    if (a.peak_live_bytes() <= budget) {
      stats.winner = "no_swap";
      return make_schedule(a, std::string(name()), budget, {});
    }
    detail::joint_greedy const greedy(a);
    detail::chain_memo chains(a);
    detail::search_workers workers(a, greedy, chains, threads);
    auto inc   = incumbent(nullptr);
    inc.chains = &chains;
    if (!encodings) {
      search(a, budget, greedy, workers, inc, stats);
    } else {
      // The search without encodings, then the one with them, sharing their constructions and
      // repairs (detail::seed_memo); the faster plan of the two. The raw plan is a plan with
      // encodings too (each entry as the Codec slot sends), so `search` with encodings is never
      // slower than without.
      detail::seed_memo memo;
      joint_search raw = *this;
      raw.encodings.reset();
      auto raw_inc   = incumbent(&memo);
      raw_inc.chains = &chains;
      joint_search_stats raw_stats;
      raw.search(a, budget, greedy, workers, raw_inc, raw_stats);
      inc.memo = &memo;
      search(a, budget, greedy, workers, inc, stats);
      stats.simulations += raw_stats.simulations;
      if (raw_inc.time() < inc.time()) {
        stats.winner       = "raw:" + raw_stats.winner;
        raw_inc.best->note = "raw:" + raw_inc.best->note;
        if (!a.model().params().use_codec) {  // the Codec slot sends raw: say so, as encodings do
          for (auto& e : raw_inc.best->entries) {
            if (e.encoding == swap_encoding::configured) { e.encoding = swap_encoding::raw; }
          }
        }
        inc.best = std::move(raw_inc.best);
        inc.sim  = std::move(raw_inc.sim);
      }
    }
    if (!inc.best) {
      auto s   = inc.smallest ? std::move(*inc.smallest) : make_schedule(a, "", budget, {});
      s.policy = std::string(name());
      s.note   = "does not fit: no seed or move fits the budget";
      return s;
    }
    inc.best->policy = std::string(name());
    return std::move(*inc.best);
  }

 private:
  [[nodiscard]] detail::joint_incumbent incumbent(detail::seed_memo* memo) const
  {
    detail::joint_incumbent inc;
    inc.activations_only = !also_any_kind;
    inc.redrop           = redrop;
    inc.share            = share_reruns;
    inc.memo             = memo;
    return inc;
  }

  // Seeds, local search and polish into `inc` (the file comment's steps 1-3).
  void search(trace_analysis const& a, std::uint64_t budget, detail::joint_greedy const& greedy,
              detail::search_workers& workers, detail::joint_incumbent& inc,
              joint_search_stats& stats) const
  {
    seed(a, budget, greedy, workers, inc, stats);
    if (!improve_runners(a, budget, workers, inc, stats)) { polish(a, budget, greedy, inc, stats); }
  }

  void seed(trace_analysis const& a, std::uint64_t budget, detail::joint_greedy const& greedy,
            detail::search_workers& workers, detail::joint_incumbent& inc,
            joint_search_stats& stats) const
  {
    auto const wraps = needed_wraps(a, budget);
    search_swap const swaps{
        .also_any_kind = also_any_kind, .wrap = !wraps.empty(), .encodings = encodings};
    inc.offer(a, swaps.plan(a, budget), "seed:search_swap", encodings, stats);
    bool const optional = optional_wraps(a, budget, wraps);
    if (optional) {
      auto wrapping = swaps;
      wrapping.wrap = true;
      inc.offer(a, wrapping.plan(a, budget), std::string(detail::optional_wrap_seed), encodings,
                stats);
    }
    inc.offer(a, checkpoint{}.plan(a, budget), "seed:checkpoint", encodings, stats);
    inc.offer(a, dtr{}.plan(a, budget), "seed:dtr", encodings, stats);
    std::vector<std::pair<std::string, detail::greedy_plan>> starts;
    starts.emplace_back("greedy", detail::greedy_plan{});
    for (std::size_t const segments : checkpoint_segments) {
      starts.emplace_back("greedy+checkpoint" + std::to_string(segments),
                          detail::greedy_plan{{}, checkpoint{segments}.plan(a, budget).recomputes});
    }
    add_wrap_starts(a, budget, wraps, optional, starts);
    for (double const f : {1.15, 1.35, 1.7}) {
      auto const higher = static_cast<std::uint64_t>(static_cast<double>(budget) * f);
      if (higher >= a.peak_live_bytes()) { break; }
      auto base =
          search_swap{
              .also_any_kind = also_any_kind, .seed_with_policies = false, .encodings = encodings}
              .plan(a, higher);
      if (base.device_peak > higher) { continue; }
      auto const tag = "hybrid:" + std::to_string(f);
      starts.emplace_back("greedy+" + tag, detail::greedy_plan{base.entries, {}});
      auto hybrid = dtr{}.plan_over(a, budget, std::move(base.entries));
      inc.offer(a, std::move(hybrid), tag, encodings, stats);
    }
    seed_greedy(a, budget, greedy, workers, starts, inc, stats);
  }

  [[nodiscard]] bool wraps_on() const noexcept { return wrap && also_any_kind; }

  // Whether search also tries wraps none of which is `needed`: where swapping activations alone
  // cannot make room (below swap_bound_bytes(activations), persistent storages leave in every
  // swap schedule) and some persistent storage may wrap.
  [[nodiscard]] bool optional_wraps(trace_analysis const& a, std::uint64_t budget,
                                    std::vector<swap_entry> const& needed) const
  {
    return wraps_on() && needed.empty() && budget < swap_bound_bytes(a, swap_scope::activations) &&
           !detail::wrap_candidates(a, 0).empty();
  }

  // The wraps some op needs (wraps_on): detail::wrap_choice::needed, those without which gaps
  // inside the iteration cannot bring every op within the budget (optimizer state used once per
  // step, weights allocated long before their first use). Where none is needed, `search` plans
  // as without wraps: more seeds and starts there cost planning time and move the local
  // search's starting points without making room that was missing.
  [[nodiscard]] std::vector<swap_entry> needed_wraps(trace_analysis const& a,
                                                     std::uint64_t budget) const
  {
    if (!wraps_on()) { return {}; }
    auto const cands = detail::wrap_candidates(a, 0);
    if (cands.empty()) { return {}; }
    std::vector<double> nominal(a.op_count());
    for (std::size_t i = 0; i < nominal.size(); ++i) { nominal[i] = a.op_start(i); }
    return detail::choose_wraps(a, cands, budget, detail::wrap_choice::needed, nominal);
  }

  // Greedy starts from the needed wraps, and from every persistent storage that may wrap
  // ("all"; where none is needed and `optional` (optional_wraps), the optional_wrap_start). The
  // greedy covers the rest with gaps inside the iteration and prunes the wraps that end up
  // redundant.
  static void add_wrap_starts(trace_analysis const& a, std::uint64_t budget,
                              std::vector<swap_entry> const& needed, bool optional,
                              std::vector<std::pair<std::string, detail::greedy_plan>>& starts)
  {
    if (needed.empty() && !optional) { return; }
    std::vector<double> nominal(a.op_count());
    for (std::size_t i = 0; i < nominal.size(); ++i) { nominal[i] = a.op_start(i); }
    auto all = detail::choose_wraps(a, detail::wrap_candidates(a, 0), budget,
                                    detail::wrap_choice::all, nominal);
    if (needed.empty()) {
      starts.emplace_back(detail::optional_wrap_start, detail::greedy_plan{std::move(all), {}});
      return;
    }
    if (needed.size() != all.size()) {
      starts.emplace_back("greedy+wrap:needed", detail::greedy_plan{needed, {}});
    }
    starts.emplace_back("greedy+wrap:all", detail::greedy_plan{std::move(all), {}});
  }

  // A construction that did not fit the budget: its start, variant and plan.
  struct miss {
    std::size_t start;
    detail::greedy_variant var;
    detail::greedy_plan plan;
  };

  static constexpr std::size_t checkpoint_segments[] = {0, 32, 64, 128};
  // Misses rebuilt with the fit repair (repair_order): one per weighting and target of the
  // variants that place swaps alone (3 at the full budget, 3 at 90%, 1 at 80%).
  static constexpr std::size_t max_repaired = 7;
  static constexpr detail::greedy_variant exchange_variant{1.0, 1.0, true};
  // Swap weights 0, 0.3, 1 with each swap placed alone; and with the swaps placed on the copy
  // engines' free intervals (greedy_variant::link_slots: only what the link can hide), weights
  // 0.05 and 0.1: a link second priced at a small fraction of a compute second, so that a
  // swap displaces the recomputes that are dear per byte, not the cheap ones.
  static constexpr detail::greedy_variant full_budget_variants[] = {{1.0, 0.0, true},
                                                                    {1.0, 0.3, true},
                                                                    {1.0, 1.0, true},
                                                                    {1.0, 0.05, true, true},
                                                                    {1.0, 0.1, true, true}};
  static constexpr std::size_t budget_free_starts = 1 + std::size(checkpoint_segments);

  // A greedy construction computed on a worker: its plan, the greedy's planned peak of it, its
  // schedule (make_plan), the fingerprint its offer looks up (joint_incumbent::repeated) and, where
  // seeding::screen has it prepared, that schedule prepared for the offer (timed: redrop repair,
  // simulation).
  struct built {
    detail::greedy_plan plan;
    std::uint64_t peak = 0;
    schedule sched;
    std::pair<std::uint64_t, std::uint64_t> print{};        // fingerprint(sched, its family)
    std::optional<detail::joint_incumbent::prepared> prep;  // sched prepared for the offer
  };

  // A construction seed_greedy computes ahead: from start k with variant var (the fit repair of
  // `missed` when not null), what it gave and, for a repair still over the budget, the repair
  // that also bans the re-runs whose own batch is over.
  struct ahead {
    std::size_t k;
    detail::greedy_variant var;
    detail::greedy_plan const* missed = nullptr;
    std::optional<built> out;
    std::optional<built> batch;
  };

  // seed_greedy's work: the constructions (construct()), then the fit repairs of those that
  // missed the budget (repair()), each built and prepared on the workers a chunk at a time and
  // offered to `inc` in the order of one thread.
  class seeding {
   public:
    seeding(joint_search const& self, trace_analysis const& a, std::uint64_t budget,
            detail::joint_greedy const& greedy, detail::search_workers& workers,
            std::vector<std::pair<std::string, detail::greedy_plan>> const& starts,
            detail::joint_incumbent& inc, joint_search_stats& stats)
        : self_(self),
          a_(a),
          budget_(budget),
          greedy_(greedy),
          workers_(workers),
          starts_(starts),
          inc_(inc),
          stats_(stats)
    {
      if (inc.memo) {
        for (auto const& st : starts) { ids_.push_back(inc.memo->start_id(st.second)); }
      }
    }

    // Every start with every variant, then feed_back on the fastest; the constructions over the
    // budget (swaps placed alone) are kept for repair().
    void construct()
    {
      std::size_t at_budget = 0;
      auto jobs             = construction_jobs(at_budget);
      in_chunks(
          jobs, [&](ahead& j, std::size_t w) { j.out = build(w, j, false); },
          [&](std::size_t i) {
            auto& j = jobs[i];
            if (i == at_budget && lead_) { feed_back(); }
            settle(j, false, *j.out);
            bool const optional = optional_start(j.k);
            if (offer(j) && i < at_budget && !optional) { lead_ = std::make_pair(j.k, j.var); }
            if (!j.var.link_slots && j.out->peak > budget_ && !optional) {
              misses_.push_back(miss{j.k, j.var, std::move(j.out->plan)});
            }
            j.out.reset();
          });
      if (jobs.size() == at_budget && lead_) { feed_back(); }
    }

    // The misses repaired (repair_order), in chunks as construct()'s.
    void repair()
    {
      std::vector<ahead> jobs;
      for (auto const m : repair_order(misses_)) {
        jobs.push_back(ahead{misses_[m].start, misses_[m].var, &misses_[m].plan, {}, {}});
      }
      in_chunks(
          jobs,
          [&](ahead& r, std::size_t w) {
            r.out = build(w, r, false);
            // Still over with the pin repair: also ban the re-runs whose own batch is over,
            // offered beside it (the pin repair's plan stays a candidate where it fits after the
            // redrops).
            if (r.out->peak > budget_) { r.batch = build(w, r, true); }
          },
          [&](std::size_t i) {
            auto& r = jobs[i];
            settle(r, false, *r.out);
            if (r.batch) { settle(r, true, *r.batch); }
            offer(r);
            r.out.reset();
            r.batch.reset();
          });
    }

   private:
    [[nodiscard]] bool optional_start(std::size_t k) const
    {
      return starts_[k].first == detail::optional_wrap_start;
    }

    // make(job, worker) for each of `jobs` and then(i) for each index, a chunk at a time
    // (search_workers::chunk_size: one job with one thread, as build-then-offer), which bounds
    // what is held to a chunk's schedules: the chunk's jobs built on the workers, screened here,
    // the forms screen() keeps prepared on the workers, then(i) for each in order here (offer).
    // Between chunks, offers, feed_back and settle change the incumbent and the memos; none of it
    // changes what a later chunk hands to offer_prepared: a construction found in inc.memo is the
    // one building gives (its key holds all the build reads); `fresh` (!inc.best when the chunk
    // is prepared) only decides whether an over-budget plan is simulated, and finish() drops such
    // a plan unsimulated-or-not once an incumbent exists, simulating it when none does; a redrop
    // repair looked up in memo->redrops and found (or not) otherwise at the offer is offered
    // again (offer_prepared's fallback), and one repaired is the same repair; a form left
    // unprepared is offered as offer() does, which is the single-thread order by definition.
    // Nothing writes inc while a chunk's workers run. So the offers, the incumbent, the runners
    // and the memos are those of the single-thread order, at any thread count.
    template <typename Make, typename Then>
    void in_chunks(std::vector<ahead>& jobs, Make&& make, Then&& then)
    {
      auto const size = workers_.chunk_size();
      for (std::size_t lo = 0; lo < jobs.size(); lo += size) {
        auto const n = std::min(size, jobs.size() - lo);
        workers_.run(n, [&](std::size_t i, std::size_t w) { make(jobs[lo + i], w); });
        auto const todo  = screen(std::span(jobs).subspan(lo, n));
        bool const fresh = !inc_.best;
        workers_.run(todo.size(),
                     [&](std::size_t i, std::size_t w) { prepare(w, *todo[i], fresh); });
        for (std::size_t i = lo; i < lo + n; ++i) { then(i); }
      }
    }

    // The forms of `chunk` (in the order offered: a repair's batch form where it differs, then
    // each job's plain one) whose offer a preparation serves: not one the offer drops as
    // repeated (its fingerprint offered before or earlier in the chunk: every form is offered
    // and `seen` only grows), nor one whose redrop repair an earlier form of the chunk computes
    // and keeps (its offer would find the repair kept and prepare it again: offer_prepared's
    // fallback). Those are left unprepared: offered, they do what offer() does there.
    [[nodiscard]] std::vector<built*> screen(std::span<ahead> chunk) const
    {
      std::vector<built*> todo;
      std::vector<std::pair<std::uint64_t, std::uint64_t>> prints;  // of the forms in todo
      for (auto& j : chunk) {
        for (auto* b : {differs(j) ? &*j.batch : nullptr, &*j.out}) {
          if (b == nullptr || inc_.offered(b->print) ||
              std::find(prints.begin(), prints.end(), b->print) != prints.end()) {
            continue;
          }
          prints.push_back(b->print);
          todo.push_back(b);
        }
      }
      return shared_repairs_dropped(todo);
    }

    // `todo` without each form whose redrop repair (joint_incumbent::repair_key) an earlier one
    // makes and memo->redrops lacks. A key (a hash over every entry) is computed only for a form
    // over the budget whose sizes and planned peak another such form shares: equal keys need
    // equal entries and recomputes, of which the planned peak is made. (A pair missed would only
    // be repaired twice, as before: offer_prepared's fallback keeps the offers as they were.)
    [[nodiscard]] std::vector<built*> shared_repairs_dropped(std::vector<built*> const& todo) const
    {
      if (!inc_.memo || !inc_.redrop) { return todo; }
      auto const shape = [](built const* b) {
        return std::make_tuple(b->sched.entries.size(), b->sched.recomputes.size(),
                               b->sched.device_peak);
      };
      auto const may_share = [&](built const* b) {
        return b->sched.device_peak > b->sched.budget &&
               std::count_if(todo.begin(), todo.end(),
                             [&](built const* o) { return shape(o) == shape(b); }) > 1;
      };
      std::vector<built*> out;
      std::vector<std::pair<std::uint64_t, std::uint64_t>> keys;  // of the repairs made in `out`
      for (auto* b : todo) {
        if (may_share(b)) {
          auto const key = *inc_.repair_key(b->sched);  // over the budget: it has one
          if (!inc_.repair_kept(key)) {
            if (std::find(keys.begin(), keys.end(), key) != keys.end()) { continue; }
            keys.push_back(key);
          }
        }
        out.push_back(b);
      }
      return out;
    }

    // Every start with every variant (the first `at_budget` jobs); then the budget-independent
    // starts (nothing, the checkpoints) for 90% and 80% of this budget: schedules for tighter
    // budgets (they fit this one too), so that the plan does not get slower as the budget grows
    // because a construction happened to do worse at this one (planned for 90% of this budget
    // they repeat exactly what a plan for that budget constructs).
    [[nodiscard]] std::vector<ahead> construction_jobs(std::size_t& at_budget) const
    {
      std::vector<ahead> jobs;
      for (std::size_t k = 0; k < starts_.size(); ++k) {
        for (auto const& var : full_budget_variants) {
          jobs.push_back(ahead{k, var, nullptr, {}, {}});
        }
      }
      at_budget = jobs.size();
      for (std::size_t k = 0; k < starts_.size() && k < budget_free_starts; ++k) {
        for (auto var : full_budget_variants) {
          var.target_share = 0.9;
          jobs.push_back(ahead{k, var, nullptr, {}, {}});
        }
        jobs.push_back(ahead{k, {0.8, 0.3, true}, nullptr, {}, {}});
      }
      return jobs;
    }

    // Job `j`'s construction (its batch form: `batches`) on worker w, from inc.memo where it
    // holds it (only read while the workers run).
    [[nodiscard]] built build(std::size_t w, ahead const& j, bool batches) const
    {
      auto const& g     = workers_.greedy(w);
      auto const& start = starts_[j.k].second;
      auto const* kept =
          inc_.memo ? inc_.memo->find(ids_[j.k], j.var, {}, j.missed, batches) : nullptr;
      auto p           = kept       ? *kept
                         : j.missed ? g.repair(budget_, j.var, start, *j.missed, batches)
                                    : g.build(budget_, j.var, start);
      auto const peak  = g.peak(p);
      auto sched       = detail::make_schedule_using(a_, std::string(name()), budget_, p.swaps,
                                                     p.recomputes, workers_.chains(w));
      auto const print = inc_.fingerprint(sched, inc_.family_of(tag(j, batches)));
      return built{std::move(p), peak, std::move(sched), print, std::nullopt};
    }

    // inc.memo's bookkeeping for a construction built ahead, as construct() would do it.
    void settle(ahead const& j, bool batches, built const& b)
    {
      if (inc_.memo) { inc_.memo->keep(ids_[j.k], j.var, {}, j.missed, batches, b.plan); }
    }

    // Whether a repair's batch form differs from its plain one (then both are offered).
    [[nodiscard]] static bool differs(ahead const& r)
    {
      return r.batch && (r.batch->plan.swaps != r.out->plan.swaps ||
                         r.batch->plan.recomputes != r.out->plan.recomputes);
    }

    // `b`'s schedule prepared for the offer on worker w (the incumbent only read: `fresh`, no
    // incumbent yet when the workers started).
    void prepare(std::size_t w, built& b, bool fresh) const
    {
      b.prep =
          inc_.prepare(a_, std::move(b.sched), self_.encodings, workers_.chains(w), fresh, true);
    }

    // The name `j`'s plain form (or its batch form) is offered as.
    [[nodiscard]] std::string tag(ahead const& j, bool batch) const
    {
      return starts_[j.k].first + ":" + variant_tag(j.var) +
             (batch      ? "/repair-batch"
              : j.missed ? "/repair"
                         : "");
    }

    // Offers `b` as `who`, prepared where screen() had it prepared.
    bool offer(built& b, std::string const& who)
    {
      if (!b.prep) { return inc_.offer(a_, std::move(b.sched), who, self_.encodings, stats_); }
      return inc_.offer_prepared(a_, std::move(*b.prep), who, b.print, self_.encodings, stats_);
    }

    // Offers construction `j` (and its batch form first, where it differs).
    bool offer(ahead& j)
    {
      if (differs(j)) { offer(*j.batch, tag(j, true)); }
      return offer(*j.out, tag(j, false));
    }

    // joint_search::feed_back from the lead construction: its constructions read the
    // incumbent's simulation, so they are built here, in order.
    void feed_back()
    {
      auto fed = [&](std::size_t k, detail::greedy_variant const& var,
                     std::vector<std::pair<storage_id, std::uint64_t>> const& no_swap) {
        auto make = [&] { return greedy_.build(budget_, var, starts_[k].second, no_swap); };
        auto p =
            inc_.memo ? inc_.memo->construct(ids_[k], var, no_swap, nullptr, false, make) : make();
        return inc_.offer(
            a_, make_plan(a_, budget_, inc_, std::move(p.swaps), std::move(p.recomputes)),
            starts_[k].first + ":" + variant_tag(var) + "+fed", self_.encodings, stats_);
      };
      joint_search::feed_back(a_, *lead_, fed, inc_);
    }

    joint_search const& self_;
    trace_analysis const& a_;
    std::uint64_t budget_;
    detail::joint_greedy const& greedy_;
    detail::search_workers& workers_;
    std::vector<std::pair<std::string, detail::greedy_plan>> const& starts_;
    detail::joint_incumbent& inc_;
    joint_search_stats& stats_;
    std::vector<std::size_t> ids_;  // each start's index in inc.memo
    std::optional<std::pair<std::size_t, detail::greedy_variant>> lead_;  // start and variant
    std::vector<miss> misses_;  // the constructions left over the budget (swaps placed alone)
  };

  // The greedy constructions (detail::joint_greedy) from each start, for each variant; those
  // planned for a tighter budget than this one are seeds too (a schedule that fits a smaller
  // budget fits this one), which keeps the planner from getting slower as the budget grows.
  // The constructions that do not read the incumbent (all but feed_back's) are built a chunk at a
  // time on the workers, with their schedules timed as the offer would (joint_incumbent::prepare),
  // then offered in the order of one thread (offer_prepared): the same plans, offers and memo.
  void seed_greedy(trace_analysis const& a, std::uint64_t budget,
                   detail::joint_greedy const& greedy, detail::search_workers& workers,
                   std::vector<std::pair<std::string, detail::greedy_plan>> const& starts,
                   detail::joint_incumbent& inc, joint_search_stats& stats) const
  {
    seeding s(*this, a, budget, greedy, workers, starts, inc, stats);
    s.construct();
    s.repair();
  }

  // Which constructions that did not fit the budget are built again with the greedy's fit
  // repair (greedy_variant::repair, up to 1 + max_repairs constructions each), by index into
  // `misses`: in turns over the weightings and targets (the first miss of each in the order
  // built, then the second, ...), skipping a plan equal to one already listed, max_repaired of
  // them. Only the variants that place each swap alone: with swaps on the link's free room, a
  // re-run taken out has no room to become a swap, and the repair never fits there.
  static std::vector<std::size_t> repair_order(std::vector<miss> const& misses)
  {
    std::vector<std::pair<double, double>> keys;  // (target share, swap weight), first seen first
    std::vector<std::size_t> turns;               // per key: misses listed so far
    std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> order;  // (turn, key, miss)
    for (std::size_t j = 0; j < misses.size(); ++j) {
      auto const& m = misses[j];
      if (std::any_of(order.begin(), order.end(), [&](auto const& o) {
            auto const& x = misses[std::get<2>(o)].plan;
            return x.swaps == m.plan.swaps && x.recomputes == m.plan.recomputes;
          })) {
        continue;
      }
      std::pair const key{m.var.target_share, m.var.swap_weight};
      auto const k =
          static_cast<std::size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
      if (k == keys.size()) {
        keys.push_back(key);
        turns.push_back(0);
      }
      order.emplace_back(turns[k]++, k, j);
    }
    std::sort(order.begin(), order.end());
    std::vector<std::size_t> out;
    for (std::size_t j = 0; j < order.size() && j < max_repaired; ++j) {
      out.push_back(std::get<2>(order[j]));
    }
    return out;
  }

  // The winning construction again, told not to swap the gaps whose prefetch stalled the compute
  // stream in its simulation (they become recomputes or other swaps), a few rounds.
  template <typename Run>
  static void feed_back(trace_analysis const& a,
                        std::pair<std::size_t, detail::greedy_variant> const& lead, Run& run,
                        detail::joint_incumbent& inc)
  {
    std::vector<std::pair<storage_id, std::uint64_t>> no_swap;
    for (int round = 0; round < 4 && inc.sim; ++round) {
      auto const before = no_swap.size();
      for (auto const& st : inc.sim->stalls) {
        if (st.cause == stall_cause::memory || !st.storage || st.op >= a.op_count()) { continue; }
        for (auto const& e : inc.best->entries) {
          if (e.id == *st.storage && e.next_use == st.op) {
            no_swap.emplace_back(e.id, e.last_use);
          }
        }
      }
      if (no_swap.size() == before || !run(lead.first, lead.second, no_swap)) { return; }
    }
  }

  [[nodiscard]] static std::string variant_tag(detail::greedy_variant const& v)
  {
    return std::to_string(std::lround(v.target_share * 100)) + "%/w" +
           std::to_string(v.swap_weight).substr(0, 4) + (v.link_slots ? "/link" : "");
  }

  // make_schedule(a, name(), budget, sw, rc), the re-runs' chains from inc's memo where it has
  // one (the same planned peak).
  [[nodiscard]] static schedule make_plan(trace_analysis const& a, std::uint64_t budget,
                                          detail::joint_incumbent& inc, std::vector<swap_entry> sw,
                                          std::vector<recompute_entry> rc)
  {
    return detail::make_schedule_using(a, std::string(name()), budget, std::move(sw), std::move(rc),
                                       inc.chains_for());
  }

  // One move's schedule, offered to `inc` as `who` unless its (kind, storage, use) `key` was
  // tried before or its planned peak is over `budget` (then not simulated); true when kept.
  bool attempt_move(trace_analysis const& a, std::uint64_t budget, detail::joint_incumbent& inc,
                    std::vector<std::tuple<int, storage_id, std::uint64_t>>& tried,
                    joint_search_stats& stats, std::size_t& sims,
                    std::tuple<int, storage_id, std::uint64_t> key, std::vector<swap_entry> sw,
                    std::vector<recompute_entry> rc, std::string const& who) const
  {
    if (std::find(tried.begin(), tried.end(), key) != tried.end()) { return false; }
    tried.push_back(key);
    auto s = make_plan(a, budget, inc, std::move(sw), std::move(rc));
    if (s.device_peak > budget) { return false; }
    ++sims;
    return inc.offer(a, std::move(s), who, encodings, stats);
  }

  // One local-search move on the incumbent; true when one was kept.
  bool try_moves(trace_analysis const& a, std::uint64_t budget, detail::joint_greedy const& greedy,
                 detail::joint_incumbent& inc,
                 std::vector<std::tuple<int, storage_id, std::uint64_t>>& tried,
                 joint_search_stats& stats, std::size_t& sims, std::size_t limit) const
  {
    auto const& best = *inc.best;
    auto attempt     = [&](int kind, storage_id id, std::uint64_t u, std::vector<swap_entry> sw,
                       std::vector<recompute_entry> rc) {
      auto const who = best.note.ends_with("+moves") ? best.note : best.note + "+moves";
      return attempt_move(a, budget, inc, tried, stats, sims, {kind, id, u}, std::move(sw),
                              std::move(rc), who);
    };
    detail::entry_chains const chains(a, greedy, best.recomputes);
    detail::recompute_set set(a, {});  // refilled for each move (detail::fill_set)
    // (a) stalled prefetches become recomputes, longest stall first.
    auto stalls = inc.sim->stalls;
    std::stable_sort(stalls.begin(), stalls.end(),
                     [](auto const& x, auto const& y) { return x.seconds > y.seconds; });
    for (auto const& st : stalls) {
      if (sims >= limit) { return false; }
      if (st.cause == stall_cause::memory || !st.storage) { continue; }
      for (std::size_t j = 0; j < best.entries.size(); ++j) {
        auto const& e = best.entries[j];
        if (e.wrap || e.id != *st.storage || e.next_use != st.op) { continue; }
        auto sw = best.entries;
        sw.erase(sw.begin() + static_cast<std::ptrdiff_t>(j));
        detail::fill_set(set, sw, best.recomputes, chains);
        if (greedy.add_to(set,
                          recompute_entry{e.id, e.last_use, e.next_use, e.next_use, e.bytes}) &&
            attempt(0, e.id, e.last_use, sw, set.entries())) {
          return true;
        }
      }
    }
    // (b) drop, (c) swap instead: recomputes, most expensive first.
    std::vector<std::pair<double, std::size_t>> cost;
    for (std::size_t k = 0; k < best.recomputes.size(); ++k) {
      auto const& e = best.recomputes[k];
      cost.emplace_back(-greedy.seconds_of(e), k);
    }
    std::stable_sort(cost.begin(), cost.end());
    for (auto const& [neg, k] : cost) {
      if (sims >= limit) { return false; }
      auto const e = best.recomputes[k];
      auto rc      = best.recomputes;
      rc.erase(rc.begin() + static_cast<std::ptrdiff_t>(k));
      if (attempt(1, e.id, e.last_use, best.entries, rc)) { return true; }
      if (e.next_use <= e.last_use + 1) { continue; }
      auto const time = a.model().prefetch_time(e.bytes, swap_encoding::configured);
      swap_entry const sw{e.id,
                          e.last_use,
                          e.next_use,
                          e.last_use + 1,
                          detail::prefetch_op(a, e.last_use + 1, e.next_use, time),
                          e.bytes};
      detail::fill_set(set, best.entries, best.recomputes, chains, k);
      if (set.size() != rc.size() || !set.swap_allowed(sw)) { continue; }
      auto swaps = best.entries;
      swaps.push_back(sw);
      if (attempt(2, e.id, e.last_use, std::move(swaps), rc)) { return true; }
    }
    // (d) exchange, dearest per byte first: without it, the greedy covers what it leaves over
    // the budget with the cheapest other entries.
    std::vector<std::pair<double, std::size_t>> per_byte;
    per_byte.reserve(cost.size());
    for (auto const& [neg, k] : cost) {
      per_byte.emplace_back(
          neg / static_cast<double>(std::max<std::uint64_t>(1, best.recomputes[k].bytes)), k);
    }
    std::stable_sort(per_byte.begin(), per_byte.end());
    for (auto const& [neg, k] : per_byte) {
      if (sims >= limit) { return false; }
      auto const e = best.recomputes[k];
      auto rc      = best.recomputes;
      rc.erase(rc.begin() + static_cast<std::ptrdiff_t>(k));
      auto p = greedy.build(budget, exchange_variant, detail::greedy_plan{best.entries, rc}, {},
                            {{e.id, e.last_use}});
      if (attempt(3, e.id, e.last_use, std::move(p.swaps), std::move(p.recomputes))) {
        return true;
      }
    }
    return false;
  }

  // (e) with share_reruns: a recompute whose chain rebuilds a storage that another entry
  // rematerialises in a different batch moves into that entry's batch when its gap allows (the
  // later of the two runs at the earlier one's op), so that one re-run serves both.
  template <typename Attempt>
  static bool align_pairs(trace_analysis const& a, schedule const& best, Attempt& attempt,
                          std::size_t& sims, std::size_t limit)
  {
    auto const& rc = best.recomputes;
    for (std::size_t j = 0; j < rc.size(); ++j) {
      auto const chain = recompute_chain_of(a, rc[j].id, rc[j].last_use, rc[j].at);
      for (auto const r : chain.transients) {
        for (std::size_t k = 0; k < rc.size(); ++k) {
          if (sims >= limit) { return false; }
          if (rc[k].id != r || rc[k].at == rc[j].at) { continue; }
          auto moved        = rc;
          auto const target = std::min(rc[j].at, rc[k].at);
          auto& late        = rc[j].at > target ? moved[j] : moved[k];
          if (late.last_use >= target) { continue; }
          late.at = target;
          std::stable_sort(moved.begin(), moved.end(),
                           [](auto const& x, auto const& y) { return x.at < y.at; });
          if (attempt(4, rc[j].id, rc[j].last_use, best.entries, std::move(moved))) { return true; }
        }
      }
    }
    return false;
  }

  // A polish (step 3) runs on each local search's result at most this many times as slow as
  // the fastest of them: the polish moves took a result 1.54x slower than the fastest to the
  // fastest plan (resnet18, batch 32, at 50% on h100_sxm: the largest such ratio at the 104
  // target points of data/traces and four recorded traces; 1.59 for the transformer at 45% on
  // h100_sxm), and one 2x slower, polished, is CPU spent on a plan that loses (regnet_y_400mf at
  // 33%: 0.5 of its 2 CPU s). A bound on CPU, not a guarantee: a runner beyond it may lose a
  // plan that would have won.
  static constexpr double polish_ratio = 1.75;

  // The local search from the fastest seed of each kind (the fastest first), then the polish of
  // each result within polish_ratio of the fastest; the best result wins. Each runner has its own
  // incumbent and reads nothing another changes: they run on the workers, and their results are
  // compared in that order after. False when no runner fits (the caller polishes `inc`).
  bool improve_runners(trace_analysis const& a, std::uint64_t budget,
                       detail::search_workers& workers, detail::joint_incumbent& inc,
                       joint_search_stats& stats) const
  {
    std::vector<std::pair<schedule, sim_result>> runners;
    for (auto& slot : inc.runners) {
      if (slot) { runners.push_back(std::move(*slot)); }
    }
    std::stable_sort(runners.begin(), runners.end(), [](auto const& x, auto const& y) {
      return x.second.iteration_s < y.second.iteration_s;
    });
    std::vector<detail::joint_incumbent> locals(runners.size());
    std::vector<joint_search_stats> counts(runners.size());
    workers.run(runners.size(), [&](std::size_t k, std::size_t w) {
      auto& local            = locals[k];
      local.activations_only = inc.activations_only;
      local.redrop           = inc.redrop;
      local.share            = inc.share;
      local.chains           = workers.chains(w);
      local.best             = std::move(runners[k].first);
      local.sim              = std::move(runners[k].second);
      auto const& greedy     = workers.greedy(w);
      improve(a, budget, greedy, local, counts[k], max_simulations);
      reinsert(a, budget, greedy, local, counts[k]);
      if (local.share) { align_final(a, budget, local, counts[k]); }
      counts[k].winner = local.best->note;
      local.chains     = nullptr;  // the worker's, which another task may use next
    });
    polish_runners(a, budget, workers, locals, counts);
    for (std::size_t k = 0; k < locals.size(); ++k) {
      auto& local = locals[k];
      stats.simulations += counts[k].simulations;
      if (local.time() < inc.time()) {
        stats.winner = counts[k].winner;
        inc.best     = std::move(local.best);
        inc.sim      = std::move(local.sim);
      }
    }
    return !locals.empty();
  }

  // Step 3 on each of `locals` within polish_ratio of the fastest, on the workers.
  void polish_runners(trace_analysis const& a, std::uint64_t budget,
                      detail::search_workers& workers, std::vector<detail::joint_incumbent>& locals,
                      std::vector<joint_search_stats>& counts) const
  {
    double fastest = std::numeric_limits<double>::infinity();
    for (auto const& local : locals) { fastest = std::min(fastest, local.time()); }
    std::vector<std::size_t> chosen;
    for (std::size_t k = 0; k < locals.size(); ++k) {
      if (locals[k].time() <= fastest * polish_ratio) { chosen.push_back(k); }
    }
    workers.run(chosen.size(), [&](std::size_t i, std::size_t w) {
      auto& local  = locals[chosen[i]];
      local.chains = workers.chains(w);
      polish(a, budget, workers.greedy(w), local, counts[chosen[i]]);
      local.chains = nullptr;
    });
  }

  // Simulations of the (e) moves on a local search's result (share_reruns).
  static constexpr std::size_t align_simulations = 16;

  // The (e) moves again on a local search's result, whose own simulation budget may be spent:
  // each kept pair shares one re-run, a saving the moves before it did not see.
  void align_final(trace_analysis const& a, std::uint64_t budget, detail::joint_incumbent& inc,
                   joint_search_stats& stats) const
  {
    std::vector<std::tuple<int, storage_id, std::uint64_t>> tried;
    std::size_t sims = 0;
    auto attempt     = [&](int kind, storage_id id, std::uint64_t u, std::vector<swap_entry> sw,
                       std::vector<recompute_entry> rc) {
      return attempt_move(a, budget, inc, tried, stats, sims, {kind, id, u}, std::move(sw),
                              std::move(rc), inc.best->note + "+align");
    };
    while (inc.best && sims < align_simulations &&
           align_pairs(a, *inc.best, attempt, sims, align_simulations)) {}
  }

  // Rounds of the polish moves: the link exchange, the cut-swap re-runs, the chained swap re-runs
  // and the held re-run splits, again while one keeps a faster plan.
  static constexpr std::size_t polish_rounds_max = 3;

  // The polish moves (detail/link_exchange.hpp, detail/cut_swap_rerun.hpp) on the winner of the
  // local searches, in rounds; the moves (a)-(d), and (e) with share_reruns, again from what they
  // give. The winner only: the moves cost a construction or a simulation each.
  // The prefetch advances run in each round, and an advance keeps any faster plan; what the
  // rounds and the moves reach from there can be slower than from the plan before it
  // (alexnet_b128 at 68.3% on h100_sxm: an advance right after the chained swap re-runs,
  // 19.49 ms, where the moves from those re-runs reach 18.25 ms; transformer_encoder_b8 at 15%:
  // the cut-swap re-runs of the later rounds reach 76.24 ms without the advance, 81.25 ms after
  // it; predicted). Elsewhere the advances between the rounds are what gain (transformer at 33%
  // on h100_sxm). So the rounds run again without the advances, from the first path's state
  // before its first advance kept (up to there both take the same steps), and the faster result
  // is kept (where it is the one without them, the advances and the rounds with them follow from
  // it) -- but only where the first path kept an advance and its moves (a)-(e)
  // stopped before their simulations ran out (no faster plan left to them: the path ended where
  // the advance led it). Where the moves were still finding faster plans when their budget ran
  // out (regnet_y_400mf_b64 at 33%), the advance did not end the path, and a second path would
  // cost a second spend of the moves' budget: not run. Never slower than the first path alone
  // (up to the latency-bound drops, which run on the faster of the two).
  void polish(trace_analysis const& a, std::uint64_t budget, detail::joint_greedy const& greedy,
              detail::joint_incumbent& inc, joint_search_stats& stats) const
  {
    std::optional<rounds_state> held;  // the first path before its first advance kept
    auto const first  = polish_rounds(a, budget, greedy, inc, stats, true, {}, &held);
    auto const winner = stats.winner;
    if (held && first.settled) {
      // The rounds without the advances take the first path's steps up to that advance (the same
      // moves on the same plans): they go on from there.
      auto& other = held->inc;
      polish_rounds(a, budget, greedy, other, stats, false, *held, nullptr);
      if (other.time() < inc.time()) {
        std::size_t work = 0;
        if (advance_prefetches(a, budget, other, stats, work)) {
          polish_rounds(a, budget, greedy, other, stats, true, {.kept = true}, nullptr);
        }
        stats.winner = other.best->note;
        inc.best     = std::move(other.best);
        inc.sim      = std::move(other.sim);
      } else {
        stats.winner = winner;
      }
    }
    // Last, on what the moves above left (so that no plan they reach gets slower): the
    // latency-bound swap drops, and the moves again from what they keep.
    if (drop_latency_swaps(a, budget, greedy, inc, stats)) {
      improve(a, budget, greedy, inc, stats, max_simulations / 2);
      if (inc.share) { align_final(a, budget, inc, stats); }
    }
  }

  // Where polish_rounds goes on from: the round, the link exchange's constructions so far, whether
  // a move was kept, whether the rounds go on (false: the moves (a)-(e) next); and, for a first
  // path's state before its first advance kept, the incumbent then.
  struct rounds_state {
    std::size_t round  = 0;
    std::size_t builds = 0;
    bool kept          = false;
    bool go_on         = true;
    detail::joint_incumbent inc{};
  };

  // What polish_rounds did: whether the moves (a)-(e) after the rounds stopped before their
  // simulations ran out (or did not run).
  struct rounds_result {
    bool settled = true;
  };

  // Rounds of the polish moves on `inc` from `at` (the prefetch advances among them when
  // `advances`), while one keeps a faster plan; then, when one was kept, the moves (a)-(e). With
  // `before_advance`, the state before the first advance kept is stored there (its incumbent a
  // copy of `inc` then, and the rounds going on where the other moves of that round kept one).
  rounds_result polish_rounds(trace_analysis const& a, std::uint64_t budget,
                              detail::joint_greedy const& greedy, detail::joint_incumbent& inc,
                              joint_search_stats& stats, bool advances, rounds_state const& at,
                              std::optional<rounds_state>* before_advance) const
  {
    std::size_t builds = at.builds;  // the link exchange's constructions, over the rounds
    std::size_t work   = 0;          // the prefetch advances' work, over the rounds
    bool kept          = at.kept;
    for (std::size_t round = at.round; at.go_on && round < polish_rounds_max; ++round) {
      bool const exchanged = exchange_links(a, budget, greedy, inc, stats, builds);
      bool const cut       = cut_reruns(a, budget, inc, stats);
      bool const chained   = chain_reruns(a, budget, greedy, inc, stats);
      bool const split     = split_reruns(a, budget, inc, stats);
      bool const other     = exchanged || cut || chained || split;
      std::optional<detail::joint_incumbent> before;
      if (advances && before_advance != nullptr && !*before_advance) { before = inc; }
      bool const advanced = advances && advance_prefetches(a, budget, inc, stats, work);
      if (advanced && before) {
        *before_advance = rounds_state{round + 1, builds, kept || other, other, std::move(*before)};
      }
      if (!other && !advanced) { break; }
      kept = true;
    }
    rounds_result out;
    if (kept) {
      out.settled = improve(a, budget, greedy, inc, stats, max_simulations / 2);
      if (inc.share) { align_final(a, budget, inc, stats); }
    }
    return out;
  }

  // The latency-bound swap drops (detail/latency_swaps.hpp) on `inc`; true when one was kept.
  bool drop_latency_swaps(trace_analysis const& a, std::uint64_t budget,
                          detail::joint_greedy const& greedy, detail::joint_incumbent& inc,
                          joint_search_stats& stats) const
  {
    if (!inc.best) { return false; }
    auto const base = *inc.best;
    auto const who  = base.note + "+latency";
    auto offer      = [&](std::vector<swap_entry> sw, std::vector<recompute_entry> rc) {
      auto s = make_plan(a, budget, inc, std::move(sw), std::move(rc));
      return s.device_peak <= budget && inc.offer(a, std::move(s), who, encodings, stats);
    };
    return detail::drop_latency_swaps(a, budget, greedy, base.entries, base.recomputes, {}, offer);
  }

  // The link exchange (detail/link_exchange.hpp) on `inc`, while it finds a faster plan and its
  // construction budget (`builds` counts them) lasts; true when it kept one.
  bool exchange_links(trace_analysis const& a, std::uint64_t budget,
                      detail::joint_greedy const& greedy, detail::joint_incumbent& inc,
                      joint_search_stats& stats, std::size_t& builds) const
  {
    if (!inc.best || inc.best->recomputes.empty()) { return false; }
    detail::link_exchange_limits const limits;
    bool kept = false;
    while (inc.best && builds < limits.builds) {
      auto const base = *inc.best;
      auto const who  = base.note.ends_with("+exchange") ? base.note : base.note + "+exchange";
      auto offer      = [&](detail::greedy_plan p) {
        auto s = make_plan(a, budget, inc, std::move(p.swaps), std::move(p.recomputes));
        return s.device_peak <= budget && inc.offer(a, std::move(s), who, encodings, stats);
      };
      if (!detail::link_exchange_round(a, budget, greedy, base.entries, base.recomputes, limits,
                                       builds, offer)) {
        break;
      }
      kept = true;
    }
    return kept;
  }

  // Candidates the cut-swap re-runs (detail/cut_swap_rerun.hpp) try per pass, and passes.
  static constexpr std::size_t cut_candidates = 8;
  static constexpr std::size_t cut_passes     = 4;

  // The cut-swap re-runs on `inc`, a pass at a time while one is kept; true when one was.
  bool cut_reruns(trace_analysis const& a, std::uint64_t budget, detail::joint_incumbent& inc,
                  joint_search_stats& stats) const
  {
    bool kept = false;
    for (std::size_t pass = 0; pass < cut_passes && inc.best; ++pass) {
      auto const base = *inc.best;
      auto const who  = base.note.ends_with("+cut") ? base.note : base.note + "+cut";
      auto offer      = [&](std::vector<swap_entry> sw, std::vector<recompute_entry> rc) {
        auto s = make_plan(a, budget, inc, std::move(sw), std::move(rc));
        return s.device_peak <= budget && inc.offer(a, std::move(s), who, encodings, stats);
      };
      if (!detail::cut_swap_reruns(a, budget, base.entries, base.recomputes, cut_candidates, offer,
                                   inc.chains_for())) {
        break;
      }
      kept = true;
    }
    return kept;
  }

  // The held re-run splits (detail/hold_split.hpp) on `inc`; true when one was kept.
  bool split_reruns(trace_analysis const& a, std::uint64_t budget, detail::joint_incumbent& inc,
                    joint_search_stats& stats) const
  {
    if (!inc.best || !inc.sim) { return false; }
    auto const base = *inc.best;
    auto const sim  = *inc.sim;
    auto const who  = base.note.ends_with("+split") ? base.note : base.note + "+split";
    auto offer      = [&](std::vector<swap_entry> sw, std::vector<recompute_entry> rc) {
      auto s = make_plan(a, budget, inc, std::move(sw), std::move(rc));
      return inc.offer(a, std::move(s), who, encodings, stats);
    };
    return detail::split_holds(a, budget, base.entries, base.recomputes, sim, {}, offer);
  }

  // The prefetch advances (detail/prefetch_advance.hpp) on `inc`, within the work `work` counts
  // over the polish's rounds; true when one was kept.
  bool advance_prefetches(trace_analysis const& a, std::uint64_t budget,
                          detail::joint_incumbent& inc, joint_search_stats& stats,
                          std::size_t& work) const
  {
    if (!inc.best || !inc.sim) { return false; }
    auto const base = *inc.best;
    auto const sim  = *inc.sim;
    auto const who  = base.note.ends_with("+prefetch") ? base.note : base.note + "+prefetch";
    auto offer      = [&](schedule s) { return inc.offer(a, std::move(s), who, encodings, stats); };
    auto make       = [&](std::vector<swap_entry> sw, std::vector<recompute_entry> rc) {
      return make_plan(a, budget, inc, std::move(sw), std::move(rc));
    };
    return detail::advance_prefetches_with(a, budget, make, base.entries, base.recomputes,
                                           base.shared_reruns, sim, {}, work, offer);
  }

  // The greedy's weightings that cover what the chained swap re-runs leave over the budget.
  static constexpr detail::greedy_variant chain_cover_variants[] = {
      {1.0, 0.0, true}, {1.0, 0.3, true}, {1.0, 1.0, true}};

  // The chained swap re-runs (detail/swap_rerun_chain.hpp) on `inc`: the plan with every one
  // that applies, offered as it is (the redrop repair where it is over the budget) and, where
  // its planned peak is over the budget (a re-run moved forward holds its storage longer), with
  // the greedy covering the rest; true when one was kept.
  bool chain_reruns(trace_analysis const& a, std::uint64_t budget,
                    detail::joint_greedy const& greedy, detail::joint_incumbent& inc,
                    joint_search_stats& stats) const
  {
    if (!inc.best) { return false; }
    auto const base = *inc.best;
    auto p          = detail::chained_swap_reruns(a, budget, base.entries, base.recomputes, {});
    if (!p) { return false; }
    auto const who  = base.note.ends_with("+chain") ? base.note : base.note + "+chain";
    auto s          = make_plan(a, budget, inc, p->swaps, p->recomputes);
    bool const over = s.device_peak > budget;
    bool kept       = inc.offer(a, std::move(s), who, encodings, stats);
    for (auto const& var : chain_cover_variants) {
      if (!over) { break; }
      auto q = greedy.build(budget, var, *p);
      auto c = make_plan(a, budget, inc, std::move(q.swaps), std::move(q.recomputes));
      if (c.device_peak <= budget) {
        kept = inc.offer(a, std::move(c), who, encodings, stats) || kept;
      }
    }
    return kept;
  }

  // Trials of joint_greedy::reinsert (one prune each) per local search.
  static constexpr std::size_t reinsert_steps = 400;

  // Insert and prune (joint_greedy::reinsert) on `inc`, a local search's result; when what it
  // gives is faster, the moves again from there.
  void reinsert(trace_analysis const& a, std::uint64_t budget, detail::joint_greedy const& greedy,
                detail::joint_incumbent& inc, joint_search_stats& stats) const
  {
    if (!inc.best || inc.best->recomputes.empty()) { return; }
    auto p = greedy.reinsert(budget, {inc.best->entries, inc.best->recomputes}, reinsert_steps);
    if (p.recomputes == inc.best->recomputes) { return; }
    auto const who = inc.best->note + "+reinsert";
    auto s         = make_plan(a, budget, inc, std::move(p.swaps), std::move(p.recomputes));
    if (inc.offer(a, std::move(s), who, encodings, stats)) {
      improve(a, budget, greedy, inc, stats, max_simulations / 2);
    }
  }

  // The moves (a)-(e) on `inc` within `limit` simulations; true when they stopped before the
  // limit (no move left that keeps a faster plan).
  bool improve(trace_analysis const& a, std::uint64_t budget, detail::joint_greedy const& greedy,
               detail::joint_incumbent& inc, joint_search_stats& stats, std::size_t limit) const
  {
    std::vector<std::tuple<int, storage_id, std::uint64_t>> tried;
    std::size_t sims = 0;
    while (inc.best && sims < limit &&
           try_moves(a, budget, greedy, inc, tried, stats, sims, limit)) {
      tried.clear();
    }
    return sims < limit;
  }
};

}  // namespace stash
