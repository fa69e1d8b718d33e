// An offload frees its device bytes at once, in the copy's stream order: under a full device
// budget the next allocation on the compute stream can only have them once the copy has run. The
// device pool then stalls (the compute stream waits for the copy, the host does not block) rather
// than throwing out_of_memory, so whether a step fits depends on what it frees, not on when the
// backend's threads get to run. The copy is held back by a gate on the compute stream: the test
// sees the allocation while the copy has certainly not run, on any machine.
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using manager   = stash::offload_manager<stash::host_backend, host_pool, host_pool>;

}  // namespace

TEST_CASE("offload_manager at a full device budget: the next allocation stalls on the offload")
{
  constexpr std::size_t n = stash::MiB;
  stash::host_backend backend;
  stash::host_backend::stream const s = backend.create_stream();
  stash::caching_pool_options budget;
  budget.budget = 2 * stash::MiB;  // one small segment: room for two tensors of 1 MiB
  host_pool device(stash::host_upstream{}, budget);
  host_pool host(stash::host_upstream{}, stash::pinned_host_pool_options(~0ull, stash::MiB));
  manager m(backend, device, host);

  auto const kept = m.allocate_async(n, s);
  auto const away = m.allocate_async(n, s);
  auto* const a   = static_cast<std::uint8_t*>(m.acquire_async(away, s));
  backend.launch(s, [a] { std::memset(a, 0x5a, n); });
  std::promise<void> gate;
  std::shared_future<void> const opened = gate.get_future().share();
  backend.launch(s, [opened] { opened.wait(); });  // the stream (and so the copy) waits here
  m.offload_async(away, s);
  // The budget is full (kept, and away's bytes until its copy has run): the pool's only room is
  // away's block, pending on the D2H stream. Without the stall this is out_of_memory.
  auto const next = m.allocate_async(n, s);
  CHECK(device.stalls() == 1);
  auto* const b = static_cast<std::uint8_t*>(m.acquire_async(next, s));
  CHECK(b == a);  // the same bytes, which `s` writes only after the copy read them
  backend.launch(s, [b] { std::memset(b, 0xc3, n); });
  gate.set_value();
  backend.synchronize(s);
  m.synchronize();
  CHECK(m.state(away) == stash::tensor_state::offloaded);
  std::vector<std::uint8_t> seen(n);
  std::memcpy(seen.data(), b, n);
  CHECK(seen == std::vector<std::uint8_t>(n, 0xc3));
  m.deallocate_async(next);
  // The offloaded copy is intact: the overwrite ran after it was taken.
  auto* const back = static_cast<std::uint8_t*>(m.acquire_async(away, s));
  backend.synchronize(s);
  std::memcpy(seen.data(), back, n);
  CHECK(seen == std::vector<std::uint8_t>(n, 0x5a));
  m.deallocate_async(away);
  m.deallocate_async(kept);
  backend.synchronize(s);
  m.synchronize();
  CHECK(device.stats().in_use_bytes == 0);
}

// The default host stream is the calling thread: memory it is handed is used at once. A stall
// there cannot be a queued wait (there is no queue): the caller blocks until the pending block's
// last use has run, instead of being handed bytes another stream is still writing (review
// 2026-11-26, seventh read, G1). The pending work sleeps, so without the wait the allocation
// returns long before it ran.
TEST_CASE("caching_pool over host streams: a stall on the default stream waits for the block")
{
  host_pool pool(stash::host_upstream{}, [] {
    stash::caching_pool_options o;
    o.budget = 2 * stash::MiB;  // one small segment
    return o;
  }());
  stash::host_stream a;
  void* const p = pool.allocate_async(2 * stash::MiB, a);
  std::atomic<bool> written{false};
  a.enqueue([p, &written] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::memset(p, 0x11, 2 * stash::MiB);
    written.store(true);
  });
  pool.deallocate_async(p, 2 * stash::MiB, a);  // pending: a's write has not run
  void* const q = pool.allocate(2 * stash::MiB, stash::cuda_allocation_alignment);
  CHECK(q == p);
  CHECK(pool.stalls() == 1);
  CHECK(written.load());  // a's last use of the bytes ran before the caller got them
  pool.deallocate(q, 2 * stash::MiB, stash::cuda_allocation_alignment);
  a.mark()->wait();
}

}  // namespace STASH_UNITY_ID
