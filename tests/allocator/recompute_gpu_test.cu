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
// Fourth case: a redrop on cuda_backend (issue 22, tests/support/rerun_read_trace.hpp, host twin
// in recompute_replay_test.cpp): x comes back for a re-run and leaves again with no second copy,
// and, written after its keep-prefetch (GPU review 2026-11-26c), leaves with a copy of its own.
#include "support/recompute_chain.hpp"
#include "support/recompute_transient.hpp"
#include "support/rerun_read_trace.hpp"
#include "support/wrap_step.hpp"

#include <stash/allocator.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/no_swap.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

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

// The rerun_read program's kernels (recompute_replay_test.cpp's host lambdas, line for line):
// x 250 floats, a 1000, b 500, g 250, h 1500.
__global__ void rr_input_kernel(float* x, int step)
{
  int const k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < 250) { x[k] = float((k * 7 + step * 3) % 19 == 0 ? 0 : k % 13) - 4; }
}
__global__ void rr_relu_kernel(float const* x, float* a)
{
  int const k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < 1000) { a[k] = fmaxf(0.0f, x[k % 250]) * float(1 + k % 3); }
}
__global__ void rr_mul_kernel(float const* a, float* b)
{
  int const k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < 500) { b[k] = a[k] * a[k + 500] + 0.25f; }
}
__global__ void rr_bwd0_kernel(float const* b, float* g)
{
  int const k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < 250) { g[k] = b[k] - 0.5f * b[k + 250]; }
}
__global__ void rr_bwd1_kernel(float const* a, float const* g, float* out)
{
  int const k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < 250) { out[k] = g[k] + a[4 * k] - a[4 * k + 3]; }
}
__global__ void rr_bwd2_kernel(float const* g, float* h)
{
  int const k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < 1500) { h[k] = 0.5f * g[k % 250]; }
}
__global__ void rr_bwd3_kernel(float const* x, float const* g, float* out)
{
  int const k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < 250) { out[k] = g[k] * x[k] + 1.0f; }
}
__global__ void rr_write_kernel(float* x)
{
  int const k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < 250) { x[k] = 2.0f * x[k] + 1.0f; }
}

struct rerun_read_run {
  std::vector<std::vector<float>> g;  // after each step
  stash::allocator_stats stats;
};

// The program of recompute_replay_test.cpp's run_rerun_read on cuda_backend; `write_x` writes x
// between op3 and op4, outside any op (after its keep-prefetch, before a late redrop).
template <class Policy>
rerun_read_run run_rerun_read(Policy policy, bool write_x)
{
  using device_pool = stash::caching_pool<stash::device_upstream>;
  using alloc_type  = stash::allocator<device_pool, Policy, void, stash::cuda_backend>;
  using kernel      = std::function<void(float* const*, stream)>;
  stash::cuda_backend backend;
  device_pool pool;
  alloc_type alloc(backend, pool, {}, policy);
  auto const s = backend.create_stream();
  auto op      = [&](std::string const& name, std::vector<stash::tensor_handle> reads,
                std::vector<stash::tensor_handle> writes, kernel k) {
    typename alloc_type::recompute_fn const launch = [k](std::span<void* const> p, stream on) {
      std::vector<float*> f;
      for (auto* q : p) { f.push_back(static_cast<float*>(q)); }
      k(f.data(), on);
    };
    launch(alloc.op(name, reads, writes, s, launch), s);
  };
  auto make = [&](std::size_t floats, stash::storage_kind kind, std::string label) {
    return alloc.allocate_async(floats * sizeof(float), kind, std::move(label), s);
  };
  auto const act = stash::storage_kind::act, temp = stash::storage_kind::temp;
  rerun_read_run r;
  for (int step = 0; step < 4; ++step) {
    alloc.begin_iteration();
    alloc.phase(stash::phase::forward);
    auto x = make(250, stash::storage_kind::input, "x");
    rr_input_kernel<<<1, 256, 0, s.get()>>>(static_cast<float*>(alloc.acquire_async(x, s)), step);
    check_launch(cudaGetLastError());
    auto a = make(1000, act, "a");
    op("aten::relu", {x}, {a}, [](float* const* p, stream on) {
      rr_relu_kernel<<<4, 256, 0, on.get()>>>(p[0], p[1]);
      check_launch(cudaGetLastError());
    });
    auto b = make(500, act, "b");
    op("aten::mul.Tensor", {a}, {b}, [](float* const* p, stream on) {
      rr_mul_kernel<<<2, 256, 0, on.get()>>>(p[0], p[1]);
      check_launch(cudaGetLastError());
    });
    alloc.phase(stash::phase::backward);
    auto g = make(250, temp, "g");
    op("my::bwd", {b}, {g}, [](float* const* p, stream on) {
      rr_bwd0_kernel<<<1, 256, 0, on.get()>>>(p[0], p[1]);
      check_launch(cudaGetLastError());
    });
    alloc.deallocate_async(b);
    op("my::bwd", {a, g}, {g}, [](float* const* p, stream on) {
      rr_bwd1_kernel<<<1, 256, 0, on.get()>>>(p[0], p[1], p[2]);
      check_launch(cudaGetLastError());
    });
    alloc.deallocate_async(a);
    if (write_x) {
      rr_write_kernel<<<1, 256, 0, s.get()>>>(static_cast<float*>(alloc.acquire_async(x, s)));
      check_launch(cudaGetLastError());
    }
    auto h = make(1500, temp, "h");
    op("my::bwd", {g}, {h}, [](float* const* p, stream on) {
      rr_bwd2_kernel<<<6, 256, 0, on.get()>>>(p[0], p[1]);
      check_launch(cudaGetLastError());
    });
    alloc.deallocate_async(h);
    op("my::bwd", {x, g}, {g}, [](float* const* p, stream on) {
      rr_bwd3_kernel<<<1, 256, 0, on.get()>>>(p[0], p[1], p[2]);
      check_launch(cudaGetLastError());
    });
    std::vector<float> out(250);
    cuda_kernels{}.download(out, static_cast<float const*>(alloc.acquire_async(g, s)), s);
    r.g.push_back(std::move(out));
    alloc.deallocate_async(g);
    alloc.deallocate_async(x);
    alloc.end_iteration();
  }
  alloc.synchronize();
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  r.stats = alloc.stats();
  return r;
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

TEST_CASE("gpu: allocator redrops a kept host copy, and copies x again once it was written")
{
  auto const kept = run_rerun_read(stash::no_swap{}, false);
  auto const got  = run_rerun_read(stash::test::rerun_read_policy{true, 1}, false);
  CHECK(got.g == kept.g);                   // bit for bit (no NaN)
  CHECK(got.stats.scheduled_redrops == 3);  // the host twin's figures: three replayed steps
  CHECK(got.stats.redrop_fallbacks == 0);
  CHECK(got.stats.offload.offloads == 3);
  CHECK(got.stats.recomputes == 3);
  CHECK(got.stats.failed_offloads + got.stats.failed_prefetches + got.stats.deviations == 0);
  // Written after its keep-prefetch: the copy is given up, the redrop falls back to a copy.
  auto const kept_w = run_rerun_read(stash::no_swap{}, true);
  auto const got_w  = run_rerun_read(stash::test::rerun_read_policy{true, 1}, true);
  CHECK(kept_w.g != kept.g);
  CHECK(got_w.g == kept_w.g);
  CHECK(got_w.stats.scheduled_redrops == 0);
  CHECK(got_w.stats.redrop_fallbacks == 3);
  CHECK(got_w.stats.offload.offloads == 3 * 2);
  CHECK(got_w.stats.offload.discarded_host_copies == 3);
  CHECK(got_w.stats.failed_offloads + got_w.stats.failed_prefetches + got_w.stats.deviations == 0);
}

}  // namespace STASH_UNITY_ID
