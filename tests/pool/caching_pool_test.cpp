
#include <stash/core/host_upstream.hpp>
#include <stash/core/limiting_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/testing/pool_conformance.hpp>

#include <doctest/doctest.h>

namespace STASH_UNITY_ID {

namespace {
using host_pool   = stash::caching_pool<stash::host_upstream>;
using manual_pool = stash::caching_pool<stash::host_upstream, stash::manual_order>;
static_assert(stash::pool<host_pool>);
static_assert(stash::pool<manual_pool>);

stash::caching_pool_options with_budget(std::size_t budget)
{
  stash::caching_pool_options o;
  o.budget = budget;
  return o;
}

// Fake, distinct stream handles: on the host a stream is only a tag for the pool.
cudaStream_t const stream_a = reinterpret_cast<cudaStream_t>(0x1000);
cudaStream_t const stream_b = reinterpret_cast<cudaStream_t>(0x2000);
}  // namespace

TEST_CASE("pool conformance: caching_pool over host memory")
{
  auto const report = stash::testing::check_pool<host_pool>(
      [](std::size_t budget) {
        return std::make_unique<host_pool>(stash::host_upstream{}, with_budget(budget));
      },
      stream_a);
  CHECK_MESSAGE(report.ok(), report.summary());
}

TEST_CASE("caching_pool rounds, splits small segments and reuses the best fit")
{
  host_pool pool;
  void* a = pool.allocate_async(100, stream_a);  // rounds to 512 in a fresh 2 MiB segment
  void* b = pool.allocate_async(600, stream_a);  // 1024, right after a
  CHECK(static_cast<char*>(b) - static_cast<char*>(a) == 512);
  auto s = pool.stats();
  CHECK(s.in_use_bytes == 512 + 1024);
  CHECK(s.reserved_bytes == 2 * stash::MiB);
  CHECK(s.largest_free_bytes == 2 * stash::MiB - 1536);
  pool.deallocate_async(a, 100, stream_a);
  void* c =
      pool.allocate_async(300, stream_a);  // best fit: a's 512-byte hole, not the big remainder
  CHECK(c == a);
  pool.deallocate_async(c, 300, stream_a);
  pool.deallocate_async(b, 600, stream_a);
  // Everything coalesced back into one free block spanning the segment.
  s = pool.stats();
  CHECK(s.in_use_bytes == 0);
  CHECK(s.largest_free_bytes == 2 * stash::MiB);
  CHECK(pool.release_cached() == 2 * stash::MiB);
  CHECK(pool.stats().reserved_bytes == 0);
  CHECK(pool.stats().peak_reserved_bytes == 2 * stash::MiB);
}

TEST_CASE("caching_pool segment sizes follow the small / medium / large rule")
{
  host_pool pool;
  void* small = pool.allocate_async(stash::MiB, stream_a);
  CHECK(pool.stats().reserved_bytes == 2 * stash::MiB);
  void* medium = pool.allocate_async(5 * stash::MiB, stream_a);
  CHECK(pool.stats().reserved_bytes == 22 * stash::MiB);
  // Larger than any cached block (the medium segment has 15 MiB left): a segment of its own,
  // rounded to 2 MiB.
  void* large = pool.allocate_async(16 * stash::MiB + 1, stream_a);
  CHECK(pool.stats().reserved_bytes == 22 * stash::MiB + 18 * stash::MiB);
  // A second medium request is carved from the first medium segment's 15 MiB remainder.
  void* medium2 = pool.allocate_async(5 * stash::MiB, stream_a);
  CHECK(pool.stats().reserved_bytes == 40 * stash::MiB);
  pool.deallocate_async(medium2, 5 * stash::MiB, stream_a);
  pool.deallocate_async(large, 16 * stash::MiB + 1, stream_a);
  pool.deallocate_async(medium, 5 * stash::MiB, stream_a);
  pool.deallocate_async(small, stash::MiB, stream_a);
  CHECK(pool.release_cached() == 40 * stash::MiB);
}

TEST_CASE(
    "caching_pool reuses a block on another stream only after the freeing stream's work passed")
{
  manual_pool pool;
  void* a = pool.allocate_async(4096, stream_a);
  pool.deallocate_async(a, 4096, stream_a);
  // Same stream: reuse at once (stream order protects it).
  void* again = pool.allocate_async(4096, stream_a);
  CHECK(again == a);
  pool.deallocate_async(again, 4096, stream_a);
  // Another stream: the whole segment is pending on stream_a, so a new segment is taken; fill it
  // completely so that it offers no free block.
  void* other  = pool.allocate_async(stash::MiB, stream_b);
  void* other2 = pool.allocate_async(stash::MiB, stream_b);
  CHECK(other != a);
  CHECK(pool.stats().reserved_bytes == 4 * stash::MiB);
  CHECK(pool.stats().largest_free_bytes == 2 * stash::MiB);  // a's segment, still pending
  // Once stream_a's work has finished, stream_b may take a's block.
  pool.order().finish(stream_a);
  void* reused = pool.allocate_async(4096, stream_b);
  CHECK(reused == a);
  CHECK(pool.stats().reserved_bytes == 4 * stash::MiB);
  pool.deallocate_async(reused, 4096, stream_b);
  pool.deallocate_async(other, stash::MiB, stream_b);
  pool.deallocate_async(other2, stash::MiB, stream_b);
  // Both segments were last freed on stream_b: none goes back to the upstream while that work is
  // pending, both once it has finished.
  CHECK(pool.release_cached() == 0);
  pool.order().finish(stream_b);
  CHECK(pool.release_cached() == 4 * stash::MiB);
}

TEST_CASE("caching_pool returns cached segments when the budget is tight, then fails cleanly")
{
  host_pool pool(stash::host_upstream{}, with_budget(4 * stash::MiB));
  void* a = pool.allocate_async(stash::MiB, stream_a);  // 2 MiB small segment
  pool.deallocate_async(a, stash::MiB, stream_a);
  // A 3 MiB request needs a new segment: the cached small one is given back to make room.
  void* b = pool.allocate_async(3 * stash::MiB, stream_a);
  CHECK(b != nullptr);
  CHECK(pool.stats().reserved_bytes == 3 * stash::MiB);  // exact-size segment under the budget
  CHECK(pool.stats().fallbacks == 0);
  CHECK_THROWS_AS((void)pool.allocate_async(2 * stash::MiB, stream_a), stash::out_of_memory);
  pool.deallocate_async(b, 3 * stash::MiB, stream_a);
}

TEST_CASE("caching_pool survives an upstream that runs out, with the pool's own figures")
{
  using limited      = stash::limiting_upstream<stash::host_upstream>;
  using limited_pool = stash::caching_pool<limited, stash::immediate_order>;
  limited_pool pool(limited(3 * stash::MiB));
  auto const& upstream = pool.upstream();
  void* a              = pool.allocate_async(stash::MiB, stream_a);
  pool.deallocate_async(a, stash::MiB, stream_a);
  // The 20 MiB medium segment does not fit the upstream: the cached segment is released and an
  // exact-size segment taken instead.
  void* b = pool.allocate_async(2 * stash::MiB + 1, stream_a);
  CHECK(b != nullptr);
  CHECK(upstream.in_use_bytes() == 2 * stash::MiB + 512);
  try {
    (void)pool.allocate_async(2 * stash::MiB, stream_a);
    FAIL("allocation beyond the upstream succeeded");
  } catch (stash::out_of_memory const& e) {
    CHECK(std::string(e.what()).find("caching_pool") != std::string::npos);
    CHECK(e.in_use_bytes() == 2 * stash::MiB + 512);
    CHECK_FALSE(e.budget_bytes().has_value());  // this pool has no budget of its own
  }
  pool.deallocate_async(b, 2 * stash::MiB + 1, stream_a);
}

TEST_CASE("caching_pool rejects a free with the wrong size through the misuse handler")
{
  host_pool pool;
  void* a = pool.allocate_async(1000, stream_a);
  stash::scoped_misuse_handler const recording;
  static_assert(noexcept(pool.deallocate_async(a, 999, stream_a)));
  pool.deallocate_async(a, 999, stream_a);
  auto const e = stash::take_misuse();
  REQUIRE(e.has_value());
  CHECK(e->kind() == stash::misuse_kind::wrong_size);
  CHECK(std::string(e->what()).find("1000 B allocated, 999 B freed") != std::string::npos);
  CHECK(pool.stats().in_use_bytes > 0);  // nothing was freed
  pool.deallocate_async(a, 1000, stream_a);
  CHECK_FALSE(stash::take_misuse().has_value());
  CHECK(pool.stats().in_use_bytes == 0);
}

// A block freed on another stream whose work has not finished (an offload's copy still running)
// is the only room under the budget: the request waits for it on the device (a memory stall)
// instead of failing, so whether it succeeds does not depend on when that copy completes. A
// request that no pending block can serve still fails, with the pool's figures.
TEST_CASE(
    "caching_pool at its budget stalls on a block pending on another stream, not out_of_memory")
{
  manual_pool pool(stash::host_upstream{}, with_budget(2 * stash::MiB));
  void* a = pool.allocate_async(stash::MiB, stream_a);  // a 2 MiB small segment: the whole budget
  pool.deallocate_async(a, stash::MiB, stream_a);       // pending: stream_a has not finished
  void* b = pool.allocate_async(stash::MiB, stream_b);
  CHECK(b == a);
  CHECK(pool.stalls() == 1);
  REQUIRE(pool.order().waits().size() == 1);
  CHECK(pool.order().waits()[0].first == stash::stream_ref{stream_b});
  CHECK(pool.stats().reserved_bytes == 2 * stash::MiB);
  // The remainder of a's block keeps a's pending marker: served to stream_b the same way.
  void* c = pool.allocate_async(stash::MiB, stream_b);
  CHECK(c == static_cast<char*>(a) + stash::MiB);
  CHECK(pool.stalls() == 2);
  CHECK(pool.order().waits().size() == 2);
  // Nothing free, nothing pending: out_of_memory with the figures, and the pool unchanged.
  CHECK_THROWS_WITH_AS((void)pool.allocate_async(512, stream_b),
                       doctest::Contains("in use 2097152 B"), stash::out_of_memory);
  CHECK(pool.stats().in_use_bytes == 2 * stash::MiB);
  pool.deallocate_async(b, stash::MiB, stream_b);
  pool.deallocate_async(c, stash::MiB, stream_b);
  // Without a budget nothing stalls: another stream's pending block is not waited for while a new
  // segment can be had (cross-stream reuse waits for the work to finish, as before).
  manual_pool free_pool;
  void* x = free_pool.allocate_async(stash::MiB, stream_a);
  free_pool.deallocate_async(x, stash::MiB, stream_a);
  void* y = free_pool.allocate_async(stash::MiB, stream_b);
  CHECK(y != x);
  CHECK(free_pool.stalls() == 0);
  CHECK(free_pool.order().waits().empty());
  free_pool.deallocate_async(y, stash::MiB, stream_b);
}

}  // namespace STASH_UNITY_ID
