// The planners' recompute set (swap/detail/recompute_set.hpp: checkpoint, dtr and search keep
// their recompute entries valid with it) on hand-made traces: which entries it lets in beside
// the ones it holds, and which swap entries it lets in beside them, against validate_schedule's
// rules (sim/schedule.hpp).
#include "support/rerun_read_trace.hpp"

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/recompute_set.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/chain_trace.hpp"
#include "support/data.hpp"
#include "support/link_bound_model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// a (4000 B), written by op0, is read by op1 and op4: two gaps (support/chain_trace.hpp).
std::string const& two_gaps_text = stash::test::chain_trace_text;

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

TEST_CASE("recompute set: a swap back for a batch at a re-run use leaves that batch's read there")
{
  // x swapped over (0, 3) ends at op3, a re-run use of x (op3 does not access it): the batch at
  // op3 waits for that prefetch (sim/simulator.hpp), so the re-run of a there finds x resident,
  // whichever is added first. The schedule is valid, and x is off the device at op2 (1000 B less
  // than the same re-run with x kept). A swap over (0, 5), past the batch, still takes the read
  // away.
  auto const t = stash::parse_trace(stash::test::rerun_read_trace_text, "rerun_read");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e9));
  stash::swap_entry const x_to_rerun{0, 0, 3, 1, 3, 1000};
  stash::recompute_entry const a_at_3{1, 1, 3, 3, 4000};
  stash::detail::recompute_set over_swap(a, std::vector<stash::swap_entry>{x_to_rerun});
  CHECK(over_swap.try_add(a_at_3));
  stash::detail::recompute_set over_rerun(a, {});
  REQUIRE(over_rerun.try_add(a_at_3));
  CHECK(over_rerun.swap_allowed(x_to_rerun));
  CHECK_FALSE(over_rerun.swap_allowed(stash::swap_entry{0, 0, 5, 1, 5, 1000}));
  auto const s = stash::make_schedule(a, "hand", 1u << 20, {x_to_rerun}, {a_at_3});
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  auto const op2     = a.ops().event[2];
  auto const swapped = stash::planned_device_curve(a, std::vector{x_to_rerun}, std::vector{a_at_3});
  auto const kept    = stash::planned_device_curve(a, {}, std::vector{a_at_3});
  CHECK(swapped[op2] + 1000 == kept[op2]);
}

TEST_CASE("recompute set: reset leaves it as a set constructed over the new swaps")
{
  // The local search refills one set per move (detail::fill_set): after reset nothing of the
  // entries, readers or swap gaps before it is left.
  auto const t = stash::parse_trace(stash::test::rerun_read_trace_text, "rerun_read");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e9));
  stash::swap_entry const x_over_rerun{0, 0, 5, 1, 5, 1000};
  stash::recompute_entry const a_at_3{1, 1, 3, 3, 4000};
  stash::detail::recompute_set rs(a, std::vector<stash::swap_entry>{x_over_rerun});
  CHECK_FALSE(rs.try_add(a_at_3));  // x is away for the batch at op3
  rs.reset({});
  REQUIRE(rs.try_add(a_at_3));
  CHECK_FALSE(rs.swap_allowed(x_over_rerun));  // the re-run reads x
  CHECK_FALSE(rs.try_add(a_at_3));             // its gap is taken
  rs.reset(std::vector<stash::swap_entry>{x_over_rerun});
  CHECK(rs.size() == 0);
  CHECK(rs.entries().empty());
  CHECK(rs.swap_allowed(stash::swap_entry{1, 1, 3, 1, 3, 4000}));  // no entry holds a's gap
  CHECK_FALSE(rs.try_add(a_at_3));
  rs.reset({});
  CHECK(rs.try_add(a_at_3));
  CHECK(rs.entries() == std::vector<stash::recompute_entry>{a_at_3});
}

TEST_CASE("recompute set: entries() in the order they run after every addition")
{
  // The set keeps its order as entries come in (and as pulls move earlier ones into a batch):
  // after each addition, entries() holds every entry added, sorted by (at, first re-run op,
  // storage) as a sort of them gives, the first op noted at the addition (a pull keeps it).
  auto const t = stash::read_trace(stash::test::data_path("traces/resnet18_b32.trace"));
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e9));
  std::vector<stash::recompute_entry> gaps;
  for (stash::storage_id id = 0; id < t.storages().size(); ++id) {
    auto const& life = a.lifetimes().storages[id];
    if (life.kind != stash::storage_kind::act) { continue; }
    for (std::size_t j = 1; j < life.accesses.size(); ++j) {
      auto const u = life.accesses[j - 1].op, q = life.accesses[j].op;
      if (q > u + 1) { gaps.push_back({id, u, q, q, life.bytes}); }
    }
  }
  std::shuffle(gaps.begin(), gaps.end(), std::mt19937_64(3));
  stash::detail::recompute_set rs(a, {});
  std::map<std::pair<stash::storage_id, std::uint64_t>, std::uint64_t> first_op;
  std::size_t added = 0;
  for (auto const& e : gaps) {
    auto const chain = stash::recompute_chain_of(a, e.id, e.last_use, e.at);
    if (!chain.valid() || !rs.try_add(e, chain)) { continue; }
    first_op[{e.id, e.last_use}] = chain.ops.front();
    ++added;
    auto const got = rs.entries();
    REQUIRE(got.size() == added);
    auto key = [&](stash::recompute_entry const& x) {
      return std::tuple(x.at, first_op.at({x.id, x.last_use}), x.id);
    };
    for (std::size_t k = 1; k < got.size(); ++k) { REQUIRE(key(got[k - 1]) < key(got[k])); }
  }
  CHECK(added > 20);
}

}  // namespace STASH_UNITY_ID
