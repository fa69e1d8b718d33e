// Every failure point of a replayed training step, one at a time, over stash::allocator on the
// host backend: the device pool's, the host staging upstream's and the backend's fallible calls
// fail at the k-th call of the iteration, for every k. The caller abandons the iteration (frees
// its tensors, ends it). After each failure every live tensor's bytes are intact, the device pool
// holds what it held before the iteration, the counters agree, and the next iteration (recorded
// anew: the failed one deviated) and the one after it (replayed) run to their ends.
#include "support/data.hpp"
#include "support/sweep_size.hpp"

#include <stash/allocator.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/vdnn.hpp>
#include <stash/testing/fault_injection.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using faulty_pool  = stash::testing::fault_injecting_pool<host_caching>;
using backend_t    = stash::testing::fault_injecting_backend<stash::host_backend>;
using allocator_t  = stash::allocator<faulty_pool, stash::vdnn_all, void, backend_t>;

constexpr std::uint64_t scale = 4096;  // tensors 4096x smaller than recorded: the walk is long

float value(std::uint64_t storage, std::uint32_t version, std::size_t i)
{
  return (i + version) % 3 == 0 ? float((storage * 7 + version * 13 + i) % 4096) : 0.0f;
}

// The allocator driven through a trace by hand, so that an iteration can be abandoned midway.
struct driver {
  stash::trace const& t;
  stash::testing::fault_injector faults;
  stash::host_backend inner;
  backend_t backend{inner, faults};
  host_caching device_real{stash::host_upstream{}, stash::caching_pool_options{}};
  faulty_pool device{device_real, faults};
  stash::host_backend::stream s{inner.create_stream()};
  allocator_t alloc;
  std::vector<std::optional<stash::tensor_handle>> id;
  std::vector<std::uint32_t> version;
  std::vector<bool> in_iteration;
  std::size_t first_iteration_event{0};
  std::atomic<std::uint64_t> bad{0};

  static stash::allocator_options options()
  {
    stash::allocator_options o;
    o.host_step = 64 * stash::KiB;  // the host pool grows a few times in the first replay
    return o;
  }

  explicit driver(stash::trace const& trace)
      : t(trace),
        alloc(backend, device, options()),
        id(t.storages().size()),
        version(t.storages().size(), 0),
        in_iteration(t.storages().size(), false)
  {
    auto const events = t.events();
    while (first_iteration_event < events.size() &&
           events[first_iteration_event].kind != stash::event_kind::phase) {
      ++first_iteration_event;
    }
    for (std::size_t k = 0; k < first_iteration_event; ++k) { event(events[k]); }
  }

  driver(driver const&)            = delete;
  driver& operator=(driver const&) = delete;
  // The test's kernels on `s` touch pool memory: they finish before the pools go.
  ~driver() { inner.synchronize(s); }

  std::size_t bytes_of(stash::storage_id sid) const
  {
    return std::max<std::uint64_t>(4, t.storages()[sid].bytes / scale / 4 * 4);
  }

  // The test's own kernels run on the real backend: only stash's calls are failure points.
  void fill(stash::storage_id sid, void* p)
  {
    std::size_t const n = bytes_of(sid) / 4;
    auto const v        = ++version[sid];
    inner.launch(s, [=] {
      for (std::size_t i = 0; i < n; ++i) { static_cast<float*>(p)[i] = value(sid, v, i); }
    });
  }
  void check(stash::storage_id sid, void const* p)
  {
    if (version[sid] == 0) { return; }
    std::size_t const n = bytes_of(sid) / 4;
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

  void event(stash::trace_event const& e)
  {
    switch (e.kind) {
      case stash::event_kind::phase:
        alloc.phase(e.phase_value());
        break;
      case stash::event_kind::alloc: {
        auto const& st   = t.storages()[e.index];
        id[e.index]      = alloc.allocate_async(bytes_of(e.index), st.kind, st.label, s);
        version[e.index] = 0;
        break;
      }
      case stash::event_kind::free:
        alloc.deallocate_async(*id[e.index]);
        id[e.index].reset();
        break;
      case stash::event_kind::op: {
        auto const& op = t.ops()[e.index];
        std::vector<stash::tensor_handle> reads, writes;
        for (auto sid : op.reads) { reads.push_back(*id[sid]); }
        for (auto sid : op.writes) { writes.push_back(*id[sid]); }
        auto const p = alloc.op(op.name, reads, writes, s);
        for (std::size_t r = 0; r < op.reads.size(); ++r) { check(op.reads[r], p[r]); }
        for (std::size_t w = 0; w < op.writes.size(); ++w) {
          fill(op.writes[w], p[op.reads.size() + w]);
        }
        break;
      }
    }
  }

  // One iteration; throws the injected failure (the allocator is then still in the iteration).
  void iteration()
  {
    alloc.begin_iteration();
    auto const events = t.events();
    for (std::size_t k = first_iteration_event; k < events.size(); ++k) {
      if (events[k].kind == stash::event_kind::alloc) { in_iteration[events[k].index] = true; }
      event(events[k]);
    }
    alloc.end_iteration();
    forget_iteration();
  }

  void forget_iteration()
  {
    for (auto&& b : in_iteration) { b = false; }
  }

  // Every live tensor's bytes, checked through the allocator (which brings back what is away).
  void check_live()
  {
    for (stash::storage_id sid = 0; sid < id.size(); ++sid) {
      if (id[sid]) { check(sid, alloc.acquire_async(*id[sid], s)); }
    }
    inner.synchronize(s);
    alloc.synchronize();
    CHECK(bad.load() == 0);
    // Every offload the allocator issued is one the manager made.
    CHECK(alloc.stats().scheduled_offloads == alloc.stats().offload.offloads);
    CHECK(alloc.stats().offload.decode_failures == 0);
  }

  // The caller's side of a failure: the iteration's tensors are freed and the iteration ended.
  void abandon_iteration()
  {
    for (stash::storage_id sid = 0; sid < id.size(); ++sid) {
      if (in_iteration[sid] && id[sid]) {
        alloc.deallocate_async(*id[sid]);
        id[sid].reset();
      }
    }
    forget_iteration();
    alloc.end_iteration();
  }
};

}  // namespace

TEST_CASE("fault injection: stash::allocator loses nothing at any failure point of alexnet's step")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  driver d(t);
  d.iteration();  // recorded and planned
  REQUIRE(d.alloc.state() == stash::allocator_state::replaying);
  d.iteration();  // replayed once without failures
  d.check_live();
  std::size_t const device_before = d.device_real.stats().in_use_bytes;
  // Every failure point in stash_sweep_tests; under ASan (stash_tests) the first 20 and every
  // fifth after them (~1/4 of the time): the kinds of call (event, copy, launch, allocation)
  // recur with a short period along the step, and a prime stride meets each kind in every part
  // of it. `walked` counts the points visited: the injector's failures add up over the walk.
  std::uint64_t k      = 0;
  std::uint64_t walked = 0;
  for (;; ++k) {
    if (!stash::test::sweep_visits(k, 20, 5)) { continue; }
    ++walked;
    d.faults.arm(k);
    try {
      d.iteration();
      if (d.faults.failures() == walked) {  // absorbed (a pool's retry): the iteration still ran
        d.check_live();
        continue;
      }
    } catch (std::exception const& e) {
      REQUIRE_MESSAGE(d.faults.failures() == walked, "not an injected failure: " << e.what());
      INFO("failure " << k << " (" << stash::testing::to_string(*d.faults.last_failure())
                      << "): " << e.what());
      d.check_live();
      d.abandon_iteration();
      d.alloc.synchronize();
      CHECK(d.device_real.stats().in_use_bytes == device_before);
      // The next iteration runs (recorded anew: the failed one deviated), then replays again.
      d.iteration();
      d.iteration();
      CHECK(d.alloc.state() == stash::allocator_state::replaying);
      d.check_live();
      CHECK(d.device_real.stats().in_use_bytes == device_before);
      continue;
    }
    break;  // nothing was left to fail
  }
  d.faults.disarm();
  d.check_live();
  CHECK(d.device_real.stats().in_use_bytes == device_before);
  MESSAGE("failure points walked: " << walked - 1 << " of " << k);
  CHECK(k > 100);
}

TEST_CASE(
    "fault injection: every allocation of stash::allocator's first replay, the host pool's too")
{
  // The first replay is where the host pool grows (its upstream is the backend's fault-injecting
  // staging upstream): a fresh allocator per k, allocations only. The k-th allocation fails three
  // times running, so that caching_pool's two retries of its upstream fail too. A scheduled
  // offload or prefetch that fails is counted and the iteration runs on (the tensor stays where
  // it was); only what an op itself needs (an allocation, an on-demand prefetch) is thrown.
  auto const t           = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  unsigned const allocs  = 1u << static_cast<unsigned>(stash::testing::fault_kind::allocate);
  std::uint64_t host_oom = 0;
  std::uint64_t prefetch_oom = 0;
  std::uint64_t thrown       = 0;
  std::uint64_t k            = 0;
  for (;; ++k) {
    // Every allocation in stash_sweep_tests; under ASan the first 30 (the host pool grows at the
    // first offloads) and every seventh after them.
    if (!stash::test::sweep_visits(k, 30, 7)) { continue; }
    driver d(t);
    d.iteration();  // recorded and planned
    d.check_live();
    std::size_t const device_before = d.device_real.stats().in_use_bytes;
    auto const before               = d.alloc.stats();
    d.faults.arm(k, allocs, 3);
    try {
      d.iteration();
    } catch (stash::out_of_memory const& e) {
      d.faults.disarm();
      ++thrown;
      INFO("allocation failure " << k << ": " << std::string(e.what()));
      CHECK(std::string(e.what()).find("host pool") == std::string::npos);  // never thrown
      d.check_live();
      d.abandon_iteration();
      d.alloc.synchronize();
      CHECK(d.device_real.stats().in_use_bytes == device_before);
      d.iteration();
      d.iteration();
      d.check_live();
      CHECK(d.device_real.stats().in_use_bytes == device_before);
      continue;
    }
    if (d.faults.failures() == 0) { break; }  // the k-th allocation never came
    d.faults.disarm();
    host_oom += d.alloc.stats().failed_offloads - before.failed_offloads;
    prefetch_oom += d.alloc.stats().failed_prefetches - before.failed_prefetches;
    d.check_live();
    d.iteration();  // and the allocator goes on
    d.check_live();
    CHECK(d.alloc.state() == stash::allocator_state::replaying);
  }
  MESSAGE("allocations walked: " << k << ", thrown from an op " << thrown
                                 << ", scheduled offloads failed (host pool) " << host_oom
                                 << ", scheduled prefetches failed " << prefetch_oom);
  CHECK(k > 100);
  CHECK(host_oom > 0);
  CHECK(thrown > 0);
}

}  // namespace STASH_UNITY_ID
