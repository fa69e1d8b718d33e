/**
 * @file swap_policy.hpp
 * @brief The swap_policy concept: an object that turns an analysed iteration and a device memory
 * budget into a swap schedule.
 *
 * Customization points of a policy `S` (an object: it may carry settings, with defaults):
 *  - `s.plan(analysis, budget)` (const): the schedule for the analysed trace at `budget` bytes.
 *    It reads the trace's facts from the stash::trace_analysis it is given and derives none anew;
 *    stash::allocator validates what it returns (stash::validate_schedule) and names the policy in
 *    the error.
 *  - `s.name()` (const): the name tools and schedules use (see policy_registry.hpp).
 *  - copyable: the allocator and any_swap_policy hold a copy.
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <concepts>
#include <cstdint>
#include <string_view>

namespace stash {

/// @brief A swap policy object (see the file comment for its customization points).
/// @tparam S The type checked.
template <class S>
concept swap_policy = std::copy_constructible<S> &&
    requires(S const& s, trace_analysis const& a, std::uint64_t b)
{
  {
    s.plan(a, b)
    } -> std::same_as<schedule>;
  {
    s.name()
    } -> std::convertible_to<std::string_view>;
};

namespace detail {

/// Names what a type used in a SwapPolicy slot lacks (a static_assert per customization point).
template <class S>
constexpr bool check_swap_policy_slot()
{
  static_assert(
      requires(S const& s, trace_analysis const& a, std::uint64_t b) {
        {
          s.plan(a, b)
          } -> std::same_as<schedule>;
      },
      "SwapPolicy slot: the type does not satisfy stash::swap_policy: it lacks "
      "`stash::schedule plan(stash::trace_analysis const&, std::uint64_t budget) const`");
  static_assert(
      requires(S const& s) {
        {
          s.name()
          } -> std::convertible_to<std::string_view>;
      },
      "SwapPolicy slot: the type does not satisfy stash::swap_policy: it lacks "
      "`std::string_view name() const`");
  static_assert(std::copy_constructible<S>,
                "SwapPolicy slot: the type does not satisfy stash::swap_policy: it is not "
                "copy-constructible");
  return true;
}

}  // namespace detail
}  // namespace stash
