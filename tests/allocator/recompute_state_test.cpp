// The fourth GPU read's recompute findings (docs/reviews/gpu_review_2026-11-25.md, C3, C5, C6,
// C7), run on the host backend: a skip_state re-run (batch norm updating its running statistics
// in place through its write pointer) reads a copy of the live state, not an uninitialised
// transient; a lifetime_arena under a recompute schedule learns from the first replayed step;
// a re-run that throws makes the iteration deviate, even at the last op; a dropped tensor keeps
// no prefetch event.
#include "support/recompute_chain.hpp"

#include <stash/allocator.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/greedy_planner.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/swap/no_swap.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using host_arena =
    stash::lifetime_arena<stash::host_upstream, stash::greedy_planner, stash::host_stream_order>;
using stream            = stash::host_backend::stream;
constexpr std::size_t n = 256;

struct rerun_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the re-runs of the batch-norm op saw through their two state pointers.
struct bn_log {
  std::vector<std::vector<float>> seen;  // through the write pointer, before the kernel
  std::vector<std::vector<float>> live;  // through the read pointer (the live state)
  bool fail_next_rerun = false;
};

// A step: x = load; y = bn(x) updating the running mean rm in place; gap g = 2x; o = y + g.
// recompute_chain_policy drops y after bn and re-runs bn before the add.
struct bn_step {
  stash::host_backend* backend;
  std::shared_ptr<bn_log> log = std::make_shared<bn_log>();

  // x, rm (read), y, rm (write): y from the batch only, the statistics updated in place.
  static void bn_kernel(float const* x, float* y, float* rm)
  {
    for (std::size_t i = 0; i < n; ++i) {
      y[i]  = 2.0f * x[i] + 1.0f;
      rm[i] = 0.5f * rm[i] + x[i];
    }
  }
  void bn(std::span<void* const> p, stream s, bool rerun) const
  {
    auto* x                   = static_cast<float const*>(p[0]);
    auto* rr                  = static_cast<float const*>(p[1]);
    auto* y                   = static_cast<float*>(p[2]);
    auto* rw                  = static_cast<float*>(p[3]);
    std::shared_ptr<bn_log> l = log;
    backend->launch(s, [=] {
      if (rerun) {
        l->seen.emplace_back(rw, rw + n);
        l->live.emplace_back(rr, rr + n);
      }
      bn_kernel(x, y, rw);
    });
  }

  // Runs `steps` steps; returns the last output, then the running mean.
  template <class Allocator>
  std::vector<float> run(Allocator& alloc, int steps, std::function<void(int)> after_step = {})
  {
    auto const s     = backend->create_stream();
    auto const bytes = n * sizeof(float);
    auto rm          = alloc.allocate_async(bytes, stash::storage_kind::param, "rm", s);
    auto* r          = static_cast<float*>(alloc.acquire_async(rm, s));
    for (std::size_t i = 0; i < n; ++i) { r[i] = 1000.0f + float(i); }
    typename Allocator::recompute_fn const rerun = [this](std::span<void* const> p, stream st) {
      if (std::exchange(log->fail_next_rerun, false)) { throw rerun_failure("on purpose"); }
      bn(p, st, true);
    };
    std::vector<float> out(n);
    for (int step = 0; step < steps; ++step) {
      alloc.begin_iteration();
      std::vector<stash::tensor_handle> t;
      for (char const* label : {"x", "y", "gap", "out"}) {
        t.push_back(alloc.allocate_async(bytes, stash::storage_kind::act, label, s));
      }
      try {
        one_step(alloc, s, t, rm, rerun, step, out);
      } catch (rerun_failure const&) {  // abandoned: the tensors are freed, the iteration ended
      }
      for (auto h : t) { alloc.deallocate_async(h); }
      alloc.end_iteration();
      if (after_step) { after_step(step); }
    }
    backend->synchronize(s);
    auto const* state = static_cast<float const*>(alloc.acquire_async(rm, s));
    backend->synchronize(s);
    out.insert(out.end(), state, state + n);
    return out;
  }

  template <class Allocator>
  void one_step(Allocator& alloc, stream s, std::vector<stash::tensor_handle> const& t,
                stash::tensor_handle rm, typename Allocator::recompute_fn const& rerun, int step,
                std::vector<float>& out)
  {
    auto p = alloc.op("load_batch", {}, std::vector{t[0]}, s);
    backend->launch(s, [x = static_cast<float*>(p[0]), step] {
      for (std::size_t i = 0; i < n; ++i) { x[i] = float(step) + 0.25f * float(i % 5); }
    });
    bn(alloc.op("aten::native_batch_norm", std::vector{t[0], rm}, std::vector{t[1], rm}, s, rerun),
       s, false);
    p = alloc.op("aten::mul.Tensor", std::vector{t[0]}, std::vector{t[2]}, s);
    backend->launch(s, [x = static_cast<float const*>(p[0]), g = static_cast<float*>(p[1])] {
      for (std::size_t i = 0; i < n; ++i) { g[i] = 2.0f * x[i]; }
    });
    p = alloc.op("aten::add.Tensor", std::vector{t[1], t[2]}, std::vector{t[3]}, s);
    backend->launch(s, [y = static_cast<float const*>(p[0]), g = static_cast<float const*>(p[1]),
                        o = static_cast<float*>(p[2])] {
      for (std::size_t i = 0; i < n; ++i) { o[i] = y[i] + g[i]; }
    });
    backend->synchronize(s);
    std::copy_n(static_cast<float const*>(p[2]), n, out.begin());
  }
};

template <class Pool, class Policy>
using host_alloc = stash::allocator<Pool, Policy, void, stash::host_backend>;

std::vector<float> kept_run(int steps)
{
  stash::host_backend backend;
  host_caching pool;
  host_alloc<host_caching, stash::no_swap> alloc(backend, pool);
  return bn_step{&backend}.run(alloc, steps);
}

}  // namespace

TEST_CASE("recompute state: a skip_state re-run updates a copy of the live state, not garbage")
{
  stash::host_backend backend;
  host_caching pool;
  host_alloc<host_caching, stash::test::recompute_chain_policy> alloc(backend, pool);
  bn_step step{&backend};
  auto const got = step.run(alloc, 4);
  REQUIRE(alloc.current_schedule().recomputes.size() == 1);  // y
  CHECK(alloc.stats().recomputes == 3);
  CHECK(alloc.stats().deviations == 0);
  REQUIRE(step.log->seen.size() == 3);
  for (std::size_t k = 0; k < step.log->seen.size(); ++k) {
    CAPTURE(k);
    // The bytes behind the write pointer were the live statistics (1000 + i, updated once per
    // step), not a transient's leftovers; the live state itself moved once per step only.
    CHECK(step.log->seen[k] == step.log->live[k]);
    CHECK(step.log->live[k][1] > 10.0f);  // the statistics, not zeros
  }
  CHECK(got == kept_run(4));  // output and running mean bitwise those of keeping y
}

TEST_CASE("recompute state: a re-run that throws at the last op makes the iteration deviate")
{
  stash::host_backend backend;
  host_caching pool;
  host_alloc<host_caching, stash::test::recompute_chain_policy> alloc(backend, pool);
  bn_step step{&backend};
  std::uint64_t replanned_after_throw = 0;
  (void)step.run(alloc, 4, [&](int i) {
    if (i == 0) { step.log->fail_next_rerun = true; }  // step 1's re-run, at op 3 of 4
    if (i == 1) { replanned_after_throw = alloc.stats().replanned; }
  });
  CHECK(alloc.stats().deviations == 1);  // op() promised it; the op count alone matched
  CHECK(replanned_after_throw == 1);
  CHECK(alloc.stats().replanned == 2);   // step 2 recorded afresh, planned again
  CHECK(alloc.stats().recomputes == 1);  // step 3
}

TEST_CASE("recompute state: a lifetime_arena learns the recompute schedule from the first replay")
{
  stash::host_backend backend;
  host_arena pool;
  host_alloc<host_arena, stash::test::recompute_chain_policy> alloc(backend, pool);
  bn_step step{&backend};
  std::vector<std::uint64_t> fallbacks;
  std::vector<std::size_t> arena_bytes;
  auto const got = step.run(alloc, 5, [&](int) {
    fallbacks.push_back(pool.stats().fallbacks);
    arena_bytes.push_back(pool.arena_bytes());
  });
  // Step 0 recorded by the allocator, its plan recomputes: the arena takes no arena for step 0's
  // sequence; step 1 (first replay, the drop and the rematerialisation in it) is recorded by the
  // arena and planned; steps 2-4 replay that plan without one fallback.
  CHECK(arena_bytes[0] == 0);
  CHECK(arena_bytes[1] > 0);
  CHECK(pool.state() == stash::arena_state::replaying);
  CHECK(fallbacks[4] == fallbacks[1]);
  CHECK(pool.replans() == 0);
  CHECK(alloc.stats().recomputes == 4);
  CHECK(got == kept_run(5));
}

namespace {

// host_backend counting the events it hands out and gets back.
class counting_backend {
 public:
  using stream       = stash::host_backend::stream;
  using event        = stash::host_backend::event;
  using stream_order = stash::host_backend::stream_order;
  explicit counting_backend(stash::host_backend& b) : b_(b) {}
  stream create_stream(int priority = 0) { return b_.create_stream(priority); }
  event record(stream s)
  {
    ++live;
    return b_.record(s);
  }
  void wait(stream s, event const& e) { b_.wait(s, e); }
  bool query(event const& e) const { return b_.query(e); }
  void synchronize(event const& e) const { b_.synchronize(e); }
  void synchronize(stream s) { b_.synchronize(s); }
  void release(event& e) noexcept
  {
    if (e != nullptr) { --live; }
    b_.release(e);
  }
  void copy_async(void* dst, void const* src, std::size_t bytes, stream s)
  {
    b_.copy_async(dst, src, bytes, s);
  }
  [[nodiscard]] stash::stream_ref tag(stream s) const noexcept { return b_.tag(s); }
  bool capturing(stream s) const noexcept { return b_.capturing(s); }
  int live = 0;  // events recorded and not released

 private:
  stash::host_backend& b_;
};

}  // namespace

TEST_CASE("recompute state: drop_async releases the last prefetch's event")
{
  stash::host_backend inner;
  counting_backend backend(inner);
  host_caching device, host;
  stash::offload_manager<counting_backend, host_caching, host_caching> m(backend, device, host);
  auto const s = backend.create_stream();
  auto const h = m.allocate_async(4096, s);
  m.offload_async(h, s);
  (void)m.acquire_async(h, s);  // prefetched on demand: the entry holds its `ready` event
  m.synchronize();
  CHECK(backend.live == 1);
  m.drop_async(h);
  CHECK(backend.live == 0);  // nothing left for the rematerialised tensor's acquires to wait on
  m.rematerialize_async(h, s);
  (void)m.acquire_async(h, s);
  m.deallocate_async(h);
  CHECK(backend.live == 0);
}

}  // namespace STASH_UNITY_ID
