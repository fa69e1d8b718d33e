// The offload manager against a careless user, a long run and failing pools (issues 24 and 26):
// handles tied to their manager, a table that reuses released slots, sizes near 2^64. (A pool
// refusing a block back cannot happen: every pool's deallocate is noexcept, as cuda::mr's.)
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using manager   = stash::offload_manager<stash::host_backend, host_pool, host_pool>;

struct pools {
  stash::host_backend backend;
  stash::host_backend::stream s{backend.create_stream()};
  host_pool device{stash::host_upstream{}, stash::caching_pool_options{}};
  host_pool host{stash::host_upstream{}, stash::pinned_host_pool_options(~0ull, stash::MiB)};
};

}  // namespace

TEST_CASE("offload_manager: handles are tied to their manager and to their tensor's lifetime")
{
  pools p;
  manager a(p.backend, p.device, p.host);
  manager b(p.backend, p.device, p.host);
  auto const ha = a.allocate_async(1024, p.s);
  auto const hb = b.allocate_async(1024, p.s);
  CHECK(ha.index() == hb.index());
  CHECK(ha.owner() == a.owner_tag());
  CHECK_THROWS_WITH_AS(b.deallocate_async(ha), doctest::Contains("belongs to another manager"),
                       stash::logic_error);
  CHECK_THROWS_AS((void)b.state(ha), stash::logic_error);
  CHECK(b.state(hb) == stash::tensor_state::resident);
  a.deallocate_async(ha);
  CHECK(a.state(ha) == stash::tensor_state::released);  // a released handle reports it
  auto const again = a.allocate_async(1024, p.s);
  CHECK(again.index() == ha.index());                   // the slot is reused...
  CHECK(a.state(ha) == stash::tensor_state::released);  // ...and the old handle still says so
  CHECK_THROWS_WITH_AS(a.deallocate_async(ha), doctest::Contains("was released"),
                       stash::logic_error);
  CHECK_THROWS_AS((void)a.acquire_async(ha, p.s), stash::logic_error);
  CHECK_THROWS_AS(a.offload_async(ha, p.s), stash::logic_error);
  CHECK(a.state(again) == stash::tensor_state::resident);
  a.deallocate_async(again);
  b.deallocate_async(hb);
}

TEST_CASE("offload_manager: the tensor table stays as large as the most tensors alive at once")
{
  pools p;
  manager m(p.backend, p.device, p.host);
  std::vector<stash::tensor_handle> live;
  for (int round = 0; round < 5000; ++round) {
    for (int k = 0; k < 8; ++k) { live.push_back(m.allocate_async(256, p.s)); }
    m.offload_async(live[3], p.s);
    m.prefetch_async(live[3]);
    for (auto h : live) { m.deallocate_async(h); }
    live.clear();
  }
  p.backend.synchronize(p.s);
  m.synchronize();
  CHECK(m.stats().tensor_slots == 8);
  CHECK(m.stats().offloads == 5000);
  CHECK(p.device.stats().in_use_bytes == 0);
  CHECK(p.host.stats().in_use_bytes == 0);
}

TEST_CASE("offload_manager: sizes near 2^64 are out_of_memory with nothing taken")
{
  pools p;
  manager m(p.backend, p.device, p.host);
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  for (std::size_t bytes : {max, max - 100, manager::max_tensor_bytes + 1}) {
    INFO("bytes " << bytes);
    CHECK_THROWS_AS((void)m.allocate_async(bytes, p.s), stash::out_of_memory);
  }
  CHECK(p.device.stats().in_use_bytes == 0);
  CHECK(m.stats().tensor_slots == 0);
  // A host slot whose size would wrap (capacity + status record) is refused, not wrapped.
  CHECK_THROWS_AS((void)manager::host_slot_bytes(max - 8), stash::out_of_memory);
  CHECK(manager::host_slot_bytes(1000) >= 1000 + sizeof(stash::transfer_status));
}

}  // namespace STASH_UNITY_ID
