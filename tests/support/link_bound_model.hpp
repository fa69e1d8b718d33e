// The hand-trace cost model of the sim and swap tests: a slow link against fast, memory-bound
// ops, so that a few kB cross it in microseconds and a hand trace's swaps, re-runs and stalls
// are easy to reckon. Shared by tests/sim/recompute_test.cpp and tests/swap/{joint_greedy,
// joint_search,link_slots}_test.cpp, which each had a copy.
#pragma once

#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>

namespace stash::test {

// 1 GB/s each way over the link (no latency), `device_bytes_per_s` of device memory, ops timed
// by the bytes they touch alone (no FLOP count), no launch overhead.
inline cost_model link_bound_model(double device_bytes_per_s)
{
  hardware const hw{"link_bound", "test", 1e9, 1e9, 0.0, device_bytes_per_s, 1e12, 0.0, 1u << 30};
  cost_params p;
  p.memory_efficiency = 1.0;
  p.use_flops         = false;
  return cost_model(hw, p);
}

}  // namespace stash::test
