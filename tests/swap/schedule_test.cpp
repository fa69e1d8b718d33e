// The schedule validator and the planned device curve on a hand-made trace.
#include <stash/sim/schedule.hpp>
#include <stash/trace/trace_reader.hpp>
#include "support/tiny_trace.hpp"

#include "support/analysis.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

std::string const& tiny = stash::test::tiny_trace_text;

stash::schedule with(stash::trace const& t, stash::swap_entry e)
{
  return stash::make_schedule(stash::test::analysis_of(t), "hand", 0, {e});
}

void expect_rejected(stash::trace const& t, stash::schedule const& s, std::string const& what)
{
  try {
    stash::validate_schedule(stash::test::analysis_of(t), s);
    FAIL("accepted an invalid schedule; expected: " << what);
  } catch (stash::schedule_error const& e) {
    CHECK(std::string(e.what()).find(what) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("a valid schedule passes and plans the peak without the storage")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  auto const s = with(t, {1, 1, 3, 1, 3, 4000});
  CHECK_NOTHROW(stash::validate_schedule(stash::test::analysis_of(t), s));
  CHECK(s.baseline_peak == 12000);
  CHECK(s.device_peak == 8000);
  CHECK(s.offloaded_bytes() == 4000);
  auto const curve = stash::planned_device_curve(stash::test::analysis_of(t), s.entries);
  // Events: p t0 t1 o0 t2 o1 t3 o2 f3 p t4 o3 f1 f2 f4; a is off after o1 through o2.
  REQUIRE(curve.size() == 15);
  CHECK(curve[5] == 6000);   // o1: a still there
  CHECK(curve[6] == 8000);   // t3: 12000 - 4000
  CHECK(curve[7] == 8000);   // o2
  CHECK(curve[8] == 2000);   // f3 ends op2: the prefetch issued as op3 starts comes after it
  CHECK(curve[9] == 2000);   // p (a phase line among op2's end frees)
  CHECK(curve[10] == 7000);  // t4: a back for op3
}

TEST_CASE("the validator names the entry and the broken rule")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  auto broken  = [&](auto change) {
    auto s = with(t, {1, 1, 3, 1, 3, 4000});
    change(s.entries[0]);
    return s;
  };
  expect_rejected(t, broken([](auto& e) { e.id = 9; }), "entry 0: storage id 9 does not exist");
  expect_rejected(t, broken([](auto& e) { e.bytes = 10; }), "differ from its size 4000");
  expect_rejected(t, broken([](auto& e) { e.last_use = 0; }), "not consecutive accesses");
  expect_rejected(t, broken([](auto& e) { e.next_use = 7; }), "out of range");
  expect_rejected(t, broken([](auto& e) { e.prefetch_at = 1; }),
                  "must be in (last_use 1, next_use 3]");
  expect_rejected(t, broken([](auto& e) { e.offload_at = 0; }),
                  "writes it after its offload starts");
  expect_rejected(t, broken([](auto& e) { e.offload_at = 3; }), "must precede prefetch_at");

  auto twice = with(t, {1, 1, 3, 1, 3, 4000});
  twice.entries.push_back(twice.entries[0]);  // the overlap is found before the peak is read
  expect_rejected(t, twice, "overlaps entry 0");

  auto peak        = with(t, {1, 1, 3, 1, 3, 4000});
  peak.device_peak = 12000;
  expect_rejected(t, peak, "is not the planned peak 8000");
}

TEST_CASE("a storage not yet allocated cannot be offloaded")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  // b (id 2) is allocated after op0; its gap op1 -> op3 with the offload at op0 is invalid.
  auto const s = with(t, {2, 2, 3, 2, 3, 1000});
  CHECK_NOTHROW(stash::validate_schedule(stash::test::analysis_of(t), s));
  auto bad        = s;
  bad.entries[0]  = {2, 1, 2, 0, 2, 1000};
  bad.device_peak = stash::planned_peak(stash::test::analysis_of(t), bad.entries);
  expect_rejected(t, bad, "before the storage is allocated");
}

TEST_CASE("storage_groups lists each storage's values ascending and unique, whatever the order")
{
  // Below 64 pairs a comparison sort, above it the radix sort (values in order or not, storages
  // and values past one 8-bit digit); each storage's list is the set of its values.
  std::mt19937_64 rng(7);
  for (std::size_t const n : {0U, 5U, 63U, 64U, 300U, 2000U}) {
    for (bool const ascending : {false, true}) {
      CAPTURE(n);
      CAPTURE(ascending);
      std::size_t const storages = 700;
      std::vector<std::pair<stash::storage_id, std::uint64_t>> pairs;
      for (std::size_t k = 0; k < n; ++k) {
        pairs.emplace_back(rng() % storages, ascending ? k / 3 : rng() % 1000);
      }
      std::map<stash::storage_id, std::vector<std::uint64_t>> expect;
      for (auto const& [id, v] : pairs) { expect[id].push_back(v); }
      for (auto& [id, values] : expect) {
        std::sort(values.begin(), values.end());
        values.erase(std::unique(values.begin(), values.end()), values.end());
      }
      stash::detail::storage_groups const groups(storages, pairs);
      for (stash::storage_id id = 0; id < storages; ++id) {
        auto const got  = groups[id];
        auto const want = expect.count(id) != 0 ? expect[id] : std::vector<std::uint64_t>{};
        REQUIRE(std::vector<std::uint64_t>(got.begin(), got.end()) == want);
      }
    }
  }
}

TEST_CASE("sort_by_first sorts pairs listed in index order as std::sort does")
{
  // Below 64 pairs a comparison sort, above it a stable radix sort by the first alone: the
  // same order while each first's seconds ascend (the callers list (storage, index) pairs).
  std::mt19937_64 rng(5);
  for (std::size_t const n : {0U, 3U, 63U, 64U, 500U}) {
    CAPTURE(n);
    std::vector<std::pair<std::uint64_t, std::size_t>> pairs;
    for (std::size_t k = 0; k < n; ++k) { pairs.emplace_back(rng() % 100000, k); }
    auto want = pairs;
    std::sort(want.begin(), want.end());
    stash::detail::sort_by_first(pairs);
    REQUIRE(pairs == want);
  }
}

TEST_CASE("sort_by_first: firsts that differ only in a digit's top bit, or past 32 bits")
{
  // The radix sort skips the 8-bit digits every first shares: here the firsts differ in bit 7
  // (the top of the first digit), in bit 15 and in bits 39 and 63 only, so every digit that
  // differs must be sorted, past the low 32 bits too.
  std::mt19937_64 rng(9);
  std::vector<std::pair<std::uint64_t, std::size_t>> pairs;
  for (std::size_t k = 0; k < 300; ++k) {
    auto const bit = [&](unsigned b) { return (rng() % 2) << b; };
    pairs.emplace_back(bit(7) | bit(15) | bit(39) | bit(63), k);
  }
  auto want = pairs;
  std::sort(want.begin(), want.end());
  stash::detail::sort_by_first(pairs);
  CHECK(pairs == want);
}

TEST_CASE("off_steps and curve_from_steps: the running sum of a difference array, reused")
{
  // Against a plain difference array summed over every event: the steps come back in event
  // order, summed per event, and the scratch is all zero again for the next round (one off_steps
  // reused, as planned_device_curve's and the greedy's are). The curve matches modulo 2^64; no
  // event over its live bytes means true, one means false; huge values (2^63 and over) may give
  // false either way (exact_curve decides then), never a wrong true.
  std::mt19937_64 rng(11);
  stash::detail::off_steps steps;
  for (std::size_t const n : {0U, 1U, 63U, 64U, 65U, 1000U}) {
    for (int round = 0; round < 40; ++round) {
      CAPTURE(n);
      CAPTURE(round);
      bool const huge           = round % 4 == 3;
      std::uint64_t const scale = huge ? std::uint64_t{1} << 61 : 1000;
      std::vector<std::uint64_t> live(n);
      for (auto& x : live) { x = rng() % (4 * scale) + (round % 2 == 0 ? 2 * scale : 0); }
      steps.size_for(n);
      std::vector<std::uint64_t> delta(n + 1, 0);
      auto const count = n == 0 ? 0 : rng() % 40;
      for (std::size_t k = 0; k < count; ++k) {
        auto const from = rng() % n, through = from + rng() % (n - from);
        auto const bytes = rng() % scale;
        steps.add(from, bytes);
        steps.add(through + 1, std::uint64_t{0} - bytes);
        delta[from] += bytes;
        delta[through + 1] -= bytes;
      }
      std::vector<std::uint64_t> want(n);
      bool over          = false;
      std::uint64_t away = 0;
      for (std::size_t i = 0; i < n; ++i) {
        away += delta[i];
        over    = over || away > live[i];
        want[i] = live[i] - away;
      }
      std::vector<std::uint64_t> got(n, 7);
      bool const fits = stash::detail::curve_from_steps(live, steps, got);
      REQUIRE(got == want);
      if (over) { REQUIRE_FALSE(fits); }
      if (!huge) { REQUIRE(fits == !over); }
      std::size_t left = 0;
      steps.drain([&](std::uint64_t, std::uint64_t) { ++left; });
      REQUIRE(left == 0);
    }
  }
}

}  // namespace STASH_UNITY_ID
