// A recompute whose re-run reads a value the device no longer holds (recompute_chain::transients):
// b = clone(a) is dropped after the clone and rematerialised before the add, but relu_ has
// overwritten a in between, so the chain re-runs a's producer into a transient buffer and clones
// that. On the host backend with real CPU ops the output matches keeping everything, bitwise.
#include "support/recompute_transient.hpp"

#include <stash/allocator.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/swap/no_swap.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching      = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using stream            = stash::host_backend::stream;
constexpr std::size_t n = stash::test::transient_elements;

// The step's kernels as host tasks in the stream's order (recompute_gpu_test.cu has the CUDA ones).
struct host_kernels {
  stash::host_backend& backend;
  void weights(float* w, stream s) const
  {
    backend.launch(s, [w] {
      for (std::size_t i = 0; i < n; ++i) { w[i] = (i % 3 == 0) ? 0.5f : -0.5f; }
    });
  }
  void input(float* x, int step, stream s) const
  {
    backend.launch(s, [x, step] {
      for (std::size_t i = 0; i < n; ++i) { x[i] = float(step) + 0.25f * float(i % 7); }
    });
  }
  void mul(float const* x, float const* w, float* y, stream s) const
  {
    backend.launch(s, [x, w, y] {
      for (std::size_t i = 0; i < n; ++i) { y[i] = x[i] * w[i]; }
    });
  }
  void clone(float const* x, float* y, stream s) const
  {
    backend.launch(s, [x, y] { std::copy_n(x, n, y); });
  }
  void relu_(float* y, stream s) const
  {
    backend.launch(s, [y] {
      for (std::size_t i = 0; i < n; ++i) { y[i] = std::max(0.0f, y[i]); }
    });
  }
  void twice(float const* x, float* y, stream s) const
  {
    backend.launch(s, [x, y] {
      for (std::size_t i = 0; i < n; ++i) { y[i] = 2.0f * x[i]; }
    });
  }
  void add(float const* a, float const* b, float* y, stream s) const
  {
    backend.launch(s, [a, b, y] {
      for (std::size_t i = 0; i < n; ++i) { y[i] = a[i] + b[i]; }
    });
  }
  void download(std::vector<float>& out, float const* src, stream s) const
  {
    backend.synchronize(s);
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
      stash::test::run_recompute_transient(alloc, backend.create_stream(), host_kernels{backend});
  *stats   = alloc.stats();
  *planned = alloc.current_schedule();
  return out;
}

}  // namespace

TEST_CASE("recompute with a rebuilt input: clone of a value relu_ overwrote, bitwise")
{
  stash::allocator_stats kept_stats, stats;
  stash::schedule kept_plan, plan;
  auto const kept = run(stash::no_swap{}, &kept_stats, &kept_plan);
  auto const got  = run(stash::test::drop_clone_policy{}, &stats, &plan);
  REQUIRE(plan.recomputes.size() == 1);
  CHECK(stats.recomputes == 2);  // two replayed steps
  // Two ops per re-run: mul rebuilding a's value before relu_ into a transient, then clone.
  CHECK(stats.recompute_ops == 2 * 2);
  CHECK(stats.recompute_fallbacks == 0);
  CHECK(stats.deviations == 0);
  CHECK(got == kept);
  // b holds the negative products relu_ cleared from a: a clone of the relu'd a would give 0.
  CHECK(got[1] < 0.0f);
}

TEST_CASE("shared re-runs: a's entry adopts the rebuild of a that b's chain runs, bitwise")
{
  stash::allocator_stats kept_stats, stats;
  stash::schedule kept_plan, plan;
  auto const kept = run(stash::no_swap{}, &kept_stats, &kept_plan);
  auto const got  = run(stash::test::drop_both_shared_policy{}, &stats, &plan);
  REQUIRE(plan.recomputes.size() == 2);
  REQUIRE(plan.shared_reruns);
  CHECK(stats.recomputes == 2 * 2);  // a and b, two replayed steps
  // Per step: mul into a's own bytes and clone for b, then relu_ for a (not mul again): 3 ops,
  // where the unshared chains run 4.
  CHECK(stats.recompute_ops == 2 * 3);
  CHECK(stats.recompute_fallbacks == 0);
  CHECK(stats.deviations == 0);
  CHECK(got == kept);
  CHECK(got[1] < 0.0f);  // b is the value before relu_, a the value after it
}

}  // namespace STASH_UNITY_ID
