/**
 * @file simulator.hpp
 * @brief A discrete-event model of one training iteration under a swap schedule: a compute
 * stream running the trace's ops in order, a D2H and an H2D copy engine beside it, and the
 * device memory that the trace and the schedule allocate and free.
 *
 * Model (the named parameters live in cost_model.hpp):
 *  - Compute runs op i when op i-1 finished and every prefetch op i waits for has finished.
 *  - Each copy engine runs its copies one at a time in issue order (one CUDA stream per
 *    direction). An offload issued at op a starts when op a-1 finished and the D2H engine is
 *    free; its encode kernel (if a codec is modelled) runs on the same stream before the copy.
 *    A prefetch issued at op p starts when op p-1 finished, the H2D engine is free and the
 *    storage's own offload finished; its decode kernel runs after the copy on the same stream.
 *    Codec kernels are assumed not to slow the compute stream.
 *  - Memory: a trace allocation made before op i is taken when op i starts; a free right after
 *    op i (before any allocation that precedes op i+1) is returned when op i ends. An offloaded
 *    storage returns its bytes when both its offload and its last use finished, and takes them
 *    again when its prefetch starts. Nothing blocks on memory: the peak is reported, not enforced.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

namespace stash {

/// @brief Why the compute stream waited before an op.
enum class stall_cause : std::uint8_t {
  transfer,         ///< the prefetch was issued too late to finish in time
  h2d_busy,         ///< the prefetch queued behind other prefetches on the H2D engine
  offload_pending,  ///< the prefetch had to wait for the storage's own offload to finish
};

/// @brief Spelling of a stall cause.
[[nodiscard]] constexpr std::string_view to_string(stall_cause c) noexcept
{
  switch (c) {
    case stall_cause::transfer:
      return "transfer";
    case stall_cause::h2d_busy:
      return "h2d_busy";
    case stall_cause::offload_pending:
      return "offload_pending";
  }
  return "?";
}

/// @brief One stall of the compute stream.
struct stall_record {
  std::uint64_t op{};    ///< the op that waited
  double seconds{};      ///< how long it waited
  storage_id storage{};  ///< the storage whose prefetch it waited for last
  stall_cause cause{};   ///< what held that prefetch back
};

/// @brief Which resource a timeline span occupies.
enum class sim_resource : std::uint8_t { compute, d2h, h2d };

/// @brief One span of the timeline: an op, a stall, an offload or a prefetch.
struct timeline_span {
  enum class kind_t : std::uint8_t { op, stall, offload, prefetch };
  kind_t kind{};            ///< what happened
  sim_resource resource{};  ///< where
  double start{};           ///< seconds from the iteration's start
  double end{};             ///< seconds from the iteration's start
  std::uint64_t index{};    ///< op index (op, stall) or schedule entry index (offload, prefetch)
};

/// @brief Options of a simulation.
struct sim_options {
  bool record_timeline = true;  ///< fill sim_result::timeline
};

/// @brief What one simulated iteration did.
struct sim_result {
  double iteration_s{};                 ///< end of the last op
  double compute_s{};                   ///< sum of op times (the iteration time without stalls)
  double stall_s{};                     ///< total time the compute stream waited
  std::vector<stall_record> stalls;     ///< one per op that waited, in op order
  std::uint64_t device_peak{};          ///< max device bytes over the timed memory curve
  double device_peak_time{};            ///< first time the peak holds
  std::uint64_t d2h_bytes{};            ///< bytes over the link device-to-host (after the codec)
  std::uint64_t h2d_bytes{};            ///< bytes over the link host-to-device (after the codec)
  std::vector<double> op_start;         ///< start time of each op
  std::vector<double> op_end;           ///< end time of each op
  std::vector<timeline_span> timeline;  ///< ops, stalls, offloads, prefetches (if recorded)
};

/// @brief Simulates one iteration of the analysed trace under schedule `s` on the analysis's cost
/// model. Validates `s` first (stash::schedule_error).
[[nodiscard]] inline sim_result simulate(trace_analysis const& analysis, schedule const& s,
                                         sim_options const& options = {})
{
  validate_schedule(analysis, s);
  auto const& t       = analysis.trace();
  auto const& model   = analysis.model();
  auto const n        = t.ops().size();
  auto const duration = analysis.op_seconds();
  auto const& entries = s.entries;
  auto const m        = entries.size();

  std::vector<std::vector<std::size_t>> offloads_at(n), prefetches_at(n), waits_at(n);
  for (std::size_t k = 0; k < m; ++k) {
    offloads_at[entries[k].offload_at].push_back(k);
    prefetches_at[entries[k].prefetch_at].push_back(k);
    waits_at[entries[k].next_use].push_back(k);
  }

  sim_result r;
  r.op_start.resize(n);
  r.op_end.resize(n);
  std::vector<double> d2h_end(m), h2d_start(m), ready(m);
  std::vector<stall_cause> cause(m, stall_cause::transfer);
  double d2h_free = 0, h2d_free = 0, now = 0;
  auto span = [&](timeline_span::kind_t kind, sim_resource res, double a, double b,
                  std::uint64_t i) {
    if (options.record_timeline) { r.timeline.push_back(timeline_span{kind, res, a, b, i}); }
  };
  for (std::size_t i = 0; i < n; ++i) {
    // `now` = when the compute stream reaches op i: the point where its copies are issued.
    for (auto const k : offloads_at[i]) {
      double const start = std::max(now, d2h_free);
      d2h_end[k]         = start + model.offload_time(entries[k].bytes);
      d2h_free           = d2h_end[k];
      r.d2h_bytes += model.wire_bytes(entries[k].bytes);
      span(timeline_span::kind_t::offload, sim_resource::d2h, start, d2h_end[k], k);
    }
    for (auto const k : prefetches_at[i]) {
      // The offload of k was issued at an earlier op (offload_at < prefetch_at): d2h_end is set.
      double const start = std::max({now, h2d_free, d2h_end[k]});
      if (start > now) {
        cause[k] = d2h_end[k] >= h2d_free ? stall_cause::offload_pending : stall_cause::h2d_busy;
      }
      h2d_start[k] = start;
      ready[k]     = start + model.prefetch_time(entries[k].bytes);
      h2d_free     = ready[k];
      r.h2d_bytes += model.wire_bytes(entries[k].bytes);
      span(timeline_span::kind_t::prefetch, sim_resource::h2d, start, ready[k], k);
    }
    double start = now;
    std::optional<std::size_t> last;
    for (auto const k : waits_at[i]) {
      if (ready[k] > start) {
        start = ready[k];
        last  = k;
      }
    }
    if (last) {
      r.stalls.push_back(stall_record{i, start - now, entries[*last].id, cause[*last]});
      r.stall_s += start - now;
      span(timeline_span::kind_t::stall, sim_resource::compute, now, start, i);
    }
    r.op_start[i] = start;
    r.op_end[i]   = start + duration[i];
    r.compute_s += duration[i];
    span(timeline_span::kind_t::op, sim_resource::compute, start, r.op_end[i], i);
    now = r.op_end[i];
  }
  r.iteration_s = now;

  // Timed memory curve. Trace changes keep the trace's order (their times never decrease along
  // it); swap changes are merged in by time, before the allocations and after the frees of the
  // same instant, releases before re-acquisitions.
  struct change {
    double time;
    bool end_of_op;  // a free returned when the previous op ends
    std::int64_t bytes;
  };
  std::vector<change> trace_changes, swap_changes;
  auto const events = t.events();
  trace_changes.reserve(events.size());
  {
    std::optional<std::uint64_t> prev_op;  // last op seen
    bool alloc_since_op = false;
    for (std::uint64_t e = 0; e < events.size(); ++e) {
      auto const& ev = events[e];
      if (ev.kind == event_kind::op) {
        prev_op        = ev.index;
        alloc_since_op = false;
        continue;
      }
      if (ev.kind == event_kind::phase) { continue; }
      auto const bytes = static_cast<std::int64_t>(t.storages()[ev.index].bytes);
      if (ev.kind == event_kind::alloc) { alloc_since_op = true; }
      std::uint64_t const next_op = prev_op ? *prev_op + 1 : 0;
      bool const at_end           = prev_op && (!alloc_since_op || next_op >= n);
      double const time = at_end ? r.op_end[*prev_op] : (next_op < n ? r.op_start[next_op] : now);
      trace_changes.push_back(change{time, at_end, ev.kind == event_kind::alloc ? bytes : -bytes});
    }
  }
  swap_changes.reserve(2 * m);
  for (std::size_t k = 0; k < m; ++k) {
    auto const bytes = static_cast<std::int64_t>(entries[k].bytes);
    swap_changes.push_back(
        change{std::max(d2h_end[k], r.op_end[entries[k].last_use]), false, -bytes});
    swap_changes.push_back(change{h2d_start[k], false, bytes});
  }
  std::sort(swap_changes.begin(), swap_changes.end(), [](change const& a, change const& b) {
    return a.time < b.time || (a.time == b.time && a.bytes < b.bytes);
  });
  std::int64_t live = 0;
  auto apply        = [&](change const& c) {
    live += c.bytes;
    if (live > static_cast<std::int64_t>(r.device_peak)) {
      r.device_peak      = static_cast<std::uint64_t>(live);
      r.device_peak_time = c.time;
    }
  };
  std::size_t next_swap = 0;
  for (auto const& c : trace_changes) {
    while (next_swap < swap_changes.size() &&
           (swap_changes[next_swap].time < c.time ||
            (swap_changes[next_swap].time == c.time && !c.end_of_op))) {
      apply(swap_changes[next_swap++]);
    }
    apply(c);
  }
  while (next_swap < swap_changes.size()) { apply(swap_changes[next_swap++]); }
  return r;
}

}  // namespace stash
