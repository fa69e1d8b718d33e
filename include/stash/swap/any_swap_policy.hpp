/**
 * @file any_swap_policy.hpp
 * @brief A type-erased swap policy, so a program chooses its policy at run time with one
 * instantiation of stash::allocator.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/swap_policy.hpp>

#include <cstdint>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

namespace stash {

/// @brief Holds any stash::swap_policy by value and forwards plan() and name() to it.
class any_swap_policy {
 public:
  /// @brief Holds a copy of `policy`.
  /// @tparam S The policy held: a stash::swap_policy.
  /// @param policy The policy held (copied or moved).
  template <class S>
  requires(!std::is_same_v<std::remove_cvref_t<S>, any_swap_policy> &&
           swap_policy<std::remove_cvref_t<S>>)
      // Implicit: a policy converts to it. The requires clause keeps it from hiding copy and
      // move, which clang-tidy 14 does not see (it only recognises enable_if constraints).
      // NOLINTNEXTLINE(google-explicit-constructor,bugprone-forwarding-reference-overload)
      any_swap_policy(S&& policy)
      : self_(std::make_shared<model<std::remove_cvref_t<S>>>(std::forward<S>(policy)))
  {
  }

  /// @brief The held policy's name.
  /// @return The held policy's name.
  [[nodiscard]] std::string_view name() const noexcept { return self_->name(); }
  /// @brief The held policy's schedule for `a` at `budget`.
  /// @param analysis The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return The held policy's schedule.
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    return self_->plan(analysis, budget);
  }

 private:
  struct concept_t {
    virtual ~concept_t()                                                            = default;
    [[nodiscard]] virtual std::string_view name() const noexcept                    = 0;
    [[nodiscard]] virtual schedule plan(trace_analysis const&, std::uint64_t) const = 0;
  };
  template <class S>
  struct model final : concept_t {
    explicit model(S p) : policy(std::move(p)) {}
    [[nodiscard]] std::string_view name() const noexcept override { return policy.name(); }
    [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const override
    {
      return policy.plan(analysis, budget);
    }
    S policy;
  };
  // Policies are immutable once held (plan is const), so copies may share one.
  std::shared_ptr<concept_t const> self_;
};

static_assert(swap_policy<any_swap_policy>);

}  // namespace stash
