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
#include <type_traits>
#include <utility>
#include <vector>

namespace stash::detail {

/// Values v[0..n) with range add; max/min and threshold searches in O(log n). Without
/// `WithMin` the nodes keep no minimum (16 bytes instead of 24): the curves that are only ever
/// asked for maxima (AutoSwap's planned curve, the gap planner's classes) take fewer cache lines
/// per add, where the adds of a long selection spend their time.
template <bool WithMin>
class basic_range_tree {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  basic_range_tree() = default;
  /// Builds over `values`.
  explicit basic_range_tree(std::span<std::int64_t const> values) { assign(values); }

  /// Replaces every value (O(n)).
  void assign(std::span<std::int64_t const> values)
  {
    n_    = values.size();
    size_ = 1;
    while (size_ < n_) { size_ *= 2; }
    t_.resize(2 * size_);
    for (std::size_t i = 0; i < n_; ++i) { t_[size_ + i] = leaf(values[i], values[i]); }
    std::fill(t_.begin() + static_cast<std::ptrdiff_t>(size_ + n_), t_.end(),
              leaf(lowest, highest));
    for (std::size_t x = size_; x-- > 1;) {
      t_[x].add = 0;
      pull(x);
    }
    recording_ = false;  // a new tree: nothing to roll back to, nothing stale
    undo_.clear();
    saved_.clear();
    stale_.clear();
    stale_mark_.clear();
  }

  [[nodiscard]] std::size_t size() const noexcept { return n_; }

  /// Starts recording the nodes the adds change, for rollback(): a tree reused as scratch over
  /// the same values (the planners' base curve) instead of rebuilt or copied per plan.
  void checkpoint()
  {
    undo_.clear();
    if (saved_.size() != t_.size()) { saved_.assign(t_.size(), 0); }  // all 0 after rollback()
    recording_ = true;
  }

  /// Restores every node changed since checkpoint() to its value then: the tree is exactly that
  /// of then. Each node is saved once, on its first change, so undoing costs one write per node
  /// changed instead of replaying every add: the upper levels, which every add re-pulls, are
  /// restored once (issue 24, item 4: the gap planner's packing rolled back as many adds as it
  /// made).
  void rollback()
  {
    recording_ = false;
    for (auto const& [x, old] : undo_) {
      t_[x]     = old;
      saved_[x] = 0;
    }
    undo_.clear();
  }

  /// Adds `d` to v[l..r).
  void add(std::size_t l, std::size_t r, std::int64_t d)
  {
    r = std::min(r, n_);
    if (l >= r) { return; }
    if (recording_) {
      add_nodes<true>(l, r, d);
    } else {
      add_nodes<false>(l, r, d);
    }
  }

  /// add(l, r, d) with the maxima (and minima) of the ancestors left stale until flush(): a batch
  /// of adds (AutoSwap's chain moves, hundreds per pick in a narrow part of the curve) pulls each
  /// ancestor once instead of once per add. No query, checkpoint or add() between the first
  /// add_deferred and flush(). The tree after flush() is the one add() would have made: the adds
  /// are integer sums in the same nodes, and each ancestor is pulled after its children.
  void add_deferred(std::size_t l, std::size_t r, std::int64_t d)
  {
    r = std::min(r, n_);
    if (l >= r) { return; }
    std::size_t const first = l + size_, last = r - 1 + size_;
    for (std::size_t x = first, y = last + 1; x < y; x /= 2, y /= 2) {
      if ((x & 1) != 0) { apply<false>(x++, d); }
      if ((y & 1) != 0) { apply<false>(--y, d); }
    }
    stale(first / 2);  // the leaves' parents: every ancestor add() pulls is above one of them
    stale(last / 2);
  }

  /// Pulls the ancestors of every add_deferred since the last flush(), level by level upwards.
  void flush()
  {
    while (!stale_.empty()) {
      stale_next_.clear();
      for (auto const x : stale_) {
        pull(x);
        stale_mark_[x] = 0;
        if (x > 1 && stale_mark_[x / 2] == 0) {
          stale_mark_[x / 2] = 1;
          stale_next_.push_back(x / 2);
        }
      }
      std::swap(stale_, stale_next_);
    }
  }

  /// v[i].
  [[nodiscard]] std::int64_t at(std::size_t i) const
  {
    std::size_t x  = size_ + i;
    std::int64_t v = t_[x].mx;
    for (x /= 2; x >= 1; x /= 2) { v += t_[x].add; }
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
      x = t_[2 * x].mx + t_[x].add == t_[x].mx ? 2 * x : 2 * x + 1;
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
  [[nodiscard]] std::size_t last_at_most(std::size_t l, std::size_t r,
                                         std::int64_t t) const requires WithMin
  {
    return l < r ? last_at_most(1, 0, size_, l, std::min(r, n_), t, 0) : npos;
  }

  /// The first index in [l, r) whose value is <= `t` (npos if none).
  [[nodiscard]] std::size_t first_at_most(std::size_t l, std::size_t r,
                                          std::int64_t t) const requires WithMin
  {
    return l < r ? first_at_most(1, 0, size_, l, std::min(r, n_), t, 0) : npos;
  }

 private:
  static constexpr std::int64_t lowest  = std::numeric_limits<std::int64_t>::min() / 4;
  static constexpr std::int64_t highest = std::numeric_limits<std::int64_t>::max() / 4;

  // Left uninitialised by the vector's resize (every node is written by assign): the trees of
  // the planners' curves are rebuilt per plan, and zeroing them first was a pass over memory.
  // Not `= default` constructors: value-initialisation would then zero them.
  struct node_with_min {
    node_with_min() {}
    std::int64_t mx, mn, add;  // max and min of its range, its own add
  };
  struct node_max_only {
    node_max_only() {}
    std::int64_t mx, add;
  };
  using node = std::conditional_t<WithMin, node_with_min, node_max_only>;

  [[nodiscard]] static node leaf(std::int64_t mx, [[maybe_unused]] std::int64_t mn)
  {
    node x;
    x.mx = mx;
    if constexpr (WithMin) { x.mn = mn; }
    x.add = 0;
    return x;
  }

  // The nodes of add(l, r, d), l < r <= n_; with `Save`, each saved for rollback() first.
  template <bool Save>
  void add_nodes(std::size_t l, std::size_t r, std::int64_t d)
  {
    // Bottom-up: the nodes covering [l, r) take d whole, then their ancestors are re-pulled. The
    // same nodes as a top-down walk, so the same tree (and every answer) without the recursion.
    std::size_t const first = l + size_, last = r - 1 + size_;
    for (std::size_t x = first, y = last + 1; x < y; x /= 2, y /= 2) {
      if ((x & 1) != 0) { apply<Save>(x++, d); }
      if ((y & 1) != 0) { apply<Save>(--y, d); }
    }
    std::size_t x = first / 2, y = last / 2;  // the same depth: they meet at their common one
    for (; x != y; x /= 2, y /= 2) {
      pull<Save>(x);
      pull<Save>(y);
    }
    for (; x >= 1; x /= 2) { pull<Save>(x); }
  }

  // Marks internal node x (all of one level: the leaves' parents) for flush().
  void stale(std::size_t x)
  {
    if (x == 0) { return; }  // a single leaf: no ancestor
    if (stale_mark_.size() != size_) { stale_mark_.assign(size_, 0); }
    if (stale_mark_[x] == 0) {
      stale_mark_[x] = 1;
      stale_.push_back(x);
    }
  }

  // Saves node x's value for rollback() unless saved since checkpoint().
  void save(std::size_t x)
  {
    if (saved_[x] == 0) {
      saved_[x] = 1;
      undo_.push_back({x, t_[x]});
    }
  }

  template <bool Save = false>
  void pull(std::size_t x)
  {
    if constexpr (Save) { save(x); }
    t_[x].mx = std::max(t_[2 * x].mx, t_[2 * x + 1].mx) + t_[x].add;
    if constexpr (WithMin) { t_[x].mn = std::min(t_[2 * x].mn, t_[2 * x + 1].mn) + t_[x].add; }
  }

  template <bool Save>
  void apply(std::size_t x, std::int64_t d)
  {
    if constexpr (Save) { save(x); }
    t_[x].mx += d;
    if constexpr (WithMin) { t_[x].mn += d; }
    t_[x].add += d;
  }

  [[nodiscard]] std::int64_t max(std::size_t x, std::size_t lo, std::size_t hi, std::size_t l,
                                 std::size_t r) const
  {
    if (r <= lo || hi <= l) { return lowest; }
    if (l <= lo && hi <= r) { return t_[x].mx; }
    auto const mid = (lo + hi) / 2;
    return std::max(max(2 * x, lo, mid, l, r), max(2 * x + 1, mid, hi, l, r)) + t_[x].add;
  }

  // `above` is the sum of the adds of x's ancestors.
  [[nodiscard]] std::size_t last_above(std::size_t x, std::size_t lo, std::size_t hi, std::size_t l,
                                       std::size_t r, std::int64_t t, std::int64_t above) const
  {
    if (r <= lo || hi <= l || t_[x].mx + above <= t) { return npos; }
    if (hi - lo == 1) { return lo; }
    auto const mid = (lo + hi) / 2;
    auto const got = last_above(2 * x + 1, mid, hi, l, r, t, above + t_[x].add);
    return got != npos ? got : last_above(2 * x, lo, mid, l, r, t, above + t_[x].add);
  }

  [[nodiscard]] std::size_t first_above(std::size_t x, std::size_t lo, std::size_t hi,
                                        std::size_t l, std::size_t r, std::int64_t t,
                                        std::int64_t above) const
  {
    if (r <= lo || hi <= l || t_[x].mx + above <= t) { return npos; }
    if (hi - lo == 1) { return lo; }
    auto const mid = (lo + hi) / 2;
    auto const got = first_above(2 * x, lo, mid, l, r, t, above + t_[x].add);
    return got != npos ? got : first_above(2 * x + 1, mid, hi, l, r, t, above + t_[x].add);
  }

  [[nodiscard]] std::size_t last_at_most(std::size_t x, std::size_t lo, std::size_t hi,
                                         std::size_t l, std::size_t r, std::int64_t t,
                                         std::int64_t above) const
  {
    if (r <= lo || hi <= l || t_[x].mn + above > t) { return npos; }
    if (hi - lo == 1) { return lo; }
    auto const mid = (lo + hi) / 2;
    auto const got = last_at_most(2 * x + 1, mid, hi, l, r, t, above + t_[x].add);
    return got != npos ? got : last_at_most(2 * x, lo, mid, l, r, t, above + t_[x].add);
  }

  [[nodiscard]] std::size_t first_at_most(std::size_t x, std::size_t lo, std::size_t hi,
                                          std::size_t l, std::size_t r, std::int64_t t,
                                          std::int64_t above) const
  {
    if (r <= lo || hi <= l || t_[x].mn + above > t) { return npos; }
    if (hi - lo == 1) { return lo; }
    auto const mid = (lo + hi) / 2;
    auto const got = first_at_most(2 * x, lo, mid, l, r, t, above + t_[x].add);
    return got != npos ? got : first_at_most(2 * x + 1, mid, hi, l, r, t, above + t_[x].add);
  }

  std::size_t n_{0}, size_{1};
  std::vector<node> t_;  // the heap-ordered nodes: 1 the root, size_ + i the leaf of v[i]
  std::vector<std::pair<std::size_t, node>> undo_;  // nodes changed since checkpoint(), as then
  std::vector<std::uint8_t> saved_;                 // whether each node is in undo_
  bool recording_{false};
  std::vector<std::size_t> stale_, stale_next_;  // nodes to pull in flush(), one level each
  std::vector<std::uint8_t> stale_mark_;         // whether each internal node is in stale_
};

/// The curves asked for minima too (the gap planner's scratch curve, joint_greedy's).
using range_tree = basic_range_tree<true>;
/// The curves only ever asked for maxima.
using max_tree = basic_range_tree<false>;

}  // namespace stash::detail
