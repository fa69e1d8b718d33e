/**
 * @file swap_bounds.hpp
 * @brief What no swap schedule can beat: the least device budget a schedule can fit
 * (swap_bound_bytes) and the least iteration time at a budget (iteration_time_lower_bound).
 *
 * Both read the memory steps of the trace_analysis (the bytes each op needs when it starts; see
 * trace_analysis::memory_steps) and the gaps between consecutive accesses of each storage. A
 * storage may be off the device at op i only inside one of its gaps (u, v) with u < i < v: it
 * is offloaded at the earliest once op u ended and must be back when op v starts; its prefetch
 * may be issued when op v - 1 ends, so it can be away for the whole of op i = v - 1.
 */
#pragma once

#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace stash {

/// @brief Which storages a bound lets leave the device.
enum class swap_scope : std::uint8_t {
  activations,  ///< only storages of kind act (what vDNN, cDMA and Gist move)
  any_kind,     ///< any storage with a gap (parameters, gradients and temporaries too)
};

/// @brief Bytes that may be off the device while op i runs, for every op: the sum over the gaps
/// (u, v) with u < i < v of the storages in `scope`.
[[nodiscard]] inline std::vector<std::uint64_t> offloadable_bytes(
    trace_analysis const& analysis, swap_scope scope = swap_scope::activations)
{
  auto const n = analysis.op_count();
  std::vector<std::int64_t> delta(n + 1, 0);
  for (auto const& s : analysis.lifetimes().storages) {
    if (scope == swap_scope::activations && s.kind != storage_kind::act) { continue; }
    for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
      auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
      if (v < u + 2) { continue; }
      delta[u + 1] += static_cast<std::int64_t>(s.bytes);
      delta[v] -= static_cast<std::int64_t>(s.bytes);
    }
  }
  std::vector<std::uint64_t> off(n);
  std::int64_t run = 0;
  for (std::size_t i = 0; i < n; ++i) {
    run += delta[i];
    off[i] = static_cast<std::uint64_t>(run);
  }
  return off;
}

/// @brief The least device budget any schedule moving storages of `scope` can fit (under the
/// simulator's memory enforcement): the maximum over ops of the live bytes at the op's start
/// peak minus what may be off then (offloadable_bytes), and the bytes the trace needs after its
/// last op. Exact: offloading every gap after its last use and prefetching it just before its
/// next use reaches it.
[[nodiscard]] inline std::uint64_t swap_bound_bytes(trace_analysis const& analysis,
                                                    swap_scope scope = swap_scope::activations)
{
  auto const steps    = analysis.memory_steps();
  auto const n        = analysis.op_count();
  auto const off      = offloadable_bytes(analysis, scope);
  std::uint64_t bound = steps[n].live_peak;
  for (std::size_t i = 0; i < n; ++i) { bound = std::max(bound, steps[i].live_peak - off[i]); }
  return bound;
}

/// @brief A lower bound on the iteration time of any schedule that fits `budget` (infinite
/// below swap_bound_bytes(analysis, swap_scope::any_kind)).
///
/// With x_i = live bytes at op i's start peak - budget (the bytes that must be away then):
/// those x_i bytes crossed the link device-to-host before op i starts, while at most the compute
/// before op i ran, and cross back after op i started, while at most the compute from op i on
/// runs; the two directions run in parallel. So the time is at least
/// max_i [max(C_<i, D2H(x_i)) + max(C_>=i, H2D(x_i))], and at least the compute time. Link
/// latency and codec kernels are left out (both only add).
[[nodiscard]] inline double iteration_time_lower_bound(trace_analysis const& analysis,
                                                       std::uint64_t budget)
{
  if (budget < swap_bound_bytes(analysis, swap_scope::any_kind)) {
    return std::numeric_limits<double>::infinity();
  }
  auto const steps   = analysis.memory_steps();
  auto const& model  = analysis.model();
  double const total = analysis.compute_seconds();
  double const lat   = model.hw().pcie_latency_s;
  double best        = total;
  for (std::size_t i = 0; i < analysis.op_count(); ++i) {
    if (steps[i].live_peak <= budget) { continue; }
    auto const x        = steps[i].live_peak - budget;
    double const before = analysis.op_start(i);
    double const d2h    = model.d2h_time(x) - lat;
    double const h2d    = model.h2d_time(x) - lat;
    best                = std::max(best, std::max(before, d2h) + std::max(total - before, h2d));
  }
  return best;
}

}  // namespace stash
