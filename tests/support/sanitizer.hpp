// Test sizes under the sanitizers. The asan and tsan presets run the suite 3-10x slower than a
// plain build (scripts/sanitize.sh): the few sweeps whose points repeat the same code over more
// inputs (budgets, traces, hardware presets) check a sample there. The test preset builds
// stash_tests under ASan + UBSan with STASH_SANITIZER_BUILD=0: every point, as CI runs it. What a
// sanitizer looks for (a bad access, a race) is in the code each point runs, not in how many
// points there are; every assertion stays as it is.
#pragma once

#include <cstddef>

// GCC defines __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__; clang answers __has_feature. Defining
// STASH_SANITIZER_BUILD=0 runs the full sweeps under a sanitizer too.
#ifndef STASH_SANITIZER_BUILD
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STASH_SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STASH_SANITIZER_BUILD 1
#endif
#endif
#endif
#ifndef STASH_SANITIZER_BUILD
#define STASH_SANITIZER_BUILD 0
#endif

namespace stash::test {

/// True in a build under ASan or TSan (STASH_SANITIZER_BUILD).
inline constexpr bool sanitizer_build = STASH_SANITIZER_BUILD != 0;

/// Whether point `index` of a sweep is checked: every point in the test preset, every `stride`-th
/// (the first included) under a sanitizer.
/// @param index The point's position in the sweep.
/// @param stride Under a sanitizer, one point in `stride` is checked.
/// @return True when the point is checked in this build.
constexpr bool sampled(std::size_t index, std::size_t stride)
{
  return !sanitizer_build || stride <= 1 || index % stride == 0;
}

}  // namespace stash::test
