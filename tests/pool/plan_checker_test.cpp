// Tests of stash::find_plan_violation / stash::check_plan: valid plans pass, and each kind of
// broken plan is rejected naming the right blocks.
#include <stash/pool/plan.hpp>
#include <stash/pool/plan_checker.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

stash::plan make_plan(std::vector<std::uint64_t> offsets, std::uint64_t footprint,
                      std::uint64_t alignment = 1)
{
  stash::plan p;
  p.offsets   = std::move(offsets);
  p.footprint = footprint;
  p.alignment = alignment;
  p.planner   = "hand";
  return p;
}

}  // namespace

TEST_CASE("plan_checker accepts a valid plan and touching ranges")
{
  std::vector<stash::lifetime_interval> const in{{10, 0, 4, 100}, {11, 2, 6, 50}, {12, 4, 8, 100}};
  // 10 and 11 overlap in time: 11 sits right on top of 10; 12 reuses 10's addresses after it died.
  auto const p = make_plan({0, 100, 0}, 150);
  CHECK_FALSE(stash::find_plan_violation(in, p).has_value());
  CHECK_NOTHROW(stash::check_plan(in, p));
}

TEST_CASE("plan_checker rejects overlapping live blocks and names both")
{
  std::vector<stash::lifetime_interval> const in{
      {7, 0, 10, 64}, {8, 20, 30, 64}, {9, 5, 25, 64}, {3, 26, 40, 64}};
  // #2 (id 9) overlaps #0 (id 7) in time [5,10) and in address [32,64).
  auto const p = make_plan({0, 0, 32, 200}, 264);
  auto const v = stash::find_plan_violation(in, p);
  REQUIRE(v.has_value());
  CHECK(v->kind == stash::plan_violation_kind::address_overlap);
  CHECK(v->first == 0);
  CHECK(v->second == 2);
  CHECK(v->message.find("id 7") != std::string::npos);
  CHECK(v->message.find("id 9") != std::string::npos);
  CHECK(v->message.find("[32, 96)") != std::string::npos);
  CHECK_THROWS_AS(stash::check_plan(in, p), stash::invalid_plan);
  try {
    stash::check_plan(in, p);
  } catch (stash::invalid_plan const& e) {
    CHECK(e.violation().second == 2);
  }
}

TEST_CASE("plan_checker finds an overlap with a block below (predecessor) and identical offsets")
{
  std::vector<stash::lifetime_interval> const in{{1, 0, 10, 100}, {2, 3, 4, 10}};
  auto const below = make_plan({0, 50}, 100);  // #1 inside #0's range
  auto const v     = stash::find_plan_violation(in, below);
  REQUIRE(v.has_value());
  CHECK(v->kind == stash::plan_violation_kind::address_overlap);
  CHECK(((v->first == 0 && v->second == 1) || (v->first == 1 && v->second == 0)));
  auto const same = make_plan({0, 0}, 100);
  CHECK(stash::find_plan_violation(in, same)->kind == stash::plan_violation_kind::address_overlap);
}

TEST_CASE("plan_checker: half-open lifetimes do not conflict at the boundary")
{
  std::vector<stash::lifetime_interval> const in{{1, 0, 5, 8}, {2, 5, 9, 8}};
  CHECK_FALSE(stash::find_plan_violation(in, make_plan({0, 0}, 8)).has_value());
}

TEST_CASE("plan_checker rejects misaligned offsets, a short footprint and a size mismatch")
{
  std::vector<stash::lifetime_interval> const in{{1, 0, 5, 100}, {2, 1, 3, 300}};
  // Padded to 256: block sizes 256 and 512.
  auto const misaligned = make_plan({0, 300}, 1024, 256);
  auto v                = stash::find_plan_violation(in, misaligned);
  REQUIRE(v.has_value());
  CHECK(v->kind == stash::plan_violation_kind::misaligned_offset);
  CHECK(v->first == 1);

  auto const short_fp = make_plan({0, 256}, 700, 256);  // needs 768
  v                   = stash::find_plan_violation(in, short_fp);
  REQUIRE(v.has_value());
  CHECK(v->kind == stash::plan_violation_kind::footprint_too_small);
  CHECK(v->first == 1);

  CHECK_FALSE(stash::find_plan_violation(in, make_plan({0, 256}, 768, 256)).has_value());
  // Padding matters: unpadded, 100 B at 0 and 300 B at 256 would not overlap; padded to 512 the
  // second block would reach 768 only if the first is below 256: put it at 128 -> overlap.
  auto const padded_overlap = make_plan({256, 0}, 1024, 256);
  v                         = stash::find_plan_violation(in, padded_overlap);
  REQUIRE(v.has_value());
  CHECK(v->kind == stash::plan_violation_kind::address_overlap);

  v = stash::find_plan_violation(in, make_plan({0}, 768, 256));
  REQUIRE(v.has_value());
  CHECK(v->kind == stash::plan_violation_kind::size_mismatch);

  v = stash::find_plan_violation(in, make_plan({0, 256}, 768, 3));
  REQUIRE(v.has_value());
  CHECK(v->kind == stash::plan_violation_kind::bad_alignment);
}

TEST_CASE("plan_lower_bound is the peak of padded live bytes")
{
  std::vector<stash::lifetime_interval> const in{{1, 0, 5, 100}, {2, 1, 3, 300}, {3, 3, 6, 10}};
  CHECK(stash::plan_lower_bound(in, 1) == 400);    // [1,3): 100 + 300; [3,5): 110
  CHECK(stash::plan_lower_bound(in, 256) == 768);  // 256 + 512
  CHECK(stash::plan_lower_bound({}, 256) == 0);
  std::vector<stash::lifetime_interval> const bad{{1, 4, 4, 8}};
  CHECK_THROWS_AS((void)stash::plan_lower_bound(bad, 1), stash::logic_error);
  CHECK_THROWS_AS((void)stash::plan_lower_bound(in, 3), stash::logic_error);
}

}  // namespace STASH_UNITY_ID
