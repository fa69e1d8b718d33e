/**
 * @file clamped_sums.hpp
 * @brief Internal: the joint greedy's excess (joint_greedy.hpp) as an index answering "the excess
 * a candidate of `b` bytes removes over its window", the sum of min(b, x_i) over a range, without
 * walking the window (issue 24: `search` re-scores candidates whose windows span most of the
 * iteration millions of times).
 *
 * The values are lowered by "subtract d, clamp at 0" over ranges, and set one at a time.
 * Clamped subtractions compose (max(0, max(0, x - d1) - d2) = max(0, x - d1 - d2)), so a block of
 * `block` consecutive values lowered as a whole keeps its raw values and one total D: x_i =
 * max(0, raw_i - D). The block holds its raw values sorted, with prefix sums, so its sum of
 * min(b, x) splits by value with two binary searches: raw - D for D < raw < D + b, b for raw >=
 * D + b (one search, or none, when the block's least or greatest value settles it). A range sums
 * its whole blocks so and walks the values of the (at most two) blocks it cuts. A subtraction
 * adds to the D of the blocks it covers and, in a block it cuts, lowers the raw values and merges
 * the two runs back into order (each stays sorted: clamped subtraction keeps order); a value set
 * re-sorts its block from the old order. O(n / block + block) a query or a change, no rebuilds
 * (a wavelet matrix over every value, rebuilt as changes piled up, did this until 2026-11-28:
 * its rebuilds and per-change descents cost more than these searches).
 * Exact: integer arithmetic only (modulo 2^64, the true sums fit), equal to the walk whatever the
 * order of the terms.
 */
#pragma once

#include <stash/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace stash::detail {

/// Values x[0..n) under clamped range subtraction and point assignment; sums of min(b, x) over
/// ranges.
class clamped_sums {
 public:
  clamped_sums() = default;

  /// Replaces every value (O(n log block)).
  void assign(std::span<std::uint64_t const> values)
  {
    // (positions are kept in 4 bytes)
    STASH_EXPECTS(
        values.size() < std::size_t{0xFFFFFFFFU},
        "clamped_sums: " + std::to_string(values.size()) + " values exceed the limit of 2^32 - 2");
    n_ = values.size();
    raw_.assign(values.begin(), values.end());
    auto const blocks = (n_ + block - 1) / block;
    d_.assign(blocks, 0);
    order_.resize(n_);
    key_.resize(n_);
    prefix_.resize(blocks * (block + 1));
    bounds_.resize(blocks);
    for (std::size_t k = 0; k < blocks; ++k) {
      for (auto i = lo_of(k); i < hi_of(k); ++i) { order_[i] = static_cast<std::uint32_t>(i); }
      std::sort(order_.begin() + static_cast<std::ptrdiff_t>(lo_of(k)),
                order_.begin() + static_cast<std::ptrdiff_t>(hi_of(k)),
                [&](std::uint32_t x, std::uint32_t y) { return raw_[x] < raw_[y]; });
      index(k);
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return n_; }

  /// x[i] = max(0, x[i] - d) for i in [l, r).
  void subtract(std::size_t l, std::size_t r, std::uint64_t d)
  {
    r = std::min(r, n_);
    if (l >= r || d == 0) { return; }
    for (auto k = l / block; k * block < r; ++k) {
      if (l <= lo_of(k) && hi_of(k) <= r) {
        d_[k] = d_[k] + d < d ? top : d_[k] + d;
      } else {
        lower_part(k, std::max(l, lo_of(k)), std::min(r, hi_of(k)), d);
      }
    }
  }

  /// x[i] = v.
  void set(std::size_t i, std::uint64_t v)
  {
    auto const k = i / block;
    settle(k);
    raw_[i] = v;
    reorder(k);
  }

  /// x[i] = v[i] wherever they differ: the values of as many set() calls, in one pass (the
  /// joint greedy's excess made exact again after a pull changes hundreds of values).
  void update(std::span<std::uint64_t const> v)
  {
    for (std::size_t k = 0; k * block < n_; ++k) {
      auto i = lo_of(k);
      while (i < hi_of(k) && at(i) == v[i]) { ++i; }
      if (i == hi_of(k)) { continue; }
      settle(k);
      for (; i < hi_of(k); ++i) { raw_[i] = v[i]; }
      reorder(k);
    }
  }

  /// x[at[k]] = v[k] wherever they differ, `at` ascending without repeats: update() where only
  /// those positions may differ (the joint greedy knows where a pull changed its excess), without
  /// a pass over every value.
  void update_at(std::span<std::size_t const> at, std::span<std::uint64_t const> v)
  {
    for (std::size_t j = 0; j < at.size();) {
      auto const k = at[j] / block;
      auto end     = j;  // the positions of block k: [j, end)
      bool differs = false;
      for (; end < at.size() && at[end] / block == k; ++end) {
        differs = differs || this->at(at[end]) != v[end];
      }
      if (differs) {
        settle(k);
        for (; j < end; ++j) { raw_[at[j]] = v[j]; }
        reorder(k);
      }
      j = end;
    }
  }

  /// x[i].
  [[nodiscard]] std::uint64_t at(std::size_t i) const { return clamp(raw_[i], d_[i / block]); }

  /// Every x[i], in order (O(n)).
  [[nodiscard]] std::vector<std::uint64_t> values() const
  {
    std::vector<std::uint64_t> out(n_);
    for (std::size_t i = 0; i < n_; ++i) { out[i] = at(i); }
    return out;
  }

  /// Sum of min(b, x[i]) over i in [l, r).
  [[nodiscard]] std::uint64_t sum_min(std::size_t l, std::size_t r, std::uint64_t b) const
  {
    r = std::min(r, n_);
    if (l >= r || b == 0) { return 0; }
    auto const first = l / block, last = (r - 1) / block;
    if (first == last) { return part_sum(first, l, r, b); }
    auto sum = part_sum(first, l, hi_of(first), b) + part_sum(last, lo_of(last), r, b);
    for (auto k = first + 1; k < last; ++k) { sum += block_sum(k, b, block); }  // (not the last)
    return sum;
  }

  /// Every x[i] is 0.
  [[nodiscard]] bool all_zero() const
  {
    for (std::size_t k = 0; k * block < n_; ++k) {
      if (bounds_[k].second > d_[k]) { return false; }
    }
    return true;
  }

 private:
  // Values per block: a query walks at most two blocks' values and searches the others' (64:
  // the fewest instructions in `search`, regnet_y_400mf_b64 at 33%, of 32, 64 and 128).
  static constexpr std::size_t block = 64;
  static constexpr std::uint64_t top = ~std::uint64_t{0};  // a saturated D: every value is 0

  [[nodiscard]] static std::uint64_t clamp(std::uint64_t x, std::uint64_t d) noexcept
  {
    return x > d ? x - d : 0;
  }

  [[nodiscard]] std::size_t lo_of(std::size_t k) const noexcept { return k * block; }
  [[nodiscard]] std::size_t hi_of(std::size_t k) const noexcept
  {
    return std::min(n_, (k + 1) * block);
  }

  // Sum of min(b, x) over [a, c) in block k: walked, or (more than half the block) the block's
  // sum less a walk over the rest.
  [[nodiscard]] std::uint64_t part_sum(std::size_t k, std::size_t a, std::size_t c,
                                       std::uint64_t b) const
  {
    auto const lo = lo_of(k), hi = hi_of(k);
    if (2 * (c - a) <= hi - lo) { return walk(k, a, c, b); }
    return block_sum(k, b, hi - lo) - walk(k, lo, a, b) - walk(k, c, hi, b);
  }

  // Sum of min(b, x) over [a, c) in block k, value by value.
  [[nodiscard]] std::uint64_t walk(std::size_t k, std::size_t a, std::size_t c,
                                   std::uint64_t b) const
  {
    auto const d      = d_[k];
    std::uint64_t sum = 0;
    for (auto i = a; i < c; ++i) { sum += std::min(b, clamp(raw_[i], d)); }
    return sum;
  }

  // Sum of min(b, x) over block k of `len` values: its raw values sorted (key_), D = d_[k].
  [[nodiscard]] std::uint64_t block_sum(std::size_t k, std::uint64_t b, std::size_t len) const
  {
    auto const d             = d_[k];
    auto const [least, most] = bounds_[k];
    if (most <= d) { return 0; }                           // every value is 0
    if (d + b >= d && least >= d + b) { return b * len; }  // every value is b or more
    auto const* key = key_.data() + lo_of(k);
    auto const* pre = prefix_.data() + k * (block + 1);
    auto const zero = least > d ? 0 : count_below(key, len, d + 1);  // raw <= d: 0
    auto const part = d + b < d || most < d + b ? len : count_below(key, len, d + b);
    return (pre[part] - pre[zero]) - d * (part - zero) + b * (len - part);  // raw >= d + b: b
  }

  // The keys of key[0..len) (ascending, len > 0) below t: a lower bound without branches.
  [[nodiscard]] static std::size_t count_below(std::uint64_t const* key, std::size_t len,
                                               std::uint64_t t) noexcept
  {
    auto const* base = key;
    for (auto n = len; n > 1;) {
      auto const half = n / 2;
      base            = base[half] < t ? base + half : base;
      n -= half;
    }
    return static_cast<std::size_t>(base - key) + (*base < t ? 1 : 0);
  }

  // Block k's D into its raw values (order kept: clamped subtraction keeps it), D = 0.
  void settle(std::size_t k)
  {
    auto const d = d_[k];
    if (d == 0) { return; }
    for (auto i = lo_of(k); i < hi_of(k); ++i) { raw_[i] = clamp(raw_[i], d); }
    d_[k] = 0;
  }

  // Positions [a, b) of block k lowered by d: those and the others each stay in order, so the
  // block's order is the merge of the two runs.
  void lower_part(std::size_t k, std::size_t a, std::size_t b, std::uint64_t d)
  {
    settle(k);
    for (auto i = a; i < b; ++i) { raw_[i] = clamp(raw_[i], d); }
    inside_.clear();
    outside_.clear();
    for (auto i = lo_of(k); i < hi_of(k); ++i) {
      auto const p = order_[i];
      (p >= a && p < b ? inside_ : outside_).push_back(p);
    }
    std::merge(inside_.begin(), inside_.end(), outside_.begin(), outside_.end(),
               order_.begin() + static_cast<std::ptrdiff_t>(lo_of(k)),
               [&](std::uint32_t x, std::uint32_t y) { return raw_[x] < raw_[y]; });
    index(k);
  }

  // Block k sorted again after some raw values changed: an insertion sort from the old order
  // (nearly sorted when few changed).
  void reorder(std::size_t k)
  {
    auto* o = order_.data();
    for (auto i = lo_of(k) + 1; i < hi_of(k); ++i) {
      auto const p = o[i];
      auto j       = i;
      for (; j > lo_of(k) && raw_[o[j - 1]] > raw_[p]; --j) { o[j] = o[j - 1]; }
      o[j] = p;
    }
    index(k);
  }

  // Block k's sorted keys and their prefix sums, from its order.
  void index(std::size_t k)
  {
    auto* pre = prefix_.data() + k * (block + 1);
    pre[0]    = 0;
    for (auto i = lo_of(k); i < hi_of(k); ++i) {
      key_[i]               = raw_[order_[i]];
      pre[i - lo_of(k) + 1] = pre[i - lo_of(k)] + key_[i];
    }
    bounds_[k] = {key_[lo_of(k)], key_[hi_of(k) - 1]};
  }

  std::size_t n_{0};
  std::vector<std::uint64_t> raw_;     // x[i] = max(0, raw_[i] - d_[i / block])
  std::vector<std::uint64_t> d_;       // per block: the subtractions covering all of it
  std::vector<std::uint32_t> order_;   // per block: its positions (n < 2^32) by raw value
  std::vector<std::uint64_t> key_;     // per block: its raw values, ascending
  std::vector<std::uint64_t> prefix_;  // per block (block + 1 each): prefix sums of key_
  // Per block: its least and greatest raw value (most of a query\'s blocks are settled by them).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> bounds_;
  std::vector<std::uint32_t> inside_, outside_;  // lower_part's scratch
};

}  // namespace stash::detail
