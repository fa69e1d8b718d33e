/**
 * @file clamped_sums.hpp
 * @brief Internal: the joint greedy's excess (joint_greedy.hpp) as an index answering "the excess
 * a candidate of `b` bytes removes over its window", the sum of min(b, x_i) over a range, without
 * walking the window (issue 24: `search` re-scores candidates whose windows span most of the
 * iteration millions of times).
 *
 * The values are lowered by "subtract d, clamp at 0" over ranges, and set one at a time.
 * Clamped subtractions compose (max(0, max(0, x - d1) - d2) = max(0, x - d1 - d2)), so the value
 * at i is max(0, base_i - D_i) with D_i the sum of the subtractions covering i: piecewise constant,
 * at most 2u + 1 pieces after u subtractions. Within a piece of constant D the sum splits by
 * value: base - D for D < base < D + b, b for base >= D + b; a wavelet matrix over the ranks of
 * the values as last built gives the count and sum of those below a threshold within a range in
 * O(log n). A value set since then is an override, counted apart. The pending pieces and
 * overrides are folded into the values and the matrix rebuilt (O(n log n)) once the queries have
 * spent about that much on them: a count of work, so the same calls do the same thing anywhere.
 * Exact: integer arithmetic only (modulo 2^64, the true sums fit), equal to the walk whatever the
 * order of the terms.
 */
#pragma once

#include <stash/core/radix_sort.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace stash::detail {

/// Values x[0..n) under clamped range subtraction and point assignment; sums of min(b, x) over
/// ranges.
class clamped_sums {
 public:
  clamped_sums() = default;

  /// Replaces every value (O(n log n)).
  void assign(std::span<std::uint64_t const> values)
  {
    n_ = values.size();
    base_.assign(values.begin(), values.end());
    build();
  }

  [[nodiscard]] std::size_t size() const noexcept { return n_; }

  /// x[i] = max(0, x[i] - d) for i in [l, r).
  void subtract(std::size_t l, std::size_t r, std::uint64_t d)
  {
    r = std::min(r, n_);
    if (l >= r || d == 0) { return; }
    split(l);
    split(r);
    for (auto& p : pieces_) {
      if (p.first >= l && p.first < r) { p.second = p.second + d < d ? top : p.second + d; }
    }
    fold_if_due();
  }

  /// x[i] = v.
  void set(std::size_t i, std::uint64_t v)
  {
    if (v + piece_of(i)->second < v) { fold(); }  // (only for values near 2^64)
    auto const d = piece_of(i)->second;
    base_[i]     = v > 0 ? v + d : 0;  // max(0, base - d) = v from here on
    set_max(i, base_[i]);
    auto const it = std::lower_bound(overrides_.begin(), overrides_.end(), i);
    if (it == overrides_.end() || *it != i) { overrides_.insert(it, i); }
    fold_if_due();
  }

  /// x[i] = v[i] wherever they differ: the values of as many set() calls, in one pass (the
  /// joint greedy's excess made exact again after a pull changes hundreds of values).
  void update(std::span<std::uint64_t const> v)
  {
    changed_.clear();
    for (auto p = pieces_.begin(); p != pieces_.end(); ++p) {
      auto const d = p->second;
      for (auto i = p->first; i < end_of(p); ++i) {
        if (clamp(base_[i], d) == v[i]) { continue; }
        if (v[i] + d < v[i]) {  // (only for values near 2^64) set() folds first: so do we
          fold();
          update(v);
          return;
        }
        changed_.push_back(i);
      }
    }
    for (auto const i : changed_) {
      base_[i] = v[i] > 0 ? v[i] + piece_of(i)->second : 0;  // as set(i, v[i])
    }
    changed(changed_);
  }

  /// x[at[k]] = v[k] wherever they differ, `at` ascending without repeats: update() where only
  /// those positions may differ (the joint greedy knows where a pull changed its excess), without
  /// a pass over every value.
  void update_at(std::span<std::size_t const> at, std::span<std::uint64_t const> v)
  {
    changed_.clear();
    auto p = pieces_.cbegin();  // the piece of at[k]: `at` ascends
    for (std::size_t k = 0; k < at.size(); ++k) {
      auto const i = at[k];
      while (p + 1 != pieces_.cend() && (p + 1)->first <= i) { ++p; }
      auto const d = p->second;
      if (clamp(base_[i], d) == v[k]) { continue; }
      if (v[k] + d < v[k]) {  // (only for values near 2^64) as update() does
        fold();
        update_at(at, v);
        return;
      }
      base_[i] = v[k] > 0 ? v[k] + d : 0;  // as set(i, v[k])
      changed_.push_back(i);
    }
    changed(changed_);
  }

  /// x[i].
  [[nodiscard]] std::uint64_t at(std::size_t i) const
  {
    return clamp(base_[i], piece_of(i)->second);
  }

  /// Every x[i], in order (O(n)).
  [[nodiscard]] std::vector<std::uint64_t> values() const
  {
    std::vector<std::uint64_t> out(n_);
    for (auto p = pieces_.begin(); p != pieces_.end(); ++p) {
      for (auto i = p->first; i < end_of(p); ++i) { out[i] = clamp(base_[i], p->second); }
    }
    return out;
  }

  /// Sum of min(b, x[i]) over i in [l, r).
  [[nodiscard]] std::uint64_t sum_min(std::size_t l, std::size_t r, std::uint64_t b) const
  {
    r = std::min(r, n_);
    if (l >= r || b == 0) { return 0; }
    std::uint64_t sum = 0;
    auto o            = std::lower_bound(overrides_.begin(), overrides_.end(), l);
    for (auto p = piece_of(l); p != pieces_.end() && p->first < r; ++p) {
      auto const lo = std::max(l, p->first), hi = std::min(r, end_of(p));
      auto const d = p->second;
      if (base_max(lo, hi) <= d) {  // every value here is 0, overrides included
        o = std::lower_bound(o, overrides_.end(), hi);
        work_ += 2;
        continue;
      }
      sum += piece_sum(lo, hi, d, b);
      for (; o != overrides_.end() && *o < hi; ++o) {  // the built value out, the set one in
        sum += std::min(b, clamp(base_[*o], d)) - std::min(b, clamp(built_[*o], d));
        ++work_;
      }
      work_ += levels_ + 1;
    }
    return sum;
  }

  /// Every x[i] is 0.
  [[nodiscard]] bool all_zero() const
  {
    for (auto p = pieces_.begin(); p != pieces_.end(); ++p) {
      if (base_max(p->first, end_of(p)) > p->second) { return false; }
    }
    return true;
  }

 private:
  using piece_it = std::vector<std::pair<std::size_t, std::uint64_t>>::const_iterator;
  static constexpr std::uint64_t top = ~std::uint64_t{0};  // a saturated D: every value is 0

  [[nodiscard]] static std::uint64_t clamp(std::uint64_t x, std::uint64_t d) noexcept
  {
    return x > d ? x - d : 0;
  }

  [[nodiscard]] std::size_t end_of(piece_it p) const
  {
    return p + 1 == pieces_.end() ? n_ : (p + 1)->first;
  }

  // The piece holding position i (pieces_ starts at 0 and is sorted by start).
  [[nodiscard]] piece_it piece_of(std::size_t i) const
  {
    auto it = std::upper_bound(pieces_.begin(), pieces_.end(), i,
                               [](std::size_t x, auto const& p) { return x < p.first; });
    return it - 1;
  }

  void split(std::size_t at)
  {
    if (at >= n_) { return; }
    auto const it = piece_of(at);
    if (it->first == at) { return; }
    pieces_.insert(it + 1, {at, it->second});
  }

  // The positions `moved` (ascending) had base_ set: their maxima, and overrides.
  void changed(std::vector<std::size_t> const& moved)
  {
    if (moved.empty()) { return; }
    if (moved.size() * levels_of(size_) >= size_) {
      build_max();
    } else {
      for (auto const i : moved) { set_max(i, base_[i]); }
    }
    auto const mid = overrides_.insert(overrides_.end(), moved.begin(), moved.end());
    std::inplace_merge(overrides_.begin(), mid, overrides_.end());
    overrides_.erase(std::unique(overrides_.begin(), overrides_.end()), overrides_.end());
    fold_if_due();
  }

  // Folds the pieces and overrides into the values once the queries spent a rebuild's worth of
  // work on them (or they grew past a rebuild's size). Any threshold gives the same sums (they
  // are exact); this one measured the fewest instructions in `search` (regnet_y_400mf_b64 at
  // 33%: twice it, the threshold until 2026-11-28, +1.3%; half of it +0.3%).
  void fold_if_due()
  {
    auto const rebuild = (n_ + 1) * (levels_ + 2);
    if (work_ < rebuild && pieces_.size() + overrides_.size() < n_ + 64) { return; }
    fold();
  }

  // The values into base_ in place (values() without a new vector: a fold runs at every
  // rebuild of the greedy's excess).
  void fold()
  {
    for (auto p = pieces_.begin(); p != pieces_.end(); ++p) {
      for (auto i = p->first; i < end_of(p); ++i) { base_[i] = clamp(base_[i], p->second); }
    }
    build();
  }

  // Sum over [l, r) of min(b, max(0, x - d)) for the values x as built.
  [[nodiscard]] std::uint64_t piece_sum(std::size_t l, std::size_t r, std::uint64_t d,
                                        std::uint64_t b) const
  {
    if (d == top) { return 0; }
    auto const upto_d = below(l, r, d + 1);  // x <= d: 0
    auto const all    = std::make_pair(r - l, prefix_[r] - prefix_[l]);
    auto const mid    = d + b < d ? all : below(l, r, d + b);  // x < d + b: x - d
    auto const mid_n  = mid.first - upto_d.first;
    auto const full_n = (r - l) - mid.first;  // x >= d + b: b
    return (mid.second - upto_d.second) - d * mid_n + b * full_n;
  }

  // (count, sum) of the values as built in [l, r) that are < t.
  [[nodiscard]] std::pair<std::size_t, std::uint64_t> below(std::size_t l, std::size_t r,
                                                            std::uint64_t t) const
  {
    auto const rank = static_cast<std::size_t>(std::lower_bound(sorted_.begin(), sorted_.end(), t) -
                                               sorted_.begin());
    if (rank == 0) { return {0, 0}; }
    if (rank >= sorted_.size()) { return {r - l, prefix_[r] - prefix_[l]}; }
    std::size_t count = 0;
    std::uint64_t sum = 0;
    for (std::size_t level = levels_; level-- > 0;) {
      auto const* z  = zeros_.data() + level * (n_ + 1);
      auto const* zs = zero_sums_.data() + level * (n_ + 1);
      auto const l0 = z[l], r0 = z[r];
      if (((rank >> level) & 1U) != 0) {  // this level's zeros rank below `rank`
        count += r0 - l0;
        sum += zs[r] - zs[l];
        l = zero_count_[level] + (l - l0);
        r = zero_count_[level] + (r - r0);
      } else {
        l = l0;
        r = r0;
      }
    }
    return {count, sum};
  }

  // cur_, (value, position) by position, sorted by value and then position (as sorting the
  // pairs does): a stable radix sort over 8-bit digits, those every value shares skipped (a build
  // sorts thousands of values, and did so with a comparison sort).
  void sort_by_value()
  {
    stable_radix_sort(cur_, next_, [](auto const& x) { return x.first; });
  }

  // The wavelet matrix over the ranks of base_, which become the values as built.
  void build()
  {
    pieces_.assign(1, {0, 0});
    overrides_.clear();
    work_  = 0;
    built_ = base_;
    build_max();
    prefix_.resize(n_ + 1);  // every one written below
    prefix_[0] = 0;
    auto& cur  = cur_;
    cur.resize(n_);
    next_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      prefix_[i + 1] = prefix_[i] + base_[i];
      cur[i]         = {base_[i], i};
    }
    sort_by_value();  // the ranks, then back to positions
    sorted_.clear();
    starts_.clear();
    for (std::size_t k = 0; k < n_; ++k) {
      auto const [value, i] = cur[k];
      if (sorted_.empty() || sorted_.back() != value) {
        sorted_.push_back(value);
        starts_.push_back(k);
      }
      next_[i] = {sorted_.size() - 1, value};
    }
    starts_.push_back(n_);
    std::swap(cur, next_);  // (rank, value) by position
    levels_ = 0;
    while ((std::size_t{1} << levels_) < sorted_.size()) { ++levels_; }
    // Grown, never shrunk: every one used is written below, and a resize after a smaller build
    // would zero the ones it adds back.
    if (zeros_.size() < levels_ * (n_ + 1)) {
      zeros_.resize(levels_ * (n_ + 1));
      zero_sums_.resize(levels_ * (n_ + 1));
    }
    count_zeros();
    for (std::size_t level = levels_; level-- > 0;) { build_level(level); }
  }

  // zero_count_: per level, the values whose rank has a 0 bit there, whatever their order, so
  // known before the level's pass. Those ranks are the blocks [k 2^(L+1), k 2^(L+1) + 2^L), and
  // starts_[r] counts the values of rank < r: O(distinct values) in all.
  void count_zeros()
  {
    auto const m = sorted_.size();
    zero_count_.assign(levels_, 0);
    for (std::size_t level = 0; level < levels_; ++level) {
      auto const half = std::size_t{1} << level;
      for (std::size_t lo = 0; lo < m; lo += 2 * half) {
        zero_count_[level] += starts_[std::min(lo + half, m)] - starts_[lo];
      }
    }
  }

  // One level of the matrix: its zero counts and sums before each position, and the values
  // stably partitioned by the bit (zeros first) for the next level, in one pass.
  void build_level(std::size_t level)
  {
    auto* z            = zeros_.data() + level * (n_ + 1);
    auto* zs           = zero_sums_.data() + level * (n_ + 1);
    std::size_t zi     = 0;
    std::size_t oi     = zero_count_[level];
    std::uint64_t zsum = 0;
    z[0]               = 0;
    zs[0]              = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      auto const x          = cur_[i];
      bool const zero       = ((x.first >> level) & 1U) == 0;
      next_[zero ? zi : oi] = x;
      zi += zero ? 1 : 0;
      oi += zero ? 0 : 1;
      zsum += zero ? x.second : 0;
      z[i + 1]  = static_cast<std::uint32_t>(zi);
      zs[i + 1] = zsum;
    }
    std::swap(cur_, next_);
  }

  [[nodiscard]] static std::size_t levels_of(std::size_t size) noexcept
  {
    std::size_t k = 1;
    while ((std::size_t{1} << k) < size) { ++k; }
    return k;
  }

  // Max of base_ over [l, r) (0 when empty), a plain segment tree.
  [[nodiscard]] std::uint64_t base_max(std::size_t l, std::size_t r) const
  {
    std::uint64_t m = 0;
    for (l += size_, r += size_; l < r; l /= 2, r /= 2) {
      if ((l & 1U) != 0) { m = std::max(m, max_[l++]); }
      if ((r & 1U) != 0) { m = std::max(m, max_[--r]); }
    }
    return m;
  }

  void set_max(std::size_t i, std::uint64_t v)
  {
    auto x  = size_ + i;
    max_[x] = v;
    for (x /= 2; x >= 1; x /= 2) { max_[x] = std::max(max_[2 * x], max_[2 * x + 1]); }
  }

  void build_max()
  {
    size_ = 1;
    while (size_ < n_) { size_ *= 2; }
    max_.resize(2 * size_);  // the leaves past n_ are 0, every inner node written below
    auto const leaves = max_.begin() + static_cast<std::ptrdiff_t>(size_);
    std::fill(std::copy(base_.begin(), base_.end(), leaves), max_.end(), std::uint64_t{0});
    for (auto x = size_; x-- > 1;) { max_[x] = std::max(max_[2 * x], max_[2 * x + 1]); }
  }

  std::size_t n_{0}, levels_{0}, size_{1};
  std::vector<std::uint64_t> base_;             // x[i] = max(0, base_[i] - D of its piece)
  std::vector<std::uint64_t> built_;            // base_ when the matrix was built
  std::vector<std::uint64_t> sorted_, prefix_;  // distinct built values; prefix sums of built_
  std::vector<std::pair<std::size_t, std::uint64_t>> pieces_{{0, 0}};  // (start, D), by start
  std::vector<std::size_t> overrides_;    // positions set since the build, ascending
  std::vector<std::uint32_t> zeros_;      // per level, per position: zero bits before it
  std::vector<std::uint64_t> zero_sums_;  // per level, per position: sum of their values
  std::vector<std::size_t> zero_count_;
  std::vector<std::size_t> starts_;  // build's: per rank, the values of lower rank (then n_)
  std::vector<std::uint64_t> max_;   // base_max's tree
  std::vector<std::pair<std::uint64_t, std::uint64_t>> cur_, next_;  // build's scratch
  std::vector<std::size_t> changed_;                                 // update's scratch
  mutable std::size_t work_{0};  // query steps spent on pieces and overrides
};

}  // namespace stash::detail
