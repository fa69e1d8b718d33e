/**
 * @file pool_conformance.hpp
 * @brief The conformance kit of the `pool` concept (stash's pools and yours): allocation,
 * alignment, non-overlap, contents, statistics, the budget and misuse, each failure named in a
 * stash::testing::conformance_report.
 *
 * @code
 * auto const r = stash::testing::check_pool<my_pool>(
 *     [](std::size_t budget) { return std::make_unique<my_pool>(budget); }, stream);
 * CHECK_MESSAGE(r.ok(), r.summary());
 * @endcode
 * Checked: 0 bytes gives nullptr and freeing it is a no-op; a pool equals itself; 3,000 random
 * allocations and frees (1 B to 24 MiB, at most 200 MiB live) never overlap, are aligned as
 * asked (256 B, or 64 B for every third), keep their contents (when host-accessible) and keep
 * in_use / reserved / peak statistics consistent; beyond the budget, allocate throws
 * stash::out_of_memory with the request, the budget, the bytes in use and the largest free block,
 * and the pool is exactly as before; freeing a foreign pointer or the same pointer twice throws
 * stash::logic_error and changes nothing. The factory builds a fresh pool that may reserve at most
 * `budget` bytes (the kit asks for 8 MiB to 512 MiB).
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/stream_ref.hpp>
#include <stash/core/units.hpp>
#include <stash/pool/pool.hpp>
#include <stash/testing/conformance_report.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace stash::testing {

/// @brief Builds a fresh pool that may reserve at most `budget` bytes.
/// @tparam Pool The pool type.
template <class Pool>
using pool_factory = std::function<std::unique_ptr<Pool>(std::size_t budget)>;

/// @brief Whether two pool_stats agree on every figure a refused or rejected call must leave as
/// it was (in use, reserved, their peaks, the largest free block, the allocation count).
inline bool same_pool_stats(pool_stats const& a, pool_stats const& b)
{
  return a.in_use_bytes == b.in_use_bytes && a.peak_in_use_bytes == b.peak_in_use_bytes &&
         a.reserved_bytes == b.reserved_bytes && a.peak_reserved_bytes == b.peak_reserved_bytes &&
         a.largest_free_bytes == b.largest_free_bytes && a.allocations == b.allocations;
}

/// @brief Live blocks by address: insert() says whether a new block overlaps none of them (what
/// the kit checks of a pool, usable on any allocator's pointers).
class live_blocks {
 public:
  /// @brief Adds [p, p + n); false (and nothing added) when it overlaps a live block.
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
  /// @brief Removes the block at `p`.
  void erase(void* p) { blocks_.erase(reinterpret_cast<std::uintptr_t>(p)); }

 private:
  std::map<std::uintptr_t, std::size_t> blocks_;
};

namespace detail {

template <class Pool>
void check_zero_bytes(pool_factory<Pool> const& make, stream_ref stream, conformance_report& r)
{
  auto p = make(64 * MiB);
  if constexpr (stash::detail::async_spelled_pool<Pool>) {  // pool_allocate answers 0 itself
    r.expect(p->allocate_async(0, cuda_allocation_alignment, stream) == nullptr,
             "allocate_async(0) did not return nullptr");
    p->deallocate_async(nullptr, 0, cuda_allocation_alignment, stream);
  }
  r.expect(p->stats().in_use_bytes == 0, "0 bytes counted as in use");
  r.expect(*p == *p, "a pool does not compare equal to itself");
}

// One step of the random walk: a block of a size drawn from three ranges.
inline std::size_t random_size(std::mt19937_64& rng, int k)
{
  return k < 6   ? std::uniform_int_distribution<std::size_t>(1, 4096)(rng)
         : k < 9 ? std::uniform_int_distribution<std::size_t>(4097, 2 * MiB)(rng)
                 : std::uniform_int_distribution<std::size_t>(2 * MiB, 24 * MiB)(rng);
}

template <class Pool>
class random_walk {
 public:
  random_walk(Pool& p, stream_ref stream, conformance_report& r) : p_(p), s_(stream), r_(r) {}

  void run()
  {
    std::mt19937_64 rng(20261122);
    std::uniform_int_distribution<int> kind(0, 9);
    for (int step = 0; step < 3000; ++step) {
      if (!lives_.empty() && kind(rng) < 4) {
        release(std::uniform_int_distribution<std::size_t>(0, lives_.size() - 1)(rng));
        continue;
      }
      std::size_t const bytes = random_size(rng, kind(rng));
      if (live_bytes_ + bytes > 200 * MiB) { continue; }
      take(bytes, static_cast<std::uint8_t>(step));
    }
    r_.expect(ok_overlap_, "two live blocks overlap");
    r_.expect(ok_align_, "a block is not aligned as asked (256 or 64 bytes)");
    r_.expect(ok_stats_, "stats while allocating: in_use below the live bytes or above reserved");
    while (!lives_.empty()) { release(lives_.size() - 1); }
    r_.expect(ok_content_, "a block's contents changed while it was live");
    auto const s = p_.stats();
    r_.expect(s.in_use_bytes == 0, "in_use_bytes is not 0 once every block was freed");
    r_.expect(s.peak_in_use_bytes >= max_live_bytes_, "peak_in_use_bytes below the peak live");
    r_.expect(
        s.peak_reserved_bytes >= s.peak_in_use_bytes && s.peak_reserved_bytes >= s.reserved_bytes,
        "peak_reserved_bytes below peak_in_use_bytes or reserved_bytes");
    r_.expect(s.allocations > 0, "allocations not counted");
  }

 private:
  struct live {
    void* ptr;
    std::size_t bytes;
    std::size_t align;
    std::uint8_t tag;
  };

  void take(std::size_t bytes, std::uint8_t tag)
  {
    // Every third block asks for a smaller alignment, which must be honoured as well.
    std::size_t const align = tag % 3 == 0 ? std::size_t{64} : cuda_allocation_alignment;
    void* ptr               = pool_allocate(p_, bytes, s_, align);
    if (ptr == nullptr) {
      r_.expect(false, "allocate(" + std::to_string(bytes) + ") returned nullptr");
      return;
    }
    ok_align_   = ok_align_ && reinterpret_cast<std::uintptr_t>(ptr) % align == 0;
    ok_overlap_ = ok_overlap_ && addresses_.insert(ptr, bytes);
    if constexpr (pool_is_host_accessible<Pool>()) { std::memset(ptr, tag, bytes); }
    lives_.push_back({ptr, bytes, align, tag});
    live_bytes_ += bytes;
    max_live_bytes_ = std::max(max_live_bytes_, live_bytes_);
    auto const s    = p_.stats();
    ok_stats_ = ok_stats_ && s.in_use_bytes >= live_bytes_ && s.reserved_bytes >= s.in_use_bytes;
  }

  void release(std::size_t i)
  {
    live const l = lives_[i];
    if constexpr (pool_is_host_accessible<Pool>()) {
      auto const* bytes = static_cast<std::uint8_t const*>(l.ptr);
      for (std::size_t k = 0; k < l.bytes; k += 61) {
        ok_content_ = ok_content_ && bytes[k] == l.tag;
      }
      ok_content_ = ok_content_ && bytes[l.bytes - 1] == l.tag;
    }
    pool_deallocate(p_, l.ptr, l.bytes, s_, l.align);
    addresses_.erase(l.ptr);
    live_bytes_ -= l.bytes;
    lives_[i] = lives_.back();
    lives_.pop_back();
  }

  Pool& p_;
  stream_ref s_;
  conformance_report& r_;
  std::vector<live> lives_;
  live_blocks addresses_;
  std::size_t live_bytes_{0};
  std::size_t max_live_bytes_{0};
  bool ok_overlap_{true}, ok_align_{true}, ok_content_{true}, ok_stats_{true};
};

template <class Pool>
void check_budget(pool_factory<Pool> const& make, stream_ref stream, conformance_report& r)
{
  auto p            = make(8 * MiB);
  void* a           = pool_allocate(*p, 5 * MiB, stream);
  auto const before = p->stats();
  try {
    (void)pool_allocate(*p, 5 * MiB, stream);
    r.expect(false, "an allocation beyond the budget succeeded");
  } catch (out_of_memory const& e) {
    r.expect(e.requested_bytes() == 5 * MiB && e.budget_bytes() == 8 * MiB &&
                 e.in_use_bytes() == before.in_use_bytes,
             "out_of_memory does not carry the request, the budget and the bytes in use");
    r.expect(e.largest_free_bytes().has_value() && *e.largest_free_bytes() < 5 * MiB,
             "out_of_memory does not carry a largest free block below the request");
  }
  r.expect(same_pool_stats(before, p->stats()), "a refused allocation changed the pool's stats");
  void* b = pool_allocate(*p, 2 * MiB, stream);  // what is left still serves
  r.expect(b != nullptr, "after a refusal, what is left does not serve");
  pool_deallocate(*p, b, 2 * MiB, stream);
  pool_deallocate(*p, a, 5 * MiB, stream);
  r.expect(p->stats().in_use_bytes == 0, "in_use_bytes is not 0 after freeing everything");
}

// Whether `f` throws stash::logic_error (and nothing else).
template <class F>
bool throws_logic_error(F&& f)
{
  try {
    f();
  } catch (logic_error const&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

template <class Pool>
void check_misuse(pool_factory<Pool> const& make, stream_ref stream, conformance_report& r)
{
  auto p            = make(64 * MiB);
  void* a           = pool_allocate(*p, 1000, stream);
  auto const before = p->stats();
  int foreign       = 0;
  r.expect(throws_logic_error([&] { pool_deallocate(*p, &foreign, sizeof(foreign), stream); }),
           "freeing a foreign pointer is not a logic_error");
  r.expect(same_pool_stats(before, p->stats()), "freeing a foreign pointer changed the stats");
  pool_deallocate(*p, a, 1000, stream);
  auto const after_free = p->stats();
  r.expect(throws_logic_error([&] { pool_deallocate(*p, a, 1000, stream); }),
           "a double free is not a logic_error");
  r.expect(same_pool_stats(after_free, p->stats()), "a double free changed the stats");
}

}  // namespace detail

/// @brief Runs the pool conformance checks (see the file comment) on pools made by `make`, used
/// on `stream`. An exception escaping a check is reported as a failure.
/// @tparam Pool A stash::pool with stats() (wrap one without in stash::statistics_adaptor).
/// @param make Builds a fresh pool with a budget.
/// @param stream The stream passed to allocate / deallocate.
template <pool_with_stats Pool>
[[nodiscard]] conformance_report check_pool(pool_factory<Pool> const& make, stream_ref stream)
{
  conformance_report r;
  r.subject    = "pool";
  auto guarded = [&](char const* what, auto&& check) {
    try {
      check();
    } catch (std::exception const& e) {
      r.expect(false, std::string(what) + " threw: " + e.what());
    }
  };
  guarded("zero bytes", [&] { detail::check_zero_bytes(make, stream, r); });
  guarded("random walk", [&] {
    auto p = make(512 * MiB);
    detail::random_walk<Pool>(*p, stream, r).run();
  });
  guarded("budget", [&] { detail::check_budget(make, stream, r); });
  guarded("misuse", [&] { detail::check_misuse(make, stream, r); });
  return r;
}

}  // namespace stash::testing
