// `search` at scale (issue 24, item 4): the greedy construction's excess as an index
// (swap/detail/clamped_sums.hpp) instead of a walk over each candidate's window returns the very
// schedules the walk did, and the index answers as a scan of the plain array does.
//
// The fingerprints below (stash_tools::schedule_fingerprint of joint_search's plan) were computed
// by the code without the index: first main 61f60cb, whose detail/joint_greedy.hpp summed the
// excess event by event for each candidate popped off the heap; then, after search's decisions
// changed (swaps placed on the copy engines' free room, planner 661e2a7), that branch's own walk,
// whose 33 rows equal the merged index code's: `bench_planning_scale --search-fingerprints data`
// (a cheap subset of its rows; it also prints the larger traces and the transformer deepened to 8
// copies, all equal as well). A change to search's DECISIONS changes
// them: then recompute them with that command and say so; a change to its speed must not.
// Changed deliberately since: search plans wrap entries where gaps inside the iteration cannot
// make room (joint_search::wrap, planner branch): alexnet at 50% and 35%, vgg16 and resnet18 at
// 35% (from this test's output; the other six rows are unchanged, as search plans as before
// where no wrap is needed).
// And (bound branch) when the planned curve stopped counting a prefetch or re-run back
// before the frees that end the op before it (sim/schedule.hpp, as simulated): its lower peaks
// change search's construction at squeezenet1_1 35% (it does not fit: the smallest schedule
// tried changes) and the transformer at 35% (285.21 -> 284.82 ms on pcie3_x16, predicted); with
// both changes merged, the rows that need wraps keep the planner branch's values (checked).
// And (greedy branch) when search rebuilt the constructions left over the budget with the
// greedy's fit repair (joint_greedy::repair: a re-run that holds the storage it reads where the
// plan is over is banned): the transformer at 35% now wins with a repaired construction (the
// re-run of the attention dropout's product held the softmax output and the mask on the device
// through the next layer's backward); the other rows are unchanged (this test's output).
#include "support/data.hpp"

#include <stash_tools/deep_trace.hpp>
#include <stash_tools/schedule_fingerprint.hpp>

#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/clamped_sums.hpp>
#include <stash/swap/joint_search.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

struct expected_search {
  char const* trace;
  std::size_t copies;  // stash_tools::deepen_trace copies (1: the trace as recorded)
  int budget_pct;
  std::uint64_t fingerprint;
};

// clang-format off
constexpr expected_search search_before_change[] = {
    {"alexnet_b128", 1, 70, 0x60844d38d2d7de35ULL},
    {"alexnet_b128", 1, 50, 0xe143c9d0fbac6eabULL},
    {"alexnet_b128", 1, 35, 0x2e30479249a652a0ULL},
    {"vgg16_b32", 1, 70, 0x4ec10c51b959e580ULL},
    {"vgg16_b32", 1, 35, 0x031c41040202c5c7ULL},
    {"resnet18_b32", 1, 35, 0x239f3b300e78ffe8ULL},
    {"squeezenet1_1_b64", 1, 35, 0xad64348379b415ceULL},
    {"transformer_encoder_b8", 1, 50, 0x9a38f7be721499daULL},
    {"transformer_encoder_b8", 1, 35, 0x5f6fcac31b579fe8ULL},
    {"transformer_encoder_b8", 4, 70, 0xc39bd9d283d465e8ULL},
};
// clang-format on

}  // namespace

TEST_CASE("search plans what it planned before its excess became an index")
{
  stash::cost_model const model(stash::presets::pcie3_x16);
  for (auto const& e : search_before_change) {
    CAPTURE(e.trace);
    CAPTURE(e.copies);
    CAPTURE(e.budget_pct);
    auto t = stash::read_trace(stash::test::data_path(std::string("traces/") + e.trace + ".trace"));
    if (e.copies > 1) { t = stash_tools::deepen_trace(t, e.copies); }
    stash::trace_analysis const a(t, model);
    auto const budget = a.peak_live_bytes() / 100 * static_cast<std::uint64_t>(e.budget_pct);
    // Pinned before joint_search::redrop went on by default (it changes 4 of these plans:
    // redrops let a re-run's inputs leave again); the index refactor is independent of it.
    stash::joint_search search;
    search.redrop = false;
    CHECK(stash_tools::schedule_fingerprint(search.plan(a, budget)) == e.fingerprint);
  }
}

TEST_CASE("clamped_sums answers as a scan of the plain array does")
{
  std::mt19937_64 rng(24);
  for (std::size_t n : {1U, 2U, 9U, 64U, 150U}) {
    CAPTURE(n);
    std::vector<std::uint64_t> plain(n);
    for (auto& x : plain) { x = rng() % 4 == 0 ? 0 : rng() % 40; }
    stash::detail::clamped_sums sums;
    sums.assign(plain);
    for (int step = 0; step < 400; ++step) {
      auto l = rng() % n, r = rng() % (n + 1);
      if (l > r) { std::swap(l, r); }
      switch (rng() % 8) {
        case 0: {  // set one value
          auto const v = rng() % 3 == 0 ? 0 : rng() % 50;
          sums.set(l, v);
          plain[l] = v;
          break;
        }
        case 1:  // everything anew (rarely)
          if (rng() % 10 == 0) {
            for (auto& x : plain) { x = rng() % 60; }
            sums.assign(plain);
          }
          break;
        default: {  // subtract, clamped at 0
          auto const d = rng() % 12;
          sums.subtract(l, r, d);
          for (auto j = l; j < r; ++j) { plain[j] = plain[j] > d ? plain[j] - d : 0; }
        }
      }
      for (int q = 0; q < 4; ++q) {
        auto ql = rng() % n, qr = rng() % (n + 1);
        if (ql > qr) { std::swap(ql, qr); }
        auto const b    = rng() % 45;
        std::uint64_t s = 0;
        for (auto j = ql; j < qr; ++j) { s += std::min(b, plain[j]); }
        REQUIRE(sums.sum_min(ql, qr, b) == s);
      }
      REQUIRE(sums.values() == plain);
      REQUIRE(sums.at(l) == plain[l]);
      REQUIRE(sums.all_zero() ==
              std::all_of(plain.begin(), plain.end(), [](std::uint64_t x) { return x == 0; }));
    }
  }
}

TEST_CASE("clamped_sums keeps exact sums of byte-sized values")
{
  // Excess in bytes: values near 2^40 and subtractions that overshoot them; the sums are exact.
  std::vector<std::uint64_t> plain{std::uint64_t{1} << 40, 3, (std::uint64_t{1} << 40) + 7, 0, 5};
  stash::detail::clamped_sums sums;
  sums.assign(plain);
  sums.subtract(0, 3, 4);
  sums.subtract(2, 5, std::uint64_t{1} << 40);
  CHECK(sums.values() == std::vector<std::uint64_t>{(std::uint64_t{1} << 40) - 4, 0, 3, 0, 0});
  CHECK(sums.sum_min(0, 5, std::uint64_t{1} << 41) == (std::uint64_t{1} << 40) - 1);
  CHECK(sums.sum_min(0, 5, 2) == 4);
  CHECK(sums.sum_min(1, 2, 100) == 0);
  sums.subtract(0, 5, ~std::uint64_t{0});
  CHECK(sums.all_zero());
  CHECK(sums.sum_min(0, 5, ~std::uint64_t{0}) == 0);
}

}  // namespace STASH_UNITY_ID
