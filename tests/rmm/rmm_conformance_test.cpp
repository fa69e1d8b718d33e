// stash's types through RMM and CCCL 3.5 as RMM's own resource suites exercise a resource (its
// resource_ref, host-resource, statistics, limiting and failure-callback cases, rewritten here for
// stash's types; issue 25): sizes 0 to exhaustion, every power-of-two alignment to a page, random
// allocate/free mixes, equality, properties, RMM adaptors over stash and stash over CCCL refs,
// RMM's exception type for out of memory, a failure callback that retries, frees that never
// throw, and no copy that counts apart. CPU only: the device-accessible pool here is host memory
// standing in (see rmm_test.cpp).
#include <stash/core/host_upstream.hpp>
#include <stash/core/limiting_upstream.hpp>
#include <stash/core/misuse.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/pool/pool_ref.hpp>
#include <stash/pool/rmm_pool_ref.hpp>
#include <stash/pool/statistics_adaptor.hpp>
#include <stash/pool/stream_order.hpp>
#include <stash/testing/pool_conformance.hpp>

#include <rmm/error.hpp>
#include <rmm/mr/failure_callback_resource_adaptor.hpp>
#include <rmm/mr/limiting_resource_adaptor.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/resource_ref.hpp>

#include <doctest/doctest.h>
#include <cuda/memory_resource>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace {

// Host memory declared device-accessible too: RMM's adaptors take device-accessible resources.
struct host_as_device {
  static constexpr bool is_host_accessible   = true;
  static constexpr bool is_device_accessible = true;
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    return stash::host_upstream{}.allocate(bytes, alignment);
  }
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    stash::host_upstream{}.deallocate(p, bytes, alignment);
  }
  bool operator==(host_as_device const&) const { return true; }
  friend void get_property(host_as_device const&, cuda::mr::host_accessible) noexcept {}
  friend void get_property(host_as_device const&, cuda::mr::device_accessible) noexcept {}
};

using pool_t = stash::caching_pool<host_as_device, stash::immediate_order>;
using arena_t =
    stash::lifetime_arena<host_as_device, stash::greedy_planner, stash::immediate_order>;
cuda::stream_ref const stream{cudaStream_t{nullptr}};
constexpr std::size_t one_pib = std::size_t{1} << 50;

stash::caching_pool_options budget(std::size_t bytes)
{
  stash::caching_pool_options o;
  o.budget = bytes;
  return o;
}

static_assert(cuda::mr::resource_with<stash::rmm_pool_ref<pool_t>, cuda::mr::device_accessible,
                                      cuda::mr::host_accessible>);
static_assert(
    cuda::mr::synchronous_resource_with<stash::rmm_pool_ref<pool_t>, cuda::mr::host_accessible>);
static_assert(cuda::mr::synchronous_resource_with<stash::limiting_upstream<stash::host_upstream>,
                                                  cuda::mr::host_accessible>);

// RMM's resource_ref suite, allocation part: sizes, alignments, contents, through a ref.
void exercise(rmm::device_async_resource_ref ref)
{
  CHECK(ref.allocate(stream, 0, 256) == nullptr);
  ref.deallocate(stream, nullptr, 0, 256);
  for (std::size_t align = 1; align <= 4096; align *= 2) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
      CAPTURE(align);
      CAPTURE(bytes);
      void* p = ref.allocate(stream, bytes, align);
      REQUIRE(p != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
      std::memset(p, 0x5A, bytes);
      ref.deallocate(stream, p, bytes, align);
    }
  }
}

}  // namespace

TEST_CASE("rmm suites: a stash pool behind rmm::device_async_resource_ref, sizes and alignments")
{
  pool_t pool;
  stash::rmm_pool_ref pool_handle{pool};
  exercise(rmm::device_async_resource_ref{pool_handle});
  arena_t arena;
  stash::rmm_pool_ref arena_handle{arena};
  exercise(rmm::device_async_resource_ref{arena_handle});
  CHECK(pool.stats().in_use_bytes == 0);
  CHECK(arena.stats().in_use_bytes == 0);
}

TEST_CASE("rmm suites: random allocate/free mixes through RMM's statistics adaptor over stash")
{
  pool_t pool;
  stash::rmm_pool_ref handle{pool};
  rmm::mr::statistics_resource_adaptor stats{rmm::device_async_resource_ref{handle}};
  std::mt19937_64 rng(25);
  struct live {
    void* p;
    std::size_t bytes;
    std::size_t align;
  };
  std::vector<live> lives;
  stash::testing::live_blocks addresses;
  bool ok            = true;
  std::size_t in_use = 0;
  for (int step = 0; step < 2000; ++step) {
    if (!lives.empty() && rng() % 3 == 0) {
      auto const i = rng() % lives.size();
      stats.deallocate(stream, lives[i].p, lives[i].bytes, lives[i].align);
      addresses.erase(lives[i].p);
      in_use -= lives[i].bytes;
      lives[i] = lives.back();
      lives.pop_back();
      continue;
    }
    std::size_t const bytes = 1 + rng() % (2 << 20);
    std::size_t const align = std::size_t{1} << (rng() % 13);
    void* p                 = stats.allocate(stream, bytes, align);
    ok = ok && reinterpret_cast<std::uintptr_t>(p) % align == 0 && addresses.insert(p, bytes);
    lives.push_back({p, bytes, align});
    in_use += bytes;
  }
  CHECK(ok);
  CHECK(stats.get_bytes_counter().value == static_cast<std::int64_t>(in_use));
  for (auto const& l : lives) { stats.deallocate(stream, l.p, l.bytes, l.align); }
  CHECK(stats.get_bytes_counter().value == 0);
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("rmm suites: exhaustion (1 PiB) is rmm::out_of_memory with stash's figures")
{
  pool_t pool{host_as_device{}, budget(64 * stash::MiB)};
  stash::rmm_pool_ref handle{pool};
  rmm::device_async_resource_ref ref{handle};
  void* held        = ref.allocate(stream, 1000, 256);
  auto const before = pool.stats();
  CHECK_THROWS_AS((void)ref.allocate(stream, one_pib, 256), rmm::out_of_memory);
  CHECK_THROWS_AS((void)ref.allocate(stream, one_pib, 256), std::bad_alloc);
  try {
    (void)ref.allocate(stream, 100 * stash::MiB, 256);
    FAIL("beyond the budget");
  } catch (stash::rmm_out_of_memory const& e) {
    CHECK(e.figures().requested_bytes() == 100 * stash::MiB);
    CHECK(e.figures().budget_bytes() == 64 * stash::MiB);
    CHECK(e.figures().in_use_bytes() == before.in_use_bytes);
    CHECK(std::string(e.what()).find("stash::out_of_memory in caching_pool: requested 104857600") !=
          std::string::npos);
  }
  CHECK(stash::testing::same_pool_stats(before, pool.stats()));
  // RMM's own adaptors over the ref see RMM's type too.
  rmm::mr::statistics_resource_adaptor stats{ref};
  CHECK_THROWS_AS((void)stats.allocate(stream, one_pib, 256), rmm::out_of_memory);
  ref.deallocate(stream, held, 1000, 256);
}

TEST_CASE("rmm suites: failure_callback_resource_adaptor over a stash pool retries")
{
  pool_t pool{host_as_device{}, budget(8 * stash::MiB)};
  stash::rmm_pool_ref ref{pool};
  struct state {
    rmm::device_async_resource_ref ref;
    void* held;
    std::size_t held_bytes;
    int calls;
    bool free_on_failure;
  };
  state s{rmm::device_async_resource_ref{ref}, nullptr, 6 * stash::MiB, 0, true};
  s.held              = s.ref.allocate(stream, s.held_bytes, 256);
  auto const callback = [](std::size_t, void* arg) {
    auto* st = static_cast<state*>(arg);
    ++st->calls;
    if (!st->free_on_failure || st->held == nullptr) { return false; }
    st->ref.deallocate(stream, st->held, st->held_bytes, 256);  // make room, then retry
    st->held = nullptr;
    return true;
  };
  rmm::mr::failure_callback_resource_adaptor<> retrying{
      cuda::mr::any_resource<cuda::mr::device_accessible>{ref}, callback, &s};
  void* p = retrying.allocate(stream, 4 * stash::MiB, 256);  // fits only after the callback
  CHECK(p != nullptr);
  CHECK(s.calls == 1);
  CHECK(s.held == nullptr);
  s.free_on_failure = false;
  CHECK_THROWS_AS((void)retrying.allocate(stream, 6 * stash::MiB, 256), rmm::out_of_memory);
  CHECK(s.calls == 2);  // asked once more, declined: RMM rethrows stash's error as RMM's type
  retrying.deallocate(stream, p, 4 * stash::MiB, 256);
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("rmm suites: RMM's limiting adaptor over stash, stash's limiting upstream under RMM")
{
  pool_t pool;
  stash::rmm_pool_ref handle{pool};
  rmm::mr::limiting_resource_adaptor limited{rmm::device_async_resource_ref{handle}, 1 << 20};
  void* p = limited.allocate(stream, 600 * 1024, 256);
  CHECK_THROWS_AS((void)limited.allocate(stream, 600 * 1024, 256), rmm::out_of_memory);
  limited.deallocate(stream, p, 600 * 1024, 256);

  stash::limiting_upstream<stash::host_upstream> mine(1 << 20);
  rmm::host_resource_ref host_ref{mine};
  cuda::mr::any_synchronous_resource<cuda::mr::host_accessible> owned{mine};
  void* a = host_ref.allocate_sync(600 * 1024, 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % 4096 == 0);
  CHECK(mine.in_use_bytes() == 600 * 1024);  // the ref counted in the caller's object
  CHECK_THROWS_AS((void)owned.allocate_sync(600 * 1024, 256), stash::out_of_memory);  // shared
  owned.deallocate_sync(a, 600 * 1024, 4096);  // freed through the owning copy
  CHECK(mine.in_use_bytes() == 0);
}

TEST_CASE("rmm suites: equality and properties of refs to stash pools")
{
  pool_t a;
  pool_t b;
  stash::rmm_pool_ref ha1{a};
  stash::rmm_pool_ref ha2{a};
  stash::rmm_pool_ref hb{b};
  CHECK(ha1 == ha2);
  CHECK(ha1 != hb);
  // Type-erased owning copies compare by the pool they refer to.
  cuda::mr::any_resource<cuda::mr::device_accessible> const oa1{ha1};
  cuda::mr::any_resource<cuda::mr::device_accessible> const oa2{ha2};
  cuda::mr::any_resource<cuda::mr::device_accessible> const ob{hb};
  CHECK(oa1 == oa2);
  CHECK(oa1 != ob);
  static_assert(cuda::has_property<stash::rmm_pool_ref<pool_t>, cuda::mr::host_accessible>);
  static_assert(cuda::has_property<stash::rmm_pool_ref<pool_t>, cuda::mr::device_accessible>);
  static_assert(cuda::has_property<stash::pool_ref<pool_t>, cuda::mr::device_accessible>);
  stash::pool_ref plain{a};
  cuda::mr::resource_ref<cuda::mr::host_accessible> host_view{plain};
  void* p                   = host_view.allocate(stream, 64, 64);
  static_cast<char*>(p)[63] = 1;  // host-accessible, as the property says
  host_view.deallocate(stream, p, 64, 64);
}

TEST_CASE("rmm suites: a wrong free behind CCCL's noexcept deallocate is reported, not terminated")
{
  pool_t pool;
  stash::statistics_adaptor<pool_t> counted(pool);
  cuda::mr::any_resource<cuda::mr::device_accessible> owned{
      stash::pool_ref<decltype(counted)>{counted}};
  void* p = owned.allocate(stream, 1000, 512);
  CHECK(counted.stats().in_use_bytes == 1000);  // the original counts, not a copy
  stash::scoped_misuse_handler const recording;
  owned.deallocate(stream, p, 999, 512);  // wrong size: CCCL calls it from a noexcept function
  auto const e = stash::take_misuse();
  REQUIRE(e.has_value());
  CHECK(e->kind() == stash::misuse_kind::wrong_size);
  owned.deallocate(stream, p, 1000, 256);  // wrong alignment
  CHECK(stash::take_misuse()->kind() == stash::misuse_kind::bad_alignment);
  CHECK(counted.stats().in_use_bytes == 1000);  // both refused, the block still live
  owned.deallocate(stream, p, 1000, 512);
  CHECK_FALSE(stash::take_misuse().has_value());
  CHECK(counted.stats().in_use_bytes == 0);
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("rmm suites: the pool conformance kit over the handle RMM is given")
{
  auto const r = stash::testing::check_pool<stash::pool_ref<pool_t>>(
      [pools = std::make_shared<std::vector<std::unique_ptr<pool_t>>>()](std::size_t b) {
        pools->push_back(std::make_unique<pool_t>(host_as_device{}, budget(b)));
        return std::make_unique<stash::pool_ref<pool_t>>(*pools->back());
      },
      stash::stream_ref{});
  CHECK_MESSAGE(r.ok(), r.summary());
}

namespace {

// RMM's host-resource suite over a host_resource_ref: zero bytes, small and large blocks, every
// alignment to a page, too much, a non-power-of-two alignment, a random allocate/free mix.
void exercise_host(rmm::host_resource_ref ref)
{
  void* zero = ref.allocate_sync(0, 256);
  ref.deallocate_sync(zero, 0, 256);
  for (std::size_t align = 1; align <= 4096; align *= 2) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{4095}, std::size_t{8} << 20}) {
      CAPTURE(align);
      CAPTURE(bytes);
      auto* p = static_cast<unsigned char*>(ref.allocate_sync(bytes, align));
      REQUIRE(p != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
      p[0]         = 1;
      p[bytes - 1] = 2;
      ref.deallocate_sync(p, bytes, align);
    }
  }
  CHECK_THROWS_AS((void)ref.allocate_sync(one_pib, 256), std::bad_alloc);
  CHECK_THROWS_AS((void)ref.allocate_sync(64, 3), stash::logic_error);
  std::mt19937_64 rng(1);
  std::vector<std::pair<void*, std::size_t>> lives;
  stash::testing::live_blocks addresses;
  bool ok = true;
  for (int step = 0; step < 500; ++step) {
    if (!lives.empty() && rng() % 2 == 0) {
      auto const i = rng() % lives.size();
      ref.deallocate_sync(lives[i].first, lives[i].second, 256);
      addresses.erase(lives[i].first);
      lives[i] = lives.back();
      lives.pop_back();
      continue;
    }
    std::size_t const bytes = 1 + rng() % (1 << 16);
    void* p                 = ref.allocate_sync(bytes, 256);
    ok                      = ok && addresses.insert(p, bytes);
    lives.emplace_back(p, bytes);
  }
  CHECK(ok);
  for (auto [p, n] : lives) { ref.deallocate_sync(p, n, 256); }
}

}  // namespace

TEST_CASE("rmm suites: stash's host upstreams behind rmm::host_resource_ref")
{
  stash::host_upstream host;
  exercise_host(rmm::host_resource_ref{host});
  stash::limiting_upstream<stash::host_upstream> limited(std::size_t{1} << 40);
  exercise_host(rmm::host_resource_ref{limited});
  CHECK(limited.in_use_bytes() == 0);
  CHECK(limited.peak_bytes() >= std::size_t{8} << 20);
  // Every copy RMM or CCCL makes of the handle is the same resource.
  rmm::host_resource_ref r1{limited};
  rmm::host_resource_ref r2{limited};
  CHECK(r1 == r2);
}
