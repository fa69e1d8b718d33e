/**
 * @file link_exchange.hpp
 * @brief Internal: `search`'s link exchange, a local improvement of a finished plan that gives
 * the link to the storages whose re-runs cost the most per second of transfer.
 *
 * Where the copy engines are busy before the peak, the swaps of a plan decide which storages
 * are not re-run, so each second of transfer is worth the re-run time it saves. The greedy
 * (joint_greedy.hpp) prices a swap by its transfer alone, and a start's recomputes (a
 * checkpoint's) stay unless redundant, so a plan may swap storages cheap to re-run while it
 * re-runs one that is dear per transfer second (a BatchNorm output over a large stem
 * activation). One exchange: recompute entry R, among those with the most re-run seconds per
 * transfer second, becomes a swap (offload right after its last use, prefetch as late as the
 * nominal timeline allows); the plan's swaps of re-runnable storages that save the fewest re-run
 * seconds per transfer second, the first d of them, are taken out (their link time is R's); the
 * greedy with re-runs only (R's banned) covers what is left over the budget, then prunes (on
 * data/traces only such a fill was ever kept; a second weighting with swaps on the link's free
 * room doubled the constructions). Each plan within the budget is simulated; the first faster one
 * is kept and the exchanges start again from it. Deterministic: fixed orders, a step budget of
 * constructions.
 */
#pragma once

#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/joint_greedy.hpp>
#include <stash/swap/detail/recompute_set.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace stash::detail {

/// How much work one link exchange pass may do.
struct link_exchange_limits {
  std::size_t recomputes = 6;   ///< recompute entries tried per round, dearest per link second
  std::size_t displaced  = 8;   ///< most swaps taken out for one recompute entry
  std::size_t builds     = 16;  ///< greedy constructions in all (each simulated when it fits)
};

/// The plans one exchange (see the file comment) proposes from `swaps` and `recomputes`, in
/// order: for each of the `limits.recomputes` entries dearest per transfer second, with 0, 1,
/// ..., `limits.displaced` swaps taken out, one construction each. `offer(plan)` times
/// a plan and returns true when it was kept (faster and fitting); the proposals stop there.
/// Returns whether one was kept; `builds` counts the constructions.
template <typename Offer>
bool link_exchange_round(trace_analysis const& a, std::uint64_t budget, joint_greedy const& greedy,
                         std::vector<swap_entry> const& swaps,
                         std::vector<recompute_entry> const& recomputes,
                         link_exchange_limits const& limits, std::size_t& builds, Offer&& offer)
{
  auto const& model = a.model();
  auto link_s       = [&](std::uint64_t bytes) {
    return std::max(model.prefetch_time(bytes, swap_encoding::configured), 1e-12);
  };
  // Recompute entries, most re-run seconds per transfer second first.
  std::vector<std::pair<double, std::size_t>> dear;
  for (std::size_t k = 0; k < recomputes.size(); ++k) {
    auto const& e = recomputes[k];
    if (e.next_use <= e.last_use + 1) { continue; }
    dear.emplace_back(-recompute_chain_of(a, e.id, e.last_use, e.at).seconds / link_s(e.bytes), k);
  }
  std::stable_sort(dear.begin(), dear.end());
  // Swaps inside the iteration of storages that could be re-run in their gap, fewest re-run
  // seconds per transfer second first: those whose link time is worth least.
  std::vector<std::pair<double, std::size_t>> cheap;
  for (std::size_t k = 0; k < swaps.size(); ++k) {
    auto const& e = swaps[k];
    if (e.wrap || e.redrop) { continue; }
    auto const c = recompute_chain_of(a, e.id, e.last_use, e.next_use);
    if (c.valid()) { cheap.emplace_back(c.seconds / link_s(e.bytes), k); }
  }
  std::stable_sort(cheap.begin(), cheap.end());
  static constexpr greedy_variant fill{1.0, -1.0, true};  // re-runs only
  for (std::size_t j = 0; j < dear.size() && j < limits.recomputes; ++j) {
    auto const r = recomputes[dear[j].second];
    auto rc      = recomputes;
    rc.erase(rc.begin() + static_cast<std::ptrdiff_t>(dear[j].second));
    auto pre = r.next_use;  // the latest op whose nominal start leaves the transfer's time
    while (pre > r.last_use + 2 && a.op_start(r.next_use) - a.op_start(pre) < link_s(r.bytes)) {
      --pre;
    }
    swap_entry const moved{r.id, r.last_use, r.next_use, r.last_use + 1, pre, r.bytes};
    for (std::size_t d = 0; d <= cheap.size() && d <= limits.displaced; ++d) {
      std::vector<char> out(swaps.size(), 0);
      for (std::size_t m = 0; m < d; ++m) { out[cheap[m].second] = 1; }
      std::vector<swap_entry> sw;
      for (std::size_t k = 0; k < swaps.size(); ++k) {
        if (out[k] == 0) { sw.push_back(swaps[k]); }
      }
      recompute_set set(a, sw);
      bool const valid =
          std::all_of(rc.begin(), rc.end(), [&](auto const& e) { return set.try_add(e); });
      if (!valid || !set.swap_allowed(moved)) { continue; }
      sw.push_back(moved);
      if (builds >= limits.builds) { return false; }
      ++builds;
      auto p = greedy.build(budget, fill, greedy_plan{sw, rc}, {}, {{r.id, r.last_use}});
      if (greedy.peak(p) > budget) { continue; }
      if (offer(std::move(p))) { return true; }
    }
  }
  return false;
}

}  // namespace stash::detail
