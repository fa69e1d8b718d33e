// Planning that scales (issue 24, item 4): the near-linear search_swap, gap planner and AutoSwap
// return the very schedules the old quadratic code did, and their building blocks (range_tree,
// stab_index) answer as a plain scan does.
//
// The fingerprints below (stash_tools::schedule_fingerprint of search_swap and of AutoSwap with
// SWDOA, DOA, AOA and WDOA) were computed by the code before the change (commit 65142fe, whose
// search_swap.hpp, auto_swap.hpp and detail/gap_planner.hpp rescanned every op and gap per
// pick): `bench_planning_scale --fingerprints data` built with those three headers in front of
// the include path (a subset of its rows, to keep the test cheap). The transformer is deepened to 4
// copies (stash_tools/deep_trace.hpp) so that long gaps, the size classes and AutoSwap's chain are
// exercised too.
#include "support/data.hpp"

#include <stash_tools/deep_trace.hpp>
#include <stash_tools/schedule_fingerprint.hpp>

#include <stash/core/error.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/auto_swap.hpp>
#include <stash/swap/detail/area_sums.hpp>
#include <stash/swap/detail/range_tree.hpp>
#include <stash/swap/detail/stab_index.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/vdnn.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

struct expected_plans {
  char const* trace;
  int budget_pct;
  std::uint64_t search_swap;
  std::array<std::uint64_t, 4> auto_swap;  // swdoa, doa, aoa, wdoa
};

// clang-format off
constexpr expected_plans before_change[] = {
    {"alexnet_b128", 80, 0xcedf449d4604de5dULL, {0x5694e692a47f263aULL, 0x536641d7e530d952ULL, 0x5694e692a47f263aULL, 0x5694e692a47f263aULL}},
    {"alexnet_b128", 45, 0x1a40e436b8249664ULL, {0xdb14ce6015e90e63ULL, 0x5bfa6a47791176fbULL, 0xdb14ce6015e90e63ULL, 0xdb14ce6015e90e63ULL}},
    {"vgg16_b32", 60, 0xbf6f128719b2c72bULL, {0xc75e4d4140422fedULL, 0xd0973fe71f36ba35ULL, 0xc75e4d4140422fedULL, 0xc75e4d4140422fedULL}},
    {"resnet18_b32", 45, 0x5fd5e39bb27c9fc9ULL, {0xc82a7a8634c6708fULL, 0x29147ac961bce535ULL, 0xc82a7a8634c6708fULL, 0xc82a7a8634c6708fULL}},
    {"transformer_encoder_b8", 80, 0x24b70fa04d1a9d45ULL, {0x0ea727f5469b6aedULL, 0x9ed4204ea1fe3a18ULL, 0x0ea727f5469b6aedULL, 0x0ea727f5469b6aedULL}},
    {"transformer_encoder_b8", 60, 0x5917ca5e3cc9e9f7ULL, {0x24274de5ccd9b45fULL, 0x5680ba714af0f4e0ULL, 0xe359f5eb3d3358b8ULL, 0x199a2ec4382a1829ULL}},
    {"transformer_encoder_b8", 45, 0x89cf00250e51cb39ULL, {0x0548a1b7c09379c4ULL, 0x89af74f76ed2a24fULL, 0xd696f347937b09ccULL, 0x71ec9c461f818164ULL}},
    {"squeezenet1_1_b64", 60, 0x0fd00239d03fa937ULL, {0xe52bb9a870885b1fULL, 0x4ad394f4ca87ff7dULL, 0xe52bb9a870885b1fULL, 0xe52bb9a870885b1fULL}},
};

// vdnn_conv and vdnn_all at half the peak, computed before their walk back over the layers
// jumped over layers that can no longer stop it (the same run of the benchmark, before that
// change to vdnn.hpp).
struct expected_vdnn {
  char const* trace;
  std::uint64_t conv, all;
};
constexpr expected_vdnn vdnn_before_change[] = {
    {"alexnet_b128", 0x4a40b2baa9849798ULL, 0x55c5a51131b4a8a3ULL},
    {"vgg16_b32", 0x7d6fe8eb754369d2ULL, 0xd4d1e97d9cf78d2aULL},
    {"resnet18_b32", 0x3689c36e2c93ca90ULL, 0x78cc305847dc70adULL},
    {"transformer_encoder_b8", 0x29eb2bbdeb3388c5ULL, 0x68b94fc2c827c6b8ULL},
};
// clang-format on

}  // namespace

TEST_CASE("vdnn_conv and vdnn_all plan what they planned before")
{
  stash::cost_model const model(stash::presets::pcie3_x16);
  for (auto const& e : vdnn_before_change) {
    CAPTURE(e.trace);
    auto t = stash::read_trace(stash::test::data_path(std::string("traces/") + e.trace + ".trace"));
    if (std::string_view(e.trace) == "transformer_encoder_b8") {
      t = stash_tools::deepen_trace(t, 4);
    }
    stash::trace_analysis const a(t, model);
    auto const budget = a.peak_live_bytes() / 2;
    CHECK(stash_tools::schedule_fingerprint(stash::vdnn_conv{}.plan(a, budget)) == e.conv);
    CHECK(stash_tools::schedule_fingerprint(stash::vdnn_all{}.plan(a, budget)) == e.all);
  }
}

TEST_CASE("search_swap and auto_swap plan what the quadratic code planned")
{
  std::string loaded;
  std::optional<stash::trace> t;
  std::optional<stash::trace_analysis> a;
  stash::cost_model const model(stash::presets::pcie3_x16);
  for (auto const& e : before_change) {
    if (loaded != e.trace) {
      a.reset();
      t = stash::read_trace(stash::test::data_path(std::string("traces/") + e.trace + ".trace"));
      if (std::string_view(e.trace) == "transformer_encoder_b8") {
        t = stash_tools::deepen_trace(*t, 4);
      }
      a.emplace(*t, model);
      loaded = e.trace;
    }
    auto const budget = a->peak_live_bytes() / 100 * static_cast<std::uint64_t>(e.budget_pct);
    CAPTURE(e.trace);
    CAPTURE(e.budget_pct);
    CHECK(stash_tools::schedule_fingerprint(stash::search_swap{}.plan(*a, budget)) ==
          e.search_swap);
    auto const scores = {stash::auto_swap_score::swdoa, stash::auto_swap_score::doa,
                         stash::auto_swap_score::aoa, stash::auto_swap_score::wdoa};
    std::size_t i     = 0;
    for (auto const score : scores) {
      CAPTURE(i);
      CHECK(stash_tools::schedule_fingerprint(stash::auto_swap{.score = score}.plan(*a, budget)) ==
            e.auto_swap[i++]);
    }
  }
}

TEST_CASE("plan_budgets plans at every budget of a sweep what plan plans at each")
{
  // The recorded budgets through one sweep per trace (AutoSwap's greedy run once for all), then
  // tighter budgets, where AutoSwap cannot reach the budget and stops early, against plan().
  stash::cost_model const model(stash::presets::pcie3_x16);
  auto const scores = {stash::auto_swap_score::swdoa, stash::auto_swap_score::doa,
                       stash::auto_swap_score::aoa, stash::auto_swap_score::wdoa};
  for (auto const* name : {"alexnet_b128", "transformer_encoder_b8"}) {
    CAPTURE(name);
    auto t = stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
    if (std::string_view(name) == "transformer_encoder_b8") { t = stash_tools::deepen_trace(t, 4); }
    stash::trace_analysis const a(t, model);
    std::vector<std::uint64_t> budgets;  // unsorted, with a repeat and one above the peak
    std::vector<expected_plans const*> expected;
    for (auto const& e : before_change) {
      if (std::string_view(e.trace) != name) { continue; }
      budgets.push_back(a.peak_live_bytes() / 100 * static_cast<std::uint64_t>(e.budget_pct));
      expected.push_back(&e);
    }
    REQUIRE(budgets.size() >= 2);
    auto const recorded = budgets.size();
    for (std::uint64_t const pct : {20, 110, 33, 20}) {
      budgets.push_back(a.peak_live_bytes() / 100 * pct);
    }
    stash::auto_swap_sweeps shared(a, budgets);  // search_swap's seeds, kept for the policies
    auto const swaps = stash::search_swap{}.plan_budgets(a, budgets, &shared);
    REQUIRE(swaps.size() == budgets.size());
    // One budget at a time from the last, as a thread of stash-plan --frontier --threads plans
    // its share (search_swap_sweep): the same schedules whatever the budgets planned before.
    stash::search_swap_sweep backwards(stash::search_swap{}, a, budgets, &shared);
    for (std::size_t b = budgets.size(); b-- > 0;) {
      CAPTURE(b);
      auto const s = backwards.plan(b);
      CHECK(stash_tools::schedule_fingerprint(s) == stash_tools::schedule_fingerprint(swaps[b]));
      CHECK(s.note == swaps[b].note);
    }
    CHECK_THROWS_AS((void)backwards.plan(budgets.size()), stash::logic_error);
    stash::auto_swap_sweeps const unplanned(a, budgets);
    CHECK_THROWS_AS((void)unplanned.planned(stash::auto_swap_score::doa), stash::logic_error);
    CHECK_THROWS_AS(stash::search_swap_sweep(stash::search_swap{}, a, budgets, nullptr),
                    stash::logic_error);
    std::size_t i = 0;
    for (auto const score : scores) {
      CAPTURE(i);
      stash::auto_swap const policy{.score = score};
      auto const sweep = policy.plan_budgets(a, budgets);
      REQUIRE(sweep.size() == budgets.size());
      REQUIRE(shared.of(score).size() == budgets.size());
      for (std::size_t b = 0; b < budgets.size(); ++b) {
        CAPTURE(b);
        auto const fp = stash_tools::schedule_fingerprint(sweep[b]);
        CHECK(fp == stash_tools::schedule_fingerprint(shared.of(score)[b]));
        if (b < recorded) { CHECK(fp == expected[b]->auto_swap[i]); }
        auto const single = policy.plan(a, budgets[b]);
        CHECK(fp == stash_tools::schedule_fingerprint(single));
        CHECK(sweep[b].note == single.note);
      }
      ++i;
    }
    for (std::size_t b = 0; b < budgets.size(); ++b) {
      CAPTURE(b);
      auto const fp = stash_tools::schedule_fingerprint(swaps[b]);
      if (b < recorded) { CHECK(fp == expected[b]->search_swap); }
      // Every budget against plan(), which plans its vDNN seeds and selections afresh.
      auto const single = stash::search_swap{}.plan(a, budgets[b]);
      CHECK(fp == stash_tools::schedule_fingerprint(single));
      CHECK(swaps[b].note == single.note);
    }
  }
}

TEST_CASE("a gap selection planned for one variant plans as the variant's own for its score")
{
  // search_swap selects once for the variants that differ only in offload point or releases
  // (detail::nominal_selections): the selection must not depend on those, on any timeline.
  stash::cost_model const model(stash::presets::pcie3_x16);
  for (auto const* name : {"alexnet_b128", "transformer_encoder_b8"}) {
    CAPTURE(name);
    auto t = stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
    if (std::string_view(name) == "transformer_encoder_b8") { t = stash_tools::deepen_trace(t, 2); }
    stash::trace_analysis const a(t, model);
    std::vector<double> nominal(a.op_count());
    for (std::size_t i = 0; i < nominal.size(); ++i) { nominal[i] = a.op_start(i); }
    // A timeline with stalls: vdnn_all's, simulated without a budget.
    auto const stalled =
        stash::simulate(a, stash::vdnn_all{}.plan(a, a.peak_live_bytes()),
                        stash::sim_options{false, stash::sim_memory::unconstrained})
            .op_start;
    for (auto const scope : {stash::swap_scope::activations, stash::swap_scope::any_kind}) {
      for (std::uint64_t const pct : {90, 60, 40, 25}) {
        auto const budget = a.peak_live_bytes() / 100 * pct;
        stash::detail::gap_planner const planner(a, budget, scope, 0);
        for (auto const* start : std::array<std::vector<double> const*, 2>{&nominal, &stalled}) {
          for (auto const& var : stash::detail::search_swap_variants) {
            for (auto const& other : stash::detail::search_swap_variants) {
              if (other.score != var.score || other.margin != var.margin) { continue; }
              CAPTURE(pct);
              auto const target =
                  budget - budget / 20 * static_cast<std::uint64_t>(var.margin * 10);
              auto const own = planner.plan(var, target, *start);
              auto const shared =
                  planner.plan(var, planner.select_gaps(other, target, *start), *start);
              CHECK(own == shared);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("range_tree and max_tree answer as a scan of the plain array does, and roll adds back")
{
  std::mt19937_64 rng(24);
  for (std::size_t n : {1U, 2U, 7U, 64U, 100U}) {
    std::vector<std::int64_t> plain(n);
    for (auto& x : plain) { x = static_cast<std::int64_t>(rng() % 20); }
    stash::detail::range_tree tree(plain);
    stash::detail::max_tree maxes(plain);     // the same without minima (AutoSwap's curve)
    stash::detail::max_tree deferred(plain);  // every add by add_deferred, flushed in batches
    auto deferred_plain = plain;              // its values (it is not rolled back)
    std::vector<std::int64_t> saved;
    for (int step = 0; step < 300; ++step) {
      // The adds of steps 100-199 are rolled back at 200, those of 220-269 at 270: a second
      // round on the same tree, which must save afresh every node the first round restored.
      if (step == 100 || step == 220) {
        tree.checkpoint();
        maxes.checkpoint();
        saved = plain;
      }
      if (step == 200 || step == 270) {
        tree.rollback();
        maxes.rollback();
        plain = saved;
        for (std::size_t j = 0; j < n; ++j) {
          REQUIRE(tree.at(j) == plain[j]);
          REQUIRE(maxes.at(j) == plain[j]);
        }
      }
      auto l = rng() % n, r = rng() % (n + 1);
      if (l > r) { std::swap(l, r); }
      auto const d = static_cast<std::int64_t>(rng() % 9) - 4;
      tree.add(l, r, d);
      maxes.add(l, r, d);
      for (auto j = l; j < r; ++j) { plain[j] += d; }
      deferred.add_deferred(l, r, d);
      for (auto j = l; j < r; ++j) { deferred_plain[j] += d; }
      if (rng() % 4 == 0) {  // a batch of 1 to many adds: every answer as the plain array's
        deferred.flush();
        for (std::size_t j = 0; j < n; ++j) { REQUIRE(deferred.at(j) == deferred_plain[j]); }
        auto const top = std::max_element(deferred_plain.begin(), deferred_plain.end());
        REQUIRE(deferred.first_max() == static_cast<std::size_t>(top - deferred_plain.begin()));
        if (l < r) {
          REQUIRE(deferred.max(l, r) ==
                  *std::max_element(deferred_plain.begin() + static_cast<std::ptrdiff_t>(l),
                                    deferred_plain.begin() + static_cast<std::ptrdiff_t>(r)));
        }
      }
      auto const t           = static_cast<std::int64_t>(rng() % 20);
      auto const npos        = stash::detail::range_tree::npos;
      std::size_t last_above = npos, last_at_most = npos, first_at_most = npos, first_above = npos;
      std::int64_t mx = std::numeric_limits<std::int64_t>::min() / 4;
      for (auto j = l; j < r; ++j) {
        if (plain[j] > t) { last_above = j; }
        if (plain[j] <= t) { last_at_most = j; }
        if (plain[j] <= t && first_at_most == npos) { first_at_most = j; }
        if (plain[j] > t && first_above == npos) { first_above = j; }
        mx = std::max(mx, plain[j]);
      }
      REQUIRE(tree.last_above(l, r, t) == last_above);
      REQUIRE(tree.last_at_most(l, r, t) == last_at_most);
      REQUIRE(tree.first_at_most(l, r, t) == first_at_most);
      REQUIRE(tree.first_above(l, r, t) == first_above);
      REQUIRE(tree.max(l, r) == mx);
      auto const first_max =
          static_cast<std::size_t>(std::max_element(plain.begin(), plain.end()) - plain.begin());
      REQUIRE(tree.first_max() == first_max);
      REQUIRE(tree.at(first_max) == plain[first_max]);
      REQUIRE(maxes.last_above(l, r, t) == last_above);
      REQUIRE(maxes.first_above(l, r, t) == first_above);
      REQUIRE(maxes.max(l, r) == mx);
      REQUIRE(maxes.first_max() == first_max);
      REQUIRE(maxes.at(first_max) == plain[first_max]);
    }
  }
}

TEST_CASE("stab_index finds exactly the windows containing a position, and the best of them")
{
  std::mt19937_64 rng(4);
  std::size_t const extent = 50;
  std::vector<std::pair<std::size_t, std::size_t>> windows(200);
  std::vector<double> score(windows.size());
  for (std::size_t i = 0; i < windows.size(); ++i) {
    auto a = rng() % extent, b = rng() % (extent + 1);
    if (a > b) { std::swap(a, b); }
    windows[i] = {a, b};
    score[i]   = static_cast<double>(rng() % 7);
  }
  std::vector<char> dead(windows.size(), 0);
  auto const keep = [&](std::size_t i) { return i % 5 != 0; };
  stash::detail::stab_index all(extent, windows, keep), best(extent, windows, keep);
  auto const less = [&](std::size_t x, std::size_t y) {
    return score[x] != score[y] ? score[x] > score[y] : x < y;
  };
  best.sort(less);
  auto const is_dead = [&](std::size_t i) { return dead[i] != 0; };
  for (int step = 0; step < 200; ++step) {
    auto const pos = rng() % extent;
    std::vector<std::size_t> expect, got;
    std::optional<std::size_t> top;
    for (std::size_t i = 0; i < windows.size(); ++i) {
      if (keep(i) && !dead[i] && windows[i].first <= pos && pos < windows[i].second) {
        expect.push_back(i);
        if (!top || less(i, *top)) { top = i; }
      }
    }
    all.for_each_at(pos, is_dead, [&](std::size_t i) { got.push_back(i); });
    std::sort(got.begin(), got.end());
    REQUIRE(got == expect);
    REQUIRE(best.best_at(pos, is_dead, less) == top);
    if (top) { dead[*top] = 1; }  // dead for good, as the planners' chosen gaps are
  }
}

TEST_CASE("area_sums gives the exact load x duration areas of a plain array under range adds")
{
  std::mt19937_64 rng(24);
  for (std::size_t n : {1U, 2U, 9U, 100U, 5000U}) {  // 5000: every level of its block sums
    CAPTURE(n);
    std::vector<double> seconds(n);
    std::vector<std::uint64_t> load(n);
    for (std::size_t i = 0; i < n; ++i) {
      seconds[i] = static_cast<double>(rng() % 1000) * 1e-6 + (i % 3 == 0 ? 0.0 : 1e-9);
      load[i]    = (rng() % 4 == 0) ? (std::uint64_t{1} << 62U) + rng() % 1000 : rng() % 5000;
    }
    stash::detail::area_sums sums(seconds, load);
    double total = 0;
    for (auto const d : seconds) { total += d; }
    REQUIRE(sums.duration(0, n) < std::uint64_t{1} << 63U);
    for (std::size_t i = 0; i < n; ++i) {  // each op's fixed-point duration is its own, closely
      auto const q = static_cast<double>(sums.duration(i, i + 1));
      REQUIRE(std::abs(sums.seconds(q) - seconds[i]) <= total * 0x1p-60);
    }
    using wide            = stash::detail::area_sums::wide;
    auto const plain_area = [&](std::size_t first, std::size_t last) {
      wide a = 0;
      for (auto i = first; i < last; ++i) {
        a += static_cast<wide>(load[i]) * sums.duration(i, i + 1);
      }
      return a;
    };
    for (int step = 0; step < 200; ++step) {
      auto a = rng() % (n + 1), b = rng() % (n + 1);
      if (a > b) { std::swap(a, b); }
      if (step % 2 == 0 && a < b) {  // lower or raise the load, never below 0
        auto lowest = load[a];
        for (auto i = a; i < b; ++i) { lowest = std::min(lowest, load[i]); }
        auto const d = static_cast<std::int64_t>(rng() % 3000) -
                       static_cast<std::int64_t>(std::min<std::uint64_t>(lowest, 1500));
        sums.add(a, b, d);
        for (auto i = a; i < b; ++i) {
          load[i] = static_cast<std::uint64_t>(static_cast<std::int64_t>(load[i]) + d);
        }
      }
      REQUIRE((sums.area(a, b) == plain_area(a, b)));
    }
    REQUIRE((sums.area(0, n) == plain_area(0, n)));
  }
}

TEST_CASE("deepen_trace stacks copies of a recorded network into one valid, deterministic trace")
{
  auto const base =
      stash::read_trace(stash::test::data_path("traces/transformer_encoder_b8.trace"));
  auto const deep = stash_tools::deepen_trace(base, 3);
  CHECK(deep.storages().size() == 3 * base.storages().size());
  CHECK(deep.ops().size() == 3 * base.ops().size());
  CHECK(stash_tools::copies_for(base, 10000) * base.storages().size() >= 10000);
  auto const again = stash_tools::deepen_trace(base, 3);
  CHECK(std::ranges::equal(deep.events(), again.events()));
  CHECK(std::ranges::equal(deep.storages(), again.storages()));
  // Copy 0's first activation lives from the first forward block to the last backward one.
  auto const life      = stash::analyze_lifetimes(deep);
  auto const base_life = stash::analyze_lifetimes(base);
  CHECK(life.peak_live_bytes > 2 * base_life.peak_live_bytes);
  CHECK(life.peak_live_bytes <= 3 * base_life.peak_live_bytes);
}

}  // namespace STASH_UNITY_ID
