// Host twin of recompute_gpu_test.cu: the same chain step (tests/support/recompute_chain.hpp),
// trace and schedule on the host backend, so what the GPU test asks of the planner and the
// allocator is checked here first (review of 2026-11-25, recompute on CUDA: the GPU test's gap
// op once overwrote an input of y's re-run, and its schedule was refused at the end of step 0).
// Also the twin of its wrap case (tests/support/wrap_step.hpp), over the same kernels.
#include "support/recompute_chain.hpp"
#include "support/wrap_step.hpp"

#include <stash/allocator.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/no_swap.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using stream       = stash::host_backend::stream;
constexpr auto n   = stash::test::chain_elements;

// The chain's kernels as host tasks in the stream's order (the GPU test's, line for line).
struct host_kernels {
  stash::host_backend* backend;
  void fill(float* x, float v, stream s) const
  {
    backend->launch(s, [x, v] {
      for (std::size_t i = 0; i < n; ++i) { x[i] = v + 0.25f * float(i % 7); }
    });
  }
  void relu_mul(float const* x, float const* w, float* y, stream s) const
  {
    backend->launch(s, [x, w, y] {
      for (std::size_t i = 0; i < n; ++i) { y[i] = std::max(0.0f, x[i] * w[i]) + 0.01f; }
    });
  }
  void twice(float const* y, float* z, stream s) const
  {
    backend->launch(s, [y, z] {
      for (std::size_t i = 0; i < n; ++i) { z[i] = 2.0f * y[i] - 0.005f; }
    });
  }
  void sum(float const* y, float const* z, float* out, stream s) const
  {
    backend->launch(s, [y, z, out] {
      for (std::size_t i = 0; i < n; ++i) { out[i] = y[i] + z[i]; }
    });
  }
  void download(std::vector<float>& out, float const* src, stream s) const
  {
    backend->synchronize(s);
    std::copy_n(src, n, out.begin());
  }
};

template <class Policy>
std::vector<float> run(Policy policy, stash::allocator_stats* stats, stash::schedule* planned)
{
  stash::host_backend backend;
  host_caching pool;
  stash::allocator<host_caching, Policy, void, stash::host_backend> alloc(backend, pool, {},
                                                                          policy);
  auto const out =
      stash::test::run_recompute_chain(alloc, backend.create_stream(), host_kernels{&backend});
  *stats   = alloc.stats();
  *planned = alloc.current_schedule();
  return out;
}

template <class Policy>
stash::test::wrap_step_result run_wrap(Policy policy)
{
  stash::host_backend backend;
  host_caching pool;
  stash::allocator<host_caching, Policy, void, stash::host_backend> alloc(backend, pool, {},
                                                                          policy);
  return stash::test::run_wrap_step(alloc, backend.create_stream(), host_kernels{&backend});
}

}  // namespace

TEST_CASE("wrap step (host twin of the gpu test): w and gw away between steps, bitwise")
{
  auto const kept = run_wrap(stash::no_swap{});
  auto const got  = run_wrap(stash::test::wrap_all_policy{});
  auto const& s   = got.stats;
  CHECK(s.scheduled_offloads == 4 * 2);  // w and gw at each step's end, the recorded one's too
  CHECK(s.persistent_offloads == 4 * 2);
  CHECK(s.offload.offloads == 4 * 2);
  CHECK(s.scheduled_prefetches == 3 * 2);  // at their first use in each replayed step
  CHECK(s.offload.demand_prefetches == 0);
  CHECK(s.failed_offloads + s.failed_prefetches + s.deviations == 0);
  CHECK(got.away_at_end == 4 * 2);
  CHECK(kept.away_at_end == 0);
  CHECK(got.w == kept.w);
  CHECK(got.gw == kept.gw);
  CHECK(got.w[1] != got.w[0]);  // the kernels' values, not a constant
}

TEST_CASE("recompute chain (host twin of the gpu test): y and z rematerialised bitwise")
{
  stash::allocator_stats kept_stats, stats;
  stash::schedule kept_plan, plan;
  auto const kept = run(stash::no_swap{}, &kept_stats, &kept_plan);
  auto const got  = run(stash::test::recompute_chain_policy{}, &stats, &plan);
  REQUIRE(plan.recomputes.size() == 2);
  CHECK(plan.recomputes[0].at == plan.recomputes[1].at);  // one batch: y, then z from y
  CHECK(stats.recomputes == 2 * 2);                       // two replayed steps
  CHECK(stats.recompute_ops == 2 * 2);
  CHECK(stats.recompute_fallbacks == 0);
  CHECK(stats.deviations == 0);
  CHECK(kept_stats.recomputes == 0);
  CHECK(got == kept);
  // The output is the kernels', not a constant: the last step's x is 1 + 0.25 (i % 7).
  CHECK(got[1] != got[0]);
}

}  // namespace STASH_UNITY_ID
