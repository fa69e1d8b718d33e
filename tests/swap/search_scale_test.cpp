// `search` at scale (issue 24, item 4): the greedy construction's excess as an index
// (swap/detail/clamped_sums.hpp) instead of a walk over each candidate's window returns the very
// schedules the walk did, and the index answers as a scan of the plain array does.
//
// The pinned schedules and their history: tests/support/search_results.hpp; a sample of them here,
// all of them in tests/sweep/search_results_test.cpp.
#include "support/search_results.hpp"

#include <stash/swap/detail/clamped_sums.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

TEST_CASE("search plans what it planned before its excess became an index")
{
  // A sample: a plan with wrap entries (alexnet 50%) and one that fits nowhere
  // (squeezenet1_1 35%: the smallest schedule tried).
  stash::test::check_search_fingerprint(stash::test::search_before_change[1]);
  stash::test::check_search_fingerprint(stash::test::search_before_change[6]);
}

TEST_CASE("clamped_sums answers as a scan of the plain array does")
{
  std::mt19937_64 rng(24);
  // Values below 40 (a few distinct: blocks of ties) and below 40 x 100 (most distinct); sizes
  // within one block, at a block's edge, and over many whole blocks (ranges that cut two blocks
  // and cover those between).
  for (std::uint64_t const scale : {1U, 100U}) {
    for (std::size_t n : {1U, 2U, 9U, 64U, 65U, 150U, 700U}) {
      CAPTURE(scale);
      CAPTURE(n);
      std::vector<std::uint64_t> plain(n);
      for (auto& x : plain) { x = rng() % 4 == 0 ? 0 : rng() % (40 * scale); }
      stash::detail::clamped_sums sums;
      sums.assign(plain);
      for (int step = 0; step < 400; ++step) {
        auto l = rng() % n, r = rng() % (n + 1);
        if (l > r) { std::swap(l, r); }
        switch (rng() % 8) {
          case 0: {  // set one value
            auto const v = rng() % 3 == 0 ? 0 : rng() % (50 * scale);
            sums.set(l, v);
            plain[l] = v;
            break;
          }
          case 1:  // everything anew (rarely)
            if (rng() % 10 == 0) {
              for (auto& x : plain) { x = rng() % (60 * scale); }
              sums.assign(plain);
            }
            break;
          default: {  // subtract, clamped at 0
            auto const d = rng() % (12 * scale);
            sums.subtract(l, r, d);
            for (auto j = l; j < r; ++j) { plain[j] = plain[j] > d ? plain[j] - d : 0; }
          }
        }
        for (int q = 0; q < 4; ++q) {
          auto ql = rng() % n, qr = rng() % (n + 1);
          if (ql > qr) { std::swap(ql, qr); }
          auto const b    = rng() % (45 * scale);
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

TEST_CASE("clamped_sums: a whole block lowered past 2^64 in all stays 0; b past 2^64 - D")
{
  // A block of 64 values lowered as a whole keeps one total D: two subtractions of 2^63 saturate
  // it (every value 0), never wrap it back to 0.
  std::uint64_t const half = std::uint64_t{1} << 63;
  stash::detail::clamped_sums sums;
  sums.assign(std::vector<std::uint64_t>(64, 5));
  sums.subtract(0, 64, half);
  sums.subtract(0, 64, half);
  CHECK(sums.values() == std::vector<std::uint64_t>(64, 0));
  CHECK(sums.sum_min(0, 64, 10) == 0);
  CHECK(sums.all_zero());

  // Raw values 2^63 + 10 under D = 2^63 are 10 each; a query with b >= 2^63 makes D + b wrap:
  // every value is below b, so the block sums to 64 x 10.
  sums.assign(std::vector<std::uint64_t>(64, half + 10));
  sums.subtract(0, 64, half);
  CHECK(sums.at(0) == 10);
  CHECK(sums.sum_min(0, 64, half) == 640);
  CHECK(sums.sum_min(0, 64, ~std::uint64_t{0}) == 640);
  CHECK(sums.sum_min(0, 64, 4) == 256);
}

TEST_CASE("clamped_sums::update sets the values that differ, as set() one by one does")
{
  // Byte-sized values under subtractions, then a vector with some values changed (raised,
  // lowered, zeroed), as the greedy's excess after a pull.
  std::mt19937_64 rng(22);
  for (std::size_t n : {1U, 5U, 70U, 300U}) {
    CAPTURE(n);
    std::vector<std::uint64_t> plain(n);
    for (auto& x : plain) { x = rng() % 5 == 0 ? 0 : rng() % (std::uint64_t{1} << 45); }
    stash::detail::clamped_sums bulk, single;
    bulk.assign(plain);
    single.assign(plain);
    for (int step = 0; step < 60; ++step) {
      auto l = rng() % n, r = rng() % (n + 1);
      if (l > r) { std::swap(l, r); }
      if (rng() % 3 != 0) {
        auto const d = rng() % (std::uint64_t{1} << 44);
        bulk.subtract(l, r, d);
        single.subtract(l, r, d);
        for (auto j = l; j < r; ++j) { plain[j] = plain[j] > d ? plain[j] - d : 0; }
      } else {
        for (auto& x : plain) {
          if (rng() % 4 != 0) { continue; }
          x = rng() % 3 == 0 ? 0 : rng() % (std::uint64_t{1} << 46);
        }
        bulk.update(plain);
        for (std::size_t j = 0; j < n; ++j) {
          if (single.at(j) != plain[j]) { single.set(j, plain[j]); }
        }
      }
      REQUIRE(bulk.values() == plain);
      for (int q = 0; q < 4; ++q) {
        auto ql = rng() % n, qr = rng() % (n + 1);
        if (ql > qr) { std::swap(ql, qr); }
        auto const b    = rng() % (std::uint64_t{1} << 45);
        std::uint64_t s = 0;
        for (auto j = ql; j < qr; ++j) { s += std::min(b, plain[j]); }
        REQUIRE(bulk.sum_min(ql, qr, b) == s);
        REQUIRE(single.sum_min(ql, qr, b) == s);
      }
      REQUIRE(bulk.all_zero() == single.all_zero());
    }
  }
}

TEST_CASE("clamped_sums::update_at sets the values given where they differ, as update() does")
{
  // As above, each change a few ascending positions with their new values (some unchanged), as
  // the greedy's excess after a pull where only those events may differ.
  std::mt19937_64 rng(23);
  for (std::size_t n : {1U, 5U, 70U, 300U}) {
    CAPTURE(n);
    std::vector<std::uint64_t> plain(n);
    for (auto& x : plain) { x = rng() % 5 == 0 ? 0 : rng() % (std::uint64_t{1} << 45); }
    stash::detail::clamped_sums some, bulk;
    some.assign(plain);
    bulk.assign(plain);
    for (int step = 0; step < 60; ++step) {
      auto l = rng() % n, r = rng() % (n + 1);
      if (l > r) { std::swap(l, r); }
      if (rng() % 3 != 0) {
        auto const d = rng() % (std::uint64_t{1} << 44);
        some.subtract(l, r, d);
        bulk.subtract(l, r, d);
        for (auto j = l; j < r; ++j) { plain[j] = plain[j] > d ? plain[j] - d : 0; }
      } else {
        std::vector<std::size_t> at;
        std::vector<std::uint64_t> to;
        for (std::size_t j = 0; j < n; ++j) {
          if (rng() % 3 != 0) { continue; }
          if (rng() % 2 == 0) { plain[j] = rng() % 3 == 0 ? 0 : rng() % (std::uint64_t{1} << 46); }
          at.push_back(j);  // given whether it changed or not
          to.push_back(plain[j]);
        }
        some.update_at(at, to);
        bulk.update(plain);
      }
      REQUIRE(some.values() == plain);
      for (int q = 0; q < 4; ++q) {
        auto ql = rng() % n, qr = rng() % (n + 1);
        if (ql > qr) { std::swap(ql, qr); }
        auto const b    = rng() % (std::uint64_t{1} << 45);
        std::uint64_t s = 0;
        for (auto j = ql; j < qr; ++j) { s += std::min(b, plain[j]); }
        REQUIRE(some.sum_min(ql, qr, b) == s);
        REQUIRE(bulk.sum_min(ql, qr, b) == s);
      }
      REQUIRE(some.all_zero() == bulk.all_zero());
    }
  }
}

}  // namespace STASH_UNITY_ID
