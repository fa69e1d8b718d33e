/**
 * @file trace_analysis.hpp
 * @brief Everything planners, swap policies, the simulator and the projection read from a trace,
 * computed once: lifetimes and accesses, the op index, each op's time under a cost model, and
 * what a recompute needs (each op's recompute class and workspace bytes).
 *
 * Data flows one way: trace -> trace_analysis (here, once) -> plan -> replay. A policy that needs
 * a fact of the trace reads it from the analysis it is given instead of deriving it again.
 */
#pragma once

#include <stash/sim/cost_model.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/op_index.hpp>
#include <stash/trace/recompute_semantics.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace stash {

/// @brief The device memory the trace itself needs around one op (no swapping). The events
/// between op i-1 and op i split in two: the frees that come before any allocation are op i-1's
/// end frees (returned when op i-1 ends); the rest, from the first allocation on and in trace
/// order, is op i's start step (taken when op i starts). Op 0's step holds everything allocated
/// before it; the events after the last op that follow its end frees form a final step.
struct memory_step {
  std::uint64_t start_peak{};  ///< running peak of the start step: bytes that must be free
  std::int64_t start_net{};    ///< net change of the start step
  std::uint64_t end_free{};    ///< bytes freed when the op ends, before any later allocation
  std::uint64_t live_peak{};   ///< live bytes at the start step's peak (nothing swapped)
};

/// @brief The facts of one trace under one cost model, computed once and passed by reference.
///
/// Holds a reference to the trace: the trace must outlive the analysis (an analysis of a
/// temporary trace does not compile).
class trace_analysis {
 public:
  /// @brief Analyses `t` and times its ops on `model` (linear in the size of the trace).
  /// @param t The trace (outlives the analysis).
  /// @param model The cost model (copied).
  trace_analysis(stash::trace const& t, cost_model const& model)
      : trace_(&t),
        model_(model),
        lifetimes_(analyze_lifetimes(t)),
        ops_(index_ops(t)),
        op_seconds_(model.op_times(t)),
        steps_(compute_memory_steps(t)),
        recompute_classes_(resolve_recompute_classes(t)),
        workspace_(compute_workspaces(t, ops_)),
        live_bytes_(compute_live_bytes(t))
  {
    op_start_.resize(op_seconds_.size() + 1, 0.0);
    for (std::size_t i = 0; i < op_seconds_.size(); ++i) {
      op_start_[i + 1] = op_start_[i] + op_seconds_[i];
    }
  }
  trace_analysis(stash::trace&&, cost_model const&) = delete;

  /// @brief The analysed trace.
  /// @return The trace.
  [[nodiscard]] stash::trace const& trace() const noexcept { return *trace_; }
  /// @brief The cost model the op times come from.
  /// @return The cost model.
  [[nodiscard]] cost_model const& model() const noexcept { return model_; }
  /// @brief Lifetimes, accesses and the peak of live bytes.
  /// @return The lifetimes.
  [[nodiscard]] lifetime_analysis const& lifetimes() const noexcept { return lifetimes_; }
  /// @brief Event index and phase of each op.
  /// @return The op index.
  [[nodiscard]] op_index const& ops() const noexcept { return ops_; }
  /// @brief Number of ops.
  /// @return The number of ops.
  [[nodiscard]] std::size_t op_count() const noexcept { return op_seconds_.size(); }
  /// @brief Seconds of each op on the cost model, indexed by op index.
  /// @return Seconds per op.
  [[nodiscard]] std::span<double const> op_seconds() const noexcept { return op_seconds_; }
  /// @brief Start of op i when nothing stalls (op_start(op_count()) is the compute time).
  /// @param i An op index.
  /// @return Seconds from the iteration's start.
  [[nodiscard]] double op_start(std::size_t i) const noexcept { return op_start_[i]; }
  /// @brief Sum of the op times: the iteration time when nothing stalls.
  /// @return Seconds.
  [[nodiscard]] double compute_seconds() const noexcept { return op_start_.back(); }
  /// @brief The memory step of each op, and at index op_count() the final step.
  /// @return The steps.
  [[nodiscard]] std::span<memory_step const> memory_steps() const noexcept { return steps_; }
  /// @brief Each op's recompute class: the default table overridden by the trace's
  /// declarations (recompute_semantics.hpp).
  /// @return One per storage.
  [[nodiscard]] std::span<recompute_class const> recompute_classes() const noexcept
  {
    return recompute_classes_;
  }
  /// @brief Bytes of each op's workspace: storages allocated and freed again between op i-1 and
  /// op i that no op names (the `.ws` temporaries); a re-run of op i needs them again.
  /// @return Bytes per op.
  [[nodiscard]] std::span<std::uint64_t const> workspace_bytes() const noexcept
  {
    return workspace_;
  }
  /// @brief The bytes live after each event of the trace, nothing swapped (planned_device_curve
  /// of no entries, computed once).
  /// @return Bytes per event.
  [[nodiscard]] std::span<std::uint64_t const> live_bytes() const noexcept { return live_bytes_; }
  /// @brief The peak of live bytes without swapping (the trace's lower bound L).
  /// @return Bytes.
  [[nodiscard]] std::uint64_t peak_live_bytes() const noexcept
  {
    return lifetimes_.peak_live_bytes;
  }

 private:
  [[nodiscard]] static std::vector<std::uint64_t> compute_live_bytes(stash::trace const& t)
  {
    std::vector<std::uint64_t> out;
    out.reserve(t.events().size());
    std::uint64_t live = 0;
    for (auto const& ev : t.events()) {
      if (ev.kind == event_kind::alloc) { live += t.storages()[ev.index].bytes; }
      if (ev.kind == event_kind::free) { live -= t.storages()[ev.index].bytes; }
      out.push_back(live);
    }
    return out;
  }

  [[nodiscard]] static std::vector<memory_step> compute_memory_steps(stash::trace const& t)
  {
    std::vector<memory_step> steps(t.ops().size() + 1);
    std::optional<std::uint64_t> prev_op;
    bool alloc_since_op = false;
    std::int64_t run = 0, peak = 0;
    std::uint64_t live = 0, live_at_start = 0;
    auto close = [&](std::size_t i) {
      steps[i].start_peak = static_cast<std::uint64_t>(peak);
      steps[i].start_net  = run;
      steps[i].live_peak  = live_at_start + static_cast<std::uint64_t>(peak);
    };
    for (auto const& ev : t.events()) {
      if (ev.kind == event_kind::phase) { continue; }
      if (ev.kind == event_kind::op) {
        close(ev.index);
        prev_op        = ev.index;
        alloc_since_op = false;
        run = peak    = 0;
        live_at_start = live;
        continue;
      }
      auto const bytes = t.storages()[ev.index].bytes;
      bool const alloc = ev.kind == event_kind::alloc;
      live             = alloc ? live + bytes : live - bytes;
      if (prev_op && !alloc_since_op && !alloc) {  // an end free of the previous op
        steps[*prev_op].end_free += bytes;
        live_at_start = live;
        continue;
      }
      alloc_since_op = alloc_since_op || alloc;
      run += alloc ? static_cast<std::int64_t>(bytes) : -static_cast<std::int64_t>(bytes);
      peak = std::max(peak, run);
    }
    close(t.ops().size());
    return steps;
  }

  // Sums (an upper bound on their running peak) the never-named storages whose alloc and free
  // both fall between the same two ops.
  [[nodiscard]] static std::vector<std::uint64_t> compute_workspaces(stash::trace const& t,
                                                                     op_index const& ops)
  {
    std::vector<std::uint64_t> ws(t.ops().size(), 0);
    std::vector<bool> named(t.storages().size(), false);
    for (auto const& op : t.ops()) {
      for (auto const id : op.reads) { named[id] = true; }
      for (auto const id : op.writes) { named[id] = true; }
    }
    auto const next_op = [&](std::uint64_t event) {
      return static_cast<std::size_t>(std::upper_bound(ops.event.begin(), ops.event.end(), event) -
                                      ops.event.begin());
    };
    for (storage_id id = 0; id < t.storages().size(); ++id) {
      auto const freed = t.free_event(id);
      if (named[id] || !freed) { continue; }
      auto const op = next_op(t.alloc_event(id));
      if (op < ws.size() && next_op(*freed) == op) { ws[op] += t.storages()[id].bytes; }
    }
    return ws;
  }

  stash::trace const* trace_;
  cost_model model_;
  lifetime_analysis lifetimes_;
  op_index ops_;
  std::vector<double> op_seconds_;
  std::vector<double> op_start_;
  std::vector<memory_step> steps_;
  std::vector<recompute_class> recompute_classes_;
  std::vector<std::uint64_t> workspace_;
  std::vector<std::uint64_t> live_bytes_;  // per event
};

}  // namespace stash
