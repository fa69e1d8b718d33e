/**
 * @file offset_planner.hpp
 * @brief The `offset_planner` concept: what stash's lifetime-aware arena needs from a planner.
 *
 * Customization points a planner provides:
 * - `p.plan(intervals, alignment)`: returns a stash::plan whose `offsets` are indexed like
 *   `intervals`, multiples of `alignment`, with no two lifetime-overlapping blocks sharing an
 *   address, and `footprint` >= every offset + padded size (stash::check_plan verifies this).
 *   Bad input (non power-of-two alignment, empty lifetime) raises stash::logic_error.
 * - `p.name()`: a short, stable name for reports and the plan's `planner` field.
 * A planner is const-callable: planning does not change the planner, so one instance can serve
 * many traces (and threads).
 */
#pragma once

#include <stash/pool/plan.hpp>
#include <stash/trace/lifetime_interval.hpp>

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>

namespace stash {

/// @brief A type that assigns arena offsets to lifetime intervals (see the file comment).
/// @tparam P The type checked.
template <class P>
concept offset_planner = requires(P const& p, std::span<const lifetime_interval> intervals,
                                  std::uint64_t alignment)
{
  {
    p.plan(intervals, alignment)
    } -> std::same_as<plan>;
  {
    p.name()
    } -> std::convertible_to<std::string_view>;
};

}  // namespace stash
