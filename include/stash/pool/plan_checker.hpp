/**
 * @file plan_checker.hpp
 * @brief Validates a stash::plan against its intervals and describes the first violation.
 *
 * A plan is valid when it has one offset per interval, every offset is a multiple of the plan's
 * (power-of-two) alignment, no two blocks that are live at a common time share an address, and
 * the footprint covers every block. The overlap test sweeps over time with an ordered set of the
 * live address ranges, O(n log n): at every moment the live ranges are disjoint, so a new block
 * can only collide with its neighbours in address order.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/pool/plan.hpp>
#include <stash/trace/lifetime_interval.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace stash {

/// @brief What is wrong with a plan.
enum class plan_violation_kind {
  size_mismatch,       ///< offsets.size() differs from the number of intervals
  bad_alignment,       ///< the plan's alignment is not a power of two
  bad_interval,        ///< an input interval has an empty lifetime
  misaligned_offset,   ///< an offset is not a multiple of the alignment
  address_overflow,    ///< offset + padded size does not fit in 64 bits
  address_overlap,     ///< two blocks live at a common time share addresses
  footprint_too_small  ///< a block ends above the plan's footprint
};

/// @brief The first violation found: its kind, the input indices involved and a full description.
struct plan_violation {
  plan_violation_kind kind{};  ///< what is wrong
  std::size_t first{0};        ///< index (into the intervals) of the block at fault
  std::size_t second{0};       ///< the other block of an overlap; equals `first` otherwise
  std::string message;         ///< human-readable: ids, lifetimes, address ranges
};

/// @brief Thrown by check_plan: a plan that breaks its contract. Carries the violation.
class invalid_plan : public logic_error {
 public:
  /// @brief Wraps the violation; what() is its message.
  /// @param v The violation.
  explicit invalid_plan(plan_violation v) : logic_error(v.message), violation_(std::move(v)) {}
  /// @brief The violation found.
  /// @return The violation.
  [[nodiscard]] plan_violation const& violation() const noexcept { return violation_; }

 private:
  plan_violation violation_;
};

namespace detail {

inline std::string describe_block(std::span<const lifetime_interval> intervals, std::size_t i,
                                  std::uint64_t offset, std::uint64_t size)
{
  // Appends rather than a chain of operator+: GCC 12 at -O3 flags the chain (-Wrestrict).
  auto const& b    = intervals[i];
  std::string text = "#";
  text.append(std::to_string(i)).append(" (id ").append(std::to_string(b.id));
  text.append(", live [")
      .append(std::to_string(b.begin))
      .append(", ")
      .append(std::to_string(b.end));
  text.append("), addresses [").append(std::to_string(offset)).append(", ");
  text.append(std::to_string(offset + size)).append("))");
  return text;
}

}  // namespace detail

/// @brief Returns the first violation of `p` for `intervals`, or nullopt if the plan is valid.
/// Overlaps are reported in time order (the earliest moment two live blocks collide).
/// @param intervals The lifetimes.
/// @param p The plan.
/// @return The first violation, or nullopt.
// Kept whole (~85 lines): the shape checks lead into one time sweep whose live-range map is the
// state every overlap check reads; split, each step would take that map and the sorted events.
[[nodiscard]] inline std::optional<plan_violation> find_plan_violation(
    std::span<const lifetime_interval> intervals, plan const& p)
{
  std::string const who = "plan by '" + p.planner + "': ";
  auto make = [&](plan_violation_kind k, std::size_t a, std::size_t b, std::string const& m) {
    return plan_violation{k, a, b, who + m};
  };
  if (p.offsets.size() != intervals.size()) {
    return make(plan_violation_kind::size_mismatch, 0, 0,
                "has " + std::to_string(p.offsets.size()) + " offsets for " +
                    std::to_string(intervals.size()) + " intervals");
  }
  if (!is_pow2(p.alignment)) {
    return make(plan_violation_kind::bad_alignment, 0, 0,
                "alignment " + std::to_string(p.alignment) + " is not a power of two");
  }
  std::size_t const n = intervals.size();
  std::vector<std::uint64_t> sizes(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto const& b = intervals[i];
    if (b.begin >= b.end) {
      return make(plan_violation_kind::bad_interval, i, i,
                  "interval #" + std::to_string(i) + " (id " + std::to_string(b.id) +
                      ") has an empty lifetime [" + std::to_string(b.begin) + ", " +
                      std::to_string(b.end) + ")");
    }
    if (b.bytes > std::numeric_limits<std::uint64_t>::max() - (p.alignment - 1)) {
      return make(plan_violation_kind::address_overflow, i, i,
                  "block #" + std::to_string(i) + " (id " + std::to_string(b.id) +
                      ") cannot be padded without overflow");
    }
    sizes[i] = align_up(b.bytes, p.alignment);
    if (!is_aligned(p.offsets[i], p.alignment)) {
      return make(plan_violation_kind::misaligned_offset, i, i,
                  "block #" + std::to_string(i) + " (id " + std::to_string(b.id) + ") has offset " +
                      std::to_string(p.offsets[i]) + ", not a multiple of the alignment " +
                      std::to_string(p.alignment));
    }
    if (p.offsets[i] > std::numeric_limits<std::uint64_t>::max() - sizes[i]) {
      return make(plan_violation_kind::address_overflow, i, i,
                  "block #" + std::to_string(i) + " (id " + std::to_string(b.id) + ") at offset " +
                      std::to_string(p.offsets[i]) + " overflows the address space");
    }
    if (p.offsets[i] + sizes[i] > p.footprint) {
      return make(plan_violation_kind::footprint_too_small, i, i,
                  "block " + detail::describe_block(intervals, i, p.offsets[i], sizes[i]) +
                      " ends above the footprint " + std::to_string(p.footprint));
    }
  }

  // Sweep: at each time, ends (dead at their end time) before begins.
  std::vector<std::tuple<std::uint64_t, int, std::size_t>> events;
  events.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    if (sizes[i] == 0) { continue; }  // an empty block occupies no address
    events.emplace_back(intervals[i].begin, 1, i);
    events.emplace_back(intervals[i].end, 0, i);
  }
  std::sort(events.begin(), events.end());
  // Live ranges keyed by (offset, index); pairwise disjoint while no violation was found.
  std::set<std::pair<std::uint64_t, std::size_t>> live;
  for (auto const& [time, is_begin, i] : events) {
    std::uint64_t const lo = p.offsets[i];
    if (is_begin == 0) {
      live.erase({lo, i});
      continue;
    }
    std::uint64_t const hi = lo + sizes[i];
    auto next              = live.lower_bound({lo, 0});
    std::optional<std::size_t> clash;
    if (next != live.end() && next->first < hi) { clash = next->second; }
    if (!clash && next != live.begin()) {
      auto const prev = std::prev(next);
      if (prev->first + sizes[prev->second] > lo) { clash = prev->second; }
    }
    if (clash) {
      std::size_t const j = *clash;
      return make(plan_violation_kind::address_overlap, j, i,
                  "blocks " + detail::describe_block(intervals, j, p.offsets[j], sizes[j]) +
                      " and " + detail::describe_block(intervals, i, lo, sizes[i]) +
                      " are both live at time " + std::to_string(time) + " and overlap in address");
    }
    live.emplace(lo, i);
  }
  return std::nullopt;
}

/// @brief Throws stash::invalid_plan describing the first violation unless `p` is valid.
/// @param intervals The lifetimes.
/// @param p The plan.
/// @throws stash::invalid_plan For the first violation.
inline void check_plan(std::span<const lifetime_interval> intervals, plan const& p)
{
  if (auto v = find_plan_violation(intervals, p)) { throw invalid_plan(std::move(*v)); }
}

}  // namespace stash
