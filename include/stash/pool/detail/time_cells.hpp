/**
 * @file time_cells.hpp
 * @brief Planner internal: compresses lifetimes to cells between consecutive distinct endpoints.
 */
#pragma once

#include <stash/trace/lifetime_interval.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace stash::detail {

/// @brief Each interval as a range [cell_begin, cell_end) of compressed time cells. Two intervals
/// overlap in time exactly when their cell ranges overlap.
struct time_cells {
  std::vector<std::uint32_t> cell_begin;  ///< per interval
  std::vector<std::uint32_t> cell_end;    ///< per interval, > cell_begin
  std::uint32_t cells{0};                 ///< number of cells
};

/// @brief Compresses the endpoints of `intervals` (restricted to `subset` if given). With
/// `begins_only`, cells start only where some interval begins: two intervals still overlap
/// exactly when their cell ranges do (the later begin of two overlapping intervals lies in both),
/// every cell's live set is a maximal one, and there are at most as many cells as intervals.
[[nodiscard]] inline time_cells make_time_cells(std::span<const lifetime_interval> intervals,
                                                std::span<const std::uint32_t> subset = {},
                                                bool begins_only                      = false)
{
  std::size_t const n = subset.empty() ? intervals.size() : subset.size();
  auto at             = [&](std::size_t k) -> lifetime_interval const& {
    return subset.empty() ? intervals[k] : intervals[subset[k]];
  };
  std::vector<std::uint64_t> points;
  points.reserve(2 * n);
  for (std::size_t k = 0; k < n; ++k) {
    points.push_back(at(k).begin);
    if (!begins_only) { points.push_back(at(k).end); }
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  if (begins_only && !points.empty()) {
    std::uint64_t last_end = 0;
    for (std::size_t k = 0; k < n; ++k) { last_end = std::max(last_end, at(k).end); }
    points.push_back(last_end);  // closes the last cell
  }
  time_cells out;
  out.cell_begin.resize(n);
  out.cell_end.resize(n);
  auto index = [&](std::uint64_t t) {
    return static_cast<std::uint32_t>(std::lower_bound(points.begin(), points.end(), t) -
                                      points.begin());
  };
  for (std::size_t k = 0; k < n; ++k) {
    out.cell_begin[k] = index(at(k).begin);
    out.cell_end[k]   = index(at(k).end);
  }
  out.cells = points.empty() ? 0 : static_cast<std::uint32_t>(points.size() - 1);
  return out;
}

}  // namespace stash::detail
