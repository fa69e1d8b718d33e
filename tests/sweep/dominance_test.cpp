// The planners' dominance sweeps over every recorded trace (data/traces): `search` (keep / swap /
// recompute) against every registered policy, both of two presets, budgets from 90% of the peak
// down; `search_swap` (swap only) against the swap-only policies, every hardware preset, budgets
// from the peak down to its swap bound. They check planner results, not memory safety: this file
// is stash_sweep_tests, built plain (tests/CMakeLists.txt), where they take ~30 CPU s instead of
// ~280 under ASan + UBSan. stash_tests runs a sample of each through the same point checks
// (tests/support/dominance.hpp; tests/swap/joint_search_test.cpp, search_swap_test.cpp).
#include "support/dominance.hpp"
#include "support/data.hpp"

#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <string>

namespace STASH_UNITY_ID {

namespace {

char const* const traces[] = {
    "alexnet_b128",           "vgg16_b32",         "resnet18_b32",           "mobilenet_v2_b32",
    "transformer_encoder_b8", "squeezenet1_1_b64", "shufflenet_v2_x1_0_b64", "efficientnet_b0_b32",
    "regnet_y_400mf_b64"};

stash::trace load(char const* name)
{
  return stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
}

}  // namespace

TEST_CASE("search fits wherever any policy fits and is never slower (0.5%), on data/traces")
{
  int points = 0, recomputing = 0;
  for (auto const* name : traces) {
    auto const t = load(name);
    for (auto const* preset : {"pcie4_x16", "h100_sxm"}) {
      stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset(preset)));
      for (double const f : {0.9, 0.7, 0.5, 0.4, 0.33}) {
        auto const budget =
            static_cast<std::uint64_t>(f * static_cast<double>(a.peak_live_bytes()));
        CAPTURE(name);
        CAPTURE(preset);
        CAPTURE(f);
        auto const p = stash::test::check_search_point(a, budget);
        points += p.compared ? 1 : 0;
        recomputing += p.recomputes ? 1 : 0;
      }
    }
  }
  CHECK(points > 40);
  CHECK(recomputing > 10);  // not only the swap seed
}

TEST_CASE("search_swap fits wherever any policy fits, never slower, down to 1.05x the bound")
{
  int budgets_checked = 0, search_better = 0;
  for (auto const* name : traces) {
    auto const t = load(name);
    for (auto const& hw : stash::hardware_presets) {
      CAPTURE(name);
      CAPTURE(hw.name);
      stash::trace_analysis const a(t, stash::cost_model(hw));
      auto const bound = stash::swap_bound_bytes(a);
      CHECK(bound <= a.peak_live_bytes());
      for (auto const budget : stash::test::swap_sweep_budgets(a.peak_live_bytes(), bound, 5)) {
        CAPTURE(budget);
        search_better += stash::test::check_search_swap_point(a, budget, bound) ? 1 : 0;
        ++budgets_checked;
      }
    }
  }
  MESSAGE(budgets_checked << " (trace, preset, budget) points; search_swap strictly faster than "
                          << "every other policy at " << search_better);
  CHECK(budgets_checked > 9 * 4 * 3);
  CHECK(search_better > 0);
}

}  // namespace STASH_UNITY_ID
