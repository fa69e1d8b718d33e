// stash_torch_alloc_smoke: drives libstash_torch_alloc through its C header only, the way
// PyTorch and ctypes do. With a GPU it runs a few arena "steps" of device allocations; without
// one it checks that stash_malloc returns nullptr and says why. Exit 0 when every check holds.
#include "stash_torch_alloc.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

namespace {

int failures = 0;

void check(bool ok, char const* what)
{
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

bool last_error_contains(char const* needle)
{
  char buffer[1024];
  (void)stash_last_error(buffer, sizeof(buffer));
  return std::strstr(buffer, needle) != nullptr;
}

bool has_device()
{
  int count     = 0;
  bool const ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  return ok;
}

// One training step, identical each time: eight blocks allocated, written and freed in reverse.
bool run_step()
{
  constexpr int blocks = 8;
  void* p[blocks]      = {};
  ssize_t sizes[blocks];
  bool ok = true;
  for (int i = 0; i < blocks; ++i) {
    sizes[i] = static_cast<ssize_t>(1 << 20) * (i + 1);  // the same every step
    p[i]     = stash_malloc(sizes[i], 0, nullptr);
    ok       = ok && p[i] != nullptr &&
         cudaMemset(p[i], i, static_cast<std::size_t>(sizes[i])) == cudaSuccess;
  }
  for (int i = blocks - 1; i >= 0; --i) { stash_free(p[i], sizes[i], 0, nullptr); }
  return ok && cudaDeviceSynchronize() == cudaSuccess;
}

}  // namespace

int main()
{
  stash_torch_stats s{};
  check(stash_stats(nullptr) == -1, "stash_stats(nullptr) fails");
  check(last_error_contains("null"), "stash_stats(nullptr) says why");
  check(stash_configure("no-such-pool", 0) == -1, "an unknown pool name is refused");
  check(last_error_contains("no-such-pool"), "the refusal names the bad value");
  check(stash_configure("arena", 0) == 0, "stash_configure(\"arena\", 0) succeeds");
  check(stash_stats(&s) == 0 && s.pool == STASH_TORCH_POOL_NONE && s.device == -1,
        "no pool before the first allocation");

  if (!has_device()) {
    void* const p = stash_malloc(1 << 20, 0, nullptr);
    check(p == nullptr, "stash_malloc returns nullptr without a device");
    check(last_error_contains("no usable CUDA device"), "stash_malloc says why");
    check(stash_stats(&s) == 0 && s.failed_allocations == 1 && s.allocations == 0,
          "the failed allocation is counted");
    stash_free(reinterpret_cast<void*>(0x1000), 64, 0, nullptr);  // must not crash
    check(last_error_contains("not stash's"), "freeing an unknown pointer is reported");
    std::printf("stash_torch_alloc_smoke: no CUDA device; the entry points fail cleanly (%s)\n",
                failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
  }

  constexpr int steps = 4;
  for (int step = 0; step < steps; ++step) {
    check(stash_begin_iteration() == 0, "stash_begin_iteration");
    check(run_step(), "a step's device allocations are usable");
    check(stash_end_iteration() == 0, "stash_end_iteration");
  }
  check(stash_end_iteration() == -1, "an unmatched stash_end_iteration is refused");
  check(stash_configure("caching", 0) == -1, "configuring after the first allocation is refused");
  check(stash_stats(&s) == 0, "stash_stats");
  check(s.pool == STASH_TORCH_POOL_ARENA && s.device == 0, "the arena serves device 0");
  check(s.in_use_bytes == 0, "everything was freed");
  check(s.iterations == steps, "every step was counted");
  check(s.allocations == 8 * steps, "every allocation was counted");
  check(s.arena_bytes > 0, "the arena planned after the first step");
  check(s.fallbacks == 0, "identical steps replay from the plan");
  check(s.peak_in_use_bytes <= s.peak_reserved_bytes, "peak in use <= peak reserved");
  check(stash_malloc(-1, 0, nullptr) == nullptr && last_error_contains("negative size"),
        "a negative size is refused");
  std::printf(
      "stash_torch_alloc_smoke: %d steps on device 0, peak reserved %llu B, arena %llu B, "
      "fallbacks %llu (%s)\n",
      steps, static_cast<unsigned long long>(s.peak_reserved_bytes),
      static_cast<unsigned long long>(s.arena_bytes), static_cast<unsigned long long>(s.fallbacks),
      failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
