// The public swap_policy conformance kit (stash/testing/) run against every registered policy,
// on a recorded trace (on two in stash_sweep_tests), and shown to catch a broken policy.
#include "support/data.hpp"
#include "support/search_results.hpp"

#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/testing/swap_policy_conformance.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <string>

namespace STASH_UNITY_ID {

namespace {

// Plans nothing but claims a budget it was not given: the kit must say so.
struct careless_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "careless"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    return stash::no_swap{}.plan(a, budget + 1);
  }
};

}  // namespace

// On the smallest recorded trace here (on the transformer, 41 CPU s under ASan at -O0); on
// resnet18 and the transformer in tests/sweep/search_results_test.cpp.
TEST_CASE("every registered swap policy passes the conformance kit")
{
  stash::test::check_every_policy_conforms("alexnet_b128");
}

TEST_CASE("the conformance kit names what a broken policy gets wrong")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset("pcie4_x16")));
  auto const r = stash::testing::check_swap_policy(careless_policy{}, a, {a.peak_live_bytes()});
  CHECK_FALSE(r.ok());
  REQUIRE(r.failures.size() == 2);  // the budget it records, and the name of the schedule
  CHECK(r.summary().find("careless") != std::string::npos);
  CHECK(r.summary().find("records budget") != std::string::npos);
}

}  // namespace STASH_UNITY_ID
