/**
 * @file wrap_planner.hpp
 * @brief search_swap's choice of wrap entries (sim/schedule.hpp): which persistent storages
 * leave the device across the iteration boundary, and where their head prefetches go. The gap
 * planner then plans the gaps inside the iteration against the bytes the wraps leave.
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/swap_bounds.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace stash::detail {

/// One storage that may take a wrap entry: its first and last access.
struct wrap_candidate {
  storage_id id{};
  std::uint64_t first{}, last{}, bytes{};
};

/// Which wraps a variant takes: only where gaps inside the iteration cannot make room (needed),
/// wherever some op is over the target before any other gap is chosen (first), or every one.
enum class wrap_choice : std::uint8_t { needed, first, all };

/// The storages that may wrap, of at least `min_bytes` (and not empty).
[[nodiscard]] inline std::vector<wrap_candidate> wrap_candidates(trace_analysis const& a,
                                                                 std::uint64_t min_bytes)
{
  std::vector<wrap_candidate> out;
  for (auto const& s : a.lifetimes().storages) {
    if (s.bytes == 0 || s.bytes < min_bytes || !may_wrap(a, s.id)) { continue; }
    out.push_back(wrap_candidate{s.id, s.accesses.front().op, s.accesses.back().op, s.bytes});
  }
  return out;
}

/// The latest op p <= c.first whose start (the end of op p - 1 on `start`) leaves the prefetch
/// time before op c.first starts, the H2D engine free from `h2d_due` on at the latest.
[[nodiscard]] inline std::uint64_t wrap_prefetch_op(trace_analysis const& a,
                                                    wrap_candidate const& c,
                                                    std::vector<double> const& start,
                                                    double h2d_due)
{
  double const due = std::min(start[c.first], h2d_due) - a.model().prefetch_time(c.bytes);
  std::uint64_t p  = c.first;
  while (p > 0 && start[p] > due) { --p; }  // start[p]: when op p - 1 ends, op p is reached
  return p;
}

/// The wrap entry of `c`: offloaded after its last use (when the iteration ends if that is the
/// last op), prefetched at `p`.
[[nodiscard]] inline swap_entry wrap_entry_of(wrap_candidate const& c, std::uint64_t p)
{
  return swap_entry{c.id, c.last, c.first, c.last + 1, p, c.bytes, swap_encoding::configured, true};
}

/// Bytes each op's start step does not hold under `wraps` (planned: off before op prefetch_at
/// and after op last_use).
[[nodiscard]] inline std::vector<std::int64_t> wrap_off_bytes(trace_analysis const& a,
                                                              std::vector<swap_entry> const& wraps)
{
  auto const n = a.op_count();
  std::vector<std::int64_t> delta(n + 1, 0);
  for (auto const& e : wraps) {
    auto const b = static_cast<std::int64_t>(e.bytes);
    delta[0] += b;
    delta[e.prefetch_at] -= b;
    delta[e.last_use + 1] += b;
    delta[n] -= b;
  }
  std::vector<std::int64_t> off(n);
  std::int64_t run = 0;
  for (std::size_t i = 0; i < n; ++i) {
    run += delta[i];
    off[i] = run;
  }
  return off;
}

/// Places the head prefetches of `chosen` (whose storages `residual` counts off before their
/// first use and after their last), latest first use first: each at the latest op that lets it
/// arrive in time on the one H2D engine (on timeline `start`), moved later wherever bringing it
/// back would take `residual` over `target`; `residual` then counts it back from there.
[[nodiscard]] inline std::vector<swap_entry> place_wraps(trace_analysis const& a,
                                                         std::vector<wrap_candidate> chosen,
                                                         std::vector<double> const& start,
                                                         std::vector<std::int64_t>& residual,
                                                         std::int64_t target)
{
  std::stable_sort(
      chosen.begin(), chosen.end(),
      [](wrap_candidate const& x, wrap_candidate const& y) { return x.first > y.first; });
  std::vector<swap_entry> out;
  double free_from = std::numeric_limits<double>::infinity();
  for (auto const& c : chosen) {
    auto p       = wrap_prefetch_op(a, c, start, free_from);
    auto const b = static_cast<std::int64_t>(c.bytes);
    for (auto i = c.first; i > p; --i) {
      if (residual[i - 1] + b > target) {
        p = i;
        break;
      }
    }
    for (auto i = p; i < c.first; ++i) { residual[i] += b; }
    out.push_back(wrap_entry_of(c, p));
    // The earlier ones must be done when this one has to start at the latest.
    free_from =
        std::max(start[p], std::min(start[c.first], free_from) - a.model().prefetch_time(c.bytes));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

/// The wraps of a variant (see wrap_choice) for `target` on timeline `start`: greedy, each
/// pick the largest candidate off at the op furthest over the target (before its first use or
/// after its last), until no op is over or none helps; then placed (place_wraps).
[[nodiscard]] inline std::vector<swap_entry> choose_wraps(trace_analysis const& a,
                                                          std::vector<wrap_candidate> const& cands,
                                                          std::uint64_t target, wrap_choice choice,
                                                          std::vector<double> const& start)
{
  auto const n     = a.op_count();
  auto const steps = a.memory_steps();
  std::vector<std::int64_t> residual(n);
  auto const inner = choice != wrap_choice::first ? offloadable_bytes(a, swap_scope::any_kind)
                                                  : std::vector<std::uint64_t>(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    residual[i] = static_cast<std::int64_t>(steps[i].live_peak - inner[i]);
  }
  auto const goal = static_cast<std::int64_t>(target);
  auto take       = [&](wrap_candidate const& c) {
    for (std::size_t i = 0; i < n; ++i) {
      if (i < c.first || i > c.last) { residual[i] -= static_cast<std::int64_t>(c.bytes); }
    }
  };
  std::vector<wrap_candidate> chosen;
  if (choice == wrap_choice::all) {
    chosen = cands;
    for (auto const& c : cands) { take(c); }
    return place_wraps(a, std::move(chosen), start, residual, goal);
  }
  std::vector<char> taken(cands.size(), 0);
  while (n > 0) {
    auto const worst = static_cast<std::size_t>(std::max_element(residual.begin(), residual.end()) -
                                                residual.begin());
    if (residual[worst] <= goal) { break; }
    std::size_t best = cands.size();
    for (std::size_t k = 0; k < cands.size(); ++k) {
      bool const off = worst < cands[k].first || worst > cands[k].last;
      if (taken[k] == 0 && off && (best == cands.size() || cands[k].bytes > cands[best].bytes)) {
        best = k;
      }
    }
    if (best == cands.size()) { break; }
    taken[best] = 1;
    chosen.push_back(cands[best]);
    take(cands[best]);
  }
  return place_wraps(a, std::move(chosen), start, residual, goal);
}

/// `entries` (gaps inside the iteration) with `wraps` added: an entry of a wrapped storage is
/// offloaded no earlier than the wrap's next use (the ring rule of validate_schedule), which
/// changes no planned byte (its gap starts after that op).
[[nodiscard]] inline std::vector<swap_entry> with_wraps(std::vector<swap_entry> entries,
                                                        std::vector<swap_entry> const& wraps)
{
  std::vector<std::pair<storage_id, std::uint64_t>> first_use;  // (id, the wrap's next use)
  first_use.reserve(wraps.size());
  for (auto const& w : wraps) { first_use.emplace_back(w.id, w.next_use); }
  std::sort(first_use.begin(), first_use.end());
  for (auto& e : entries) {
    auto const it = std::lower_bound(first_use.begin(), first_use.end(),
                                     std::pair<storage_id, std::uint64_t>{e.id, 0});
    if (it != first_use.end() && it->first == e.id) {
      e.offload_at = std::max(e.offload_at, it->second);
    }
  }
  entries.insert(entries.end(), wraps.begin(), wraps.end());
  return entries;
}

}  // namespace stash::detail
