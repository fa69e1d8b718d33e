/**
 * @file transfer_dispatch.hpp
 * @brief Runs the member of a transfer_set chosen at run time: the offload manager sees every
 * Transfer as a set (a single transfer is a set of one), so one code path serves both.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/offload/transfer.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>

namespace stash::detail {

// The members of Transfer as a transfer_set.
template <class Transfer>
struct transfer_members {
  using type = transfer_set<Transfer>;
};
template <class... Ts>
struct transfer_members<transfer_set<Ts...>> {
  using type = transfer_set<Ts...>;
};

template <class Set>
struct transfer_dispatch;

template <class... Ts>
struct transfer_dispatch<transfer_set<Ts...>> {
  static constexpr std::size_t size = sizeof...(Ts);
  static constexpr std::array<bool, size> reports_status_of{Ts::reports_status...};
  static constexpr bool any_reports_status = (Ts::reports_status || ...);

  // f(std::type_identity<T>{}) for the member at `index`; every call must return the same type.
  template <class F>
  static decltype(auto) visit(std::size_t index, F&& f)
  {
    STASH_EXPECTS(index < size, "offload_manager: transfer index " + std::to_string(index) +
                                    " is not below the transfer set's size " +
                                    std::to_string(size));
    return visit_from<0>(index, f);
  }

 private:
  template <std::size_t I, class F>
  static decltype(auto) visit_from(std::size_t index, F& f)
  {
    using member = std::tuple_element_t<I, std::tuple<Ts...>>;
    if constexpr (I + 1 == size) {
      return f(std::type_identity<member>{});
    } else {
      if (index == I) { return f(std::type_identity<member>{}); }
      return visit_from<I + 1>(index, f);
    }
  }
};

}  // namespace stash::detail
