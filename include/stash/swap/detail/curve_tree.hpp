/**
 * @file curve_tree.hpp
 * @brief Internal: a planned device curve (sim/schedule.hpp) as a max_tree (range_tree.hpp), for
 * the prunes that raise it as entries go (joint_greedy.hpp, cut_swap_rerun.hpp). Apart from
 * range_tree.hpp, which knows nothing of schedules.
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/swap/detail/range_tree.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace stash::detail {

/// A max_tree over the planned device curve `curve_of()` returns (a vector of std::uint64_t),
/// or none when it throws stash::schedule_error: a plan whose curve planned_device_curve
/// refuses, which the callers (the prunes that raise the curve as entries go) then test entry
/// by entry the slow way, as planned_peak refuses it.
template <class CurveOf>
[[nodiscard]] std::optional<max_tree> curve_tree(CurveOf&& curve_of)
{
  try {
    auto const c = curve_of();
    return max_tree(std::vector<std::int64_t>(c.begin(), c.end()));
  } catch (schedule_error const&) {
    return std::nullopt;
  }
}

}  // namespace stash::detail
