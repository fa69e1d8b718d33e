// search's result sweeps in full (tests/support/search_results.hpp; stash_tests runs a sample of
// each under ASan + UBSan): not slower at a larger budget on three (trace, preset) sweeps; the
// ten pinned schedules; every registered policy through the conformance kit on two traces.
#include "support/search_results.hpp"

#include <doctest/doctest.h>

namespace STASH_UNITY_ID {

TEST_CASE("sweep: search does not get slower (2.5% slack) as the budget grows, on recorded traces")
{
  for (auto const& sw :
       {stash::test::monotone_sweep{"squeezenet1_1_b64", "pcie4_x16", {0.7, 0.6, 0.5, 0.45}},
        stash::test::monotone_sweep{"squeezenet1_1_b64", "h100_sxm", {0.7, 0.6, 0.5, 0.45}},
        stash::test::monotone_sweep{"transformer_encoder_b8", "h100_sxm", {0.55, 0.5, 0.45}}}) {
    stash::test::check_search_monotone(sw);
  }
}

TEST_CASE("sweep: search plans what it planned before its excess became an index")
{
  for (auto const& e : stash::test::search_before_change) {
    stash::test::check_search_fingerprint(e);
  }
}

TEST_CASE("sweep: every registered swap policy passes the conformance kit")
{
  for (auto const* name : {"resnet18_b32", "transformer_encoder_b8"}) {
    stash::test::check_every_policy_conforms(name);
  }
}

}  // namespace STASH_UNITY_ID
