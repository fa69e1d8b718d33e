// The conformance suite of the `pool` concept, run against every pool: on the host (over
// host_upstream) in stash_tests, on a device (gpu label) in stash_gpu_tests.
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/pool/pool.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace stash::test {

/// Builds a fresh pool with a budget (bytes it may reserve).
template <class Pool>
using pool_factory = std::function<std::unique_ptr<Pool>(std::size_t budget)>;

namespace detail {

inline bool same_stats(pool_stats const& a, pool_stats const& b)
{
  return a.in_use_bytes == b.in_use_bytes && a.peak_in_use_bytes == b.peak_in_use_bytes &&
         a.reserved_bytes == b.reserved_bytes && a.peak_reserved_bytes == b.peak_reserved_bytes &&
         a.largest_free_bytes == b.largest_free_bytes && a.allocations == b.allocations;
}

// Live blocks by address, to check that no two overlap.
class live_set {
 public:
  bool insert(void* p, std::size_t n)
  {
    auto const a = reinterpret_cast<std::uintptr_t>(p);
    auto next    = blocks_.lower_bound(a);
    if (next != blocks_.end() && next->first < a + n) { return false; }
    if (next != blocks_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second > a) { return false; }
    }
    blocks_.emplace(a, n);
    return true;
  }
  void erase(void* p) { blocks_.erase(reinterpret_cast<std::uintptr_t>(p)); }

 private:
  std::map<std::uintptr_t, std::size_t> blocks_;
};

}  // namespace detail

/// Runs every conformance check of the pool concept against pools made by `make`.
template <pool Pool>
void check_pool_conformance(pool_factory<Pool> const& make, cudaStream_t stream)
{
  SUBCASE("zero bytes: nullptr, and freeing it is a no-op")
  {
    auto p = make(64 * MiB);
    CHECK(p->allocate(0, stream) == nullptr);
    CHECK_NOTHROW(p->deallocate(nullptr, 0, stream));
    CHECK(p->stats().in_use_bytes == 0);
  }

  SUBCASE("random allocations never overlap, are aligned, keep their contents and balance stats")
  {
    auto p = make(512 * MiB);
    std::mt19937_64 rng(20261122);
    std::uniform_int_distribution<int> kind(0, 9);
    struct live {
      void* ptr;
      std::size_t bytes;
      std::uint8_t tag;
    };
    std::vector<live> lives;
    detail::live_set addresses;
    std::size_t live_bytes = 0, max_live_bytes = 0;
    bool ok_overlap = true, ok_align = true, ok_content = true;
    auto release = [&](std::size_t i) {
      live const l = lives[i];
      if constexpr (Pool::is_host_accessible) {
        auto const* bytes = static_cast<std::uint8_t const*>(l.ptr);
        for (std::size_t k = 0; k < l.bytes; k += 61) {
          ok_content = ok_content && bytes[k] == l.tag;
        }
        ok_content = ok_content && bytes[l.bytes - 1] == l.tag;
      }
      p->deallocate(l.ptr, l.bytes, stream);
      addresses.erase(l.ptr);
      live_bytes -= l.bytes;
      lives[i] = lives.back();
      lives.pop_back();
    };
    for (int step = 0; step < 3000; ++step) {
      if (!lives.empty() && kind(rng) < 4) {
        release(std::uniform_int_distribution<std::size_t>(0, lives.size() - 1)(rng));
        continue;
      }
      int const k = kind(rng);
      std::size_t const bytes =
          k < 6   ? std::uniform_int_distribution<std::size_t>(1, 4096)(rng)
          : k < 9 ? std::uniform_int_distribution<std::size_t>(4097, 2 * MiB)(rng)
                  : std::uniform_int_distribution<std::size_t>(2 * MiB, 24 * MiB)(rng);
      if (live_bytes + bytes > 200 * MiB) { continue; }
      void* ptr = p->allocate(bytes, stream);
      REQUIRE(ptr != nullptr);
      ok_align       = ok_align && reinterpret_cast<std::uintptr_t>(ptr) % 256 == 0;
      ok_overlap     = ok_overlap && addresses.insert(ptr, bytes);
      auto const tag = static_cast<std::uint8_t>(step);
      if constexpr (Pool::is_host_accessible) { std::memset(ptr, tag, bytes); }
      lives.push_back({ptr, bytes, tag});
      live_bytes += bytes;
      max_live_bytes = std::max(max_live_bytes, live_bytes);
      auto const s   = p->stats();
      CHECK(s.in_use_bytes >= live_bytes);
      CHECK(s.reserved_bytes >= s.in_use_bytes);
    }
    CHECK(ok_overlap);
    CHECK(ok_align);
    while (!lives.empty()) { release(lives.size() - 1); }
    CHECK(ok_content);
    auto const s = p->stats();
    CHECK(s.in_use_bytes == 0);
    CHECK(s.peak_in_use_bytes >= max_live_bytes);
    CHECK(s.peak_reserved_bytes >= s.peak_in_use_bytes);
    CHECK(s.peak_reserved_bytes >= s.reserved_bytes);
    CHECK(s.allocations > 0);
  }

  SUBCASE("beyond the budget: out_of_memory with the figures, and the pool is intact")
  {
    auto p            = make(8 * MiB);
    void* a           = p->allocate(5 * MiB, stream);
    auto const before = p->stats();
    try {
      (void)p->allocate(5 * MiB, stream);
      FAIL("allocation beyond the budget succeeded");
    } catch (out_of_memory const& e) {
      CHECK(e.requested_bytes() == 5 * MiB);
      CHECK(e.budget_bytes() == 8 * MiB);
      CHECK(e.in_use_bytes() == before.in_use_bytes);
      CHECK(e.largest_free_bytes().has_value());
      CHECK(*e.largest_free_bytes() < 5 * MiB);
    }
    CHECK(detail::same_stats(before, p->stats()));
    void* b = p->allocate(2 * MiB, stream);  // what is left still serves
    CHECK(b != nullptr);
    p->deallocate(b, 2 * MiB, stream);
    p->deallocate(a, 5 * MiB, stream);
    CHECK(p->stats().in_use_bytes == 0);
  }

  SUBCASE("freeing what the pool did not hand out is a logic_error and changes nothing")
  {
    auto p            = make(64 * MiB);
    void* a           = p->allocate(1000, stream);
    auto const before = p->stats();
    int foreign       = 0;
    CHECK_THROWS_AS(p->deallocate(&foreign, sizeof(foreign), stream), logic_error);
    CHECK(detail::same_stats(before, p->stats()));
    p->deallocate(a, 1000, stream);
    auto const after_free = p->stats();
    CHECK_THROWS_AS(p->deallocate(a, 1000, stream), logic_error);  // double free
    CHECK(detail::same_stats(after_free, p->stats()));
  }
}

}  // namespace stash::test
