// Misuse of recompute on stash::allocator (issue 22 item 5), host backend: a writer given no
// callable is a stash::logic_error naming the op and the storage at the first replayed step, the
// storage then stays resident (recompute_fallbacks) and the results stay bitwise those of keeping
// everything; a callable that throws fails that step only: the exception leaves op() with the
// tensor allocated, the step is abandoned, and the next steps run.
#include "support/recompute_mlp.hpp"

#include <stash/allocator.hpp>
#include <stash/core/error.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/checkpoint.hpp>
#include <stash/swap/no_swap.hpp>

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
template <class Policy>
using host_allocator = stash::allocator<host_caching, Policy, void, stash::host_backend>;

struct rerun_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The weights and gradients after `steps` steps of a kept (no_swap) run.
stash::test::mlp_state kept_state(int steps)
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  host_allocator<stash::no_swap> alloc(backend, pool);
  stash::test::mlp net(alloc, backend, s, {});
  for (int i = 0; i < steps; ++i) { net.step(i); }
  return net.state();
}

}  // namespace

TEST_CASE("recompute misuse: a writer without a callable is named once, then kept resident")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  host_allocator<stash::checkpoint> alloc(backend, pool);
  stash::test::mlp_options o;
  o.no_callable = "aten::mul.Tensor";  // z = 2y gets none: every dropped z lacks a way back
  stash::test::mlp net(alloc, backend, s, o);
  net.step(0);
  REQUIRE_FALSE(alloc.current_schedule().recomputes.empty());
  // The first replayed step: each op() that would drop a z without a callable is refused, naming
  // the op and the storage, before anything is done; the loop calls it again.
  std::vector<std::string> errors;
  net.on_refusal = [&](std::string const& what) { errors.push_back(what); };
  net.step(1);
  REQUIRE_FALSE(errors.empty());
  CHECK(errors.front().find("'aten::mul.Tensor'") != std::string::npos);
  CHECK(errors.front().find("storage") != std::string::npos);
  CHECK(errors.front().find("'z'") != std::string::npos);
  CHECK(alloc.stats().recompute_fallbacks == errors.size());
  CHECK(alloc.stats().deviations == 0);
  auto const after_first = errors.size();
  auto const recomputes  = alloc.stats().recomputes;
  net.step(2);
  net.step(3);
  CHECK(errors.size() == after_first);  // named once: the next steps keep those storages
  CHECK(alloc.stats().recompute_fallbacks == after_first);
  // The other entries (the y's, whose writer has a callable) still run.
  CHECK(alloc.stats().recomputes > recomputes);
  CHECK(net.state() == kept_state(4));
}

TEST_CASE("recompute misuse: a callable that throws fails its step; the next steps run")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  host_allocator<stash::checkpoint> alloc(backend, pool);
  stash::test::mlp_options o;
  int reruns    = 0;
  bool fail_now = false;
  o.on_rerun    = [&](std::string const&) {
    ++reruns;
    if (fail_now) { throw rerun_failure("re-run failed on purpose"); }
  };
  stash::test::mlp net(alloc, backend, s, o);
  net.step(0);
  net.step(1);
  REQUIRE(reruns > 0);
  fail_now = true;
  CHECK_THROWS_AS(net.step(2), rerun_failure);
  fail_now = false;
  // The step is abandoned: the rematerialised tensor is allocated (resident), nothing is dropped
  // without memory behind it, every tensor can be freed and the iteration ended.
  REQUIRE_FALSE(net.alive.empty());
  int resident = 0;
  for (auto h : net.alive) {
    auto const w = alloc.where(h);
    resident += w == stash::tensor_state::resident ? 1 : 0;
  }
  CHECK(resident >= 1);
  net.abandon();
  CHECK(alloc.stats().deviations == 1);
  // The next steps: recorded afresh, then replayed with recomputes, as if step 2 never ran.
  auto const before = alloc.stats().recomputes;
  net.step(3);
  net.step(4);
  net.step(5);
  CHECK(alloc.stats().recomputes > before);
  // Steps 0, 1, 3, 4, 5 ran whole (the input of each step but the first is the same).
  CHECK(net.state() == kept_state(5));
}

}  // namespace STASH_UNITY_ID
