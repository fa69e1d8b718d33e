/**
 * @file planners.hpp
 * @brief stash-plan's planner section: every offset planner's footprint, alpha and time on one
 * input, the search's nodes, each plan checked, the best one, and (for traces) the caching pool
 * it is compared with.
 */
#pragma once

#include <stash/core/virtual_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/greedy_planner.hpp>
#include <stash/pool/plan.hpp>
#include <stash/pool/plan_checker.hpp>
#include <stash/pool/search_planner.hpp>
#include <stash/pool/stream_order.hpp>
#include <stash/pool/trace_replay.hpp>
#include <stash/trace/lifetime_interval.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace stash_plan {

/// @brief One planner's result on one input.
struct planner_result {
  std::string name;
  std::uint64_t footprint_bytes{};
  double alpha{};                             ///< footprint / lower_bound (1.0 is optimal)
  double plan_ms{};                           ///< wall time of plan(), checking excluded
  std::optional<std::uint64_t> search_nodes;  ///< search planner: nodes it expanded
  std::optional<std::uint64_t> node_budget;   ///< search planner: the nodes it was allowed
  bool time_capped{false};                    ///< search planner: the --search-ms cap cut it short
};

/// @brief The planner section of a report.
struct planner_section {
  std::uint64_t alignment{};             ///< every block padded to this
  std::uint64_t lower_bound{};           ///< L: peak live padded bytes (stash::plan_lower_bound)
  std::vector<planner_result> planners;  ///< in the order they ran
  std::size_t best{};                    ///< index into planners: the smallest footprint
  std::optional<std::uint64_t> caching_pool_reserved_peak;  ///< traces: replayed caching pool
  std::optional<std::uint64_t> capacity;                    ///< CSV: the target from the name

  /// @brief The best planner's result.
  [[nodiscard]] planner_result const& best_result() const { return planners.at(best); }
  /// @brief How much smaller the best plan is than the caching pool's peak, in percent of the
  /// pool's peak (negative when the plan is larger).
  [[nodiscard]] std::optional<double> saving_vs_caching_pool_percent() const
  {
    if (!caching_pool_reserved_peak || *caching_pool_reserved_peak == 0) { return std::nullopt; }
    auto const pool = static_cast<double>(*caching_pool_reserved_peak);
    return (pool - static_cast<double>(best_result().footprint_bytes)) / pool * 100.0;
  }
  /// @brief CSV: whether the best plan fits the capacity.
  [[nodiscard]] std::optional<bool> best_within_capacity() const
  {
    if (!capacity) { return std::nullopt; }
    return best_result().footprint_bytes <= *capacity;
  }
};

/// @brief Runs the greedy and the search planner on `intervals`, checks both plans
/// (stash::invalid_plan if a planner produced a bad one) and picks the smaller footprint (the
/// earlier planner on a tie).
[[nodiscard]] inline planner_section plan_intervals(
    std::span<const stash::lifetime_interval> intervals, std::uint64_t alignment,
    stash::search_options const& search)
{
  planner_section section;
  section.alignment   = alignment;
  section.lower_bound = stash::plan_lower_bound(intervals, alignment);
  section.capacity    = search.capacity;
  auto add            = [&](stash::plan const& p) -> planner_result& {
    stash::check_plan(intervals, p);
    planner_result r;
    r.name            = p.planner;
    r.footprint_bytes = p.footprint;
    r.alpha           = p.alpha(section.lower_bound);
    r.plan_ms         = p.plan_seconds() * 1e3;
    return section.planners.emplace_back(std::move(r));
  };
  add(stash::greedy_planner{}.plan(intervals, alignment));
  stash::search_stats stats;
  auto& searched        = add(stash::search_planner{search}.plan(intervals, alignment, stats));
  searched.search_nodes = stats.nodes;
  searched.node_budget  = stats.node_budget;
  searched.time_capped  = stats.time_capped;
  auto const best       = std::min_element(section.planners.begin(), section.planners.end(),
                                           [](planner_result const& a, planner_result const& b) {
                                       return a.footprint_bytes < b.footprint_bytes;
                                     });
  section.best          = static_cast<std::size_t>(best - section.planners.begin());
  return section;
}

/// @brief The caching pool's peak reserved bytes over the trace's alloc/free sequence (addresses
/// are virtual: nothing is allocated for real).
[[nodiscard]] inline std::uint64_t caching_pool_peak(stash::trace const& t)
{
  stash::caching_pool<stash::virtual_upstream, stash::immediate_order> pool;
  return stash::replay_trace(t, pool).peak_reserved_bytes;
}

}  // namespace stash_plan
