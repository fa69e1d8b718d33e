// The public offload_backend conformance kit (stash/testing/) on the host backend, and shown to
// catch a backend that breaks its contract.
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/testing/backend_conformance.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>

namespace STASH_UNITY_ID {

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;

// The host backend, except that query() never reports completion.
struct forgetful_backend : stash::host_backend {
  [[nodiscard]] bool query(event const&) const { return false; }
};
static_assert(stash::offload_backend<forgetful_backend>);

}  // namespace

TEST_CASE("the host backend passes the offload_backend conformance kit")
{
  stash::host_backend backend;
  host_pool memory;
  auto const r = stash::testing::check_offload_backend(backend, memory);
  CHECK_MESSAGE(r.ok(), r.summary());
  CHECK(r.checks >= 6);
}

TEST_CASE("the backend kit catches events that never complete")
{
  forgetful_backend backend;
  host_pool memory;
  auto const r = stash::testing::check_offload_backend(backend, memory);
  CHECK_FALSE(r.ok());
  CHECK(r.summary().find("not complete") != std::string::npos);
}

TEST_CASE("host streams are stash::stream_refs, and a host stream order refuses a CUDA stream")
{
  stash::host_backend backend;
  auto const s   = backend.create_stream();
  auto const ref = backend.tag(s);
  CHECK(ref.is_host());
  CHECK(ref.host() == s);
  CHECK(ref == backend.tag(s));
  CHECK(ref != backend.tag(backend.create_stream()));

  stash::host_stream_order order;
  auto m = order.record(ref);  // a flag queued on the worker
  REQUIRE(m != nullptr);
  backend.synchronize(s);
  CHECK(order.passed(m));
  CHECK(order.record(stash::stream_ref{}) == nullptr);  // the default stream: nothing to wait for
  cudaStream_t const cuda_stream = reinterpret_cast<cudaStream_t>(0x1000);
  CHECK_THROWS_AS((void)order.record(cuda_stream), stash::logic_error);
  CHECK_THROWS_AS(order.wait(cuda_stream, m), stash::logic_error);
  CHECK_FALSE(order.capturing(cuda_stream));
}

TEST_CASE("a host stream order's wait holds the waiting stream until the marked work ran")
{
  // A is held on a gate; B waits (through the pools' stream order) for a marker recorded on A
  // after it, then runs a task. B's task must not run before the gate opens. The test gives B
  // 50 ms to run early: a correct wait never does (the check cannot fail spuriously), a wait
  // that queues nothing lets B run at once.
  stash::host_backend backend;
  auto const a = backend.create_stream();
  auto const b = backend.create_stream();
  stash::host_stream_order order;
  stash::host_flag gate;
  // Opens the gate however the case ends (a failed check may end it early): A's worker must not
  // stay blocked when the backend joins it.
  struct opener {
    stash::host_flag& g;
    ~opener() { g.set(); }
  } const open_at_exit{gate};
  std::atomic<bool> b_ran{false};
  bool b_ran_before_a = true;
  a->enqueue([&] {
    gate.wait();
    b_ran_before_a = b_ran.load();
  });
  auto m = order.record(backend.tag(a));
  order.wait(backend.tag(b), m);
  std::promise<void> b_done;
  b->enqueue([&] {
    b_ran = true;
    b_done.set_value();
  });
  auto const early = b_done.get_future().wait_for(std::chrono::milliseconds(50));
  CHECK(early == std::future_status::timeout);
  gate.set();
  backend.synchronize(a);
  backend.synchronize(b);
  CHECK_FALSE(b_ran_before_a);
  CHECK(b_ran.load());
  order.release(m);
}

}  // namespace STASH_UNITY_ID
