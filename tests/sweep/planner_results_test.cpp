// The offset search planner's result sweeps in full (tests/support/planner_results.hpp;
// stash_tests runs a sample of each under ASan + UBSan): the eleven MiniMalloc instances within
// capacity, seven recorded traces with perturbed sizes within 0.2% of the bound.
#include "support/planner_results.hpp"

#include <doctest/doctest.h>

namespace STASH_UNITY_ID {

TEST_CASE("sweep: search planner packs all 11 MiniMalloc instances within capacity")
{
  for (auto const* name : stash::test::minimalloc_instances) {
    stash::test::check_minimalloc_default_budget(name);
  }
}

TEST_CASE("sweep: search planner within 0.2% of L on traces with sizes it was not tuned on")
{
  for (auto const* name : stash::test::perturbed_traces) {
    stash::test::check_perturbed_within_alpha(name);
  }
}

}  // namespace STASH_UNITY_ID
