// Tests of the offset planners (greedy, search, best-of): known optima on hand-made cases,
// alignment, bad input, randomized instances and MiniMalloc instances. Every plan made here goes
// through stash::check_plan. The search runs on node budgets, never on wall time, so every
// verdict here is the same on a quiet machine, a loaded one or under a sanitizer.
#include <stash/pool/best_of_planner.hpp>
#include <stash/pool/detail/dsa_search.hpp>
#include <stash/pool/detail/time_cells.hpp>
#include <stash/pool/greedy_planner.hpp>
#include <stash/pool/offset_planner.hpp>
#include <stash/pool/plan.hpp>
#include <stash/pool/plan_checker.hpp>
#include <stash/pool/search_planner.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/minimalloc_reader.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash_tools/planner_workloads.hpp>

#include "support/data.hpp"
#include "support/planner_results.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using intervals = std::vector<stash::lifetime_interval>;
using best_of   = stash::best_of_planner<stash::greedy_planner, stash::search_planner>;

static_assert(stash::offset_planner<stash::greedy_planner>);
static_assert(stash::offset_planner<stash::search_planner>);
static_assert(stash::offset_planner<best_of>);

stash::search_planner quick_search(std::uint64_t nodes = 20'000)
{
  stash::search_options o;
  o.node_budget = nodes;
  return stash::search_planner(o);
}

template <class Planner>
stash::plan checked(Planner const& p, intervals const& in, std::uint64_t alignment)
{
  auto result = p.plan(in, alignment);
  stash::check_plan(in, result);
  CHECK(result.footprint >= stash::plan_lower_bound(in, alignment));
  CHECK(result.alignment == alignment);
  return result;
}

intervals random_instance(std::uint64_t seed, std::size_t n, std::uint64_t horizon)
{
  std::mt19937_64 rng(seed);
  intervals out;
  for (std::size_t i = 0; i < n; ++i) {
    auto const begin = rng() % horizon;
    auto const len   = 1 + rng() % (horizon / 8 + 1);
    auto const bytes = (rng() % 8 == 0) ? 0 : 1 + rng() % 100000;
    out.push_back({1000 + i, begin, begin + len, bytes});
  }
  return out;
}

// The optimal footprint by brute force: every gravity-packed plan, sorted by offset, puts each
// block on the highest top of the time-overlapping blocks before it, so trying every order finds
// the optimum. Only for a handful of blocks.
std::uint64_t brute_force_optimum(intervals const& in)
{
  std::vector<std::size_t> order(in.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::uint64_t best = ~std::uint64_t{0};
  do {
    std::vector<std::uint64_t> offset(in.size(), 0);
    std::uint64_t footprint = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
      auto const b = order[k];
      for (std::size_t j = 0; j < k; ++j) {
        auto const c = order[j];
        if (in[c].begin < in[b].end && in[b].begin < in[c].end) {
          offset[b] = std::max(offset[b], offset[c] + in[c].bytes);
        }
      }
      footprint = std::max(footprint, offset[b] + in[b].bytes);
    }
    best = std::min(best, footprint);
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

intervals small_instance(std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  intervals out;
  auto const n = 3 + rng() % 5;
  for (std::size_t i = 0; i < n; ++i) {
    auto const begin = rng() % 10;
    out.push_back({i, begin, begin + 1 + rng() % 6, 1 + rng() % 9});
  }
  return out;
}

// The engine's input for `in`, built the way search_planner builds it for one section (time
// cells start only where a block begins).
stash::detail::dsa_instance engine_instance(std::vector<stash::lifetime_interval> const& in)
{
  auto const cells = stash::detail::make_time_cells(in, {}, /*begins_only=*/true);
  stash::detail::dsa_instance inst;
  for (auto const& b : in) { inst.size.push_back(b.bytes); }
  inst.cell_begin = cells.cell_begin;
  inst.cell_end   = cells.cell_end;
  inst.cells      = cells.cells;
  return inst;
}

}  // namespace

TEST_CASE("dsa_search is complete: it packs at the optimum and proves nothing fits below it")
{
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    CAPTURE(seed);
    auto const in      = small_instance(seed);
    auto const optimum = brute_force_optimum(in);
    stash::detail::dsa_search search(engine_instance(in));
    for (auto order : {stash::detail::dsa_order::twa, stash::detail::dsa_order::wat,
                       stash::detail::dsa_order::taw}) {
      for (bool critical_first : {true, false}) {
        std::vector<std::uint64_t> offsets;
        REQUIRE(search.solve(optimum, order, ~std::uint64_t{0}, offsets, seed % 3,
                             critical_first) == stash::detail::dsa_status::found);
        stash::plan p;
        p.alignment = 1;
        p.offsets   = offsets;
        for (std::size_t i = 0; i < in.size(); ++i) {
          p.footprint = std::max(p.footprint, offsets[i] + in[i].bytes);
        }
        stash::check_plan(in, p);
        CHECK(p.footprint <= optimum);
        CHECK(search.solve(optimum - 1, order, ~std::uint64_t{0}, offsets, seed % 3,
                           critical_first) == stash::detail::dsa_status::exhausted);
      }
    }
  }
}

TEST_CASE("search planner without a capacity reaches the optimum on small instances")
{
  for (std::uint64_t seed = 200; seed <= 240; ++seed) {
    CAPTURE(seed);
    auto const in = small_instance(seed);
    auto const p  = checked(quick_search(1'000'000), in, 1);
    CHECK(p.footprint == brute_force_optimum(in));
  }
}

TEST_CASE("planners: disjoint lifetimes all share offset 0")
{
  intervals const in{{1, 0, 2, 500}, {2, 2, 5, 300}, {3, 5, 6, 700}, {4, 6, 9, 200}};
  auto const check = [&](auto const& planner) {
    auto const p = checked(planner, in, 1);
    CHECK(p.footprint == 700);
    for (auto o : p.offsets) { CHECK(o == 0); }
  };
  check(stash::greedy_planner{});
  check(quick_search());
  check(best_of{});
}

TEST_CASE("planners: blocks all live together stack up to the sum")
{
  intervals const in{{1, 0, 10, 64}, {2, 1, 9, 128}, {3, 2, 8, 32}, {4, 3, 7, 256}};
  auto const check = [&](auto const& planner) {
    auto const p = checked(planner, in, 1);
    CHECK(p.footprint == 64 + 128 + 32 + 256);
    CHECK(p.alpha(stash::plan_lower_bound(in, 1)) == doctest::Approx(1.0));
  };
  check(stash::greedy_planner{});
  check(quick_search());
  check(best_of{});
}

TEST_CASE("greedy places largest first, best fit in the smallest gap that fits")
{
  intervals const in{{1, 0, 4, 100}, {2, 0, 10, 40}, {3, 5, 9, 30}, {4, 5, 6, 50}};
  // The classic heuristic over the whole input (without sections; see the next case).
  auto const p = checked(stash::greedy_planner{stash::greedy_options{false}}, in, 1);
  // Largest first: 1 -> 0; 4 -> 0 (no placed conflict); 2 conflicts with 1 [0,100) and 4 [0,50)
  // and has no gap, so it goes on top at 100; 3 conflicts with 2 [100,140) and 4 [0,50) and
  // fits the gap [50,100).
  CHECK(p.offsets == std::vector<std::uint64_t>{0, 100, 50, 0});
  CHECK(p.footprint == 140);
}

TEST_CASE("greedy reuses a gap exactly the size of the block")
{
  // Largest first: 1 -> 0; 2 conflicts with 1 -> 100; 3 conflicts with 2 [100,160) only and
  // takes the gap [0,100) -> 0; 4 conflicts with 2 and 3 [0,50): the gap [50,100) is exactly its
  // 50 bytes. Taking it gives 160, the lower bound (60 + 50 + 50 over [5,9)); refusing an exact
  // fit would put 4 on top at 160 and need 210.
  intervals const in{{1, 0, 4, 100}, {2, 0, 10, 60}, {3, 5, 10, 50}, {4, 5, 9, 50}};
  auto const p = checked(stash::greedy_planner{stash::greedy_options{false}}, in, 1);
  CHECK(p.offsets == std::vector<std::uint64_t>{0, 100, 0, 50});
  CHECK(p.footprint == 160);
  CHECK(p.footprint == stash::plan_lower_bound(in, 1));
}

TEST_CASE("greedy and search stack the blocks live over their whole section below it")
{
  // Block 2 lives over everything: the default greedy stacks it at 0, and above it the two
  // sections [0,4) and [5,9) on their own: 1 -> 40; in [5,9), block 3 lives over the whole
  // section, so it is stacked at 40 and 4 goes on it at 70.
  intervals const in{{1, 0, 4, 100}, {2, 0, 10, 40}, {3, 5, 9, 30}, {4, 5, 6, 50}};
  auto const p = checked(stash::greedy_planner{}, in, 1);
  CHECK(p.offsets == std::vector<std::uint64_t>{40, 0, 40, 70});
  CHECK(p.footprint == 140);
  stash::search_stats stats;
  auto const s = quick_search().plan(in, 1, stats);
  stash::check_plan(in, s);
  CHECK(stats.sections == 2);
  CHECK(s.footprint == 140);  // = L
  CHECK(s.offsets[1] == 0);

  // A training-like input: parameters allocated first and never freed, then three iterations of
  // a case greedy cannot pack. The parameters are stacked, the iterations are three sections of
  // one shape: the search solves one and reuses it for the others, so three iterations cost the
  // nodes of one.
  auto iterations = [](std::uint64_t k) {
    intervals v;
    std::uint64_t const len = 40;
    for (std::uint64_t q = 0; q < 5; ++q) {
      v.push_back({v.size(), q, 5 + k * len, 256 * (q + 3)});
    }
    for (std::uint64_t i = 0; i < k; ++i) {
      auto const t0 = 5 + i * len;
      // The case where greedy is provably suboptimal (see below), in every iteration.
      for (auto const& [b, e, units] : {std::tuple{2, 4, 3}, {4, 6, 3}, {5, 8, 3}, {3, 5, 1}}) {
        v.push_back({v.size(), t0 + b, t0 + e, 256 * std::uint64_t(units)});
      }
    }
    return v;
  };
  stash::search_stats one, three;
  auto const in1 = iterations(1);
  auto const in3 = iterations(3);
  auto const p1  = quick_search().plan(in1, 256, one);
  auto const p3  = quick_search().plan(in3, 256, three);
  stash::check_plan(in1, p1);
  stash::check_plan(in3, p3);
  CHECK(one.sections == 1);
  CHECK(three.sections == 3);
  CHECK(one.greedy_footprint > one.lower_bound);  // so the search has work to do
  CHECK(one.nodes > 0);
  CHECK(p1.footprint == one.lower_bound);
  CHECK(p3.footprint == p1.footprint);
  CHECK(three.nodes == one.nodes);
  for (std::uint64_t q = 0; q < 5; ++q) { CHECK(p3.offsets[q] == 256 * (q * (q + 5) / 2)); }
}

TEST_CASE("time cells over begins only keep exactly the overlaps of the intervals")
{
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    auto const in      = random_instance(seed, 60, 200);
    auto const cells   = stash::detail::make_time_cells(in, {}, /*begins_only=*/true);
    std::size_t begins = 0;
    for (std::size_t a = 0; a < in.size(); ++a) {
      REQUIRE(cells.cell_begin[a] < cells.cell_end[a]);
      begins += 1;
      for (std::size_t b = 0; b < in.size(); ++b) {
        bool const overlap = in[a].begin < in[b].end && in[b].begin < in[a].end;
        bool const cells_overlap =
            cells.cell_begin[a] < cells.cell_end[b] && cells.cell_begin[b] < cells.cell_end[a];
        CHECK(overlap == cells_overlap);
      }
    }
    CHECK(cells.cells <= begins);
  }
}

TEST_CASE("greedy is provably suboptimal here and the search reaches the lower bound")
{
  intervals const in{{0, 2, 4, 3}, {1, 4, 6, 3}, {2, 5, 8, 3}, {3, 3, 5, 1}};
  auto const lower = stash::plan_lower_bound(in, 1);
  CHECK(lower == 6);
  auto const greedy = checked(stash::greedy_planner{}, in, 1);
  CHECK(greedy.footprint == 7);  // > L, so greedy is not optimal
  auto const search = checked(quick_search(), in, 1);
  CHECK(search.footprint == lower);
  auto const best = checked(best_of{}, in, 1);
  CHECK(best.footprint == lower);
  CHECK(best.planner == "search");
  CHECK(best_of{}.name() == "best_of(greedy_by_size,search)");
}

TEST_CASE("planners pad sizes and align offsets")
{
  intervals const in{{1, 0, 5, 100}, {2, 1, 6, 257}, {3, 2, 3, 1}, {4, 6, 9, 1000}, {5, 0, 9, 0}};
  for (std::uint64_t alignment : {1ULL, 8ULL, 256ULL, 4096ULL}) {
    CAPTURE(alignment);
    for (auto const& p : {checked(stash::greedy_planner{}, in, alignment),
                          checked(quick_search(), in, alignment)}) {
      for (auto o : p.offsets) { CHECK(o % alignment == 0); }
      CHECK(p.footprint % alignment == 0);
    }
  }
  // At 256: three overlapping blocks padded to 256 + 512 + 256 = 1024; 1000 pads to 1024.
  CHECK(stash::greedy_planner{}.plan(in, 256).footprint == 1024);
  CHECK(stash::greedy_planner{}.plan(in).alignment == 256);
}

TEST_CASE("planners reject bad input with a logic_error naming the block")
{
  intervals const empty_life{{1, 0, 5, 8}, {42, 7, 7, 8}};
  try {
    (void)stash::greedy_planner{}.plan(empty_life, 1);
    FAIL("expected stash::logic_error");
  } catch (stash::logic_error const& e) {
    CHECK(std::string(e.what()).find("id 42") != std::string::npos);
    CHECK(std::string(e.what()).find("greedy_planner") != std::string::npos);
  }
  CHECK_THROWS_AS((void)quick_search().plan(empty_life, 1), stash::logic_error);
  intervals const ok{{1, 0, 5, 8}};
  CHECK_THROWS_AS((void)stash::greedy_planner{}.plan(ok, 24), stash::logic_error);
  CHECK_THROWS_AS((void)quick_search().plan(ok, 0), stash::logic_error);
  auto const none = stash::greedy_planner{}.plan(intervals{}, 256);
  CHECK(none.offsets.empty());
  CHECK(none.footprint == 0);
}

TEST_CASE("planners: randomized instances validate, and the search never loses to greedy")
{
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    CAPTURE(seed);
    auto const in     = random_instance(seed, 40 + 20 * seed, 400);
    auto const lower  = stash::plan_lower_bound(in, 256);
    auto const greedy = checked(stash::greedy_planner{}, in, 256);
    auto const search = checked(quick_search(), in, 256);
    CHECK(search.footprint <= greedy.footprint);
    auto const best = checked(best_of{stash::greedy_planner{}, quick_search()}, in, 256);
    CHECK(best.footprint <= greedy.footprint);
    CHECK(best.footprint >= lower);
  }
}

TEST_CASE("search planner: statistics and independent sections")
{
  // Two time-disjoint groups; the second is the greedy-suboptimal case shifted to t >= 100.
  intervals in{{0, 0, 3, 5}, {1, 1, 4, 5}};
  for (auto b : intervals{{10, 2, 4, 3}, {11, 4, 6, 3}, {12, 5, 8, 3}, {13, 3, 5, 1}}) {
    b.begin += 100;
    b.end += 100;
    in.push_back(b);
  }
  stash::search_stats stats;
  auto const p = quick_search().plan(in, 1, stats);
  stash::check_plan(in, p);
  CHECK(stats.sections == 2);
  CHECK(stats.lower_bound == 10);
  CHECK(stats.greedy_footprint == 10);  // the first section dominates: greedy already optimal
  CHECK(p.footprint == 10);
}

// A sample (all eleven: tests/sweep/planner_results_test.cpp).
TEST_CASE("search planner packs MiniMalloc instances within capacity on the default budget")
{
  stash::test::check_minimalloc_default_budget("minimalloc/A.1048576.csv");
  stash::test::check_minimalloc_default_budget("minimalloc/B.1048576.csv");
}

TEST_CASE("search planner: a larger budget changes nothing once a plan is found")
{
  // D needs a tight lower offset for the blocks that must rise; I and K the restart portfolio.
  // The search stops at its first plan within capacity, so on a 1 M node budget (and no work
  // cap) it stops at the same node as on the default one.
  for (char const* name :
       {"minimalloc/D.1048576.csv", "minimalloc/I.1048576.csv", "minimalloc/K.1048576.csv"}) {
    CAPTURE(name);
    auto const inst = stash::read_minimalloc_csv(stash::test::data_path(name));
    REQUIRE(inst.capacity.has_value());
    stash::search_options o;
    o.capacity = inst.capacity;
    stash::search_stats by_default;
    auto const d  = stash::search_planner(o).plan(inst.buffers, 1, by_default);
    o.node_budget = 1'000'000;
    o.work_budget = 0;  // no cap but the nodes
    stash::search_stats stats;
    auto const p = stash::search_planner(o).plan(inst.buffers, 1, stats);
    stash::check_plan(inst.buffers, p);
    CHECK(p.footprint <= *inst.capacity);
    CHECK(stats.nodes == by_default.nodes);
    CHECK(p.offsets == d.offsets);
  }
}

TEST_CASE("search planner: the work budget stops a search deterministically")
{
  // G within capacity needs ~31 M work: on 2 M the search runs out, always at the same node,
  // having spent the budget and at most one node's work beyond it.
  auto const g = stash::read_minimalloc_csv(stash::test::data_path("minimalloc/G.1048576.csv"));
  stash::search_options o;
  o.capacity    = g.capacity;
  o.work_budget = 2'000'000;
  stash::search_stats first, second;
  auto const p1 = stash::search_planner(o).plan(g.buffers, 1, first);
  auto const p2 = stash::search_planner(o).plan(g.buffers, 1, second);
  stash::check_plan(g.buffers, p1);
  CHECK(p1.footprint > *g.capacity);
  CHECK(p1.offsets == p2.offsets);
  CHECK(first.work == second.work);
  CHECK(first.nodes == second.nodes);
  CHECK(first.nodes < o.node_budget);  // the work stopped it, not the nodes
  CHECK(first.work >= o.work_budget);
  CHECK(first.work <= o.work_budget + 2 * g.buffers.size());
  CHECK(first.work_budget == o.work_budget);
}

TEST_CASE("search planner: the node budget alone decides the plan, split over targets in nodes")
{
  // G within capacity needs ~92k nodes: on 10k the search runs out, always at the same node.
  auto const g = stash::read_minimalloc_csv(stash::test::data_path("minimalloc/G.1048576.csv"));
  stash::search_options o;
  o.capacity    = g.capacity;
  o.node_budget = 10'000;
  stash::search_stats first, second;
  auto const p1 = stash::search_planner(o).plan(g.buffers, 1, first);
  auto const p2 = stash::search_planner(o).plan(g.buffers, 1, second);
  stash::check_plan(g.buffers, p1);
  CHECK(p1.offsets == p2.offsets);
  CHECK(first.nodes == o.node_budget);  // spent to the last node, never beyond
  CHECK(second.nodes == first.nodes);
  CHECK(first.node_budget == o.node_budget);
  CHECK_FALSE(first.time_capped);

  // Without a capacity (bisection between L and the best plan): same plan and node count twice,
  // within the budget; 0 nodes keeps the greedy plan.
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    CAPTURE(seed);
    auto const in = random_instance(seed, 150, 300);
    stash::search_stats a, b;
    auto const q1 = quick_search(5'000).plan(in, 256, a);
    auto const q2 = quick_search(5'000).plan(in, 256, b);
    CHECK(q1.offsets == q2.offsets);
    CHECK(a.nodes == b.nodes);
    CHECK(a.attempts == b.attempts);
    CHECK(a.nodes <= 5'000);
    stash::search_stats none;
    auto const greedy = quick_search(0).plan(in, 256, none);
    CHECK(greedy.offsets == stash::greedy_planner{}.plan(in, 256).offsets);
    CHECK(none.nodes == 0);
    CHECK(none.attempts == 0);
  }
}

TEST_CASE("search planner: the optional time cap is a safety net that says when it cut in")
{
  // Whether a 1 ms cap cuts G's search (~0.3 s of work) short depends on the machine, so only
  // the report is checked: the plan fits within the capacity exactly when the cap did not cut in.
  auto const k = stash::read_minimalloc_csv(stash::test::data_path("minimalloc/G.1048576.csv"));
  stash::search_options o;
  o.capacity    = k.capacity;
  o.node_budget = 1'000'000;  // enough for G
  o.time_cap    = std::chrono::milliseconds(1);
  stash::search_stats stats;
  auto const p = stash::search_planner(o).plan(k.buffers, 1, stats);
  stash::check_plan(k.buffers, p);
  CHECK(stats.time_capped == (p.footprint > *k.capacity));
  CHECK(stats.nodes <= o.node_budget);

  // The engine, given a deadline already past, stops at its first clock check (node 256) and
  // says it was the deadline, not the node budget.
  stash::detail::dsa_search engine(engine_instance(k.buffers));
  std::vector<std::uint64_t> offsets;
  auto const past = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  CHECK(engine.solve(*k.capacity, stash::detail::dsa_order::twa, 8000, offsets, 0, true, false,
                     past) == stash::detail::dsa_status::deadline);
  CHECK(engine.nodes() == 256);
  CHECK(engine.solve(*k.capacity, stash::detail::dsa_order::twa, 8000, offsets) ==
        stash::detail::dsa_status::budget);
  CHECK(engine.nodes() == 8000);
}

TEST_CASE("dsa_search: a restart reuses the failed sub-states of earlier runs, and stays complete")
{
  // The same engine solved repeatedly at one capacity (remembering failures) and at others
  // (forgetting them) must keep agreeing with brute force.
  for (std::uint64_t seed = 300; seed <= 340; ++seed) {
    CAPTURE(seed);
    auto const in      = small_instance(seed);
    auto const optimum = brute_force_optimum(in);
    stash::detail::dsa_search search(engine_instance(in));
    std::vector<std::uint64_t> offsets;
    for (std::uint64_t run = 0; run < 9; ++run) {
      auto const order = static_cast<stash::detail::dsa_order>(run % 3);
      CHECK(search.solve(optimum - 1, order, ~std::uint64_t{0}, offsets, run, run % 2 == 0,
                         run % 3 == 2) == stash::detail::dsa_status::exhausted);
    }
    for (std::uint64_t run = 0; run < 9; ++run) {
      auto const order = static_cast<stash::detail::dsa_order>(run % 3);
      REQUIRE(search.solve(optimum, order, ~std::uint64_t{0}, offsets, run, run % 2 == 1,
                           run % 3 == 1) == stash::detail::dsa_status::found);
      stash::plan p;
      p.alignment = 1;
      p.offsets   = offsets;
      for (std::size_t i = 0; i < in.size(); ++i) {
        p.footprint = std::max(p.footprint, offsets[i] + in[i].bytes);
      }
      stash::check_plan(in, p);
      CHECK(p.footprint <= optimum);
    }
  }
}

TEST_CASE("greedy plans 100k blocks (a MiniMalloc instance repeated in time) validly")
{
  auto const inst = stash::read_minimalloc_csv(stash::test::data_path("minimalloc/A.1048576.csv"));
  intervals big;
  std::uint64_t shift = 0;
  std::uint64_t span  = 0;
  for (auto const& b : inst.buffers) { span = std::max(span, b.end); }
  while (big.size() < 100000) {
    for (auto b : inst.buffers) {
      b.id = big.size();
      b.begin += shift;
      b.end += shift;
      big.push_back(b);
    }
    shift += span;
  }
  auto const p = checked(stash::greedy_planner{}, big, 1);
  // Repetitions are disjoint in time, so the footprint is that of one copy.
  CHECK(p.footprint == stash::greedy_planner{}.plan(inst.buffers, 1).footprint);
}

TEST_CASE("search planner on a 100k-storage real trace: iterations planned once, alpha of one")
{
  // resnet18's step 151 times back to back (parameters and optimizer state allocated once):
  // the iterations are sections of one shape, so the search solves one and reuses it.
  auto const tr   = stash::read_trace(stash::test::data_path("traces/resnet18_b32.trace"));
  auto const one  = stash::lifetime_intervals(tr);
  auto const many = stash_tools::repeat_iterations(tr, 151);
  REQUIRE(many.size() > 100000);
  stash::search_stats single, repeated;
  auto const p1 = stash::search_planner{}.plan(one, 256, single);
  auto const pn = stash::search_planner{}.plan(many, 256, repeated);
  stash::check_plan(one, p1);
  stash::check_plan(many, pn);
  CHECK(repeated.sections == 151);
  CHECK(repeated.nodes == single.nodes);
  CHECK(repeated.lower_bound == single.lower_bound);
  CHECK(pn.footprint == p1.footprint);
  CHECK(pn.footprint == single.lower_bound);  // alpha 1 here, as on one iteration
  // Greedy, also per section: the same footprint as on one iteration.
  CHECK(stash::greedy_planner{}.plan(many, 256).footprint ==
        stash::greedy_planner{}.plan(one, 256).footprint);
}

// A sample (seven traces: tests/sweep/planner_results_test.cpp).
TEST_CASE("search planner within 0.2% of L on traces with sizes it was not tuned on")
{
  stash::test::check_perturbed_within_alpha("alexnet_b128");
  stash::test::check_perturbed_within_alpha("squeezenet1_1_b64");
}

}  // namespace STASH_UNITY_ID
