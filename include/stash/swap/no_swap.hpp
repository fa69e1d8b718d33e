/**
 * @file no_swap.hpp
 * @brief The baseline policy: everything stays on the device.
 */
#pragma once

#include <stash/sim/cost_model.hpp>
#include <stash/swap/schedule.hpp>
#include <stash/trace/trace.hpp>

#include <cstdint>
#include <string_view>

namespace stash {

/// @brief Offloads nothing; its peak is the trace's peak live bytes.
struct no_swap {
  /// @brief Registry name.
  static constexpr std::string_view name = "no_swap";

  /// @brief An empty schedule (fits when the trace's peak is within `budget`).
  [[nodiscard]] static schedule plan(trace const& t, cost_model const&, std::uint64_t budget)
  {
    return make_schedule(t, std::string(name), budget, {});
  }
};

}  // namespace stash
