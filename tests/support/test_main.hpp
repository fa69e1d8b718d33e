// The doctest main shared by stash_tests, stash_gpu_tests and the other test executables (compiled
// by the host compiler: nothing in it is device code).
//
// `--require-gpu` (consumed here, not passed to doctest) marks a run that needs a CUDA device:
// without one it prints why and exits with 77, which ctest reports as "skipped" (SKIP_RETURN_CODE).
#pragma once

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <stash/core/device.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

namespace stash::test {

/// Exit code ctest treats as "skipped".
inline constexpr int skip_exit_code = 77;

inline int run_tests(int argc, char** argv)
{
  std::vector<char*> args;
  bool require_gpu = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--require-gpu") == 0) {
      require_gpu = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  if (require_gpu && !stash::gpu_available()) {
    std::printf("SKIPPED: these tests need a CUDA device and none is usable here (%s)\n",
                stash::no_gpu_reason().c_str());
    return skip_exit_code;
  }
  doctest::Context context;
  context.applyCommandLine(static_cast<int>(args.size()), args.data());
  return context.run();
}

}  // namespace stash::test
