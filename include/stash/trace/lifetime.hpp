/**
 * @file lifetime.hpp
 * @brief Lifetime analysis of a trace: when each storage is live and accessed, the peak of live
 * bytes (the lower bound L that no offset plan can beat) and where it happens.
 *
 * Time is the event index in program order. A storage allocated at event a and freed at event f
 * is live over [a, f); one never freed (persistent) is live until the number of events. The live
 * bytes at time t are the sum of the sizes of the storages live at t, so the peak counts
 * everything resident, parameters and optimizer state included (data/README.md's "peak live
 * bytes").
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/trace/lifetime_interval.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace stash {

/// @brief One op's use of a storage.
struct storage_access {
  std::uint64_t event;  ///< event index of the op (its time)
  std::uint64_t op;     ///< op index
  bool read;            ///< the op lists the storage among its reads
  bool write;           ///< the op lists the storage among its writes

  /// @brief Field by field.
  friend constexpr bool operator==(storage_access const&, storage_access const&) = default;
};

/// @brief When one storage is live and when ops touch it.
struct storage_lifetime {
  storage_id id{};                          ///< the storage
  std::uint64_t bytes{};                    ///< its size
  storage_kind kind{};                      ///< its kind
  std::uint64_t alloc_event{};              ///< event index of its `t` line
  std::optional<std::uint64_t> free_event;  ///< event index of its `f` line; nullopt = persistent
  std::uint64_t end_event{};                ///< free_event, or the number of events if persistent
  std::vector<storage_access> accesses;     ///< one per op touching it, in program order

  /// @brief True when the storage is never freed within the iteration.
  /// @return Whether it has no free event.
  [[nodiscard]] bool persistent() const noexcept { return !free_event.has_value(); }
  /// @brief The first op touching it, if any.
  /// @return The first access, or nothing.
  [[nodiscard]] std::optional<storage_access> first_access() const noexcept
  {
    if (accesses.empty()) { return std::nullopt; }
    return accesses.front();
  }
  /// @brief The last op touching it, if any.
  /// @return The last access, or nothing.
  [[nodiscard]] std::optional<storage_access> last_access() const noexcept
  {
    if (accesses.empty()) { return std::nullopt; }
    return accesses.back();
  }
};

/// @brief Bytes (or counts) per storage kind, indexed by the enum.
using per_kind = std::array<std::uint64_t, storage_kind_count>;

/// @brief Everything lifetime analysis learns from a trace.
struct lifetime_analysis {
  std::uint64_t event_count{};             ///< number of events (the end of time)
  std::vector<storage_lifetime> storages;  ///< indexed by storage id

  std::uint64_t peak_live_bytes{};  ///< the lower bound L: max over time of live bytes
  std::optional<std::uint64_t>
      peak_event;  ///< first event at which the peak holds; nullopt if no events
  std::optional<stash::phase> peak_phase;  ///< phase marked last at or before peak_event, if any
  /// Op the peak belongs to: the first op at or after peak_event (an op's allocations precede
  /// its `o` line), else the last op before it; nullopt if the trace has no ops.
  std::optional<std::uint64_t> peak_op;

  std::uint64_t activation_bytes{};  ///< total bytes of kind act
  per_kind bytes_by_kind{};          ///< total bytes allocated per kind
  per_kind count_by_kind{};          ///< number of storages per kind
  per_kind live_at_peak_by_kind{};   ///< live bytes per kind at peak_event (sums to the peak)

  /// @brief Total bytes allocated of `kind`.
  /// @param kind The storage kind.
  /// @return The bytes.
  [[nodiscard]] std::uint64_t bytes_of(storage_kind kind) const noexcept
  {
    return bytes_by_kind[static_cast<std::size_t>(kind)];
  }
};

namespace detail {

/// Adds with a check: byte totals beyond 2^64 mean a corrupt input, never a plausible trace.
[[nodiscard]] inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b)
{
  std::uint64_t sum = 0;
  STASH_EXPECTS(!__builtin_add_overflow(a, b, &sum), "byte total overflows 64 bits");
  return sum;
}

}  // namespace detail

/// @brief Analyses `t`: per-storage lifetimes and accesses, the peak of live bytes and where it
/// happens, and bytes per kind. Linear in the size of the trace.
/// @param t The trace.
/// @return The analysis.
/// @throws stash::logic_error When a byte total overflows 64 bits.
// Kept whole (~80 lines): one linear pass over the events fills lifetimes, accesses and the
// live-byte curve together, then one short pass finds the peak; the passes share the curve.
[[nodiscard]] inline lifetime_analysis analyze_lifetimes(trace const& t)
{
  lifetime_analysis result;
  auto const events   = t.events();
  auto const storages = t.storages();
  auto const ops      = t.ops();
  result.event_count  = events.size();
  result.storages.resize(storages.size());

  std::uint64_t live = 0;
  for (std::uint64_t e = 0; e < events.size(); ++e) {
    auto const& event = events[e];
    switch (event.kind) {
      case event_kind::alloc: {
        auto const& s           = storages[event.index];
        auto& life              = result.storages[event.index];
        life.id                 = event.index;
        life.bytes              = s.bytes;
        life.kind               = s.kind;
        life.alloc_event        = e;
        live                    = detail::checked_add(live, s.bytes);
        auto const k            = static_cast<std::size_t>(s.kind);
        result.bytes_by_kind[k] = detail::checked_add(result.bytes_by_kind[k], s.bytes);
        ++result.count_by_kind[k];
        break;
      }
      case event_kind::free:
        result.storages[event.index].free_event = e;
        live -= storages[event.index].bytes;  // a trace only frees live storages
        break;
      case event_kind::op: {
        auto const& o = ops[event.index];
        auto touch    = [&](storage_id id, bool is_write) {
          auto& accesses = result.storages[id].accesses;
          if (!accesses.empty() && accesses.back().event == e) {
            // Listed twice by the same op (read and written, or repeated): one access.
            (is_write ? accesses.back().write : accesses.back().read) = true;
          } else {
            accesses.push_back(storage_access{e, event.index, !is_write, is_write});
          }
        };
        for (auto const id : o.reads) { touch(id, false); }
        for (auto const id : o.writes) { touch(id, true); }
        break;
      }
      case event_kind::phase:
        break;
    }
    if (!result.peak_event || live > result.peak_live_bytes) {
      result.peak_live_bytes = live;
      result.peak_event      = e;
    }
  }
  for (auto& life : result.storages) {
    life.end_event = life.free_event.value_or(result.event_count);
  }
  result.activation_bytes = result.bytes_of(storage_kind::act);

  if (result.peak_event) {
    auto const peak = *result.peak_event;
    for (auto const& life : result.storages) {
      if (life.alloc_event <= peak && peak < life.end_event) {
        result.live_at_peak_by_kind[static_cast<std::size_t>(life.kind)] += life.bytes;
      }
    }
    for (std::uint64_t e = peak + 1; e-- > 0;) {
      if (events[e].kind == event_kind::phase) {
        result.peak_phase = events[e].phase_value();
        break;
      }
    }
    for (std::uint64_t e = peak; e < events.size() && !result.peak_op; ++e) {
      if (events[e].kind == event_kind::op) { result.peak_op = events[e].index; }
    }
    if (!result.peak_op && !ops.empty()) { result.peak_op = ops.size() - 1; }
  }
  return result;
}

/// @brief One interval per storage (id = storage id, [alloc event, end event), bytes), for
/// offset planners.
/// @param t The trace.
/// @return The intervals, indexed by storage id.
[[nodiscard]] inline std::vector<lifetime_interval> lifetime_intervals(trace const& t)
{
  auto const events = t.events();
  std::vector<lifetime_interval> intervals(t.storages().size());
  for (std::uint64_t e = 0; e < events.size(); ++e) {
    auto const& event = events[e];
    if (event.kind == event_kind::alloc) {
      intervals[event.index] =
          lifetime_interval{event.index, e, events.size(), t.storages()[event.index].bytes};
    } else if (event.kind == event_kind::free) {
      intervals[event.index].end = e;
    }
  }
  return intervals;
}

/// @brief The peak of live bytes over a set of intervals and the first time it holds.
struct live_peak {
  std::uint64_t bytes{};  ///< max over time of the bytes of the intervals live then
  std::uint64_t time{};   ///< the first time step at which that maximum holds (0 if empty)

  /// @brief Field by field.
  friend constexpr bool operator==(live_peak const&, live_peak const&) = default;
};

/// @brief The peak of live bytes of `intervals` (trace lifetimes or a MiniMalloc instance) and
/// when it first happens. Every interval must satisfy begin < end (stash::logic_error otherwise).
/// O(n log n).
/// @param intervals The intervals.
/// @return The peak and its first time.
/// @throws stash::logic_error For an interval with begin >= end.
[[nodiscard]] inline live_peak peak_live(std::span<lifetime_interval const> intervals)
{
  std::vector<std::pair<std::uint64_t, std::uint64_t>> starts, ends;  // (time, bytes)
  starts.reserve(intervals.size());
  ends.reserve(intervals.size());
  for (auto const& interval : intervals) {
    STASH_EXPECTS(interval.begin < interval.end,
                  "lifetime interval of id " + std::to_string(interval.id) + " is empty: begin " +
                      std::to_string(interval.begin) + " >= end " + std::to_string(interval.end));
    starts.emplace_back(interval.begin, interval.bytes);
    ends.emplace_back(interval.end, interval.bytes);
  }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  live_peak peak;
  std::uint64_t live = 0;
  std::size_t s = 0, d = 0;
  // Visit each start time once: at time T the live set is every interval with begin <= T < end,
  // so the ends at or before T leave before the starts at T are counted (half-open intervals).
  while (s < starts.size()) {
    auto const now = starts[s].first;
    while (d < ends.size() && ends[d].first <= now) { live -= ends[d++].second; }
    while (s < starts.size() && starts[s].first == now) {
      live = detail::checked_add(live, starts[s++].second);
    }
    if (live > peak.bytes) {
      peak.bytes = live;
      peak.time  = now;
    }
  }
  return peak;
}

/// @brief The lower bound L of `intervals`: the maximum over time of their live bytes.
/// @param intervals The intervals.
/// @return The peak of live bytes.
/// @throws stash::logic_error As peak_live().
[[nodiscard]] inline std::uint64_t peak_live_bytes(std::span<lifetime_interval const> intervals)
{
  return peak_live(intervals).bytes;
}

}  // namespace stash
