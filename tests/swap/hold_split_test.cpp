// search's held re-run splits (swap/detail/hold_split.hpp) on a hand trace: b's re-run reads a,
// so a is re-run in b's batch and then held to its own next use, across the backward's largest
// temporary. The split re-runs a again at that use (leaving right after b's batch): the hold's
// bytes are back where the temporary needs them, for one more relu.
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/swap/detail/hold_split.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/link_bound_model.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// a = relu(x), b = a x a, c = sum(b); the backward reads b (op 4), makes the 8000 B temporary w
// (ops 5-6), then reads a (op 7).
std::string const held = R"(# stash-trace v1 model=held dtype=float32
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
o my::bwd 2,4 4
f 2
t 5 8000 temp w
o my::bwd 4 5
o my::bwd 5 4
f 5
o my::bwd 1,4 4
f 1
f 4
)";

// `held` with k (100 B), written by op4 beside g and read by op7.
std::string const held_k = R"(# stash-trace v1 model=held_k dtype=float32
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
t 5 100 act k
o my::bwd 2,4 4,5
f 2
t 6 8000 temp w
o my::bwd 4 6
o my::bwd 6 4
f 6
o my::bwd 1,4,5 4
f 1
f 4
f 5
)";

}  // namespace

TEST_CASE("a re-run held from its batch to its use is re-run again at its use")
{
  auto const t = stash::parse_trace(held, "held");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e10));
  std::uint64_t const budget = 12000;
  // a re-run with b at op 4 (b's chain reads it) and held to op 7, across w: over the budget.
  std::vector<stash::recompute_entry> const rcs{{1, 1, 7, 4, 4000}, {2, 2, 4, 4, 2000}};
  auto const before = stash::make_schedule(a, "held", budget, {}, rcs);
  REQUIRE(before.device_peak > budget);

  std::vector<std::pair<std::vector<stash::swap_entry>, std::vector<stash::recompute_entry>>>
      offered;
  auto offer = [&](std::vector<stash::swap_entry> sw, std::vector<stash::recompute_entry> rc) {
    offered.emplace_back(std::move(sw), std::move(rc));
    return false;
  };
  CHECK_FALSE(stash::detail::split_holds(a, budget, {}, rcs, stash::sim_result{}, {}, offer));
  REQUIRE(offered.size() == 1);  // a is the only entry re-run before its next use
  auto const& [sw, rc] = offered.front();
  CHECK(sw.empty());  // nothing left over the budget for the late cover
  REQUIRE(rc.size() == 3);
  CHECK(rc[0] == stash::recompute_entry{1, 1, 4, 4, 4000});  // for b's re-run, then leaves
  CHECK(rc[1] == stash::recompute_entry{2, 2, 4, 4, 2000});
  CHECK(rc[2] == stash::recompute_entry{1, 4, 7, 7, 4000});  // again at its own use
  auto const s = stash::make_schedule(a, "split", budget, sw, rc);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  CHECK(s.device_peak <= budget);
  CHECK(stash::simulate(a, s).fits);

  // Held with no re-run of its batch reading it: moved to its use instead of split.
  std::vector<stash::recompute_entry> const alone{{1, 1, 7, 4, 4000}};
  offered.clear();
  (void)stash::detail::split_holds(a, budget, {}, alone, stash::sim_result{}, {}, offer);
  REQUIRE(offered.size() == 1);
  REQUIRE(offered.front().second.size() == 1);
  CHECK(offered.front().second[0] == stash::recompute_entry{1, 1, 7, 7, 4000});
}

TEST_CASE("the late cover issues a prefetch that lands before an op over the budget after it")
{
  auto const t = stash::parse_trace(held, "held");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e10));
  // a swapped over (1, 7) and back from op 3: with w (ops 5-6) the plan is over 12000 B there.
  std::vector<stash::swap_entry> sw{{1, 1, 7, 2, 3, 4000}};
  REQUIRE(stash::make_schedule(a, "early", 12000, sw, {}).device_peak > 12000);
  stash::detail::late_cover(a, 12000, sw, {}, 48);
  REQUIRE(sw.size() == 1);
  CHECK(sw[0].prefetch_at == 6);  // after op 5; op 6 still holds w, but a is needed at op 7
  // With room for a beside w nothing is over: unchanged.
  std::vector<stash::swap_entry> room{{1, 1, 7, 2, 3, 4000}};
  stash::detail::late_cover(a, 14000, room, {}, 48);
  CHECK(room[0].prefetch_at == 3);
}

TEST_CASE("a split drops the swaps inside the hold that stalled, and keeps those that did not")
{
  // held_k: k (100 B) swapped over (4, 7), inside a's hold from its batch at op4 to op7. Its
  // prefetch did not stall (no stall recorded): the split keeps it; once a stall waited for it
  // at op7, the split drops it.
  auto const t = stash::parse_trace(held_k, "held_k");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e10));
  std::vector<stash::recompute_entry> const rcs{{1, 1, 7, 4, 4000}, {2, 2, 4, 4, 2000}};
  stash::swap_entry const k{5, 4, 7, 5, 7, 100};
  CHECK_NOTHROW(stash::validate_schedule(a, stash::make_schedule(a, "k", 1u << 20, {k}, rcs)));
  std::vector<std::vector<stash::swap_entry>> offered;
  auto offer = [&](std::vector<stash::swap_entry> sw, std::vector<stash::recompute_entry> const&) {
    offered.push_back(std::move(sw));
    return false;
  };
  (void)stash::detail::split_holds(a, 1u << 20, {k}, rcs, stash::sim_result{}, {}, offer);
  REQUIRE(offered.size() == 1);
  CHECK(offered.front() == std::vector<stash::swap_entry>{k});

  stash::sim_result stalled;
  stalled.stalls = {
      stash::stall_record{7, 1e-6, stash::storage_id{5}, stash::stall_cause::transfer}};
  offered.clear();
  (void)stash::detail::split_holds(a, 1u << 20, {k}, rcs, stalled, {}, offer);
  REQUIRE(offered.size() == 1);
  CHECK(offered.front().empty());  // nothing over the budget: the late cover adds nothing
}

TEST_CASE("covers_gap: a listed gap of the storage that overlaps (u, v), not one touching it")
{
  // Storage 1 away over (2, 5) (a swap) and (9, 12) (a recompute); storage 2 over (0, 20).
  std::vector<stash::swap_entry> const sw{{1, 2, 5, 3, 5, 100}, {2, 0, 20, 1, 20, 100}};
  std::vector<stash::recompute_entry> const rc{{1, 9, 12, 12, 100}};
  auto const gaps = stash::detail::covered_gaps(sw, rc);
  CHECK(stash::detail::covers_gap(gaps, 1, 3, 4));
  CHECK(stash::detail::covers_gap(gaps, 1, 4, 10));
  CHECK(stash::detail::covers_gap(gaps, 1, 0, 3));
  CHECK_FALSE(stash::detail::covers_gap(gaps, 1, 5, 9));  // touches both at its ends
  CHECK_FALSE(stash::detail::covers_gap(gaps, 1, 0, 2));
  CHECK_FALSE(stash::detail::covers_gap(gaps, 1, 12, 15));
  CHECK_FALSE(stash::detail::covers_gap(gaps, 3, 0, 20));  // no gap of storage 3
}

}  // namespace STASH_UNITY_ID
