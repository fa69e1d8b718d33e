/**
 * @file best_of_planner.hpp
 * @brief Runs several offset planners, validates each plan and keeps the smallest footprint.
 */
#pragma once

#include <stash/core/units.hpp>
#include <stash/pool/offset_planner.hpp>
#include <stash/pool/plan.hpp>
#include <stash/pool/plan_checker.hpp>
#include <stash/trace/lifetime_interval.hpp>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>

namespace stash {

/// @brief A planner that runs each of `Planners` in turn, checks every plan with
/// stash::check_plan (an invalid plan throws stash::invalid_plan: it is a planner bug, never
/// silently dropped) and returns the valid plan with the smallest footprint; ties go to the
/// planner listed first. The returned plan's `planner` names the winner and its `plan_time`
/// covers all runs. The choice depends on the footprints only, never on the measured times, so
/// it is as reproducible as the planners it runs (stash::search_planner stops on search nodes).
template <offset_planner... Planners>
requires(sizeof...(Planners) > 0) class best_of_planner {
 public:
  /// @brief Default-constructs every planner.
  best_of_planner() requires(std::default_initializable<Planners>&&...) = default;

  /// @brief Holds the given planners.
  /// @param planners The planners tried.
  explicit best_of_planner(Planners... planners) : planners_(std::move(planners)...) {}

  /// @brief "best_of(a,b,...)".
  /// @return The name.
  [[nodiscard]] std::string name() const
  {
    std::string out = "best_of(";
    std::apply(
        [&](auto const&... p) {
          bool first = true;
          ((out += (first ? "" : ","), out += std::string(p.name()), first = false), ...);
        },
        planners_);
    return out + ")";
  }

  /// @brief Plans with every planner and keeps the smallest valid footprint.
  /// @param intervals The lifetimes.
  /// @param alignment A power of two.
  /// @return The best plan.
  /// @throws stash::logic_error For invalid input (the member planners' validate_planner_input).
  /// @throws stash::invalid_plan When a member planner returns an invalid plan (check_plan).
  [[nodiscard]] stash::plan plan(std::span<const lifetime_interval> intervals,
                                 std::uint64_t alignment = cuda_allocation_alignment) const
  {
    auto const start = std::chrono::steady_clock::now();
    stash::plan best;
    bool have = false;
    std::apply(
        [&](auto const&... p) {
          (
              [&] {
                stash::plan candidate = p.plan(intervals, alignment);
                check_plan(intervals, candidate);
                if (!have || candidate.footprint < best.footprint) {
                  best = std::move(candidate);
                  have = true;
                }
              }(),
              ...);
        },
        planners_);
    best.plan_time = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start);
    return best;
  }

 private:
  std::tuple<Planners...> planners_;
};

}  // namespace stash
