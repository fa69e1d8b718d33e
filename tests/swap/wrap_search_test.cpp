// search_swap and search with wrap entries (search_swap::wrap, joint_search::wrap): persistent
// storages off the device across the iteration boundary, planned only when asked (search_swap)
// or needed (search; and, where swapping activations alone cannot make room, as options). Every
// time here is predicted by the cost model.
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/joint_search.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/wrap_trace.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

stash::search_swap wrapping()
{
  stash::search_swap p;
  p.wrap = true;
  return p;
}

stash::cost_model pcie3() { return stash::cost_model(stash::hardware_preset("pcie3_x16")); }

// A training step of `layers` layers as a CPU loop records it: per layer a parameter, a
// gradient buffer and a momentum buffer (allocated before the first op; with
// `grads_in_backward` the gradient is allocated where backward writes it and freed after the
// optimizer's update, as PyTorch's zero_grad(set_to_none=True) leaves it); forward writes an
// activation per layer, backward reads it and the parameter and writes the gradient, the
// optimizer reads the gradient and updates the parameter and the momentum in place.
stash::trace training_step(int layers, std::uint64_t param_bytes, std::uint64_t act_bytes,
                           bool grads_in_backward = false)
{
  stash::trace t;
  std::vector<stash::storage_id> w, g(static_cast<std::size_t>(layers)), m, act;
  for (int l = 0; l < layers; ++l) {
    w.push_back(t.add_alloc(param_bytes, stash::storage_kind::param, "w" + std::to_string(l)));
    if (!grads_in_backward) {
      g[static_cast<std::size_t>(l)] =
          t.add_alloc(param_bytes, stash::storage_kind::grad, "g" + std::to_string(l));
    }
    m.push_back(t.add_alloc(param_bytes, stash::storage_kind::optstate, "m" + std::to_string(l)));
  }
  t.add_phase(stash::phase::forward);
  auto x = t.add_alloc(act_bytes, stash::storage_kind::input, "x");
  act.push_back(x);
  for (int l = 0; l < layers; ++l) {
    auto const y = t.add_alloc(act_bytes, stash::storage_kind::act, "y" + std::to_string(l));
    t.add_op("aten::linear", {act.back(), w[l]}, {y});
    act.push_back(y);
  }
  t.add_phase(stash::phase::backward);
  auto dy = t.add_alloc(act_bytes, stash::storage_kind::temp, "dy");
  t.add_op("aten::fill_", {act.back()}, {dy});
  for (int l = layers - 1; l >= 0; --l) {
    auto const dx = t.add_alloc(act_bytes, stash::storage_kind::temp, "dx" + std::to_string(l));
    auto const li = static_cast<std::size_t>(l);
    if (grads_in_backward) {
      g[li] = t.add_alloc(param_bytes, stash::storage_kind::grad, "g" + std::to_string(l));
    }
    t.add_op("aten::linear_backward", {dy, act[li], w[li]}, {dx, g[li]});
    t.add_free(dy);
    t.add_free(act[l + 1]);
    dy = dx;
  }
  t.add_free(dy);
  t.add_free(act[0]);
  t.add_phase(stash::phase::optimizer);
  for (std::size_t l = 0; l < w.size(); ++l) {
    t.add_op("aten::add_", {g[l], m[l], w[l]}, {w[l], m[l]});
    if (grads_in_backward) { t.add_free(g[l]); }
  }
  return t;
}

}  // namespace

TEST_CASE("search_swap plans a wrap entry only when asked, and then fits where nothing else can")
{
  auto const t = stash::parse_trace(stash::test::wrap_trace_text, "wrap");
  stash::trace_analysis const a(t, pcie3());
  // Without wraps 9000 B is the least (op1: 13000 B less w's gap); m has no gap of its own.
  REQUIRE(stash::swap_bound_bytes(a, stash::swap_scope::any_kind) == 9000);
  REQUIRE(stash::swap_bound_bytes(a, stash::swap_scope::any_kind_wrap) == 7000);
  auto const off = stash::search_swap{}.plan(a, 8000);
  CHECK_FALSE(off.fits());
  CHECK(std::none_of(off.entries.begin(), off.entries.end(),
                     [](stash::swap_entry const& e) { return e.wrap; }));
  auto const on = wrapping().plan(a, 8000);
  stash::validate_schedule(a, on);
  CHECK(on.fits());
  CHECK(on.note.starts_with("variant_wrap"));
  CHECK(std::any_of(on.entries.begin(), on.entries.end(),
                    [](stash::swap_entry const& e) { return e.wrap && e.id == 1; }));
  CHECK(stash::simulate(a, on).fits);
}

TEST_CASE(
    "search plans wrap entries (joint_search::wrap): the wrap trace fits 8000 B only with them")
{
  auto const t = stash::parse_trace(stash::test::wrap_trace_text, "wrap");
  stash::trace_analysis const a(t, pcie3());
  // Neither swapping nor recomputing inside the iteration takes m off op1 (it has no gap there).
  REQUIRE(stash::memory_lower_bound_bytes(a) > 8000);
  REQUIRE(stash::memory_lower_bound_bytes(a, true) <= 8000);
  stash::joint_search no_wraps;
  no_wraps.wrap  = false;
  auto const off = no_wraps.plan(a, 8000);
  CHECK_FALSE(off.fits());
  auto const on = stash::joint_search{}.plan(a, 8000);
  stash::validate_schedule(a, on);
  CHECK(on.fits());
  CHECK(std::any_of(on.entries.begin(), on.entries.end(),
                    [](stash::swap_entry const& e) { return e.wrap && e.id == 1; }));
  auto const r = stash::simulate(a, on, {false, stash::sim_memory::enforce_budget, false});
  CHECK(r.fits);
  // Where no wrap is needed and swapping activations alone can make room, search plans none
  // (its schedules there are those it planned before wraps), and with also_any_kind off it plans
  // none at all.
  auto const roomy = stash::joint_search{}.plan(a, 12000);
  CHECK(roomy.fits());
  CHECK(std::none_of(roomy.entries.begin(), roomy.entries.end(),
                     [](stash::swap_entry const& e) { return e.wrap; }));
  stash::joint_search act_only_planner;
  act_only_planner.also_any_kind = false;
  auto const act_only            = act_only_planner.plan(a, 8000);
  CHECK(std::none_of(act_only.entries.begin(), act_only.entries.end(),
                     [](stash::swap_entry const& e) { return e.wrap; }));
}

TEST_CASE("with wrap entries search_swap fits below the any-kind swap bound of a training step")
{
  auto const t = training_step(6, 4u << 20, 1u << 20);
  stash::trace_analysis const a(t, pcie3());
  auto const inner = stash::swap_bound_bytes(a, stash::swap_scope::any_kind);
  auto const wrap  = stash::swap_bound_bytes(a, stash::swap_scope::any_kind_wrap);
  auto const peak  = a.peak_live_bytes();
  CAPTURE(peak);
  CAPTURE(inner);
  CAPTURE(wrap);
  REQUIRE(wrap < inner);  // the momentum buffers have no gap inside the step
  int below_inner = 0;
  for (int pct : {90, 70, 50, 40, 30}) {
    auto const budget = peak / 100 * static_cast<std::uint64_t>(pct);
    CAPTURE(pct);
    auto const without = stash::search_swap{}.plan(a, budget);
    auto const with    = wrapping().plan(a, budget);
    stash::validate_schedule(a, with);
    auto const r = stash::simulate(a, with);
    if (without.fits()) {  // never lose a fit; never slower (the wrap variants only add options)
      auto const r0 = stash::simulate(a, without);
      CHECK(r.fits);
      CHECK(r.iteration_s <= r0.iteration_s * 1.005);
    }
    if (budget < inner && budget >= wrap) {
      CHECK(r.fits);
      below_inner += r.fits ? 1 : 0;
    }
  }
  CHECK(below_inner > 0);
}

TEST_CASE(
    "search wraps optimizer state where no wrap is needed but activations alone cannot make room")
{
  // Gradients live from backward to the optimizer, so the weights' gaps inside the step make
  // room down to the any-kind swap bound without wraps; the momentum buffers, read once per
  // step, can only leave across the iteration boundary.
  auto const t = training_step(6, 4u << 20, 2u << 20, true);
  stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset("pcie4_x16")));
  auto const act_bound = stash::swap_bound_bytes(a, stash::swap_scope::activations);
  auto const peak      = a.peak_live_bytes();
  CAPTURE(peak);
  CAPTURE(act_bound);
  stash::joint_search no_wraps;
  no_wraps.wrap  = false;
  int checked    = 0;
  int wrap_gains = 0;
  for (int pct : {95, 85, 75}) {
    auto const budget = peak / 100 * static_cast<std::uint64_t>(pct);
    CAPTURE(pct);
    REQUIRE(budget < act_bound);
    auto const off = no_wraps.plan(a, budget);
    REQUIRE(off.fits());  // no wrap is needed at this budget
    auto const on = stash::joint_search{}.plan(a, budget);
    stash::validate_schedule(a, on);
    auto const r0 = stash::simulate(a, off, {false});
    auto const r1 = stash::simulate(a, on, {false});
    REQUIRE(r0.fits);
    CHECK(r1.fits);
    CHECK(r1.iteration_s <= r0.iteration_s * 1.005);
    ++checked;
    bool const wraps_momentum =
        std::any_of(on.entries.begin(), on.entries.end(), [&](auto const& e) {
          return e.wrap && t.storages()[e.id].kind == stash::storage_kind::optstate;
        });
    if (wraps_momentum && r1.iteration_s < r0.iteration_s * 0.9) { ++wrap_gains; }
  }
  CHECK(checked == 3);
  CHECK(wrap_gains > 0);  // momentum off across the boundary beats weights crossing twice
}

}  // namespace STASH_UNITY_ID
