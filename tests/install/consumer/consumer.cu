// A minimal user program: includes stash, compiles a kernel next to it, and uses host-side stash
// code (runs without a GPU): reads a real trace and replays its storages' sizes through a caching
// pool over host memory. It includes only the headers it uses, installed (find_package) or
// vendored (add_subdirectory): run_install_test.cmake checks that every header is installed as in
// the source tree, where each compiles alone (stash_header_check) and the umbrella under nvcc.
#include <stash/core/host_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash/version.hpp>

#include <cstdio>

static_assert(STASH_VERSION_MAJOR == CONSUMER_STASH_VERSION_MAJOR &&
                  STASH_VERSION_MINOR == CONSUMER_STASH_VERSION_MINOR &&
                  STASH_VERSION_PATCH == CONSUMER_STASH_VERSION_PATCH,
              "stash/version.hpp and the CMake package's version disagree");

// stash::stash's usage requirements (cuda_std_20) made nvcc compile this unit as C++20: the
// consumer's CMakeLists.txt sets no standard.
static_assert(__cplusplus >= 202002L, "stash::stash did not bring C++20 to this nvcc unit");

__global__ void scale(float* x, int n, float a)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { x[i] *= a; }
}

int main(int argc, char** argv)
{
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer FILE.trace\n");
    return 2;
  }
  stash::trace const t             = stash::read_trace(argv[1]);
  stash::lifetime_analysis const a = stash::analyze_lifetimes(t);
  stash::caching_pool<stash::host_upstream> pool;
  void* p = pool.allocate_async(t.storages()[0].bytes, nullptr);
  pool.deallocate_async(p, t.storages()[0].bytes, nullptr);
  std::printf("consumer: stash %d, %zu storages, lower bound %llu B, pool peak %zu B\n",
              STASH_VERSION, t.storages().size(),
              static_cast<unsigned long long>(a.peak_live_bytes), pool.stats().peak_reserved_bytes);
  return a.peak_live_bytes > 0 ? 0 : 1;
}
