/**
 * @file plan.hpp
 * @brief The result of offset planning: an arena offset for every block of a recorded iteration,
 * the arena size it needs, and the helpers that judge it against the lower bound.
 *
 * A plan is indexed like the planner's input: `offsets[i]` belongs to `intervals[i]`. Block sizes
 * are padded to the plan's alignment and offsets are multiples of it, so `offsets[i]` can be
 * added to an arena base that is itself aligned.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/trace/lifetime_interval.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace stash {

/// @brief Arena offsets for a set of lifetime intervals, as produced by an offset planner.
struct plan {
  std::vector<std::uint64_t> offsets;  ///< byte offset of block i, indexed like the input
  std::uint64_t footprint{0};          ///< arena bytes the plan needs: max(offset + padded size)
  std::uint64_t alignment{
      cuda_allocation_alignment};         ///< every offset and padded size is a multiple
  std::string planner;                    ///< name of the planner that produced it
  std::chrono::nanoseconds plan_time{0};  ///< wall time spent planning

  /// @brief footprint / lower_bound; 1.0 is optimal. A zero lower bound gives 1.0.
  /// @param lower_bound The lower bound L.
  /// @return The ratio.
  [[nodiscard]] double alpha(std::uint64_t lower_bound) const noexcept
  {
    return lower_bound == 0 ? 1.0
                            : static_cast<double>(footprint) / static_cast<double>(lower_bound);
  }

  /// @brief Planning time in seconds.
  /// @return The seconds.
  [[nodiscard]] double plan_seconds() const noexcept
  {
    return std::chrono::duration<double>(plan_time).count();
  }
};

/// @brief `bytes` rounded up to `alignment`; throws stash::logic_error if that overflows.
/// @param bytes The size.
/// @param alignment A power of two.
/// @return The padded size.
/// @throws stash::logic_error When it overflows 64 bits.
[[nodiscard]] inline std::uint64_t padded_size(std::uint64_t bytes, std::uint64_t alignment)
{
  STASH_EXPECTS(bytes <= std::numeric_limits<std::uint64_t>::max() - (alignment - 1),
                "padded_size: " + std::to_string(bytes) + " B cannot be padded to alignment " +
                    std::to_string(alignment) + " without overflow");
  return align_up(bytes, alignment);
}

/// @brief Checks what every planner requires of its input: a power-of-two alignment and, for
/// each interval, begin < end and a size that can be padded. `who` names the caller in the error.
/// @param intervals The lifetimes.
/// @param alignment The alignment.
/// @param who The caller, named in the error.
/// @throws stash::logic_error For the first requirement not met.
inline void validate_planner_input(std::span<const lifetime_interval> intervals,
                                   std::uint64_t alignment, std::string const& who)
{
  STASH_EXPECTS(is_pow2(alignment),
                who + ": alignment " + std::to_string(alignment) + " is not a power of two");
  for (std::size_t i = 0; i < intervals.size(); ++i) {
    auto const& b = intervals[i];
    STASH_EXPECTS(b.begin < b.end, who + ": interval #" + std::to_string(i) + " (id " +
                                       std::to_string(b.id) + ") has an empty lifetime [" +
                                       std::to_string(b.begin) + ", " + std::to_string(b.end) +
                                       ")");
    STASH_EXPECTS(b.bytes <= std::numeric_limits<std::uint64_t>::max() / 2,
                  who + ": interval #" + std::to_string(i) + " (id " + std::to_string(b.id) +
                      ") has an implausible size of " + std::to_string(b.bytes) + " B");
  }
}

/// @brief The lower bound L on any plan's footprint: the maximum over time of the sum of live
/// padded sizes. Blocks ending at t are dead at t (half-open lifetimes). O(n log n).
/// @param intervals The lifetimes.
/// @param alignment A power of two.
/// @return The lower bound.
/// @throws stash::logic_error As validate_planner_input.
[[nodiscard]] inline std::uint64_t plan_lower_bound(std::span<const lifetime_interval> intervals,
                                                    std::uint64_t alignment)
{
  validate_planner_input(intervals, alignment, "plan_lower_bound");
  // (time, is_begin, size): at equal times ends (is_begin = 0) sort first.
  std::vector<std::pair<std::pair<std::uint64_t, int>, std::uint64_t>> events;
  events.reserve(intervals.size() * 2);
  for (auto const& b : intervals) {
    auto const size = padded_size(b.bytes, alignment);
    events.push_back({{b.begin, 1}, size});
    events.push_back({{b.end, 0}, size});
  }
  std::sort(events.begin(), events.end());
  std::uint64_t live = 0;
  std::uint64_t peak = 0;
  for (auto const& [key, size] : events) {
    if (key.second == 1) {
      live += size;
      peak = std::max(peak, live);
    } else {
      live -= size;
    }
  }
  return peak;
}

}  // namespace stash
