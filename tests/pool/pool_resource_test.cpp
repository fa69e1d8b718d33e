// stash's pools as cuda::mr resources, and cuda::mr resources as stash pools: the spellings of
// both CCCL generations, alignment, equality, properties, type-erased references, the statistics
// adaptor over foreign resources, and stash::stream_ref's conversions.

#include <stash/core/host_stream.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/stream_ref.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/pool/pool_ref.hpp>
#include <stash/pool/statistics_adaptor.hpp>
#include <stash/testing/pool_conformance.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool  = stash::caching_pool<stash::host_upstream>;
using host_arena = stash::lifetime_arena<stash::host_upstream>;

// A CUDA stream handle that is never used as one: these pools order nothing on it.
cudaStream_t const fake_stream = reinterpret_cast<cudaStream_t>(0x1000);

#if defined(STASH_HAS_CUDA_MR)
static_assert(cuda::mr::async_resource<host_pool>);
static_assert(cuda::mr::async_resource<host_arena>);
static_assert(cuda::mr::async_resource_with<host_pool, cuda::mr::host_accessible>);
static_assert(!cuda::has_property<host_pool, cuda::mr::device_accessible>);
#endif

// A foreign resource in the CUDA 13.0 toolkit's spelling: knows nothing of stash, takes
// cuda::stream_ref, has no stats. Host memory from aligned_alloc.
struct toolkit_spelled_resource {
  int allocations = 0;
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    ++allocations;
    return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  }
  void deallocate(void* p, std::size_t, std::size_t) noexcept { std::free(p); }
  void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref)
  {
    return allocate(bytes, alignment);
  }
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment, cuda::stream_ref)
  {
    deallocate(p, bytes, alignment);
  }
  bool operator==(toolkit_spelled_resource const&) const { return true; }
};

// A foreign resource in the spelling of CCCL >= 3.1 and RMM 26: the stream comes first.
struct stream_first_resource {
  toolkit_spelled_resource inner;
  void* allocate(cuda::stream_ref s, std::size_t bytes, std::size_t alignment)
  {
    return inner.allocate_async(bytes, alignment, s);
  }
  void deallocate(cuda::stream_ref s, void* p, std::size_t bytes, std::size_t alignment)
  {
    inner.deallocate_async(p, bytes, alignment, s);
  }
  bool operator==(stream_first_resource const&) const { return true; }
  static constexpr bool is_host_accessible = true;
};

static_assert(stash::pool<toolkit_spelled_resource>);
static_assert(stash::pool<stream_first_resource>);
static_assert(!stash::pool_with_stats<toolkit_spelled_resource>);
static_assert(stash::pool_with_stats<stash::statistics_adaptor<stream_first_resource>>);
static_assert(!stash::pool_is_host_accessible<toolkit_spelled_resource>());
static_assert(stash::pool_is_host_accessible<stream_first_resource>());

stash::caching_pool_options with_budget(std::size_t budget)
{
  stash::caching_pool_options o;
  o.budget = budget;
  return o;
}

}  // namespace

TEST_CASE("stash pools answer in every cuda::mr spelling, at the alignment asked")
{
  host_pool pool;
  cuda::stream_ref const s{fake_stream};
  void* a = pool.allocate_async(1000, 64, s);  // CCCL 3.0
  void* b = pool.allocate(s, 1000, 128);       // CCCL >= 3.1
  void* c = pool.allocate(1000, 256);          // synchronous, CCCL 3.0
  void* d = pool.allocate_sync(1000, 32);      // synchronous, CCCL >= 3.1
  for (auto [p, align] :
       {std::pair{a, 64}, std::pair{b, 128}, std::pair{c, 256}, std::pair{d, 32}}) {
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(align) == 0);
  }
  CHECK(pool.stats().allocations == 4);
  pool.deallocate_async(a, 1000, 64, s);
  pool.deallocate(s, b, 1000, 128);
  pool.deallocate(c, 1000, 256);
  pool.deallocate_sync(d, 1000, 32);
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("an alignment a pool cannot honour is refused, saying why, and changes nothing")
{
  host_pool pool;
  void* a            = pool.allocate_async(4096, stash::stream_ref{fake_stream});
  auto const before  = pool.stats();
  auto const message = [&](std::size_t alignment) {
    try {
      (void)pool.allocate_async(100, alignment, fake_stream);
    } catch (stash::logic_error const& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(message(3).find("alignment 3 B is not a power of two") != std::string::npos);
  CHECK(message(0).find("alignment 0 B is not a power of two") != std::string::npos);
  CHECK(message(8192).find("alignment 8192 B is above the largest a stash pool honours (4096 B") !=
        std::string::npos);
  // A free at an alignment no allocation had never throws: the misuse handler hears of it.
  stash::scoped_misuse_handler const recording;
  pool.deallocate_async(a, 4096, 8192, fake_stream);
  auto const e = stash::take_misuse();
  REQUIRE(e.has_value());
  CHECK(e->kind() == stash::misuse_kind::bad_alignment);
  CHECK(stash::testing::same_pool_stats(before, pool.stats()));
  pool.deallocate_async(a, 4096, fake_stream);
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("every power-of-two alignment up to a page, on the caching pool and the arena")
{
  host_pool pool;
  host_arena arena;
  for (std::size_t align = 1; align <= 4096; align *= 2) {
    CAPTURE(align);
    void* p = pool.allocate_async(1000, align, fake_stream);
    void* q = arena.allocate_async(1000, align, fake_stream);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(q) % align == 0);
    pool.deallocate_async(p, 1000, align, fake_stream);
    arena.deallocate_async(q, 1000, align, fake_stream);
  }
  CHECK(pool.stats().in_use_bytes == 0);
  CHECK(arena.stats().in_use_bytes == 0);
}

TEST_CASE("stateful pools compare equal only to themselves")
{
  host_pool a;
  host_pool b;
  CHECK(a == a);
  CHECK(a != b);
}

#if defined(STASH_HAS_CUDA_MR)
TEST_CASE("a stash pool behind a type-erased cuda::mr reference")
{
  host_arena arena;
  cuda::mr::async_resource_ref<cuda::mr::host_accessible> ref{arena};
  cuda::stream_ref const s{fake_stream};
  auto* p = static_cast<std::uint8_t*>(ref.allocate_async(4096, 256, s));
  REQUIRE(p != nullptr);
  p[0]    = 7;
  p[4095] = 9;  // host-accessible, as the property promised
  CHECK(arena.stats().in_use_bytes >= 4096);
  ref.deallocate_async(p, 4096, 256, s);
  CHECK(arena.stats().in_use_bytes == 0);
}
#endif

TEST_CASE("pool conformance: statistics_adaptor over foreign resources of both spellings")
{
  toolkit_spelled_resource toolkit;
  auto const r1 = stash::testing::check_pool<stash::statistics_adaptor<toolkit_spelled_resource>>(
      [&](std::size_t budget) {
        return std::make_unique<stash::statistics_adaptor<toolkit_spelled_resource>>(toolkit,
                                                                                     budget);
      },
      fake_stream);
  CHECK_MESSAGE(r1.ok(), r1.summary());
  CHECK(toolkit.allocations > 0);  // the adaptor forwarded, it did not serve by itself

  stream_first_resource first;
  auto const r2 = stash::testing::check_pool<stash::statistics_adaptor<stream_first_resource>>(
      [&](std::size_t budget) {
        return std::make_unique<stash::statistics_adaptor<stream_first_resource>>(first, budget);
      },
      fake_stream);
  CHECK_MESSAGE(r2.ok(), r2.summary());
}

TEST_CASE("pool conformance: statistics_adaptor over a stash pool agrees with the pool")
{
  auto const r = stash::testing::check_pool<stash::statistics_adaptor<host_pool>>(
      [pools = std::make_shared<std::vector<std::unique_ptr<host_pool>>>()](std::size_t budget) {
        pools->push_back(std::make_unique<host_pool>(stash::host_upstream{}, with_budget(budget)));
        return std::make_unique<stash::statistics_adaptor<host_pool>>(*pools->back());
      },
      fake_stream);
  CHECK_MESSAGE(r.ok(), r.summary());
}

TEST_CASE("stash::stream_ref: CUDA and host streams, conversions and refusals")
{
  stash::stream_ref const none;
  stash::stream_ref const cuda_s{fake_stream};
  CHECK(none == stash::stream_ref{nullptr});
  CHECK(none.get() == nullptr);
  CHECK(cuda_s.get() == fake_stream);
  CHECK(static_cast<cuda::stream_ref>(cuda_s).get() == fake_stream);
  CHECK(stash::stream_ref{cuda::stream_ref{fake_stream}} == cuda_s);
  CHECK(!cuda_s.is_host());

  stash::host_stream worker;
  stash::stream_ref const host_s{worker};
  CHECK(host_s.is_host());
  CHECK(host_s.host() == &worker);
  CHECK(host_s != cuda_s);
  CHECK(host_s != none);
  // A host stream is never a cudaStream_t in disguise.
  CHECK_THROWS_AS((void)host_s.get(), stash::logic_error);
  CHECK_THROWS_AS((void)static_cast<cuda::stream_ref>(host_s), stash::logic_error);
}

TEST_CASE("a foreign resource is refused a host stream rather than handed a fake one")
{
  toolkit_spelled_resource toolkit;
  stash::statistics_adaptor<toolkit_spelled_resource> adaptor(toolkit);
  stash::host_stream worker;
  auto const before = adaptor.stats();
  CHECK_THROWS_AS((void)adaptor.allocate_async(64, stash::stream_ref{worker}), stash::logic_error);
  CHECK(stash::testing::same_pool_stats(before, adaptor.stats()));
  CHECK(toolkit.allocations == 0);
}

TEST_CASE("pool_ref: a copyable handle that compares equal for one pool and forwards every call")
{
  host_pool a;
  host_pool b;
  stash::pool_ref<host_pool> const ra{a};
  stash::pool_ref<host_pool> ra2 = ra;  // copyable, as CCCL 3.1's resource_ref wants
  CHECK(ra == ra2);
  CHECK(ra != stash::pool_ref<host_pool>{b});
  static_assert(stash::pool_with_stats<stash::pool_ref<host_pool>>);
#if defined(STASH_HAS_CUDA_MR)
  static_assert(
      cuda::mr::async_resource_with<stash::pool_ref<host_pool>, cuda::mr::host_accessible>);
#endif
  cuda::stream_ref const s{fake_stream};
  void* p = ra2.allocate(s, 1000, 64);
  void* q = ra2.allocate_async(2000, 256, fake_stream);
  CHECK(a.stats().in_use_bytes >= 3000);
  CHECK(b.stats().in_use_bytes == 0);
  CHECK(ra.stats().in_use_bytes == a.stats().in_use_bytes);
  ra2.deallocate(s, p, 1000, 64);
  ra2.deallocate_async(q, 2000, 256, fake_stream);
  CHECK(a.stats().in_use_bytes == 0);
  CHECK_THROWS_AS((void)ra2.allocate_sync(10, 8192), stash::logic_error);  // the pool's checks
}

}  // namespace STASH_UNITY_ID
