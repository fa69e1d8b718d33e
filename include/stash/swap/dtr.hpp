/**
 * @file dtr.hpp
 * @brief `dtr`: Dynamic Tensor Rematerialization's greedy eviction (Kirisame et al., ICLR 2021),
 * simulated offline on the trace and expressed as recompute entries.
 *
 * Walking the iteration in order, whenever the planned device bytes exceed the budget it evicts,
 * among the storages resident there that can be rematerialised for their current gap (from their
 * last access before that point to their next access, recompute_chain.hpp), the one with the
 * least h = cost / (bytes x staleness): cost is its re-run time on the cost model, staleness the
 * nominal time since its last access. An evicted storage is rematerialised right before its next
 * access. Evicting a storage whose re-run reads an evicted one pulls that one's re-run to the
 * same point first (DTR's recursive rematerialisation); its h grows by the share of bytes it pulls
 * back, (1 + pulled / bytes). This is DTR's heuristic
 * with local cost (not the evicted-neighbourhood estimate), on the planned (instantaneous) memory
 * curve; evictions that would strand a planned re-run's input are skipped. It stops when the budget
 * holds or nothing is left to evict (the schedule's note says so).
 */
#pragma once

#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/recompute_set.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stash {

/// @brief DTR's greedy eviction, simulated (see the file comment).
struct dtr {
  /// Evictions tried at most (a step budget; each re-plans the curve once).
  std::size_t max_evictions = 4096;

  /// @brief Registry name.
  /// @return "dtr".
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "dtr"; }

  /// @brief The eviction schedule for `budget`.
  /// @param a The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& a, std::uint64_t budget) const
  {
    return plan_over(a, budget, {});
  }

  /// @brief The eviction schedule for `budget` on top of the swap entries `swaps` (which stay as
  /// they are; gaps they move are not evicted, and no eviction strands their storages).
  /// @param a The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @param swaps Swap entries planned before the evictions.
  /// @return The schedule: `swaps` plus the evictions.
  [[nodiscard]] schedule plan_over(trace_analysis const& a, std::uint64_t budget,
                                   std::vector<swap_entry> swaps) const
  {
    auto cands = candidates(a);
    detail::recompute_set set(a, swaps);
    std::vector<bool> taken(cands.size(), false);
    std::vector<recompute_entry> entries;
    std::string note;
    for (std::size_t step = 0;; ++step) {
      auto const over = detail::first_overflow(a, swaps, entries, budget);
      if (!over) { break; }
      if (step == max_evictions) {
        note = "stopped after max_evictions";
        break;
      }
      auto const pick = cheapest(a, cands, taken, set, *over);
      if (!pick) {
        note = "nothing left to evict at event " + std::to_string(*over);
        break;
      }
      taken[*pick] = true;
      entries      = set.entries();
    }
    auto s = make_schedule(a, std::string(name()), budget, std::move(swaps), std::move(entries));
    s.note = note;
    return s;
  }

 private:
  struct candidate {
    recompute_entry e;
    recompute_chain chain;
  };

  // Every gap of an activation or temporary that a re-run right before its next use can fill.
  [[nodiscard]] static std::vector<candidate> candidates(trace_analysis const& a)
  {
    std::vector<candidate> out;
    for (auto const& s : a.lifetimes().storages) {
      if (s.kind != storage_kind::act && s.kind != storage_kind::temp) { continue; }
      for (std::size_t k = 0; k + 1 < s.accesses.size(); ++k) {
        auto const u = s.accesses[k].op, v = s.accesses[k + 1].op;
        if (v <= u + 1 || (s.accesses[k + 1].write && !s.accesses[k + 1].read)) { continue; }
        auto chain = recompute_chain_of(a, s.id, u, v);
        if (chain.valid()) { out.push_back(candidate{{s.id, u, v, v, s.bytes}, std::move(chain)}); }
      }
    }
    return out;
  }

  // The admissible candidate away over `event` with the least h; it is added to `set`.
  [[nodiscard]] static std::optional<std::size_t> cheapest(trace_analysis const& a,
                                                           std::vector<candidate> const& cands,
                                                           std::vector<bool>& taken,
                                                           detail::recompute_set& set,
                                                           std::uint64_t event)
  {
    auto const& ev = a.ops().event;
    auto const now_op =
        static_cast<std::size_t>(std::lower_bound(ev.begin(), ev.end(), event) - ev.begin());
    double const now = a.op_start(std::min(now_op, a.op_count() - 1));
    std::optional<std::size_t> best;
    double best_h = 0;
    for (std::size_t k = 0; k < cands.size(); ++k) {
      auto const& e = cands[k].e;
      if (taken[k] || e.bytes == 0 || !(ev[e.last_use] < event && event <= ev[e.at - 1])) {
        continue;
      }
      auto const pulled = set.pulled_bytes(e, cands[k].chain);
      if (!pulled) { continue; }
      // What it pulls back is resident again from its re-run on: a penalty, not a loss here.
      double const stale = now - a.op_start(e.last_use) + 1e-9;
      double const bytes = static_cast<double>(e.bytes);
      double const h =
          cands[k].chain.seconds * (1.0 + static_cast<double>(*pulled) / bytes) / (bytes * stale);
      if (!best || h < best_h) {
        best   = k;
        best_h = h;
      }
    }
    if (!best || !set.try_add(cands[*best].e, cands[*best].chain)) { return std::nullopt; }
    taken[*best] = true;
    return best;
  }
};

}  // namespace stash
