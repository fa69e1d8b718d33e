// Sizes near 2^64 through every pool, adaptor and upstream that runs on a CPU (issue 24): a size
// whose rounding would wrap 64 bits is stash::out_of_memory carrying the request, nothing is
// allocated or counted, and the pool serves as before. Without checked rounding
// caching_pool::allocate_async(SIZE_MAX - 100) handed back a 2 MiB block reporting 0 B in use.

#include <stash/core/host_upstream.hpp>
#include <stash/core/limiting_upstream.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/pool/statistics_adaptor.hpp>
#include <stash/pool/stream_order.hpp>
#include <stash/testing/pool_conformance.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <limits>

namespace STASH_UNITY_ID {

namespace {

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();
cudaStream_t const fake_stream = reinterpret_cast<cudaStream_t>(0x1000);

using host_pool   = stash::caching_pool<stash::host_upstream, stash::immediate_order>;
using host_arena  = stash::lifetime_arena<stash::host_upstream>;
using host_pinned = stash::pinned_host_pool<stash::host_upstream, stash::immediate_order>;

// Sizes that wrap at the pools' roundings (512 B, 2 MiB, 64 MiB) and the largest of all.
constexpr std::size_t huge_sizes[] = {size_max - 100, size_max - 511, size_max - (2u << 20) + 1,
                                      size_max};

// Every huge size is refused as out_of_memory carrying the request, the pool's figures unchanged
// and a small block still served afterwards.
template <class Pool>
void check_refuses_huge(Pool& pool)
{
  void* held        = stash::pool_allocate(pool, fake_stream, 4096);
  auto const before = pool.stats();
  for (std::size_t const bytes : huge_sizes) {
    CAPTURE(bytes);
    try {
      (void)stash::pool_allocate(pool, fake_stream, bytes);
      FAIL("a size near 2^64 was served");
    } catch (stash::out_of_memory const& e) {
      CHECK(e.requested_bytes() == bytes);
    }
    CHECK(stash::testing::same_pool_stats(before, pool.stats()));
  }
  void* small = stash::pool_allocate(pool, fake_stream, 1000);
  CHECK(small != nullptr);
  stash::pool_deallocate(pool, fake_stream, small, 1000);
  stash::pool_deallocate(pool, fake_stream, held, 4096);
  CHECK(pool.stats().in_use_bytes == 0);
}

}  // namespace

TEST_CASE("checked_align_up refuses what align_up wraps")
{
  CHECK(stash::align_up(size_max - 100, 512) == 0);  // the wrap the checked form exists for
  CHECK_FALSE(stash::checked_align_up(size_max - 100, 512).has_value());
  CHECK_FALSE(stash::checked_align_up(size_max, 2).has_value());
  CHECK(stash::checked_align_up(size_max, 1) == size_max);
  CHECK(stash::checked_align_up(size_max - 511, 512) == size_max - 511);
  CHECK(stash::checked_align_up(0, 4096) == 0);
  CHECK(stash::checked_align_up(4097, 4096) == 8192);
  static_assert(stash::checked_align_up(3, 4) == 4);
}

TEST_CASE("caching_pool: a size near 2^64 is out_of_memory and changes nothing")
{
  host_pool pool;
  check_refuses_huge(pool);
  CHECK_THROWS_AS(pool.reserve(size_max - 100), stash::out_of_memory);
  CHECK(pool.stats().reserved_bytes == 2 * stash::MiB);  // the small segment of the checks only
}

TEST_CASE("caching_pool: an aligned request whose padding would wrap 2^64 is out_of_memory")
{
  // At 4096-byte alignment a block needs 4096 - 256 bytes of padding beyond the request: near
  // 2^64 the sum wraps to a few KiB, which must not be served.
  host_pool pool;
  auto const before = pool.stats();
  for (std::size_t const bytes : {size_max - 1000, size_max - 3839, size_max}) {
    CAPTURE(bytes);
    CHECK_THROWS_AS((void)stash::pool_allocate(pool, fake_stream, bytes, 4096),
                    stash::out_of_memory);
    CHECK(stash::testing::same_pool_stats(before, pool.stats()));
  }
  void* small = stash::pool_allocate(pool, fake_stream, 1000, 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(small) % 4096 == 0);
  stash::pool_deallocate(pool, fake_stream, small, 1000, 4096);
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("pinned host pool options (64 MiB steps): a size near 2^64 is out_of_memory")
{
  host_pinned pool(stash::host_upstream{}, stash::pinned_host_pool_options());
  check_refuses_huge(pool);
}

TEST_CASE("lifetime_arena: a size near 2^64 is out_of_memory while recording and replaying")
{
  host_arena arena;
  check_refuses_huge(arena);  // outside iterations
  for (int it = 0; it < 3; ++it) {
    arena.begin_iteration();
    void* a = arena.allocate_async(1 << 20, fake_stream);
    void* b = arena.allocate_async(1 << 16, fake_stream);
    if (it == 2) {
      REQUIRE(arena.state() == stash::arena_state::replaying);
      auto const before = arena.stats();
      CHECK_THROWS_AS((void)arena.allocate_async(size_max - 100, fake_stream),
                      stash::out_of_memory);
      CHECK(stash::testing::same_pool_stats(before, arena.stats()));
    }
    arena.deallocate_async(b, 1 << 16, fake_stream);
    arena.deallocate_async(a, 1 << 20, fake_stream);
    arena.end_iteration();
  }
  CHECK(arena.stats().fallbacks == 0);  // the refused request did not count as a deviation
}

TEST_CASE("lifetime_arena with largest sizes: a size near 2^64 does not take a slot")
{
  stash::lifetime_arena_options o;
  o.sizes = stash::arena_sizes::largest;
  host_arena arena(stash::host_upstream{}, o);
  for (int it = 0; it < 2; ++it) {
    arena.begin_iteration();
    void* a = arena.allocate_async(1 << 20, fake_stream);
    arena.deallocate_async(a, 1 << 20, fake_stream);
    arena.end_iteration();
  }
  REQUIRE(arena.state() == stash::arena_state::replaying);
  arena.begin_iteration();
  CHECK_THROWS_AS((void)arena.allocate_async(size_max - 100, fake_stream), stash::out_of_memory);
  CHECK(arena.stats().in_use_bytes == 0);
  arena.end_iteration();
}

TEST_CASE("statistics_adaptor: a size near 2^64 is out_of_memory and counts nothing")
{
  host_pool pool;
  stash::statistics_adaptor<host_pool> counted(pool);
  check_refuses_huge(counted);
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("host and limiting upstreams: a size near 2^64 is out_of_memory and counts nothing")
{
  stash::host_upstream host;
  CHECK_THROWS_AS((void)host.allocate(size_max - 100, 256), stash::out_of_memory);
  stash::limiting_upstream<stash::host_upstream> unlimited(size_max);
  for (std::size_t const bytes : huge_sizes) {
    CHECK_THROWS_AS((void)unlimited.allocate(bytes, 256), stash::out_of_memory);
    CHECK(unlimited.in_use_bytes() == 0);
  }
  using limited_pool =
      stash::caching_pool<stash::limiting_upstream<stash::host_upstream>, stash::immediate_order>;
  limited_pool pool{stash::limiting_upstream<stash::host_upstream>(size_max)};
  check_refuses_huge(pool);
  CHECK(pool.upstream().in_use_bytes() == pool.stats().reserved_bytes);
}

}  // namespace STASH_UNITY_ID
