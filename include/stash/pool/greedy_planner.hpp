/**
 * @file greedy_planner.hpp
 * @brief Greedy-by-size offset planner with best fit among lifetime-overlapping placed blocks.
 *
 * The heuristic of SmartPool and TFLite: place blocks largest first; each goes into the smallest
 * address gap, between already placed blocks that are live at a common time with it, that is
 * large enough, or on top of them if none is. Ties in size are broken by longer lifetime, then
 * earlier begin, then input index, so the plan is deterministic. An interval index over
 * compressed time finds the conflicting placed blocks without an O(n^2) scan: O(n log n + sum of
 * conflicts · log) overall, about 0.1 s for 100k blocks.
 */
#pragma once

#include <stash/core/units.hpp>
#include <stash/pool/detail/interval_index.hpp>
#include <stash/pool/detail/time_cells.hpp>
#include <stash/pool/offset_planner.hpp>
#include <stash/pool/plan.hpp>
#include <stash/trace/lifetime_interval.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace stash {

/// @brief Greedy by size, best fit among conflicting placed blocks (see the file comment).
class greedy_planner {
 public:
  /// @brief The planner's name in plans and reports.
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "greedy_by_size"; }

  /// @brief Plans `intervals` with offsets and sizes padded to `alignment` (a power of two).
  [[nodiscard]] stash::plan plan(std::span<const lifetime_interval> intervals,
                                 std::uint64_t alignment = cuda_allocation_alignment) const
  {
    auto const start = std::chrono::steady_clock::now();
    validate_planner_input(intervals, alignment, "greedy_planner");
    std::size_t const n = intervals.size();
    stash::plan result;
    result.planner   = std::string(name());
    result.alignment = alignment;
    result.offsets.assign(n, 0);

    std::vector<std::uint64_t> size(n);
    for (std::size_t i = 0; i < n; ++i) { size[i] = padded_size(intervals[i].bytes, alignment); }
    auto const cells = detail::make_time_cells(intervals);

    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0U);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      auto const& ia = intervals[a];
      auto const& ib = intervals[b];
      if (size[a] != size[b]) { return size[a] > size[b]; }
      auto const la = ia.end - ia.begin;
      auto const lb = ib.end - ib.begin;
      if (la != lb) { return la > lb; }
      if (ia.begin != ib.begin) { return ia.begin < ib.begin; }
      return a < b;
    });

    detail::interval_index placed(cells.cells);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> conflicts;  // (offset, top)
    std::uint64_t footprint = 0;
    for (auto const b : order) {
      if (size[b] == 0) { continue; }  // occupies nothing: offset 0
      conflicts.clear();
      placed.for_each_overlapping(cells.cell_begin[b], cells.cell_end[b], [&](std::uint32_t c) {
        conflicts.emplace_back(result.offsets[c], result.offsets[c] + size[c]);
      });
      std::sort(conflicts.begin(), conflicts.end());
      std::uint64_t free_from = 0;  // lowest address above everything scanned so far
      std::uint64_t best_gap  = std::numeric_limits<std::uint64_t>::max();
      std::uint64_t best_at   = std::numeric_limits<std::uint64_t>::max();
      for (auto const& [lo, hi] : conflicts) {
        if (lo > free_from) {
          auto const gap = lo - free_from;
          if (gap >= size[b] && gap < best_gap) {
            best_gap = gap;
            best_at  = free_from;
          }
        }
        free_from = std::max(free_from, hi);
      }
      std::uint64_t const offset =
          best_at != std::numeric_limits<std::uint64_t>::max() ? best_at : free_from;
      result.offsets[b] = offset;
      footprint         = std::max(footprint, offset + size[b]);
      placed.insert(b, cells.cell_begin[b], cells.cell_end[b]);
    }
    result.footprint = footprint;
    result.plan_time = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start);
    return result;
  }
};

static_assert(offset_planner<greedy_planner>);

}  // namespace stash
