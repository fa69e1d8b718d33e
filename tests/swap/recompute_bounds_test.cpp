// The bounds of swap_bounds.hpp against schedules that recompute: random valid recompute sets
// (with swaps beside them) on random traces of recomputable ops and on the two smallest recorded
// traces, and what checkpoint, dtr and search plan at several budgets. For each:
// memory_lower_bound_bytes <= the planned peak and the simulated peak, and
// iteration_time_lower_bound <= the simulated iteration time wherever it fits. Every time here
// is predicted by the cost model.
#include "support/data.hpp"

#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/checkpoint.hpp>
#include <stash/swap/dtr.hpp>
#include <stash/swap/joint_search.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using stash::storage_id;
using stash::storage_kind;

// A small random iteration of ops the default table lets re-run: parameters, then ops that each
// allocate an output (sometimes with a workspace), read one to three live storages, sometimes
// write one of them in place too, and sometimes free an earlier storage after them; a backward
// phase reads the activations again, as training does.
stash::trace random_trace(std::mt19937& rng, int ops)
{
  stash::trace t;
  auto pick  = [&](std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); };
  auto bytes = [&] { return std::uint64_t{100} * (1 + pick(9)); };
  std::vector<storage_id> live;
  for (std::uint32_t k = 0, n = 1 + pick(2); k < n; ++k) {
    live.push_back(t.add_alloc(bytes(), storage_kind::param, "w"));
  }
  t.add_phase(stash::phase::forward);
  char const* const names[] = {"aten::add.Tensor", "aten::mul.Tensor", "aten::relu", "my::op"};
  for (int i = 0; i < 2 * ops; ++i) {
    if (i == ops) { t.add_phase(stash::phase::backward); }
    std::optional<storage_id> ws;
    if (pick(3) == 0) { ws = t.add_alloc(bytes(), storage_kind::temp, "ws"); }
    auto const out = t.add_alloc(bytes(), pick(4) != 0 ? storage_kind::act : storage_kind::temp,
                                 "y" + std::to_string(i));
    if (ws) { t.add_free(*ws); }
    std::vector<storage_id> reads;
    for (std::uint32_t k = 0, n = 1 + pick(3); k < n; ++k) {
      reads.push_back(live[pick(static_cast<std::uint32_t>(live.size()))]);
    }
    std::vector<storage_id> writes{out};
    if (pick(6) == 0) { writes.push_back(reads.front()); }  // in place
    t.add_op(names[pick(10) == 0 ? 3 : pick(3)], reads, writes);
    live.push_back(out);
    if (live.size() > 4 && pick(3) == 0) {
      auto const k = 1 + pick(static_cast<std::uint32_t>(live.size() - 1));
      if (t.storages()[live[k]].kind != storage_kind::param) {
        t.add_free(live[k]);
        live.erase(live.begin() + k);
      }
    }
  }
  return t;
}

// A random valid schedule: each recomputable gap dropped with probability 1/2 (its re-run at a
// random op of the gap), each other gap of two ops or more swapped with probability 1/4; an
// entry that would make the schedule invalid is left out.
stash::schedule random_schedule(stash::trace_analysis const& a, std::mt19937& rng)
{
  std::vector<stash::swap_entry> swaps;
  std::vector<stash::recompute_entry> recomputes;
  for (auto const& s : a.lifetimes().storages) {
    for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
      auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
      auto const at = u + 1 + rng() % (v - u);
      auto trial_r  = recomputes;
      auto trial_s  = swaps;
      if (rng() % 2 == 0 && stash::recompute_chain_of(a, s.id, u, at).valid()) {
        trial_r.push_back({s.id, u, v, at, s.bytes});
        std::stable_sort(trial_r.begin(), trial_r.end(),
                         [](auto const& x, auto const& y) { return x.at < y.at; });
      } else if (v >= u + 2 && rng() % 4 == 0) {
        trial_s.push_back({s.id, u, v, u + 1, at == u + 1 ? v : at, s.bytes});
      } else {
        continue;
      }
      try {
        stash::validate_schedule(a, stash::make_schedule(a, "random", 0, trial_s, trial_r));
        swaps      = std::move(trial_s);
        recomputes = std::move(trial_r);
      } catch (stash::schedule_error const&) {  // this entry breaks a rule: left out
      }
    }
  }
  return stash::make_schedule(a, "random", 0, std::move(swaps), std::move(recomputes));
}

stash::cost_model model_of(char const* preset)
{
  return stash::cost_model(stash::hardware_preset(preset));
}

struct tally {
  int schedules = 0, recomputing = 0, fitting = 0;
};

// The checks of the file comment for `s`, planned for `s.budget` (0: its own planned peak); with
// `wrap`, the bounds of schedules that may also use wrap gaps (search plans wrap entries).
void check_bounds(stash::trace_analysis const& a, stash::schedule s, tally& n, bool wrap = false)
{
  auto const least = stash::memory_lower_bound_bytes(a, wrap);
  auto const scope = wrap ? stash::swap_scope::any_kind_wrap : stash::swap_scope::any_kind;
  stash::time_bound_options time_options;
  time_options.wrap = wrap;
  ++n.schedules;
  n.recomputing += s.recomputes.empty() ? 0 : 1;
  CHECK(least <= s.device_peak);
  auto const free_run = stash::simulate(a, s, {false, stash::sim_memory::unconstrained, false});
  CHECK(least <= free_run.device_peak);
  if (s.budget == 0) { s.budget = s.device_peak; }
  // Its own budget, then halfway down to the bound (memory stalls, or no fit).
  for (auto const budget : {s.budget, least + (std::max(s.budget, least) - least) / 2}) {
    CAPTURE(budget);
    s.budget     = budget;
    auto const r = stash::simulate(a, s, {false, stash::sim_memory::enforce_budget, false});
    if (!r.fits) { continue; }
    ++n.fitting;
    CHECK(budget >= least);
    // A recompute entry frees no more than the swap of its gap would (its storage is back
    // before op `at` takes its step, as a prefetch is): the bound is the any-kind swap bound.
    CHECK(r.device_peak >= stash::swap_bound_bytes(a, scope));
    CHECK(r.iteration_s >=
          stash::iteration_time_lower_bound(a, budget, time_options) * (1 - 1e-12));
    CHECK(r.device_peak >= least);
  }
}

}  // namespace

TEST_CASE("memory and time bounds hold for random schedules that recompute")
{
  std::mt19937 rng(2211);
  tally n;
  for (int round = 0; round < 120; ++round) {
    CAPTURE(round);
    auto const t = random_trace(rng, 3 + round % 6);
    stash::trace_analysis const a(t, model_of(round % 2 ? "pcie4_x16" : "h100_sxm"));
    for (int k = 0; k < 4; ++k) { check_bounds(a, random_schedule(a, rng), n); }
  }
  for (auto const* name : {"alexnet_b128", "vgg16_b32"}) {
    CAPTURE(name);
    auto const t =
        stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
    stash::trace_analysis const a(t, model_of("pcie4_x16"));
    for (int k = 0; k < 3; ++k) { check_bounds(a, random_schedule(a, rng), n); }
  }
  MESSAGE(n.schedules << " random schedules, " << n.recomputing << " with recomputes, " << n.fitting
                      << " fits at their planned peak or halfway below");
  CHECK(n.recomputing >= n.schedules * 3 / 4);
  CHECK(n.fitting >= n.schedules);
}

TEST_CASE("memory and time bounds hold for checkpoint, dtr and search at several budgets")
{
  std::mt19937 rng(77);
  tally n;
  auto plan_all = [&](stash::trace_analysis const& a, bool search) {
    auto const least = stash::memory_lower_bound_bytes(a);
    auto const peak  = a.peak_live_bytes();
    for (double const f : {0.2, 0.5, 0.8}) {
      auto const budget = least + static_cast<std::uint64_t>(f * static_cast<double>(peak - least));
      CAPTURE(budget);
      check_bounds(a, stash::checkpoint{}.plan(a, budget), n);
      check_bounds(a, stash::dtr{}.plan(a, budget), n);
      if (search) { check_bounds(a, stash::joint_search{}.plan(a, budget), n, true); }
    }
  };
  for (int round = 0; round < 25; ++round) {
    CAPTURE(round);
    auto const t = random_trace(rng, 4 + round % 5);
    stash::trace_analysis const a(t, model_of(round % 2 ? "pcie4_x16" : "h100_sxm"));
    plan_all(a, true);
  }
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::trace_analysis const a(t, model_of("pcie4_x16"));
  plan_all(a, false);
  MESSAGE(n.schedules << " planned schedules, " << n.recomputing << " with recomputes, "
                      << n.fitting << " fits at their budget or halfway below");
  CHECK(n.recomputing >= n.schedules / 3);  // 89 of 231 when written
  CHECK(n.fitting > 0);
}

}  // namespace STASH_UNITY_ID
