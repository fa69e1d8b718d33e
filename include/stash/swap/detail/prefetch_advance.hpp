/**
 * @file prefetch_advance.hpp
 * @brief Internal: `search`'s prefetch advances, a local improvement of a finished plan whose
 * prefetches queue behind each other on the H2D engine.
 *
 * The greedy (joint_greedy.hpp) issues each prefetch as late as the nominal timeline allows,
 * one storage at a time. Where several storages come back close together, their copies queue
 * on the one H2D engine in the order they were issued, and a storage needed first can wait
 * behind one needed later: transformer_encoder_b8 at 33% of the peak on h100_sxm brings each
 * layer's FFN dropout mask (48 MiB) back right before that layer's dropout2 mask (12 MiB),
 * which the backward reads first (0.56 ms of stall per layer; 2.44 ms of H2D-busy stalls in
 * all, predicted). One move: a swap entry's prefetch is issued d ops earlier (d = 1, 2, 4, ...,
 * 64; never at or before its last use or its offload), so that it leaves the queue sooner; the
 * device then holds the storage from the earlier issue on. A plan whose planned peak goes over
 * the budget is not offered (a larger d only holds it longer, so the larger ones are skipped);
 * the others are offered to the simulator, which weighs the earlier arrivals against the memory
 * they take, and kept only when faster. The entries in the plan's order, each from its
 * prefetch at the start of its turn; passes while one is kept. Only where the plan's simulation
 * waited for a copy (transfer or H2D-busy stalls): an earlier prefetch cannot shorten a wait
 * for memory. Deterministic: a fixed order and a step budget of work (each trial counted as
 * the trace's ops plus the plan's entries and recomputes, about what its planned curve and
 * simulation cost).
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stash::detail {

/// Step budgets of the prefetch advances.
struct prefetch_advance_limits {
  /// Work over all calls that share a counter: a trial costs the trace's ops plus the plan's
  /// entries and recomputes (transformer_encoder_b8: ~830 a trial, ~630 trials).
  std::size_t work   = std::size_t{1} << 19;
  std::size_t passes = 8;  ///< passes over the entries per call
};

/// How many ops earlier a prefetch is tried, in this order.
inline constexpr std::array<std::uint64_t, 7> prefetch_advance_steps{1, 2, 4, 8, 16, 32, 64};

/// Whether `sim` waited for a copy to arrive (a stall of cause transfer or h2d_busy).
[[nodiscard]] inline bool waited_for_copies(sim_result const& sim) noexcept
{
  return sim.stall_by_cause[static_cast<std::size_t>(stall_cause::transfer)] > 0 ||
         sim.stall_by_cause[static_cast<std::size_t>(stall_cause::h2d_busy)] > 0;
}

/// The entries worth advancing in the plan `sw` / `rc` (its simulation with the timeline `sim`):
/// for each stall waiting for a copy (transfer or h2d_busy), the longest first, the entry it
/// waited for and those whose copies ran right before it on the H2D engine without a gap (the
/// queue it stood in), each once.
[[nodiscard]] inline std::vector<std::size_t> queued_before_stalls(
    std::vector<swap_entry> const& sw, sim_result const& sim)
{
  std::vector<std::size_t> order;  // the entries in the order their copies ran on the H2D engine
  std::vector<std::size_t> pos(sw.size(), sw.size());
  std::vector<double> start, end;
  for (auto const& x : sim.timeline) {
    if (x.kind != timeline_span::kind_t::prefetch || x.index >= sw.size()) { continue; }
    pos[x.index] = order.size();
    order.push_back(x.index);
    start.push_back(x.start);
    end.push_back(x.end);
  }
  std::vector<stall_record> stalls;
  for (auto const& st : sim.stalls) {
    if (st.storage && (st.cause == stall_cause::transfer || st.cause == stall_cause::h2d_busy)) {
      stalls.push_back(st);
    }
  }
  std::stable_sort(stalls.begin(), stalls.end(), [](stall_record const& x, stall_record const& y) {
    return x.seconds > y.seconds;
  });
  std::vector<std::size_t> out;
  std::vector<char> in(sw.size(), 0);
  for (auto const& st : stalls) {
    for (std::size_t k = 0; k < sw.size(); ++k) {
      auto const& e = sw[k];
      if (e.wrap || e.id != *st.storage || e.next_use != st.op || pos[k] == sw.size()) { continue; }
      for (auto p = pos[k] + 1; p-- > 0;) {  // back along the busy run that ends with it
        if (in[order[p]] == 0 && !sw[order[p]].wrap) {
          in[order[p]] = 1;
          out.push_back(order[p]);
        }
        if (p == 0 || end[p - 1] < start[p]) { break; }
      }
    }
  }
  return out;
}

/// advance_prefetches, each schedule made by `make(entries, recomputes)` (make_schedule's
/// schedule, named as the plan).
template <typename Make, typename Offer>
bool advance_prefetches_with(trace_analysis const& a, std::uint64_t budget, Make&& make,
                             std::vector<swap_entry> sw, std::vector<recompute_entry> const& rc,
                             bool shared, sim_result const& sim,
                             prefetch_advance_limits const& limits, std::size_t& work,
                             Offer&& offer)
{
  if (!waited_for_copies(sim)) { return false; }
  std::size_t const cost = a.op_count() + sw.size() + rc.size();
  bool kept              = false;
  for (std::size_t pass = 0; pass < limits.passes; ++pass) {
    if (work + cost > limits.work) { return kept; }
    work += cost;
    auto base          = make(sw, rc);
    base.shared_reruns = shared;
    auto const timed   = simulate(a, base, sim_options{true, sim_memory::enforce_budget, false});
    bool any           = false;
    for (auto const k : queued_before_stalls(sw, timed)) {
      auto const e     = sw[k];
      auto const floor = std::max(e.last_use, e.offload_at) + 1;  // prefetch_at's least value
      for (auto const d : prefetch_advance_steps) {
        if (e.prefetch_at < floor + d) { break; }
        if (work + cost > limits.work) { return kept; }
        work += cost;
        auto trial           = sw;
        trial[k].prefetch_at = e.prefetch_at - d;
        auto s               = make(std::move(trial), rc);
        if (s.device_peak > budget) { break; }  // a larger d holds the storage longer still
        auto entries = s.entries;
        if (offer(std::move(s))) {
          sw   = std::move(entries);
          any  = true;
          kept = true;
        }
      }
    }
    if (!any) { break; }
  }
  return kept;
}

/// The prefetch advances of the file comment on the plan `sw` / `rc` (simulated as `sim`):
/// calls `offer(schedule)` for each trial whose planned peak fits `budget` (a schedule named
/// `name`, made by make_schedule), while `work` (shared across calls) stays within
/// `limits.work`; an offer returns true when it kept the plan, which is then the base of the
/// next trials. Each pass simulates the base (its re-runs shared in a batch when `shared`, as
/// schedule::shared_reruns) with its timeline to find the entries queued before its stalls
/// (queued_before_stalls). Returns true when one was kept.
template <typename Offer>
bool advance_prefetches(trace_analysis const& a, std::uint64_t budget, std::string const& name,
                        std::vector<swap_entry> sw, std::vector<recompute_entry> const& rc,
                        bool shared, sim_result const& sim, prefetch_advance_limits const& limits,
                        std::size_t& work, Offer&& offer)
{
  auto make = [&](std::vector<swap_entry> entries, std::vector<recompute_entry> const& rcs) {
    return make_schedule(a, name, budget, std::move(entries), rcs);
  };
  return advance_prefetches_with(a, budget, make, std::move(sw), rc, shared, sim, limits, work,
                                 offer);
}

}  // namespace stash::detail
