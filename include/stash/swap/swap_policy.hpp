/**
 * @file swap_policy.hpp
 * @brief The swap_policy concept: a type that turns a recorded iteration, a cost model and a
 * device memory budget into a swap schedule.
 */
#pragma once

#include <stash/sim/cost_model.hpp>
#include <stash/swap/schedule.hpp>
#include <stash/trace/trace.hpp>

#include <concepts>
#include <cstdint>
#include <string_view>

namespace stash {

/// @brief A compile-time swap policy: `S::plan(trace, cost_model, budget)` returns the schedule
/// and `S::name` names it (the name tools accept, see policy_registry.hpp).
template <class S>
concept swap_policy = requires(trace const& t, cost_model const& m, std::uint64_t budget)
{
  {
    S::plan(t, m, budget)
    } -> std::same_as<schedule>;
  {
    S::name
    } -> std::convertible_to<std::string_view>;
};

}  // namespace stash
