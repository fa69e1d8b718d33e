// stash::allocator against a reference model (issue 24 item 3; support/facade_model.hpp): random
// setups and iteration bodies, each run several times (recorded, then replayed under no_swap,
// vdnn_all or a policy that swaps every gap, persistent tensors included), with misuse and
// faults injected between steps; every step is checked against the model. Fixed seeds here; the
// same harness is the libFuzzer target tests/fuzz/facade_fuzz.cpp. STASH_MODEL_RUNS sets the
// number of random runs (default 40).
#include "support/facade_model.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

int model_runs()
{
  char const* env = std::getenv("STASH_MODEL_RUNS");
  return env != nullptr ? std::max(1, std::atoi(env)) : 40;
}

}  // namespace

TEST_CASE("facade model: random runs with misuse and faults match the reference model")
{
  std::mt19937 rng(20261125);  // the engine's output is specified: the same bytes everywhere
  int const runs = model_runs();
  stash::test::facade_model::harness::summary total;
  for (int run = 0; run < runs; ++run) {
    std::vector<std::uint8_t> bytes(256);
    for (auto& b : bytes) { b = static_cast<std::uint8_t>(rng() & 0xFF); }
    // Every configuration (host budget, device budget, policy) in turn, whatever the bytes say.
    bytes[0] = static_cast<std::uint8_t>((bytes[0] & 0xC0) | (run % 48));
    stash::test::facade_model::harness h(bytes);
    std::string const violations = h.run();
    CAPTURE(run);
    CHECK_MESSAGE(violations.empty(), violations);
    auto const& d = h.done();
    total.steps += d.steps;
    total.refusals += d.refusals;
    total.iterations += d.iterations;
    total.replays += d.replays;
    total.offloads += d.offloads;
    total.persistent_offloads += d.persistent_offloads;
    total.failed_offloads += d.failed_offloads;
  }
  MESSAGE(runs << " runs: " << total.steps << " steps, " << total.refusals
               << " misuse calls refused, " << total.iterations << " iterations (" << total.replays
               << " replayed as recorded), " << total.offloads << " scheduled offloads ("
               << total.persistent_offloads << " persistent), " << total.failed_offloads
               << " failed offloads");
  // The runs reach what the model is for: replays that move tensors, and refusals.
  CHECK(total.replays > 0);
  CHECK(total.offloads > 0);
  CHECK(total.persistent_offloads > 0);
  CHECK(total.failed_offloads > 0);
  CHECK(total.refusals > 0);
}

TEST_CASE("facade model: the harness finds a wrong model (it can fail)")
{
  // A body whose op reads a tensor the model thinks holds other bytes must be reported: the
  // harness is run on a configuration, then its check is fed a corrupted expectation.
  std::vector<std::uint8_t> bytes{0x20, 1, 10, 6, 0, 0, 0, 0, 4, 2, 0, 2, 2, 0, 0, 0};
  stash::test::facade_model::harness h(bytes);
  h.corrupt_model_for_test();
  CHECK_FALSE(h.run().empty());
}

}  // namespace STASH_UNITY_ID
