/**
 * @file policy_registry.hpp
 * @brief Choosing a swap policy by name at run time, for tools (`stash-plan --policy NAME`).
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/swap/auto_swap.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/schedule.hpp>
#include <stash/swap/swap_policy.hpp>
#include <stash/swap/vdnn.hpp>
#include <stash/trace/trace.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace stash {
namespace detail {

/// One registered policy: its name and its plan function.
struct registered_policy {
  std::string_view name;
  schedule (*plan)(trace const&, cost_model const&, std::uint64_t);
};

template <swap_policy S>
[[nodiscard]] constexpr registered_policy register_policy() noexcept
{
  return registered_policy{S::name, &S::plan};
}

inline constexpr std::array<registered_policy, 8> policy_registry = {
    register_policy<no_swap>(),
    register_policy<vdnn_conv>(),
    register_policy<vdnn_all>(),
    register_policy<vdnn_dyn>(),
    register_policy<auto_swap>(),
    register_policy<basic_auto_swap<auto_swap_score::doa>>(),
    register_policy<basic_auto_swap<auto_swap_score::aoa>>(),
    register_policy<basic_auto_swap<auto_swap_score::wdoa>>(),
};

}  // namespace detail

/// @brief The names plan_by_name accepts, in a stable order (baseline first).
[[nodiscard]] inline std::array<std::string_view, detail::policy_registry.size()>
swap_policy_names()
{
  std::array<std::string_view, detail::policy_registry.size()> names{};
  for (std::size_t i = 0; i < names.size(); ++i) { names[i] = detail::policy_registry[i].name; }
  return names;
}

/// @brief Plans `t` with the policy called `name`; stash::logic_error listing the known names
/// when there is none.
[[nodiscard]] inline schedule plan_by_name(std::string_view name, trace const& t,
                                           cost_model const& model, std::uint64_t budget)
{
  for (auto const& entry : detail::policy_registry) {
    if (entry.name == name) { return entry.plan(t, model, budget); }
  }
  std::string known;
  for (auto const& entry : detail::policy_registry) {
    known += (known.empty() ? "" : ", ") + std::string(entry.name);
  }
  STASH_FAIL("unknown swap policy '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace stash
