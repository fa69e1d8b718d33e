// libstash_torch_alloc: the C entry points of stash_torch_alloc.h over one process-wide
// allocator_state on device memory. All logic lives in
// stash_tools/pytorch_allocator/allocator_state.hpp (tested on the host); this file only owns the
// instance and forwards.
#include "stash_torch_alloc.h"
#include <stash_tools/pytorch_allocator/allocator_state.hpp>

#include <stash/core/device_upstream.hpp>

#include <cstdio>
#include <exception>

// train_torchvision.py mirrors stash_torch_stats with ctypes: ten uint64_t then two int32_t.
static_assert(sizeof(stash_torch_stats) == 10 * sizeof(uint64_t) + 2 * sizeof(int32_t),
              "stash_torch_stats changed: update StashStats in train_torchvision.py");

namespace {

using device_state = stash::torch_alloc::allocator_state<stash::device_upstream>;

device_state* make_state() noexcept
{
  try {
    return new device_state();
  } catch (std::exception const& e) {
    std::fprintf(stderr, "stash_torch_alloc: cannot create the allocator state: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "stash_torch_alloc: cannot create the allocator state\n");
  }
  return nullptr;
}

// Deliberately never destroyed: PyTorch frees tensors during interpreter shutdown, after this
// library's static destructors would have run, and by then the CUDA runtime may be unloading.
// The driver reclaims the device memory when the process exits.
device_state* state() noexcept
{
  static device_state* const instance = make_state();
  return instance;
}

void report_no_state(char const* where) noexcept
{
  std::fprintf(stderr, "stash_torch_alloc: %s: no allocator state (creating it failed)\n", where);
}

}  // namespace

extern "C" {

STASH_TORCH_ALLOC_API void* stash_malloc(ssize_t size, int device, cudaStream_t stream)
{
  auto* s = state();
  if (s == nullptr) {
    report_no_state("stash_malloc");
    return nullptr;
  }
  return stash::torch_alloc::c_malloc(*s, size, device, stream);
}

STASH_TORCH_ALLOC_API void stash_free(void* ptr, ssize_t size, int device, cudaStream_t stream)
{
  auto* s = state();
  if (s == nullptr) {
    report_no_state("stash_free");
    return;
  }
  stash::torch_alloc::c_free(*s, ptr, size, device, stream);
}

STASH_TORCH_ALLOC_API int stash_configure(const char* pool, size_t budget)
{
  auto* s = state();
  if (s == nullptr) {
    report_no_state("stash_configure");
    return -1;
  }
  return stash::torch_alloc::c_configure(*s, pool, budget);
}

STASH_TORCH_ALLOC_API int stash_begin_iteration(void)
{
  auto* s = state();
  if (s == nullptr) {
    report_no_state("stash_begin_iteration");
    return -1;
  }
  return stash::torch_alloc::c_begin_iteration(*s);
}

STASH_TORCH_ALLOC_API int stash_end_iteration(void)
{
  auto* s = state();
  if (s == nullptr) {
    report_no_state("stash_end_iteration");
    return -1;
  }
  return stash::torch_alloc::c_end_iteration(*s);
}

STASH_TORCH_ALLOC_API int stash_stats(stash_torch_stats* out)
{
  auto* s = state();
  if (s == nullptr) {
    report_no_state("stash_stats");
    return -1;
  }
  return stash::torch_alloc::c_stats(*s, out);
}

STASH_TORCH_ALLOC_API size_t stash_last_error(char* buffer, size_t size)
{
  auto* s = state();
  if (s == nullptr) {
    static constexpr char message[] = "no allocator state (creating it failed)";
    if (buffer != nullptr && size > 0) { std::snprintf(buffer, size, "%s", message); }
    return sizeof(message) - 1;
  }
  return s->last_error(buffer, size);
}

}  // extern "C"
