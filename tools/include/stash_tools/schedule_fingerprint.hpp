/**
 * @file schedule_fingerprint.hpp
 * @brief A 64-bit FNV-1a fingerprint of a schedule's entries, recompute entries, peaks and note:
 * what the planning-scale work compares to show that a faster planner returns the very schedule
 * the old one did (tests/swap/planning_scale_test.cpp, benchmarks/swap/planning_scale.cpp).
 */
#pragma once

#include <stash/sim/schedule.hpp>

#include <cstdint>
#include <string_view>

namespace stash_tools {

/// @brief FNV-1a over every field of `s` that a planner chooses (policy name excluded).
[[nodiscard]] inline std::uint64_t schedule_fingerprint(stash::schedule const& s) noexcept
{
  std::uint64_t h = 1469598103934665603ULL;
  auto mix        = [&](std::uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xffU;
      h *= 1099511628211ULL;
    }
  };
  mix(s.budget);
  mix(s.device_peak);
  mix(s.entries.size());
  for (auto const& e : s.entries) {
    mix(e.id);
    mix(e.last_use);
    mix(e.next_use);
    mix(e.offload_at);
    mix(e.prefetch_at);
    mix(e.bytes);
    mix(static_cast<std::uint64_t>(e.encoding));
    if (e.wrap) { mix(0x77726170); }    // only when set: the recorded fingerprints stay valid
    if (e.redrop) { mix(0x72656472); }  // likewise
  }
  mix(s.recomputes.size());
  for (auto const& e : s.recomputes) {
    mix(e.id);
    mix(e.last_use);
    mix(e.next_use);
    mix(e.at);
    mix(e.bytes);
  }
  for (char const c : std::string_view(s.note)) { mix(static_cast<unsigned char>(c)); }
  return h;
}

}  // namespace stash_tools
