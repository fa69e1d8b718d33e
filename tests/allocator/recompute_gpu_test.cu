// stash::allocator executing recompute entries on the CUDA backend (issue 22 item 5): the chain
// step of tests/support/recompute_chain.hpp (y = relu(x * w) + 0.01, z = 2 y, a gap op reading x,
// out = y + z); a policy drops y and z after the forward and rematerialises them (y, then z from
// y: a chain) before the op reading them. The output must be bitwise the one of keeping
// everything. The host twin, recompute_chain_test.cpp, runs the same trace and schedule.
// Second case: a re-run that reads a rebuilt input (recompute_chain::transients; the step of
// tests/support/recompute_transient.hpp, host twin recompute_transient_test.cpp): the transient
// buffer is taken, written by the rebuilding re-run, read by the clone's and given back, all in
// the compute stream's order on cuda_backend.
// Third case: wrap entries on cuda_backend (review 2026-11-26 G6; tests/support/wrap_step.hpp,
// host twin in recompute_chain_test.cpp): a weight and its gradient leave the device at each
// step's end, after the optimizer's in-place kernel, and come back at their first use of the next.
#include "support/recompute_chain.hpp"
#include "support/recompute_transient.hpp"
#include "support/wrap_step.hpp"

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

constexpr int tn = static_cast<int>(stash::test::transient_elements);

__global__ void weights_kernel(float* w)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < tn) { w[i] = i % 3 == 0 ? 0.5f : -0.5f; }
}
__global__ void input_kernel(float* x, int step)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < tn) { x[i] = float(step) + 0.25f * float(i % 7); }
}
__global__ void mul_kernel(float const* x, float const* w, float* y)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < tn) { y[i] = x[i] * w[i]; }
}
__global__ void relu_inplace_kernel(float* y)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < tn) { y[i] = fmaxf(0.0f, y[i]); }
}
__global__ void twice_plain_kernel(float const* x, float* y)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < tn) { y[i] = 2.0f * x[i]; }
}
__global__ void add_kernel(float const* a, float const* b, float* y)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < tn) { y[i] = a[i] + b[i]; }
}

// The transient step's kernels on a CUDA stream (the host twin's, line for line; the clone is a
// device-to-device copy in the stream's order).
struct cuda_transient_kernels {
  dim3 grid = (tn + 255) / 256;
  void weights(float* w, stream s) const
  {
    weights_kernel<<<grid, 256, 0, s.get()>>>(w);
    check_launch(cudaGetLastError());
  }
  void input(float* x, int step, stream s) const
  {
    input_kernel<<<grid, 256, 0, s.get()>>>(x, step);
    check_launch(cudaGetLastError());
  }
  void mul(float const* x, float const* w, float* y, stream s) const
  {
    mul_kernel<<<grid, 256, 0, s.get()>>>(x, w, y);
    check_launch(cudaGetLastError());
  }
  void clone(float const* x, float* y, stream s) const
  {
    check_launch(cudaMemcpyAsync(y, x, tn * sizeof(float), cudaMemcpyDeviceToDevice, s.get()));
  }
  void relu_(float* y, stream s) const
  {
    relu_inplace_kernel<<<grid, 256, 0, s.get()>>>(y);
    check_launch(cudaGetLastError());
  }
  void twice(float const* x, float* y, stream s) const
  {
    twice_plain_kernel<<<grid, 256, 0, s.get()>>>(x, y);
    check_launch(cudaGetLastError());
  }
  void add(float const* a, float const* b, float* y, stream s) const
  {
    add_kernel<<<grid, 256, 0, s.get()>>>(a, b, y);
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
std::vector<float> run_transient(Policy policy, stash::allocator_stats* stats)
{
  using device_pool = stash::caching_pool<stash::device_upstream>;
  stash::cuda_backend backend;
  device_pool pool;
  stash::allocator<device_pool, Policy, void, stash::cuda_backend> alloc(backend, pool, {}, policy);
  auto const out = stash::test::run_recompute_transient(alloc, backend.create_stream(),
                                                        cuda_transient_kernels{});
  *stats         = alloc.stats();
  return out;
}

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

template <class Policy>
stash::test::wrap_step_result run_wrap(Policy policy)
{
  using device_pool = stash::caching_pool<stash::device_upstream>;
  stash::cuda_backend backend;
  device_pool pool;
  stash::allocator<device_pool, Policy, void, stash::cuda_backend> alloc(backend, pool, {}, policy);
  return stash::test::run_wrap_step(alloc, backend.create_stream(), cuda_kernels{});
}

}  // namespace

TEST_CASE("gpu: allocator wraps a weight and its gradient across steps, bitwise as if kept")
{
  auto const kept = run_wrap(stash::no_swap{});
  auto const got  = run_wrap(stash::test::wrap_all_policy{});
  auto const& s   = got.stats;
  CHECK(s.scheduled_offloads == 4 * 2);  // the host twin's figures
  CHECK(s.scheduled_prefetches == 3 * 2);
  CHECK(s.offload.demand_prefetches == 0);
  CHECK(s.failed_offloads + s.failed_prefetches + s.deviations == 0);
  CHECK(got.away_at_end == 4 * 2);
  CHECK(got.w == kept.w);
  CHECK(got.gw == kept.gw);
}

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

TEST_CASE("gpu: allocator re-runs a rebuilt input into a transient buffer, bitwise as if kept")
{
  stash::allocator_stats kept_stats, stats;
  auto const kept = run_transient(stash::no_swap{}, &kept_stats);
  auto const got  = run_transient(stash::test::drop_clone_policy{}, &stats);
  CHECK(stats.recomputes == 2);         // two replayed steps
  CHECK(stats.recompute_ops == 2 * 2);  // mul into the transient, then the clone
  CHECK(stats.recompute_fallbacks == 0);
  CHECK(stats.deviations == 0);
  CHECK(got == kept);
  CHECK(got[1] < 0.0f);  // b's negative products, which relu_ cleared from a
}
