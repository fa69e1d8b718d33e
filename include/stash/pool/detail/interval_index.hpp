/**
 * @file interval_index.hpp
 * @brief Planner internal: a set of time intervals (over compressed time cells) that reports,
 * for a query interval, every stored interval overlapping it, in O(log m + output + span).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stash::detail {

/// @brief Intervals [cell_begin, cell_end) over `cells` time cells, queried for overlap.
///
/// A stored interval overlaps a query [b, e) exactly when it contains cell b or starts inside
/// (b, e). The first set comes from a segment tree holding each interval in its canonical nodes
/// (a stab query walks one leaf-to-root path); the second from per-cell start lists. The two
/// sets are disjoint, so every overlapping interval is reported once.
class interval_index {
 public:
  /// @brief An empty index over `cells` time cells.
  explicit interval_index(std::size_t cells)
  {
    leaves_ = 1;
    while (leaves_ < cells) { leaves_ <<= 1; }
    cover_.resize(2 * leaves_);
    starts_.resize(cells);
  }

  /// @brief Stores `value` for the cells [cell_begin, cell_end) (cell_begin < cell_end).
  void insert(std::uint32_t value, std::uint32_t cell_begin, std::uint32_t cell_end)
  {
    starts_[cell_begin].push_back(value);
    std::size_t l = cell_begin + leaves_;
    std::size_t r = cell_end + leaves_;
    while (l < r) {
      if (l & 1U) { cover_[l++].push_back(value); }
      if (r & 1U) { cover_[--r].push_back(value); }
      l >>= 1U;
      r >>= 1U;
    }
  }

  /// @brief Calls `f(value)` once for every stored interval overlapping [cell_begin, cell_end).
  template <class F>
  void for_each_overlapping(std::uint32_t cell_begin, std::uint32_t cell_end, F&& f) const
  {
    for (std::size_t node = cell_begin + leaves_; node >= 1; node >>= 1U) {
      for (auto v : cover_[node]) { f(v); }
    }
    for (std::uint32_t c = cell_begin + 1; c < cell_end; ++c) {
      for (auto v : starts_[c]) { f(v); }
    }
  }

 private:
  std::size_t leaves_{1};
  std::vector<std::vector<std::uint32_t>> cover_;
  std::vector<std::vector<std::uint32_t>> starts_;
};

}  // namespace stash::detail
