// stash::allocator executing recompute entries on the CUDA backend (issue 22 item 5): the chain
// step of tests/support/recompute_chain.hpp (y = relu(x * w) + 0.01, z = 2 y, a gap op reading x,
// out = y + z); a policy drops y and z after the forward and rematerialises them (y, then z from
// y: a chain) before the op reading them. The output must be bitwise the one of keeping
// everything. The host twin, recompute_chain_test.cpp, runs the same trace and schedule.
#include "support/recompute_chain.hpp"

#include <stash/allocator.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/no_swap.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <vector>

namespace {

constexpr int n = static_cast<int>(stash::test::chain_elements);
using stream    = stash::cuda_backend::stream;

__global__ void fill_kernel(float* x, float v)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { x[i] = v + 0.25f * float(i % 7); }
}
__global__ void relu_mul_kernel(float const* x, float const* w, float* y)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[i] = fmaxf(0.0f, x[i] * w[i]) + 0.01f; }
}
__global__ void twice_kernel(float const* y, float* z)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { z[i] = 2.0f * y[i] - 0.005f; }
}
__global__ void sum_kernel(float const* y, float const* z, float* out)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { out[i] = y[i] + z[i]; }
}

// Checks a launch's error (scripts/check-launches.sh looks for cudaGetLastError after each <<<).
void check_launch(cudaError_t e) { REQUIRE_MESSAGE(e == cudaSuccess, cudaGetErrorString(e)); }

// The chain's kernels on a CUDA stream (the host twin's, line for line).
struct cuda_kernels {
  dim3 grid = (n + 255) / 256;
  void fill(float* x, float v, stream s) const
  {
    fill_kernel<<<grid, 256, 0, s.get()>>>(x, v);
    check_launch(cudaGetLastError());
  }
  void relu_mul(float const* x, float const* w, float* y, stream s) const
  {
    relu_mul_kernel<<<grid, 256, 0, s.get()>>>(x, w, y);
    check_launch(cudaGetLastError());
  }
  void twice(float const* y, float* z, stream s) const
  {
    twice_kernel<<<grid, 256, 0, s.get()>>>(y, z);
    check_launch(cudaGetLastError());
  }
  void sum(float const* y, float const* z, float* out, stream s) const
  {
    sum_kernel<<<grid, 256, 0, s.get()>>>(y, z, out);
    check_launch(cudaGetLastError());
  }
  void download(std::vector<float>& out, float const* src, stream s) const
  {
    REQUIRE(cudaMemcpyAsync(out.data(), src, out.size() * sizeof(float), cudaMemcpyDeviceToHost,
                            s.get()) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  }
};

template <class Policy>
std::vector<float> run(Policy policy, stash::allocator_stats* stats)
{
  using device_pool = stash::caching_pool<stash::device_upstream>;
  stash::cuda_backend backend;
  device_pool pool;
  stash::allocator<device_pool, Policy, void, stash::cuda_backend> alloc(backend, pool, {}, policy);
  auto const out = stash::test::run_recompute_chain(alloc, backend.create_stream(), cuda_kernels{});
  *stats         = alloc.stats();
  return out;
}

}  // namespace

TEST_CASE("gpu: allocator recomputes a dropped y and z (a chain) bitwise as if kept")
{
  stash::allocator_stats kept_stats, stats;
  auto const kept = run(stash::no_swap{}, &kept_stats);
  auto const got  = run(stash::test::recompute_chain_policy{}, &stats);
  CHECK(stats.recomputes == 2 * 2);  // two replayed steps, y and z each
  CHECK(stats.recompute_ops == 2 * 2);
  CHECK(stats.recompute_fallbacks == 0);
  CHECK(stats.deviations == 0);
  CHECK(got == kept);
}
