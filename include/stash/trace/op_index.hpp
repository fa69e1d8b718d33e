/**
 * @file op_index.hpp
 * @brief Where each op sits in a trace's event order and which phase it belongs to.
 */
#pragma once

#include <stash/trace/trace.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace stash {

/// @brief Per-op facts that planners, swap policies and the simulator share.
struct op_index {
  std::vector<std::uint64_t> event;                ///< event index of op i's `o` line
  std::vector<std::optional<stash::phase>> phase;  ///< phase marked last before op i, if any
};

/// @brief Indexes the ops of `t` (linear in the number of events).
/// @param t The trace.
/// @return The index.
[[nodiscard]] inline op_index index_ops(trace const& t)
{
  op_index result;
  result.event.reserve(t.ops().size());
  result.phase.reserve(t.ops().size());
  std::optional<stash::phase> current;
  auto const events = t.events();
  for (std::uint64_t e = 0; e < events.size(); ++e) {
    if (events[e].kind == event_kind::phase) {
      current = events[e].phase_value();
    } else if (events[e].kind == event_kind::op) {
      result.event.push_back(e);
      result.phase.push_back(current);
    }
  }
  return result;
}

}  // namespace stash
