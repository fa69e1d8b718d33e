// stash::allocator executing recompute entries on the CUDA backend (issue 22 item 5): a tiny
// kernel chain y = relu(x * w) + 0.01, z = 2 y, out = y + z read after a gap; a policy drops y and
// z after the forward and rematerialises them (y, then z from y: a chain) before the op reading
// them. The output must be bitwise the one of keeping everything (the host twin is
// recompute_replay_test.cpp).
#include <stash/allocator.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/swap/no_swap.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <span>
#include <string_view>
#include <vector>

namespace {

constexpr int n = 4096;

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

float* f(std::span<void* const> p, std::size_t i) { return static_cast<float*>(p[i]); }

// Checks a launch's error (scripts/check-launches.sh looks for cudaGetLastError after each <<<).
void check_launch(cudaError_t e) { REQUIRE_MESSAGE(e == cudaSuccess, cudaGetErrorString(e)); }

// Drops y and z (storages labelled so) after their last forward use and rematerialises both
// before the op that reads them: y first, then z, whose re-run reads y.
struct chain_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "gpu_chain"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    auto const& t = a.trace();
    std::vector<stash::recompute_entry> rs;
    for (std::string_view const label : {"y", "z"}) {
      for (stash::storage_id id = 0; id < t.storages().size(); ++id) {
        if (t.storages()[id].label != label) { continue; }
        auto const& acc = a.lifetimes().storages[id].accesses;
        rs.push_back(
            {id, acc[acc.size() - 2].op, acc.back().op, acc.back().op, t.storages()[id].bytes});
      }
    }
    return stash::make_schedule(a, std::string(name()), budget, {}, std::move(rs));
  }
};

template <class Policy>
std::vector<float> run(Policy policy, stash::allocator_stats* stats)
{
  using device_pool = stash::caching_pool<stash::device_upstream>;
  stash::cuda_backend backend;
  device_pool pool;
  stash::allocator<device_pool, Policy, void, stash::cuda_backend> alloc(backend, pool, {}, policy);
  auto const s     = backend.create_stream();
  auto const bytes = n * sizeof(float);
  dim3 const grid  = (n + 255) / 256;
  auto const kind  = stash::storage_kind::act;
  auto w           = alloc.allocate_async(bytes, stash::storage_kind::param, "w", s);
  fill_kernel<<<grid, 256, 0, s.get()>>>(static_cast<float*>(alloc.acquire_async(w, s)), 0.5f);
  check_launch(cudaGetLastError());
  std::vector<float> out(n);
  for (int step = 0; step < 3; ++step) {
    alloc.begin_iteration();
    auto x = alloc.allocate_async(bytes, kind, "x", s);
    auto y = alloc.allocate_async(bytes, kind, "y", s);
    auto z = alloc.allocate_async(bytes, kind, "z", s);
    auto o = alloc.allocate_async(bytes, kind, "out", s);
    auto p = alloc.op("load_batch", {}, std::vector{x}, s);
    fill_kernel<<<grid, 256, 0, s.get()>>>(f(p, 0), -1.0f + float(step));
    check_launch(cudaGetLastError());
    auto relu_mul = [grid](std::span<void* const> q, stash::cuda_backend::stream st) {
      relu_mul_kernel<<<grid, 256, 0, st.get()>>>(f(q, 0), f(q, 1), f(q, 2));
      check_launch(cudaGetLastError());
    };
    auto twice = [grid](std::span<void* const> q, stash::cuda_backend::stream st) {
      twice_kernel<<<grid, 256, 0, st.get()>>>(f(q, 0), f(q, 1));
      check_launch(cudaGetLastError());
    };
    relu_mul(alloc.op("aten::addmm", std::vector{x, w}, std::vector{y}, s, relu_mul), s);
    twice(alloc.op("aten::mul.Tensor", std::vector{y}, std::vector{z}, s, twice), s);
    p = alloc.op("aten::mul.Tensor", std::vector{x}, std::vector{x}, s);  // the gap
    p = alloc.op("aten::add.Tensor", std::vector{y, z}, std::vector{o}, s);
    sum_kernel<<<grid, 256, 0, s.get()>>>(f(p, 0), f(p, 1), f(p, 2));
    check_launch(cudaGetLastError());
    REQUIRE(cudaMemcpyAsync(out.data(), f(p, 2), bytes, cudaMemcpyDeviceToHost, s.get()) ==
            cudaSuccess);
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    for (auto h : {x, y, z, o}) { alloc.deallocate_async(h); }
    alloc.end_iteration();
  }
  alloc.synchronize();
  *stats = alloc.stats();
  return out;
}

}  // namespace

TEST_CASE("gpu: allocator recomputes a dropped y and z (a chain) bitwise as if kept")
{
  stash::allocator_stats kept_stats, stats;
  auto const kept = run(stash::no_swap{}, &kept_stats);
  auto const got  = run(chain_policy{}, &stats);
  CHECK(stats.recomputes == 2 * 2);  // two replayed steps, y and z each
  CHECK(stats.recompute_ops == 2 * 2);
  CHECK(stats.recompute_fallbacks == 0);
  CHECK(got == kept);
}
