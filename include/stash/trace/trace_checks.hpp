/**
 * @file trace_checks.hpp
 * @brief Signs that a well-formed trace is not one whole training iteration: warnings, not
 * errors, because each also has a legitimate reading.
 *
 * - Truncated: storages of kind act, temp or grad that are never freed. A recorded iteration
 *   frees every activation and temporary (and, in data/traces, every gradient) before it ends;
 *   a trace cut short in the backward pass leaves them live. (A recorder that keeps gradients
 *   alive across iterations also triggers it, hence a warning.)
 * - Phases out of order: a `p` line going back (backward -> forward, optimizer -> backward).
 *   Gradient accumulation over micro-batches does that on purpose; two traces concatenated or
 *   a recorder that mislabels phases does it by mistake, and phase-based reports (peak phase,
 *   forward/backward splits) then mean something else.
 * stash-plan prints them ("warning" lines, JSON "warnings") and still summarises the trace.
 */
#pragma once

#include <stash/trace/trace.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stash {

/// @brief The warnings of `t` (see the file comment), in a fixed order; empty when none.
/// @param t The trace.
/// @return The warnings, one sentence each.
[[nodiscard]] inline std::vector<std::string> trace_warnings(trace const& t)
{
  std::vector<std::string> warnings;
  std::array<std::uint64_t, storage_kind_count> live_count{}, live_bytes{};
  auto const storages = t.storages();
  for (storage_id id = 0; id < storages.size(); ++id) {
    if (t.free_event(id)) { continue; }
    auto const k = static_cast<std::size_t>(storages[id].kind);
    ++live_count[k];
    live_bytes[k] += storages[id].bytes;
  }
  std::string unfreed;
  for (auto const kind : {storage_kind::act, storage_kind::temp, storage_kind::grad}) {
    auto const k = static_cast<std::size_t>(kind);
    if (live_count[k] == 0) { continue; }
    unfreed += (unfreed.empty() ? "" : ", ") + std::to_string(live_count[k]) + " " +
               std::string(to_string(kind)) + " (" + std::to_string(live_bytes[k]) + " B)";
  }
  if (!unfreed.empty()) {
    warnings.push_back("never freed: " + unfreed +
                       "; a whole iteration frees them, so the trace may be truncated");
  }
  std::optional<phase> last;
  auto const events = t.events();
  for (std::uint64_t e = 0; e < events.size(); ++e) {
    if (events[e].kind != event_kind::phase) { continue; }
    auto const p = events[e].phase_value();
    if (last && p < *last) {
      warnings.push_back("phase '" + std::string(to_string(p)) + "' after '" +
                         std::string(to_string(*last)) + "' (event " + std::to_string(e) +
                         "): phases out of order (micro-batches, or concatenated traces?)");
      break;  // one is enough to say it
    }
    last = p;
  }
  return warnings;
}

}  // namespace stash
