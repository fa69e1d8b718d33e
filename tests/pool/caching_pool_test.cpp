
#include <stash/core/host_upstream.hpp>
#include <stash/core/limiting_upstream.hpp>
#include <stash/core/virtual_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/testing/pool_conformance.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

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

namespace {
// The pool's bookkeeping (map and set nodes) allocates through this: it counts the nodes and
// throws std::bad_alloc at the armed one, so a test can fail each node a request allocates.
struct node_faults {
  static inline std::uint64_t calls   = 0;
  static inline std::uint64_t fail_at = 0;  // the value of `calls` that throws; 0: none
};

template <class T>
struct failing_node_allocator {
  using value_type                  = T;
  failing_node_allocator() noexcept = default;
  template <class U>
  failing_node_allocator(failing_node_allocator<U> const&) noexcept  // NOLINT: rebinding
  {
  }
  T* allocate(std::size_t n)
  {
    if (++node_faults::calls == node_faults::fail_at) { throw std::bad_alloc(); }
    return std::allocator<T>{}.allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>{}.deallocate(p, n); }
  bool operator==(failing_node_allocator const&) const noexcept = default;
};

// Virtual addresses: the same in every run from a fresh upstream, so runs compare pointer by
// pointer; manual_order keeps a free on another stream pending (the stall path).
using node_fault_pool = stash::caching_pool<stash::virtual_upstream, stash::manual_order,
                                            failing_node_allocator<std::byte>>;

struct live_block {
  void* p;
  std::size_t bytes;
  std::size_t alignment;
  cudaStream_t stream;
};

// A request (bytes, alignment, stream) made after `setup`, which returns the blocks it left live.
struct bookkeeping_case {
  std::string name;
  std::size_t budget;
  std::function<std::vector<live_block>(node_fault_pool&)> setup;
  live_block request;
};

// What a failed request must leave as it was: the figures, the upstream, the stream waits.
struct pool_state {
  stash::pool_stats stats;
  std::uint64_t stalls;
  std::size_t waits;
  std::size_t upstream_in_use;
};

pool_state state_of(node_fault_pool& pool)
{
  return {pool.stats(), pool.stalls(), pool.order().waits().size(), pool.upstream().in_use_bytes()};
}

void check_same(pool_state const& a, pool_state const& b)
{
  CHECK(a.stats.in_use_bytes == b.stats.in_use_bytes);
  CHECK(a.stats.peak_in_use_bytes == b.stats.peak_in_use_bytes);
  CHECK(a.stats.reserved_bytes == b.stats.reserved_bytes);
  CHECK(a.stats.peak_reserved_bytes == b.stats.peak_reserved_bytes);
  CHECK(a.stats.largest_free_bytes == b.stats.largest_free_bytes);
  CHECK(a.stats.allocations == b.stats.allocations);
  CHECK(a.stalls == b.stalls);
  CHECK(a.waits == b.waits);
  CHECK(a.upstream_in_use == b.upstream_in_use);
}

// The run after setup (and, when `fail`, the request failed at its `fail`-th node): the request,
// then a second one, every block freed, the streams finished, cached segments released; the
// pointers and states on the way, and the upstream's bytes once the pool is gone.
struct after_setup {
  std::vector<void*> pointers;
  std::vector<pool_state> states;
  std::size_t upstream_after_destruction;
};

after_setup run_case(bookkeeping_case const& c, std::uint64_t fail, std::uint64_t* nodes)
{
  after_setup out;
  stash::virtual_upstream upstream;
  {
    stash::caching_pool_options options;
    options.budget = c.budget;
    node_fault_pool pool(upstream, options);
    auto live        = c.setup(pool);
    auto const& r    = c.request;
    auto const start = node_faults::calls;
    if (fail != 0) {
      auto const before    = state_of(pool);
      node_faults::fail_at = start + fail;
      CHECK_THROWS_AS((void)pool.allocate_async(r.bytes, r.alignment, r.stream), std::bad_alloc);
      node_faults::fail_at = 0;
      check_same(state_of(pool), before);
    }
    auto const first = node_faults::calls;
    for (int i = 0; i < 2; ++i) {
      live.push_back(
          {pool.allocate_async(r.bytes, r.alignment, r.stream), r.bytes, r.alignment, r.stream});
      out.pointers.push_back(live.back().p);
      out.states.push_back(state_of(pool));
      if (i == 0 && nodes != nullptr) { *nodes = node_faults::calls - first; }
    }
    for (auto const& b : live) { pool.deallocate_async(b.p, b.bytes, b.alignment, b.stream); }
    pool.order().finish(stream_a);
    pool.order().finish(stream_b);
    (void)pool.release_cached();
    out.states.push_back(state_of(pool));
  }
  out.upstream_after_destruction = upstream.in_use_bytes();
  return out;
}
}  // namespace

// "A failed allocation leaves the pool intact" for std::bad_alloc from the pool's own map and
// set nodes too (GPU review 2026-11-26b, P1 and G4): before, a node that failed after the
// upstream call lost the segment (never given back), one that failed in a split lost the block
// from the free index, and an over-aligned stall was counted (and its wait queued) for a request
// that then failed. Every node of each request is failed in turn; the pool must then look as it
// did and go on exactly as a pool that never saw the failure.
TEST_CASE("caching_pool: std::bad_alloc from its bookkeeping leaves the pool intact")
{
  auto const none = [](node_fault_pool&) { return std::vector<live_block>{}; };
  std::vector<bookkeeping_case> const cases{
      {"a new small segment, split", stash::MiB * 64, none, {nullptr, 1000, 256, stream_a}},
      {"a new segment, over-aligned", stash::MiB * 64, none, {nullptr, 100, 4096, stream_a}},
      {"a cached block, split",
       stash::MiB * 64,
       [](node_fault_pool& pool) {
         return std::vector<live_block>{{pool.allocate_async(4096, stream_a), 4096, 256, stream_a}};
       },
       {nullptr, 1000, 256, stream_a}},
      {"a cached block, over-aligned and split",
       stash::MiB * 64,
       [](node_fault_pool& pool) {
         return std::vector<live_block>{{pool.allocate_async(512, stream_a), 512, 256, stream_a}};
       },
       {nullptr, 100, 4096, stream_a}},
      {"a stall on a pending block at the budget, over-aligned",
       2 * stash::MiB,
       [](node_fault_pool& pool) {
         // The pending block starts 512 B into the segment: the request needs an aligned start.
         std::vector<live_block> live{{pool.allocate_async(512, stream_a), 512, 256, stream_a}};
         void* pending = pool.allocate_async(stash::MiB, stream_a);
         pool.deallocate_async(pending, stash::MiB, stream_a);  // pending: stream_a not finished
         return live;
       },
       {nullptr, 100, 4096, stream_b}},
  };
  for (auto const& c : cases) {
    CAPTURE(c.name);
    std::uint64_t nodes  = 0;
    auto const reference = run_case(c, 0, &nodes);
    CHECK(reference.upstream_after_destruction == 0);
    REQUIRE(nodes >= 2);  // each case inserts at least a split's remainder or a segment
    for (std::uint64_t k = 1; k <= nodes; ++k) {
      CAPTURE(k);
      auto const failed = run_case(c, k, nullptr);
      CHECK(failed.pointers == reference.pointers);
      REQUIRE(failed.states.size() == reference.states.size());
      for (std::size_t i = 0; i < failed.states.size(); ++i) {
        check_same(failed.states[i], reference.states[i]);
      }
      CHECK(failed.upstream_after_destruction == 0);
    }
  }
  CHECK(node_faults::fail_at == 0);
}

}  // namespace STASH_UNITY_ID
