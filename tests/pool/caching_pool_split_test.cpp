// caching_pool's split rule at its boundaries, with exact in_use / reserved figures: a block of a
// small segment splits when at least one rounding unit would remain; a block of a larger segment
// only when more than small_limit would (unless split_large_segments). One byte either side of
// each boundary changes what the pool holds, and so what the next request costs.
#include <stash/core/units.hpp>
#include <stash/core/virtual_upstream.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cstddef>

namespace STASH_UNITY_ID {

namespace {

using pool_type             = stash::caching_pool<stash::virtual_upstream, stash::immediate_order>;
cudaStream_t const stream   = reinterpret_cast<cudaStream_t>(0x1000);
constexpr std::size_t unit  = 512;             // the default rounding
constexpr std::size_t small = 2 * stash::MiB;  // the default small segment

}  // namespace

TEST_CASE("caching_pool rounds requests of rounding - 1, rounding and rounding + 1 bytes exactly")
{
  pool_type pool;
  REQUIRE(pool.options().rounding == unit);
  void* a = pool.allocate_async(unit - 1, stream);
  CHECK(pool.stats().in_use_bytes == unit);
  void* b = pool.allocate_async(unit, stream);
  CHECK(pool.stats().in_use_bytes == 2 * unit);
  void* c = pool.allocate_async(unit + 1, stream);
  CHECK(pool.stats().in_use_bytes == 4 * unit);
  // Carved one after another from one small segment; what is left stays one free block.
  CHECK(static_cast<char*>(b) - static_cast<char*>(a) == unit);
  CHECK(static_cast<char*>(c) - static_cast<char*>(b) == unit);
  CHECK(pool.stats().reserved_bytes == small);
  CHECK(pool.stats().largest_free_bytes == small - 4 * unit);
  pool.deallocate_async(b, unit, stream);
  CHECK(pool.stats().in_use_bytes == 3 * unit);
  pool.deallocate_async(a, unit - 1, stream);
  pool.deallocate_async(c, unit + 1, stream);
  CHECK(pool.stats().in_use_bytes == 0);
  CHECK(pool.stats().largest_free_bytes == small);
}

TEST_CASE("caching_pool splits a small segment's block when one rounding unit or more remains")
{
  // A 1 MiB block (small_limit, the largest small request) leaves a free block of 1 MiB in its
  // segment; a request from that block leaves 2 units, 1 unit, or nothing (its size rounds up to
  // the whole block); a request of one unit after it then fits the remainder or needs a segment.
  constexpr std::size_t one_mib = stash::MiB;
  struct boundary {
    std::size_t second;    // request bytes
    std::size_t rounded;   // its size in the pool
    std::size_t free;      // the largest free block after it
    std::size_t reserved;  // after a third request of one unit
  };
  for (auto const& c : {boundary{one_mib - 2 * unit, one_mib - 2 * unit, 2 * unit, small},
                        boundary{one_mib - unit - 1, one_mib - unit, unit, small},
                        boundary{one_mib - unit, one_mib - unit, unit, small},
                        boundary{one_mib - unit + 1, one_mib, 0, 2 * small}}) {
    CAPTURE(c.second);
    pool_type pool;
    REQUIRE(pool.options().small_limit == one_mib);
    void* first = pool.allocate_async(one_mib, stream);
    CHECK(pool.stats().in_use_bytes == one_mib);
    CHECK(pool.stats().largest_free_bytes == small - one_mib);
    void* second = pool.allocate_async(c.second, stream);
    CHECK(pool.stats().in_use_bytes == one_mib + c.rounded);
    CHECK(pool.stats().reserved_bytes == small);
    CHECK(pool.stats().largest_free_bytes == c.free);
    void* third = pool.allocate_async(unit, stream);
    CHECK(pool.stats().in_use_bytes == one_mib + c.rounded + unit);
    CHECK(pool.stats().reserved_bytes == c.reserved);
    if (c.reserved == small) {  // the remainder, right after the second block
      CHECK(static_cast<char*>(third) - static_cast<char*>(second) ==
            static_cast<std::ptrdiff_t>(c.rounded));
    }
    pool.deallocate_async(third, unit, stream);
    pool.deallocate_async(second, c.second, stream);
    pool.deallocate_async(first, one_mib, stream);
    CHECK(pool.stats().in_use_bytes == 0);
    CHECK(pool.release_cached() == c.reserved);
  }
}

TEST_CASE("caching_pool splits a larger segment's block only when more than small_limit remains")
{
  // Requests of about 19 MiB (over medium_limit) get a segment of their own, rounded up to
  // large_rounding: 20 MiB.
  constexpr std::size_t own_segment = 20 * stash::MiB;
  constexpr std::size_t limit       = stash::MiB;  // the default small_limit
  struct boundary {
    std::size_t first;
    std::size_t in_use;
    std::size_t free;
  };
  SUBCASE("the default: a remainder of small_limit or less stays attached")
  {
    for (auto const& c :
         {boundary{own_segment - limit - unit, own_segment - limit - unit, limit + unit},
          boundary{own_segment - limit - unit + 1, own_segment, 0},
          boundary{own_segment - limit, own_segment, 0}}) {
      CAPTURE(c.first);
      pool_type pool;
      void* p = pool.allocate_async(c.first, stream);
      CHECK(pool.stats().in_use_bytes == c.in_use);
      CHECK(pool.stats().reserved_bytes == own_segment);
      CHECK(pool.stats().largest_free_bytes == c.free);
      pool.deallocate_async(p, c.first, stream);
      CHECK(pool.stats().in_use_bytes == 0);
      CHECK(pool.stats().largest_free_bytes == own_segment);
    }
  }
  SUBCASE("split_large_segments: down to one rounding unit, as in a small segment")
  {
    stash::caching_pool_options o;
    o.split_large_segments = true;
    for (auto const& c : {boundary{own_segment - unit - 1, own_segment - unit, unit},
                          boundary{own_segment - unit, own_segment - unit, unit},
                          boundary{own_segment - unit + 1, own_segment, 0}}) {
      CAPTURE(c.first);
      pool_type pool(stash::virtual_upstream{}, o);
      void* p = pool.allocate_async(c.first, stream);
      CHECK(pool.stats().in_use_bytes == c.in_use);
      CHECK(pool.stats().reserved_bytes == own_segment);
      CHECK(pool.stats().largest_free_bytes == c.free);
      pool.deallocate_async(p, c.first, stream);
      CHECK(pool.stats().in_use_bytes == 0);
    }
  }
}

}  // namespace STASH_UNITY_ID
