/**
 * @file no_swap.hpp
 * @brief The baseline policy: everything stays on the device.
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <cstdint>
#include <string_view>

namespace stash {

/// @brief Offloads nothing; its peak is the trace's peak live bytes.
struct no_swap {
  /// @brief Registry name.
  /// @return "no_swap".
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "no_swap"; }

  /// @brief An empty schedule (fits when the trace's peak is within `budget`).
  /// @param analysis The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return An empty schedule.
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    return make_schedule(analysis, std::string(name()), budget, {});
  }
};

}  // namespace stash
