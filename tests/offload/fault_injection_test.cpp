// Every failure point of a real training step, one at a time, over the offload manager on the
// host backend: a device or host allocation, a copy, an event record or wait, a codec "launch"
// fails at the k-th fallible call of an iteration, for every k. After each failure nothing is
// lost: a tensor whose offload failed is resident, every live tensor's bytes are intact, the pools
// hold what they held before the iteration, the counters count what was done, and the next
// iteration runs to its end.
#include "support/data.hpp"
#include "support/sweep_size.hpp"

#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/testing/fault_injection.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool   = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using faulty_pool = stash::testing::fault_injecting_pool<host_pool>;
using backend_t   = stash::testing::fault_injecting_backend<stash::host_backend>;
using stash::tensor_handle;
using stash::tensor_state;

constexpr std::uint64_t scale = 4096;  // alexnet's tensors, 4096x smaller: the walk is long
constexpr std::uint64_t gap   = 6;     // a tensor idle for this many ops is offloaded

float value(std::uint64_t storage, std::uint32_t version, std::size_t i)
{
  return (i + version) % 3 == 0 ? float((storage * 7 + version * 13 + i) % 4096) : 0.0f;
}

// The step as the walk runs it: per op, what is offloaded after it and prefetched before it.
struct step_plan {
  stash::trace const& trace;
  std::vector<stash::trace_event> persistent, iteration;
  std::vector<std::vector<stash::storage_id>> offload_after, prefetch_before;
  std::vector<std::size_t> bytes;

  explicit step_plan(stash::trace const& t)
      : trace(t), offload_after(t.ops().size()), prefetch_before(t.ops().size() + 2)
  {
    auto const events = t.events();
    std::size_t first = 0;
    while (first < events.size() && events[first].kind != stash::event_kind::phase) { ++first; }
    persistent.assign(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(first));
    iteration.assign(events.begin() + static_cast<std::ptrdiff_t>(first), events.end());
    for (auto const& s : t.storages()) {
      bytes.push_back(std::max<std::uint64_t>(4, s.bytes / scale / 4 * 4));
    }
    std::vector<std::vector<std::uint64_t>> uses(t.storages().size());
    for (std::uint64_t j = 0; j < t.ops().size(); ++j) {
      for (auto s : t.ops()[j].reads) { uses[s].push_back(j); }
      for (auto s : t.ops()[j].writes) { uses[s].push_back(j); }
    }
    for (stash::storage_id s = 0; s < uses.size(); ++s) {
      for (std::size_t u = 0; u + 1 < uses[s].size(); ++u) {
        if (uses[s][u + 1] - uses[s][u] < gap) { continue; }
        offload_after[uses[s][u]].push_back(s);
        prefetch_before[uses[s][u + 1] - 2].push_back(s);  // two ops ahead
      }
    }
  }
};

// One manager over fault-injecting pools and backend, driven through the plan.
template <class Transfer>
struct walk {
  using manager = stash::offload_manager<backend_t, faulty_pool, faulty_pool, Transfer>;

  step_plan const& plan;
  stash::testing::fault_injector faults;
  stash::host_backend inner;
  backend_t backend{inner, faults};
  host_pool device_real{stash::host_upstream{}, stash::caching_pool_options{}};
  host_pool host_real{stash::host_upstream{}, stash::pinned_host_pool_options(~0ull, stash::MiB)};
  faulty_pool device{device_real, faults};
  faulty_pool host{host_real, faults};
  stash::host_backend::stream s{inner.create_stream()};
  manager m{backend, device, host};
  std::vector<std::optional<tensor_handle>> handle;
  std::vector<std::uint32_t> version;
  std::vector<bool> in_iteration;
  std::atomic<std::uint64_t> bad{0};
  std::uint64_t offloads_done{0}, bytes_done{0};
  std::optional<tensor_handle> offloading;  // the tensor inside offload_async, if any

  explicit walk(step_plan const& p)
      : plan(p), handle(p.bytes.size()), version(p.bytes.size(), 0), in_iteration(p.bytes.size())
  {
    for (auto const& e : plan.persistent) { event(e); }
  }

  walk(walk const&)            = delete;
  walk& operator=(walk const&) = delete;
  // The test's kernels on `s` touch pool memory: they finish before the pools go.
  ~walk() { inner.synchronize(s); }

  // Kernels of the test itself go to the real backend: only stash's calls are failure points.
  void fill(stash::storage_id sid)
  {
    void* p             = m.acquire_async(*handle[sid], s);
    std::size_t const n = plan.bytes[sid] / 4;
    auto const v        = ++version[sid];
    inner.launch(s, [=] {
      for (std::size_t i = 0; i < n; ++i) { static_cast<float*>(p)[i] = value(sid, v, i); }
    });
  }
  void check(stash::storage_id sid)
  {
    if (version[sid] == 0) { return; }
    void const* p       = m.acquire_async(*handle[sid], s);
    std::size_t const n = plan.bytes[sid] / 4;
    auto const v        = version[sid];
    inner.launch(s, [=, this] {
      for (std::size_t i = 0; i < n; ++i) {
        if (static_cast<float const*>(p)[i] != value(sid, v, i)) {
          bad.fetch_add(1);
          return;
        }
      }
    });
  }

  void op(std::uint64_t j)
  {
    for (auto sid : plan.prefetch_before[j]) {
      if (handle[sid]) { m.prefetch_async(*handle[sid]); }
    }
    auto const& o = plan.trace.ops()[j];
    for (auto sid : o.reads) { check(sid); }
    for (auto sid : o.writes) { fill(sid); }
    for (auto sid : plan.offload_after[j]) {
      if (!handle[sid] || m.state(*handle[sid]) != tensor_state::resident) { continue; }
      offloading = handle[sid];
      m.offload_async(*handle[sid], s);
      offloading.reset();
      ++offloads_done;
      bytes_done += plan.bytes[sid];
    }
  }

  void event(stash::trace_event const& e)
  {
    if (e.kind == stash::event_kind::alloc) {
      handle[e.index]  = m.allocate_async(plan.bytes[e.index], s);
      version[e.index] = 0;
    } else if (e.kind == stash::event_kind::free) {
      m.deallocate_async(*handle[e.index]);
      handle[e.index].reset();
    } else if (e.kind == stash::event_kind::op) {
      op(e.index);
    }
  }

  // One iteration; throws the injected failure.
  void iteration()
  {
    for (auto const& e : plan.iteration) {
      if (e.kind == stash::event_kind::alloc) { in_iteration[e.index] = true; }
      event(e);
    }
  }

  // After a failure: the failed offload's tensor is resident, every live tensor is intact, the
  // counters count what was done; then the iteration's tensors go and the pools are as before.
  void recover(std::size_t device_before, std::string const& where)
  {
    INFO(where);
    if (offloading) { CHECK(m.state(*offloading) == tensor_state::resident); }
    offloading.reset();
    settle(device_before);
  }

  // Every live tensor resident and checked, the iteration's released: the pools as before it.
  void settle(std::size_t device_before)
  {
    for (stash::storage_id sid = 0; sid < handle.size(); ++sid) {
      if (!handle[sid]) { continue; }
      (void)m.acquire_async(*handle[sid], s);
      check(sid);
    }
    inner.synchronize(s);
    m.synchronize();
    CHECK(bad.load() == 0);
    CHECK(m.stats().offloads == offloads_done);
    CHECK(m.stats().bytes_offloaded == bytes_done);
    CHECK(m.stats().decode_failures == 0);
    release_iteration();
    CHECK(device_real.stats().in_use_bytes == device_before);
    CHECK(host_real.stats().in_use_bytes == 0);
  }

  void release_iteration()
  {
    for (stash::storage_id sid = 0; sid < handle.size(); ++sid) {
      if (in_iteration[sid] && handle[sid]) {
        m.deallocate_async(*handle[sid]);
        handle[sid].reset();
      }
      in_iteration[sid] = false;
    }
    m.synchronize();
  }
};

// Walks the failure points of one iteration; returns how many there were.
template <class Transfer>
std::uint64_t walk_every_failure(stash::trace const& t)
{
  step_plan const plan(t);
  walk<Transfer> w(plan);
  w.m.synchronize();
  std::size_t const device_before = w.device_real.stats().in_use_bytes;
  // Every failure point in stash_sweep_tests; under ASan (stash_tests) the first 20 and every
  // seventh after them. `walked` counts the points visited (the injector's failures add up).
  std::uint64_t walked = 0;
  for (std::uint64_t k = 0;; ++k) {
    if (!stash::test::sweep_visits(k, 20, 7)) { continue; }
    ++walked;
    w.faults.arm(k);
    try {
      w.iteration();
    } catch (std::exception const& e) {
      REQUIRE_MESSAGE(w.faults.failures() == walked, "not an injected failure: " << e.what());
      w.recover(device_before, "failure " + std::to_string(k) + " (" +
                                   stash::testing::to_string(*w.faults.last_failure()) +
                                   "): " + e.what());
      continue;
    }
    // Nothing was left to fail: the iteration ran to its end, with every byte intact.
    w.faults.disarm();
    CHECK(w.faults.failures() == walked - 1);
    w.settle(device_before);
    return k;
  }
}

stash::trace const& alexnet()
{
  static stash::trace const t =
      stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  return t;
}

}  // namespace

TEST_CASE("fault injection: raw copies lose nothing at any failure point of alexnet's step")
{
  auto const points = walk_every_failure<stash::raw_transfer>(alexnet());
  MESSAGE("failure points: " << points);
  CHECK(points > 100);
}

TEST_CASE("fault injection: zvc host copies lose nothing at any failure point of alexnet's step")
{
  auto const points = walk_every_failure<stash::zvc<float>>(alexnet());
  MESSAGE("failure points: " << points);
  CHECK(points > 100);
}

TEST_CASE("fault_injector: arm(k) fails the k-th counted call once, of the kinds asked for")
{
  using stash::testing::fault_kind;
  stash::testing::fault_injector f;
  CHECK_FALSE(f.fail_now(fault_kind::copy));  // nothing armed: counted, not failed
  f.arm(2, 1u << static_cast<unsigned>(fault_kind::allocate));
  CHECK_FALSE(f.fail_now(fault_kind::event));  // another kind: neither counted for k nor failed
  CHECK_FALSE(f.fail_now(fault_kind::allocate));
  CHECK_FALSE(f.fail_now(fault_kind::allocate));
  CHECK(f.fail_now(fault_kind::allocate));
  CHECK_FALSE(f.fail_now(fault_kind::allocate));  // once
  CHECK_FALSE(f.armed());
  CHECK(f.failures() == 1);
  CHECK(f.last_failure() == fault_kind::allocate);
  CHECK(f.calls() == 6);
  CHECK(f.calls(fault_kind::allocate) == 4);
  f.arm(0);
  f.disarm();
  CHECK_FALSE(f.fail_now(fault_kind::launch));
}

TEST_CASE("fault injection: the wrappers throw what the real calls throw, and change nothing")
{
  stash::testing::fault_injector f;
  host_pool real(stash::host_upstream{}, stash::caching_pool_options{});
  faulty_pool pool(real, f);
  f.arm(0);
  CHECK_THROWS_AS((void)pool.allocate_async(1024, nullptr), stash::out_of_memory);
  CHECK(real.stats().allocations == 0);
  stash::testing::fault_injecting_upstream<> up(stash::host_upstream{}, f);
  f.arm(0);
  CHECK_THROWS_AS((void)up.allocate(64), stash::out_of_memory);
  stash::host_backend inner;
  backend_t b(inner, f);
  auto const s = b.create_stream();
  std::array<char, 8> x{}, y{};
  f.arm(0);
  CHECK_THROWS_AS(b.copy_async(x.data(), y.data(), 8, s), stash::cuda_error);
  f.arm(0);
  CHECK_THROWS_AS((void)b.record(s), stash::cuda_error);
  f.arm(0);
  CHECK_THROWS_AS(b.launch(s, [] {}), stash::cuda_error);
  b.synchronize(s);
  CHECK(f.failures() == 5);
}

}  // namespace STASH_UNITY_ID
