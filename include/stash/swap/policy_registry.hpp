/**
 * @file policy_registry.hpp
 * @brief Choosing a swap policy by name at run time, for tools (`stash-plan --policy NAME`) and
 * programs that take the policy as a setting.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/any_swap_policy.hpp>
#include <stash/swap/auto_swap.hpp>
#include <stash/swap/checkpoint.hpp>
#include <stash/swap/dtr.hpp>
#include <stash/swap/joint_search.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/vdnn.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace stash {
namespace detail {

/// Every registered policy with its default settings, baseline first.
[[nodiscard]] inline std::array<any_swap_policy, 12> const& registered_policies()
{
  static std::array<any_swap_policy, 12> const policies = {
      no_swap{},
      vdnn_conv{},
      vdnn_all{},
      vdnn_dyn{},
      auto_swap{},
      auto_swap{.score = auto_swap_score::doa},
      auto_swap{.score = auto_swap_score::aoa},
      auto_swap{.score = auto_swap_score::wdoa},
      search_swap{},
      checkpoint{},
      dtr{},
      joint_search{},
  };
  return policies;
}

}  // namespace detail

/// @brief The names make_swap_policy accepts, in a stable order (baseline first).
/// @return The names, comma-separated.
[[nodiscard]] inline std::array<std::string_view, 12> swap_policy_names()
{
  std::array<std::string_view, 12> names{};
  auto const& all = detail::registered_policies();
  for (std::size_t i = 0; i < names.size(); ++i) { names[i] = all[i].name(); }
  return names;
}

/// @brief The policy called `name` with its default settings; stash::logic_error listing the
/// known names when there is none.
/// @param name A registered name (see swap_policy_names()).
/// @return The policy with its default settings.
[[nodiscard]] inline any_swap_policy make_swap_policy(std::string_view name)
{
  for (auto const& p : detail::registered_policies()) {
    if (p.name() == name) { return p; }
  }
  std::string known;
  for (auto const& p : detail::registered_policies()) {
    known += (known.empty() ? "" : ", ") + std::string(p.name());
  }
  STASH_FAIL("unknown swap policy '" + std::string(name) + "' (known: " + known + ")");
}

/// @brief Plans the analysed trace with the policy called `name` (see make_swap_policy).
/// @param name A registered name (see swap_policy_names()).
/// @param analysis The recorded iteration's facts.
/// @param budget Device bytes the iteration must fit in.
/// @return The policy's schedule.
[[nodiscard]] inline schedule plan_by_name(std::string_view name, trace_analysis const& analysis,
                                           std::uint64_t budget)
{
  return make_swap_policy(name).plan(analysis, budget);
}

}  // namespace stash
