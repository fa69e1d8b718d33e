// Swap policies: vDNN's choices on a hand-made three-layer trace, and every policy on the five
// recorded traces (schedules validate, never raise the peak, and keep their promises).
#include "support/data.hpp"
#include "support/sweep_size.hpp"

#include <stash/core/error.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/swap/any_swap_policy.hpp>
#include <stash/swap/auto_swap.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/swap/swap_policy.hpp>
#include <stash/swap/vdnn.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/analysis.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <set>
#include <string>

namespace STASH_UNITY_ID {

static_assert(stash::swap_policy<stash::no_swap>);
static_assert(stash::swap_policy<stash::vdnn_all>);
static_assert(stash::swap_policy<stash::vdnn_conv>);
static_assert(stash::swap_policy<stash::vdnn_dyn>);
static_assert(stash::swap_policy<stash::auto_swap>);
static_assert(stash::swap_policy<stash::any_swap_policy>);
static_assert(!stash::swap_policy<int>);

namespace {

// conv (op0, X = x) -> relu_ (op1, in place: no layer) -> pool (op2, X = y0) -> conv (op3,
// X = y1); backward needs y1 at op5, y0 at op6, x at op7.
std::string const layers = R"(# stash-trace v1 model=three dtype=float32
t 0 100 param w0
t 1 100 param w1
t 2 1000 input x
p forward
t 3 2000 act y0
o aten::convolution 2,0 3
o aten::relu_ 3 3
t 4 2000 act y1
o aten::max_pool2d 3 4
t 5 500 act y2
o aten::convolution 4,1 5
p backward
t 6 500 temp g2
o aten::ones_like 5 6
t 7 2000 temp g1
o aten::convolution_backward 6,4,1 7
f 6
t 8 2000 temp g0
o aten::max_pool2d_backward 7,3 8
f 7
f 4
t 9 1000 temp gx
o aten::convolution_backward 8,2,0 9
f 8
f 3
f 9
f 5
)";

stash::cost_model const pcie3(stash::hardware_preset("pcie3_x16"));

stash::swap_entry const* find(stash::schedule const& s, stash::storage_id id)
{
  for (auto const& e : s.entries) {
    if (e.id == id) { return &e; }
  }
  return nullptr;
}

}  // namespace

TEST_CASE("vdnn_all offloads every layer input and prefetches one layer ahead")
{
  auto const t = stash::parse_trace(layers, "three");
  auto const s = stash::vdnn_all{}.plan(stash::trace_analysis(t, pcie3), 0);
  CHECK_NOTHROW(stash::validate_schedule(stash::test::analysis_of(t), s));
  REQUIRE(s.entries.size() == 3);
  auto const* x  = find(s, 2);
  auto const* y0 = find(s, 3);
  auto const* y1 = find(s, 4);
  REQUIRE((x && y0 && y1));
  // Offloads start with the layer that reads the map (it only reads it).
  CHECK(x->offload_at == 0);
  CHECK(y0->offload_at == 2);
  CHECK(y1->offload_at == 3);
  CHECK((x->last_use == 0 && x->next_use == 7));
  CHECK((y0->last_use == 2 && y0->next_use == 6));
  // Backward of the last layer (op5): its own y1 on demand, plus the next layer down, y0.
  CHECK(y1->prefetch_at == 5);
  CHECK(y0->prefetch_at == 5);
  // Backward of the pool layer (op6) fetches x.
  CHECK(x->prefetch_at == 6);
  // At the last forward op x and y0 are gone (y1 is still being read): 5700 - 1000 - 2000.
  auto const curve = stash::planned_device_curve(stash::test::analysis_of(t), s.entries);
  std::uint64_t const last_forward_op_event = 10;
  REQUIRE(t.events()[last_forward_op_event].kind == stash::event_kind::op);
  REQUIRE(t.events()[last_forward_op_event].index == 3);
  CHECK(curve[last_forward_op_event] == 2700);
  // The peak (before op6) needs y0 and, prefetched one layer ahead, x: no lower than without.
  CHECK(s.device_peak == s.baseline_peak);
}

TEST_CASE("vdnn_conv offloads conv inputs only and prefetches past non-conv layers")
{
  auto const t = stash::parse_trace(layers, "three");
  auto const s = stash::vdnn_conv{}.plan(stash::trace_analysis(t, pcie3), 0);
  CHECK_NOTHROW(stash::validate_schedule(stash::test::analysis_of(t), s));
  REQUIRE(s.entries.size() == 2);
  REQUIRE(find(s, 2) != nullptr);
  REQUIRE(find(s, 4) != nullptr);
  CHECK(find(s, 3) == nullptr);
  // The search from the last conv skips the pool layer (not offloaded, not a conv) and finds x.
  CHECK(find(s, 2)->prefetch_at == 5);
  CHECK(find(s, 4)->prefetch_at == 5);
}

TEST_CASE("vdnn offloads a map written in place after its layer, with one op left for the copy")
{
  // x (act) is read by the conv layer op0, then written in place by op1 (not a layer: it writes
  // what it reads), and read again in backward at op3. vDNN issues the offload after that last
  // forward write, at op2, the one op before the next use: the prefetch at op3 still comes after
  // it, so the entry is kept (offload_at 2 < prefetch_at 3).
  std::string const in_place = R"(# stash-trace v1 model=in_place dtype=float32
t 0 100 param w
t 1 1000 act x
p forward
t 2 2000 act y
o aten::convolution 1,0 2
o aten::mul_ 1 1
t 3 500 act z
o aten::convolution 2,0 3
p backward
t 4 500 temp g
o aten::convolution_backward 3,1,0 4
f 4
f 3
f 2
f 1
)";
  auto const t               = stash::parse_trace(in_place, "in_place");
  auto const s               = stash::vdnn_all{}.plan(stash::trace_analysis(t, pcie3), 0);
  CHECK_NOTHROW(stash::validate_schedule(stash::test::analysis_of(t), s));
  auto const* x = find(s, 1);
  REQUIRE(x != nullptr);
  CHECK(x->last_use == 1);
  CHECK(x->next_use == 3);
  CHECK(x->offload_at == 2);
  CHECK(x->prefetch_at == 3);
}

TEST_CASE("a trace without phase markers has no vDNN layers")
{
  auto const t = stash::parse_trace(
      "# stash-trace v1\nt 0 10 input x\nt 1 10 act y\no aten::convolution 0 1\no aten::relu 1 1\n",
      "flat");
  CHECK(stash::vdnn_all{}.plan(stash::trace_analysis(t, pcie3), 0).entries.empty());
}

TEST_CASE("policies are found by name at run time")
{
  auto const names = stash::swap_policy_names();
  std::set<std::string> const got(names.begin(), names.end());
  for (auto const* n : {"no_swap", "vdnn_all", "vdnn_conv", "vdnn_dyn", "auto_swap",
                        "auto_swap_doa", "auto_swap_aoa", "auto_swap_wdoa"}) {
    CHECK(got.count(n) == 1);
  }
  auto const t = stash::parse_trace(layers, "three");
  CHECK(stash::plan_by_name("vdnn_all", stash::trace_analysis(t, pcie3), 0).entries ==
        stash::vdnn_all{}.plan(stash::trace_analysis(t, pcie3), 0).entries);
  CHECK_THROWS_WITH_AS((void)stash::plan_by_name("vdnn_some", stash::trace_analysis(t, pcie3), 0),
                       doctest::Contains("unknown swap policy 'vdnn_some' (known: no_swap"),
                       stash::logic_error);
}

TEST_CASE("every policy on every recorded trace")
{
  int auto_swap_fits = 0;
  std::array<char const*, 5> const names{"alexnet_b128", "resnet18_b32", "vgg16_b32",
                                         "mobilenet_v2_b32", "transformer_encoder_b8"};
  for (int n = 0; n < stash::test::sweep_size(5, 2); ++n) {
    auto const* name = names[static_cast<std::size_t>(n)];
    CAPTURE(name);
    auto const t =
        stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
    auto const baseline = stash::no_swap{}.plan(stash::trace_analysis(t, pcie3), 0);
    CHECK(baseline.entries.empty());
    auto const budget = baseline.baseline_peak / 10 * 8;  // 80% of the no-swap peak

    for (auto const policy : stash::swap_policy_names()) {
      CAPTURE(policy);
      auto const s = stash::plan_by_name(policy, stash::trace_analysis(t, pcie3), budget);
      CHECK(s.policy == policy);
      CHECK(s.budget == budget);
      CHECK_NOTHROW(stash::validate_schedule(stash::test::analysis_of(t), s));
      CHECK(s.device_peak <= s.baseline_peak);
      // The model's bookkeeping, whatever the budget: with the budget lifted every schedule runs.
      auto const sim = stash::simulate(stash::trace_analysis(t, pcie3), s,
                                       stash::sim_options{false, stash::sim_memory::unconstrained});
      CHECK(sim.device_peak <= s.baseline_peak);
      CHECK(sim.stall_s >= 0.0);
      CHECK(sim.d2h_bytes == s.offloaded_bytes());
      CHECK(sim.iteration_s == doctest::Approx(sim.compute_s + sim.stall_s + sim.recompute_s));
    }

    auto const all  = stash::vdnn_all{}.plan(stash::trace_analysis(t, pcie3), budget);
    auto const conv = stash::vdnn_conv{}.plan(stash::trace_analysis(t, pcie3), budget);
    CHECK(all.offloaded_bytes() >= conv.offloaded_bytes());
    for (auto const& e : conv.entries) { CHECK(find(all, e.id) != nullptr); }

    auto const dyn      = stash::vdnn_dyn{}.plan(stash::trace_analysis(t, pcie3), budget);
    bool const any_fits = baseline.device_peak <= budget || conv.fits() || all.fits();
    CHECK(dyn.fits() == any_fits);
    CHECK((dyn.entries == baseline.entries || dyn.entries == conv.entries ||
           dyn.entries == all.entries));

    auto const as = stash::auto_swap{}.plan(stash::trace_analysis(t, pcie3), budget);
    if (as.fits()) {
      ++auto_swap_fits;
      CHECK(as.device_peak <= budget);
      CHECK(as.note.empty());
    } else {
      CHECK(as.note.find("cannot reach the budget") != std::string::npos);
    }
    for (auto const& e : as.entries) { CHECK(e.offload_at == e.last_use + 1); }
    // A generous budget needs no swapping at all.
    CHECK(stash::auto_swap{}
              .plan(stash::trace_analysis(t, pcie3), baseline.baseline_peak)
              .entries.empty());
  }
  CHECK(auto_swap_fits > 0);
}

}  // namespace STASH_UNITY_ID
