/**
 * @file link_line.hpp
 * @brief Internal: the busy intervals of one copy engine (one direction of the host link) on the
 * nominal timeline, so that a planner can place each transfer where the engine is free.
 *
 * The simulator runs each direction's copies one at a time in issue order (simulator.hpp). A
 * planner that places every prefetch "as late as its own transfer allows" ignores that: the
 * prefetches of a backward's first layers all want the same last milliseconds, queue on the H2D
 * engine, and stall the compute stream or hold memory while they wait. Reserving each transfer's
 * interval here makes the next one go earlier (prefetch) or later (offload), where it costs
 * memory instead of time. Searches are bounded in steps (deterministic, and cheap when the line
 * is fragmented): a transfer that finds no room within the bound is reported as not fitting.
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <optional>

namespace stash::detail {

/// Busy intervals [start, end) of one copy engine, disjoint (reserve merges overlaps).
class link_line {
 public:
  /// Intervals a search visits at most before it gives up (not fitting).
  static constexpr std::size_t max_steps = 64;

  /// The latest start s >= earliest with [s, s + len) free and s + len <= deadline.
  [[nodiscard]] std::optional<double> latest_fit(double deadline, double len, double earliest) const
  {
    double end = deadline;
    auto it    = busy_.lower_bound(end);  // first interval starting at or after `end`
    for (std::size_t step = 0; step < max_steps; ++step) {
      if (end - len < earliest) { return std::nullopt; }
      if (it == busy_.begin()) { return end - len; }
      auto const prev = std::prev(it);
      if (prev->second <= end - len) { return end - len; }  // ends before the slot begins
      end = std::min(end, prev->first);
      it  = prev;
    }
    return std::nullopt;
  }

  /// The earliest start s >= release with [s, s + len) free and s <= latest.
  [[nodiscard]] std::optional<double> earliest_fit(double release, double len, double latest) const
  {
    double start = release;
    auto it      = busy_.upper_bound(start);  // first interval starting after `start`
    if (it != busy_.begin()) {
      auto const prev = std::prev(it);
      if (prev->second > start) { start = prev->second; }
    }
    for (std::size_t step = 0; step < max_steps; ++step) {
      if (start > latest) { return std::nullopt; }
      if (it == busy_.end() || it->first >= start + len) { return start; }
      start = std::max(start, it->second);
      ++it;
    }
    return std::nullopt;
  }

  /// Marks [start, end) busy (merged with the intervals it touches).
  void reserve(double start, double end)
  {
    if (!(start < end)) { return; }
    auto it = busy_.upper_bound(start);
    if (it != busy_.begin() && std::prev(it)->second >= start) { --it; }
    while (it != busy_.end() && it->first <= end) {
      start = std::min(start, it->first);
      end   = std::max(end, it->second);
      it    = busy_.erase(it);
    }
    busy_.emplace(start, end);
  }

  /// Number of disjoint busy intervals.
  [[nodiscard]] std::size_t size() const noexcept { return busy_.size(); }

 private:
  std::map<double, double> busy_;
};

}  // namespace stash::detail
