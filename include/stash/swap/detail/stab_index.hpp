/**
 * @file stab_index.hpp
 * @brief Which candidates' windows contain a position, without scanning them all: the planners'
 * "best unchosen gap spanning the worst op" (gap_planner) and "best candidate covering the peak"
 * (AutoSwap) as a segment tree of windows. Each window [first, last) sits in the O(log n) nodes
 * that tile it, so the nodes on one leaf's path hold exactly the windows containing it.
 * best_at() serves scores fixed for the index's life (each node's list sorted once, a cursor
 * stepping past chosen items); for_each_at() enumerates them for scores that change.
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace stash::detail {

/// Items with a window [first, last) of positions in [0, extent).
class stab_index {
 public:
  /// Indexes item i's window windows[i] for every i with keep(i).
  template <class Keep>
  stab_index(std::size_t extent, std::vector<std::pair<std::size_t, std::size_t>> const& windows,
             Keep&& keep)
  {
    size_ = 1;
    while (size_ < extent) { size_ *= 2; }
    begin_.assign(2 * size_ + 1, 0);
    auto tile = [&](std::size_t i, auto&& visit) {
      auto l = windows[i].first + size_, r = std::min(windows[i].second, extent) + size_;
      for (; l < r; l /= 2, r /= 2) {
        if ((l & 1U) != 0) { visit(l++); }
        if ((r & 1U) != 0) { visit(--r); }
      }
    };
    for (std::size_t i = 0; i < windows.size(); ++i) {
      if (keep(i)) {
        tile(i, [&](std::size_t x) { ++begin_[x + 1]; });
      }
    }
    for (std::size_t x = 0; x < 2 * size_; ++x) { begin_[x + 1] += begin_[x]; }
    items_.resize(begin_.back());
    live_.assign(begin_.begin(), begin_.end() - 1);  // fill cursor, then the live end
    for (std::size_t i = 0; i < windows.size(); ++i) {
      if (keep(i)) {
        tile(i, [&](std::size_t x) { items_[live_[x]++] = i; });
      }
    }
    cursor_.assign(begin_.begin(), begin_.end() - 1);
  }

  /// Sorts each node's items by `less` (best first), for best_at().
  template <class Less>
  void sort(Less&& less)
  {
    for (std::size_t x = 1; x < 2 * size_; ++x) {
      std::sort(items_.begin() + static_cast<std::ptrdiff_t>(begin_[x]),
                items_.begin() + static_cast<std::ptrdiff_t>(begin_[x + 1]), less);
    }
  }

  /// Starts best_at() afresh (each node's cursor back at its first item), for another life in
  /// which other items are dead: a sorted index reused across plans instead of rebuilt.
  void rewind() { cursor_.assign(begin_.begin(), begin_.end() - 1); }

  /// The best item by `less` (the order sort() was given) whose window contains `pos`, skipping
  /// items with dead(i); dead items must stay dead for the index's life.
  template <class Dead, class Less>
  [[nodiscard]] std::optional<std::size_t> best_at(std::size_t pos, Dead&& dead, Less&& less)
  {
    std::optional<std::size_t> best;
    for (std::size_t x = pos + size_; x >= 1; x /= 2) {
      auto& c = cursor_[x];
      while (c < begin_[x + 1] && dead(items_[c])) { ++c; }
      if (c < begin_[x + 1] && (!best || less(items_[c], *best))) { best = items_[c]; }
    }
    return best;
  }

  /// Calls f(i) for every item whose window contains `pos`, except those with dead(i) (dropped
  /// for good: dead items must stay dead for the index's life).
  template <class Dead, class F>
  void for_each_at(std::size_t pos, Dead&& dead, F&& f)
  {
    for (std::size_t x = pos + size_; x >= 1; x /= 2) {
      auto k = begin_[x];
      while (k < live_[x]) {
        if (dead(items_[k])) {
          items_[k] = items_[--live_[x]];
        } else {
          f(items_[k++]);
        }
      }
    }
  }

 private:
  std::size_t size_{1};
  std::vector<std::size_t> begin_;   // node x's items are items_[begin_[x], begin_[x + 1])
  std::vector<std::size_t> live_;    // for_each_at: node x's live items end here
  std::vector<std::size_t> cursor_;  // best_at: node x's first item not known dead
  std::vector<std::size_t> items_;
};

}  // namespace stash::detail
