// Identity (issue 25, item 4): no stash pool, adaptor or upstream whose copy silently counts or
// hands out apart from the original. Pools and statistics_adaptor are not copyable (CCCL and RMM
// get a stash::pool_ref); limiting_upstream and virtual_upstream are handles whose copies share
// their state and compare equal.

#include <stash/core/host_upstream.hpp>
#include <stash/core/limiting_upstream.hpp>
#include <stash/core/virtual_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/pool/pool_ref.hpp>
#include <stash/pool/statistics_adaptor.hpp>
#include <stash/pool/stream_order.hpp>
#include <stash/testing/pool_conformance.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

cudaStream_t const fake_stream = reinterpret_cast<cudaStream_t>(0x1000);
using host_pool                = stash::caching_pool<stash::host_upstream, stash::immediate_order>;
using limited                  = stash::limiting_upstream<stash::host_upstream>;

static_assert(!std::is_copy_constructible_v<host_pool>);
static_assert(!std::is_copy_constructible_v<stash::lifetime_arena<stash::host_upstream>>);
static_assert(!std::is_copy_constructible_v<stash::statistics_adaptor<host_pool>>);
static_assert(!std::is_copy_assignable_v<stash::statistics_adaptor<host_pool>>);
static_assert(std::is_copy_constructible_v<stash::pool_ref<stash::statistics_adaptor<host_pool>>>);
static_assert(std::is_copy_constructible_v<limited>);
static_assert(std::is_copy_constructible_v<stash::virtual_upstream>);

#if defined(STASH_HAS_CUDA_MR)
static_assert(stash::cuda_mr_synchronous_resource_with<limited, cuda::mr::host_accessible>);
#endif

}  // namespace

TEST_CASE("limiting_upstream copies share the budget and compare equal")
{
  limited a(1 << 20);
  limited b = a;
  CHECK(a == b);
  void* p = b.allocate(600 * 1024, 256);
  CHECK(a.in_use_bytes() == 600 * 1024);  // counted once, seen through either
  CHECK_THROWS_AS((void)a.allocate(600 * 1024, 256), stash::out_of_memory);
  a.deallocate(p, 600 * 1024, 256);  // memory from one freed through the other
  CHECK(b.in_use_bytes() == 0);
  CHECK(a != limited(1 << 20));
  // A pool that owns a copy is still held to the budget the caller sees.
  stash::caching_pool<limited, stash::immediate_order> pool{a};
  void* q = stash::pool_allocate(pool, fake_stream, 1000);
  CHECK(a.in_use_bytes() == pool.stats().reserved_bytes);
  stash::pool_deallocate(pool, fake_stream, q, 1000);
}

TEST_CASE("virtual_upstream copies never hand out the same address")
{
  stash::virtual_upstream a;
  stash::virtual_upstream b = a;
  CHECK(a == b);
  void* p = a.allocate(4096, 256);
  void* q = b.allocate(4096, 256);
  CHECK(reinterpret_cast<std::uintptr_t>(q) >= reinterpret_cast<std::uintptr_t>(p) + 4096);
  CHECK(a.in_use_bytes() == 8192);
  a.deallocate(p, 4096, 256);
  b.deallocate(q, 4096, 256);
  CHECK(stash::virtual_upstream{} != a);
}

TEST_CASE("a lifetime_arena over virtual_upstream: the arena and its fallback never overlap")
{
  // The arena takes its block from its upstream and gives a copy to its fallback pool; copies
  // that did not share the range handed both the same addresses.
  stash::lifetime_arena<stash::virtual_upstream, stash::greedy_planner, stash::immediate_order>
      arena;
  stash::testing::live_blocks addresses;
  bool ok = true;
  for (int it = 0; it < 3; ++it) {
    arena.begin_iteration();
    std::vector<std::pair<void*, std::size_t>> blocks;
    for (std::size_t k = 1; k <= 4; ++k) {
      std::size_t const n = k * 100000;
      blocks.emplace_back(arena.allocate_async(n, fake_stream), n);
      ok = ok && addresses.insert(blocks.back().first, n);
    }
    // One allocation the recording did not have: from the fallback, beside the arena's blocks.
    void* extra = it == 2 ? arena.allocate_async(3000000, fake_stream) : nullptr;
    ok          = ok && (extra == nullptr || addresses.insert(extra, 3000000));
    if (extra != nullptr) {
      arena.deallocate_async(extra, 3000000, fake_stream);
      addresses.erase(extra);
    }
    for (auto [p, n] : blocks) {
      arena.deallocate_async(p, n, fake_stream);
      addresses.erase(p);
    }
    arena.end_iteration();
  }
  CHECK(arena.state() == stash::arena_state::replaying);
  CHECK(ok);
}

TEST_CASE("statistics_adaptor: one count, reached through pool_refs")
{
  host_pool pool;
  stash::statistics_adaptor<host_pool> counted(pool);
  stash::pool_ref<stash::statistics_adaptor<host_pool>> r1{counted};
  auto r2 = r1;
  CHECK(r1 == r2);
  void* p = r1.allocate_async(1000, 256, fake_stream);
  CHECK(counted.stats().in_use_bytes == 1000);
  r2.deallocate_async(p, 1000, 256, fake_stream);  // freed through the copy: the same adaptor
  CHECK(counted.stats().in_use_bytes == 0);
  CHECK(counted.stats().allocations == 1);
}

}  // namespace STASH_UNITY_ID
