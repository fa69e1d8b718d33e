/**
 * @file range_tree.hpp
 * @brief The planners' curves of bytes per op (or per event) under range updates: a segment tree
 * with range add, range max and min, and searches for the first or last position past a
 * threshold, each O(log n). What makes gap selection, pruning and prefetch packing near-linear
 * instead of walking every op of every gap (issue 24, item 4). Exact: integer values, and every
 * query returns what the walk over the plain array returned (the first of equal maxima).
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace stash::detail {

/// Values v[0..n) with range add; max/min and threshold searches in O(log n).
class range_tree {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  range_tree() = default;
  /// Builds over `values`.
  explicit range_tree(std::span<std::int64_t const> values) { assign(values); }

  /// Replaces every value (O(n)).
  void assign(std::span<std::int64_t const> values)
  {
    n_    = values.size();
    size_ = 1;
    while (size_ < n_) { size_ *= 2; }
    mx_.assign(2 * size_, lowest);
    mn_.assign(2 * size_, highest);
    add_.assign(2 * size_, 0);
    for (std::size_t i = 0; i < n_; ++i) { mx_[size_ + i] = mn_[size_ + i] = values[i]; }
    for (std::size_t x = size_; x-- > 1;) { pull(x); }
  }

  [[nodiscard]] std::size_t size() const noexcept { return n_; }

  /// Adds `d` to v[l..r).
  void add(std::size_t l, std::size_t r, std::int64_t d)
  {
    if (l < r) { add(1, 0, size_, l, std::min(r, n_), d); }
  }

  /// v[i].
  [[nodiscard]] std::int64_t at(std::size_t i) const
  {
    std::size_t x  = size_ + i;
    std::int64_t v = mx_[x];
    for (x /= 2; x >= 1; x /= 2) { v += add_[x]; }
    return v;
  }

  /// Max of v[l..r) (lowest when empty).
  [[nodiscard]] std::int64_t max(std::size_t l, std::size_t r) const
  {
    return l < r ? max(1, 0, size_, l, std::min(r, n_)) : lowest;
  }

  /// The first index of the overall max (npos when empty), as std::max_element finds it.
  [[nodiscard]] std::size_t first_max() const
  {
    if (n_ == 0) { return npos; }
    std::size_t x = 1;
    while (x < size_) {  // the left child holds the max whenever it ties
      x = mx_[2 * x] + add_[x] == mx_[x] ? 2 * x : 2 * x + 1;
    }
    return x - size_;
  }

  /// The last index in [l, r) whose value is > `t` (npos if none).
  [[nodiscard]] std::size_t last_above(std::size_t l, std::size_t r, std::int64_t t) const
  {
    return l < r ? last_above(1, 0, size_, l, std::min(r, n_), t, 0) : npos;
  }

  /// The first index in [l, r) whose value is > `t` (npos if none).
  [[nodiscard]] std::size_t first_above(std::size_t l, std::size_t r, std::int64_t t) const
  {
    return l < r ? first_above(1, 0, size_, l, std::min(r, n_), t, 0) : npos;
  }

  /// The last index in [l, r) whose value is <= `t` (npos if none).
  [[nodiscard]] std::size_t last_at_most(std::size_t l, std::size_t r, std::int64_t t) const
  {
    return l < r ? last_at_most(1, 0, size_, l, std::min(r, n_), t, 0) : npos;
  }

  /// The first index in [l, r) whose value is <= `t` (npos if none).
  [[nodiscard]] std::size_t first_at_most(std::size_t l, std::size_t r, std::int64_t t) const
  {
    return l < r ? first_at_most(1, 0, size_, l, std::min(r, n_), t, 0) : npos;
  }

 private:
  static constexpr std::int64_t lowest  = std::numeric_limits<std::int64_t>::min() / 4;
  static constexpr std::int64_t highest = std::numeric_limits<std::int64_t>::max() / 4;

  void pull(std::size_t x)
  {
    mx_[x] = std::max(mx_[2 * x], mx_[2 * x + 1]) + add_[x];
    mn_[x] = std::min(mn_[2 * x], mn_[2 * x + 1]) + add_[x];
  }

  void add(std::size_t x, std::size_t lo, std::size_t hi, std::size_t l, std::size_t r,
           std::int64_t d)
  {
    if (r <= lo || hi <= l) { return; }
    if (l <= lo && hi <= r) {
      mx_[x] += d;
      mn_[x] += d;
      add_[x] += d;
      return;
    }
    auto const mid = (lo + hi) / 2;
    add(2 * x, lo, mid, l, r, d);
    add(2 * x + 1, mid, hi, l, r, d);
    pull(x);
  }

  [[nodiscard]] std::int64_t max(std::size_t x, std::size_t lo, std::size_t hi, std::size_t l,
                                 std::size_t r) const
  {
    if (r <= lo || hi <= l) { return lowest; }
    if (l <= lo && hi <= r) { return mx_[x]; }
    auto const mid = (lo + hi) / 2;
    return std::max(max(2 * x, lo, mid, l, r), max(2 * x + 1, mid, hi, l, r)) + add_[x];
  }

  // `above` is the sum of the adds of x's ancestors.
  [[nodiscard]] std::size_t last_above(std::size_t x, std::size_t lo, std::size_t hi, std::size_t l,
                                       std::size_t r, std::int64_t t, std::int64_t above) const
  {
    if (r <= lo || hi <= l || mx_[x] + above <= t) { return npos; }
    if (hi - lo == 1) { return lo; }
    auto const mid = (lo + hi) / 2;
    auto const got = last_above(2 * x + 1, mid, hi, l, r, t, above + add_[x]);
    return got != npos ? got : last_above(2 * x, lo, mid, l, r, t, above + add_[x]);
  }

  [[nodiscard]] std::size_t first_above(std::size_t x, std::size_t lo, std::size_t hi,
                                        std::size_t l, std::size_t r, std::int64_t t,
                                        std::int64_t above) const
  {
    if (r <= lo || hi <= l || mx_[x] + above <= t) { return npos; }
    if (hi - lo == 1) { return lo; }
    auto const mid = (lo + hi) / 2;
    auto const got = first_above(2 * x, lo, mid, l, r, t, above + add_[x]);
    return got != npos ? got : first_above(2 * x + 1, mid, hi, l, r, t, above + add_[x]);
  }

  [[nodiscard]] std::size_t last_at_most(std::size_t x, std::size_t lo, std::size_t hi,
                                         std::size_t l, std::size_t r, std::int64_t t,
                                         std::int64_t above) const
  {
    if (r <= lo || hi <= l || mn_[x] + above > t) { return npos; }
    if (hi - lo == 1) { return lo; }
    auto const mid = (lo + hi) / 2;
    auto const got = last_at_most(2 * x + 1, mid, hi, l, r, t, above + add_[x]);
    return got != npos ? got : last_at_most(2 * x, lo, mid, l, r, t, above + add_[x]);
  }

  [[nodiscard]] std::size_t first_at_most(std::size_t x, std::size_t lo, std::size_t hi,
                                          std::size_t l, std::size_t r, std::int64_t t,
                                          std::int64_t above) const
  {
    if (r <= lo || hi <= l || mn_[x] + above > t) { return npos; }
    if (hi - lo == 1) { return lo; }
    auto const mid = (lo + hi) / 2;
    auto const got = first_at_most(2 * x, lo, mid, l, r, t, above + add_[x]);
    return got != npos ? got : first_at_most(2 * x + 1, mid, hi, l, r, t, above + add_[x]);
  }

  std::size_t n_{0}, size_{1};
  std::vector<std::int64_t> mx_, mn_, add_;  // per node: max and min of its range, its own add
};

}  // namespace stash::detail
