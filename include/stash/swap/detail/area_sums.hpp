/**
 * @file area_sums.hpp
 * @brief Exact load-weighted areas over ranges of ops under range adds of load: AutoSwap's
 * SWDOA score (the integral of the device load over a candidate's absence) on the current planned
 * load in O(log n) per change and per area, instead of a pass over every op per pick.
 *
 * Each op's duration is a fixed-point integer, q_i = round(d_i x 2^s), with s chosen from the
 * total duration alone so that the sum of q_i stays below 2^63: the rounding of one op's duration
 * is at most 2^-62 of the whole iteration, and everything after it is exact integer arithmetic
 * (areas below 2^127, so unsigned 128-bit arithmetic modulo 2^128 gives them exactly, whatever
 * the order of the adds). A floating-point prefix sum of load x duration over every op instead
 * rounds once per op, and an area taken as the difference of two such sums loses the digits the
 * two share: the integer area is the more exact one.
 */
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace stash::detail {

/// Areas sum(load_i x q_i, i in [first, last)) over a load per op that changes by range adds.
class area_sums {
 public:
  /// Unsigned 128-bit integers: arithmetic modulo 2^128 (true areas stay below 2^127).
  __extension__ typedef unsigned __int128 wide;

  /// The durations (seconds, >= 0) and the starting load per op.
  area_sums(std::span<double const> seconds, std::span<std::uint64_t const> load)
      : n_(seconds.size())
  {
    double total = 0;
    for (auto const d : seconds) { total += d; }
    // 2^shift_ x total < 2^62, so the rounded durations sum below 2^63; a total that is zero,
    // negative or not finite gives every op a zero duration (and every area 0).
    if (std::isfinite(total) && total > 0) { shift_ = 61 - std::ilogb(total); }
    quantum_.assign(n_, 0);
    prefix_q_.assign(n_ + 1, 0);
    base_.assign(n_ + 1, 0);
    for (std::size_t i = 0; i < n_; ++i) {
      auto const d = seconds[i];
      if (std::isfinite(total) && total > 0 && d > 0) {
        quantum_[i] = static_cast<std::uint64_t>(std::llround(std::ldexp(d, shift_)));
      }
      prefix_q_[i + 1] = prefix_q_[i] + quantum_[i];
      base_[i + 1]     = base_[i] + static_cast<wide>(load[i]) * quantum_[i];
    }
    diff_.assign(n_ + 1, 0);
    for (std::size_t level = 0; level < blocks_.size(); ++level) {
      blocks_[level].assign(((n_ + 1) >> (block_bits * (level + 1))) + 1, {});
    }
  }

  /// Adds `d` to the load of ops [first, last).
  void add(std::size_t first, std::size_t last, std::int64_t d)
  {
    if (first >= last) { return; }
    wide w = static_cast<std::uint64_t>(d);  // d modulo 2^128
    if (d < 0) { w -= wide{1} << 64U; }
    added_ = true;
    point(first, w);
    point(last, -w);
  }

  /// The exact area of ops [first, last) on the current load (0 when empty).
  [[nodiscard]] wide area(std::size_t first, std::size_t last) const
  {
    return last > first ? prefix(last) - prefix(first) : wide{0};
  }

  /// The area of ops [first, last) on the starting load.
  [[nodiscard]] wide base_area(std::size_t first, std::size_t last) const
  {
    return last > first ? base_[last] - base_[first] : wide{0};
  }

  /// The sum of the fixed-point durations of ops [first, last).
  [[nodiscard]] std::uint64_t duration(std::size_t first, std::size_t last) const
  {
    return last > first ? prefix_q_[last] - prefix_q_[first] : 0;
  }

  /// An area in load x seconds, rounded once from the exact integer.
  [[nodiscard]] double seconds(wide a) const { return std::ldexp(static_cast<double>(a), -shift_); }

 private:
  // The load's difference array D (load_i - start_i = D_0 + ... + D_i), and per block of 2^6
  // and of 2^12 positions the sums of D_j and of D_j x Q_j (Q_j = q_0 + ... + q_(j-1)); the area
  // of ops [0, x) is then Q_x x (D_0 + ... + D_(x-1)) - (D_0 Q_0 + ... + D_(x-1) Q_(x-1)) on top
  // of the start's. An add (the chain's moves, many per pick) writes three places per end
  // instead of a Fenwick tree's 2 x log n, and a prefix (a rescored candidate, few per pick)
  // reads at most 3 x 63 of them, taking D_j x Q_j within its last block from D_j. Sums modulo
  // 2^128 in any grouping: the same areas.
  struct pair_sum {
    wide d = 0, dq = 0;
  };
  static constexpr int block_bits = 6;

  void point(std::size_t j, wide d)
  {
    wide const dq = d * prefix_q_[j];
    diff_[j] += d;
    for (std::size_t level = 0; level < blocks_.size(); ++level) {
      auto& slot = blocks_[level][j >> (block_bits * (level + 1))];
      slot.d += d;
      slot.dq += dq;
    }
  }

  // Positions [0, x): the whole blocks of 2^12, then those of 2^6 up to x, then the positions.
  [[nodiscard]] wide prefix(std::size_t x) const
  {
    if (!added_) { return base_[x]; }
    wide s = 0, sq = 0;
    std::size_t done = 0;  // positions [0, done) summed
    for (std::size_t level = blocks_.size(); level-- > 0;) {
      auto const shift = block_bits * (level + 1);
      auto const& sums = blocks_[level];
      for (auto b = done >> shift, e = x >> shift; b < e; ++b) {
        s += sums[b].d;
        sq += sums[b].dq;
      }
      done = (x >> shift) << shift;
    }
    for (; done < x; ++done) {
      s += diff_[done];
      sq += diff_[done] * prefix_q_[done];
    }
    return base_[x] + static_cast<wide>(prefix_q_[x]) * s - sq;
  }

  std::size_t n_;
  int shift_ = 0;
  std::vector<std::uint64_t> quantum_;           // q_i
  std::vector<std::uint64_t> prefix_q_;          // Q_x
  std::vector<wide> base_;                       // the start's areas of ops [0, x)
  bool added_ = false;                           // whether add() was ever called
  std::vector<wide> diff_;                       // D_j
  std::array<std::vector<pair_sum>, 2> blocks_;  // per 2^6 and per 2^12 positions
};

}  // namespace stash::detail
