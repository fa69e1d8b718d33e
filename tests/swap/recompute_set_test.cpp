// The planners' recompute set (swap/detail/recompute_set.hpp: checkpoint, dtr and search keep
// their recompute entries valid with it) on hand-made traces: which entries it lets in beside
// the ones it holds, and which swap entries it lets in beside them, against validate_schedule's
// rules (sim/schedule.hpp).
#include "support/rerun_read_trace.hpp"

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/recompute_set.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/link_bound_model.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// x (input) is read by op0; a (4000 B) is written by op0 (relu x) and read by op1 and op4.
//   op0 relu x -> a   op1 mul a -> b   op2 sum b -> c   op3 bwd c -> g   op4 bwd a,b,g -> g
std::string const two_gaps_text = R"(# stash-trace v1 model=two_gaps dtype=float32
t 0 1000 input x
p forward
t 1 4000 act a
o aten::relu 0 1
t 2 2000 act b
o aten::mul.Tensor 1 2
t 3 1000 act c
o aten::sum.dim_IntList 2 3
p backward
t 4 1000 temp g
o my::bwd 3 4
f 3
o my::bwd 1,2,4 4
f 1
f 2
f 4
)";

}  // namespace

TEST_CASE("recompute set: two entries of one storage over consecutive gaps do not overlap")
{
  // a dropped after op0 and re-run before op1, and dropped again after op1 and re-run before
  // op4: the first entry ends where the second starts (op1 reads a), which the validator allows.
  auto const t = stash::parse_trace(two_gaps_text, "two_gaps");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e9));
  stash::recompute_entry const early{1, 0, 1, 1, 4000};
  stash::recompute_entry const late{1, 1, 4, 4, 4000};
  CHECK_NOTHROW(
      stash::validate_schedule(a, stash::make_schedule(a, "hand", 1u << 20, {}, {early, late})));
  stash::detail::recompute_set rs(a, {});
  CHECK(rs.try_add(late));
  CHECK(rs.try_add(early));
  CHECK(rs.entries() == std::vector<stash::recompute_entry>{early, late});
  // The same gap twice does overlap.
  CHECK_FALSE(rs.try_add(late));
  CHECK(rs.size() == 2);
}

TEST_CASE("recompute set: no swap entry takes away a storage a planned re-run reads")
{
  // a is re-run before op3 by re-running op0, which reads x: a swap of x over its gap (0, 5)
  // would leave the re-run without its input; b, which no re-run reads, may be swapped.
  auto const t = stash::parse_trace(stash::test::rerun_read_trace_text, "rerun_read");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e9));
  stash::detail::recompute_set rs(a, {});
  REQUIRE(rs.try_add(stash::recompute_entry{1, 1, 3, 3, 4000}));
  stash::swap_entry const x_over_rerun{0, 0, 5, 1, 5, 1000};
  CHECK_FALSE(rs.swap_allowed(x_over_rerun));
  CHECK(rs.swap_allowed(stash::swap_entry{2, 1, 2, 1, 2, 2000}));
  // The validator agrees: that swap and the recompute entry are no schedule.
  auto const s = stash::make_schedule(a, "hand", 1u << 20, {x_over_rerun},
                                      {stash::recompute_entry{1, 1, 3, 3, 4000}});
  CHECK_THROWS_AS(stash::validate_schedule(a, s), stash::schedule_error);
}

}  // namespace STASH_UNITY_ID
