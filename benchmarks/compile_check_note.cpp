// Linked into every benchmark built with STASH_BENCHMARKS_COMPILE_CHECK (the test preset, which
// builds them at -O0 only to check that they compile): a note on stderr before main runs, so that
// no time measured by such a build is taken for a figure.
#include <cstdio>

namespace {

struct compile_check_note {
  compile_check_note()
  {
    std::fputs(
        "note: this benchmark was built unoptimized (-O0, STASH_BENCHMARKS_COMPILE_CHECK: "
        "the test preset checks that it compiles); its times are not figures: build it "
        "with the default preset (cmake --preset default)\n",
        stderr);
  }
};

compile_check_note const note;

}  // namespace
