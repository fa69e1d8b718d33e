// search's latency-bound swap drops (swap/detail/latency_swaps.hpp) on a hand trace: four 100 B
// parameters swapped from the forward to the optimizer make room for the temporary w, each
// paying the link's 10 us per copy; dropped, the greedy covers the same bytes with swaps of the
// 1000 B input and activation (two copies each way instead of four), and the simulation says
// faster.
#include <stash/sim/hardware.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/swap/detail/joint_greedy.hpp>
#include <stash/swap/detail/latency_swaps.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// p0-p3 are read by op 0 and updated by ops 4-7; w (ops 1-2) is the forward's peak.
std::string const small = R"(# stash-trace v1 model=small dtype=float32
t 0 100 param p0
t 1 100 param p1
t 2 100 param p2
t 3 100 param p3
t 4 1000 input x
p forward
t 5 1000 act a
o my::fwd 0,1,2,3,4 5
t 6 4000 temp w
o my::fwd 5 6
o my::fwd 6 6
f 6
p backward
o my::bwd 4,5 5
f 4
f 5
p optimizer
o my::opt 0 0
o my::opt 1 1
o my::opt 2 2
o my::opt 3 3
)";

// 1 GB/s each way with 10 us per copy (the presets' latency), 1 GB/s of device memory.
stash::cost_model latency_model()
{
  stash::hardware const hw{"latency", "test", 1e9, 1e9, 10e-6, 1e9, 1e12, 0.0, 1u << 30};
  stash::cost_params p;
  p.memory_efficiency = 1.0;
  p.use_flops         = false;
  return stash::cost_model(hw, p);
}

}  // namespace

TEST_CASE("swaps of small storages are dropped and their bytes covered by fewer, larger swaps")
{
  auto const t = stash::parse_trace(small, "small");
  stash::trace_analysis const a(t, latency_model());
  std::uint64_t const budget = 6000;  // 6400 B live at ops 1-2
  // Each parameter away from op 0 to its update, prefetched right before it.
  std::vector<stash::swap_entry> sw;
  for (stash::storage_id p = 0; p < 4; ++p) { sw.push_back({p, 0, 4 + p, 1, 3 + p, 100}); }
  auto const before = stash::make_schedule(a, "params", budget, sw, {});
  REQUIRE(before.device_peak <= budget);
  auto const slow = stash::simulate(a, before);
  REQUIRE(slow.fits);

  stash::detail::joint_greedy const greedy(a);
  std::vector<std::pair<std::vector<stash::swap_entry>, std::vector<stash::recompute_entry>>>
      offered;
  auto offer = [&](std::vector<stash::swap_entry> s, std::vector<stash::recompute_entry> r) {
    offered.emplace_back(std::move(s), std::move(r));
    return false;
  };
  CHECK_FALSE(stash::detail::drop_latency_swaps(a, budget, greedy, sw, {}, {}, offer));
  // Every tier drops all four (0.1 us of wire time against 10 us of latency): one offer.
  REQUIRE(offered.size() == 1);
  auto const& [swaps, rcs] = offered.front();
  CHECK(std::none_of(swaps.begin(), swaps.end(), [](auto const& e) { return e.id < 4; }));
  // x away over op 1 and a over op 2 (the nominal timeline brings x back for op 3 at op 2).
  CHECK(swaps.size() < sw.size());
  CHECK(std::all_of(swaps.begin(), swaps.end(), [](auto const& e) { return e.bytes == 1000; }));
  auto const after = stash::make_schedule(a, "input", budget, swaps, rcs);
  CHECK_NOTHROW(stash::validate_schedule(a, after));
  CHECK(after.device_peak <= budget);
  auto const fast = stash::simulate(a, after);
  REQUIRE(fast.fits);
  CHECK(fast.iteration_s < slow.iteration_s);

  // A wrap, a redrop and an entry whose host copy a redrop reuses stay.
  std::vector<stash::swap_entry> pinned{{0, 0, 4, 1, 3, 100}};
  pinned[0].wrap = true;
  CHECK_FALSE(stash::detail::droppable_swaps(pinned)[0]);
  std::vector<stash::swap_entry> chain{{4, 0, 1, 1, 1, 1000}, {4, 1, 3, 1, 2, 1000}};
  chain[1].redrop = true;
  CHECK(stash::detail::droppable_swaps(chain) == std::vector<bool>{false, false});
  CHECK(stash::detail::droppable_swaps(sw) == std::vector<bool>(4, true));
}

TEST_CASE("a tier drops the swaps whose wire time, less the link latency, is that share of it")
{
  // Each parameter's copy is 10 us of latency and 0.1 us on the wire: 1/100 of the latency, so
  // a single tier of 1/32 drops all four (one offer), and a tier of 1/200 none (no offer).
  auto const t = stash::parse_trace(small, "small");
  stash::trace_analysis const a(t, latency_model());
  std::vector<stash::swap_entry> sw;
  for (stash::storage_id p = 0; p < 4; ++p) { sw.push_back({p, 0, 4 + p, 1, 3 + p, 100}); }
  stash::detail::joint_greedy const greedy(a);
  std::size_t offers = 0;
  auto offer         = [&](std::vector<stash::swap_entry> const& s,
                   std::vector<stash::recompute_entry> const&) {
    ++offers;
    CHECK(std::none_of(s.begin(), s.end(), [](auto const& e) { return e.id < 4; }));
    return false;
  };
  stash::detail::latency_swap_limits tight;
  tight.shares = {1.0 / 32, 1.0 / 32, 1.0 / 32, 1.0 / 32};
  CHECK_FALSE(stash::detail::drop_latency_swaps(a, 6000, greedy, sw, {}, tight, offer));
  CHECK(offers == 1);
  tight.shares = {1.0 / 200, 1.0 / 200, 1.0 / 200, 1.0 / 200};
  offers       = 0;
  CHECK_FALSE(stash::detail::drop_latency_swaps(a, 6000, greedy, sw, {}, tight, offer));
  CHECK(offers == 0);
}

}  // namespace STASH_UNITY_ID
