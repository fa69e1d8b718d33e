/**
 * @file trace_analysis.hpp
 * @brief Everything planners, swap policies, the simulator and the projection read from a trace,
 * computed once: lifetimes and accesses, the op index, and each op's time under a cost model.
 *
 * Data flows one way: trace -> trace_analysis (here, once) -> plan -> replay. A policy that needs
 * a fact of the trace reads it from the analysis it is given instead of deriving it again.
 */
#pragma once

#include <stash/sim/cost_model.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/op_index.hpp>
#include <stash/trace/trace.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace stash {

/// @brief The facts of one trace under one cost model, computed once and passed by reference.
///
/// Holds a reference to the trace: the trace must outlive the analysis (an analysis of a
/// temporary trace does not compile).
class trace_analysis {
 public:
  /// @brief Analyses `t` and times its ops on `model` (linear in the size of the trace).
  trace_analysis(stash::trace const& t, cost_model const& model)
      : trace_(&t),
        model_(model),
        lifetimes_(analyze_lifetimes(t)),
        ops_(index_ops(t)),
        op_seconds_(model.op_times(t))
  {
    op_start_.resize(op_seconds_.size() + 1, 0.0);
    for (std::size_t i = 0; i < op_seconds_.size(); ++i) {
      op_start_[i + 1] = op_start_[i] + op_seconds_[i];
    }
  }
  trace_analysis(stash::trace&&, cost_model const&) = delete;

  /// @brief The analysed trace.
  [[nodiscard]] stash::trace const& trace() const noexcept { return *trace_; }
  /// @brief The cost model the op times come from.
  [[nodiscard]] cost_model const& model() const noexcept { return model_; }
  /// @brief Lifetimes, accesses and the peak of live bytes.
  [[nodiscard]] lifetime_analysis const& lifetimes() const noexcept { return lifetimes_; }
  /// @brief Event index and phase of each op.
  [[nodiscard]] op_index const& ops() const noexcept { return ops_; }
  /// @brief Number of ops.
  [[nodiscard]] std::size_t op_count() const noexcept { return op_seconds_.size(); }
  /// @brief Seconds of each op on the cost model, indexed by op index.
  [[nodiscard]] std::span<double const> op_seconds() const noexcept { return op_seconds_; }
  /// @brief Start of op i when nothing stalls (op_start(op_count()) is the compute time).
  [[nodiscard]] double op_start(std::size_t i) const noexcept { return op_start_[i]; }
  /// @brief Sum of the op times: the iteration time when nothing stalls.
  [[nodiscard]] double compute_seconds() const noexcept { return op_start_.back(); }
  /// @brief The peak of live bytes without swapping (the trace's lower bound L).
  [[nodiscard]] std::uint64_t peak_live_bytes() const noexcept
  {
    return lifetimes_.peak_live_bytes;
  }

 private:
  stash::trace const* trace_;
  cost_model model_;
  lifetime_analysis lifetimes_;
  op_index ops_;
  std::vector<double> op_seconds_;
  std::vector<double> op_start_;
};

}  // namespace stash
