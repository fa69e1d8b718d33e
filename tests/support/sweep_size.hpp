// How much of a result check a test executable runs. A property checked by brute force or over
// every recorded trace checks results, not memory safety: stash_sweep_tests (plain -O2, built
// with STASH_TEST_FULL_SWEEP) runs all of it, stash_tests (ASan + UBSan at -O0 in the test preset)
// a leading part of the same loop (the same seeds, the same first rounds), so the sanitizers
// still see the code at a fraction of the time (CONTRIBUTING.md "CI").
#pragma once

#include <cstdint>

namespace stash::test {

#ifdef STASH_TEST_FULL_SWEEP
inline constexpr bool full_sweep = true;
#else
inline constexpr bool full_sweep = false;
#endif

/// @brief `full` in stash_sweep_tests, `sample` in stash_tests.
/// @param full The whole sweep's size (rounds, traces, ...).
/// @param sample The part stash_tests runs.
constexpr int sweep_size(int full, int sample) { return full_sweep ? full : sample; }

/// @brief Whether a walk over points 0, 1, 2, ... (failure points, allocations) visits point `k`:
/// every point in stash_sweep_tests; in stash_tests the first `lead` (where pools grow and first
/// uses happen) and then every `stride`-th.
/// @param k The point.
/// @param lead How many leading points stash_tests visits.
/// @param stride The stride after them (prime to the short periods of a step's calls).
constexpr bool sweep_visits(std::uint64_t k, std::uint64_t lead, std::uint64_t stride)
{
  return full_sweep || k < lead || k % stride == 0;
}

}  // namespace stash::test
