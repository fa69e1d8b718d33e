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
 * and the pool is exactly as before; a wrong free (a foreign pointer, the same pointer twice,
 * another size, another alignment, an alignment of 3) never throws, is reported once to the
 * misuse handler with its misuse_kind (core/misuse.hpp) and changes nothing; every power-of-two
 * alignment from 1 B to a page (4096 B) is honoured, an alignment of 3 or 8192 is a logic_error
 * saying why; sizes near 2^64 are out_of_memory and change nothing. The factory builds a fresh pool
 * that may reserve at most `budget` bytes (the kit asks for 8 MiB to 512 MiB).
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/misuse.hpp>
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
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace stash::testing {

/// @brief Builds a fresh pool that may reserve at most `budget` bytes.
/// @tparam Pool The pool type.
template <class Pool>
using pool_factory = std::function<std::unique_ptr<Pool>(std::size_t budget)>;

/// @brief Whether two pool_stats agree on every figure a refused or rejected call must leave as
/// it was (in use, reserved, their peaks, the largest free block, the allocation count).
/// @param a One pool's counters.
/// @param b The other's.
/// @return Whether they agree.
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
  /// @param p The block's address.
  /// @param n Its size.
  /// @return Whether the block was added.
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
  /// @param p The block's address.
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
    void* ptr               = pool_allocate(p_, s_, bytes, align);
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
    pool_deallocate(p_, s_, l.ptr, l.bytes, l.align);
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
  void* a           = pool_allocate(*p, stream, 5 * MiB);
  auto const before = p->stats();
  try {
    (void)pool_allocate(*p, stream, 5 * MiB);
    r.expect(false, "an allocation beyond the budget succeeded");
  } catch (out_of_memory const& e) {
    r.expect(e.requested_bytes() == 5 * MiB && e.budget_bytes() == 8 * MiB &&
                 e.in_use_bytes() == before.in_use_bytes,
             "out_of_memory does not carry the request, the budget and the bytes in use");
    r.expect(e.largest_free_bytes().has_value() && *e.largest_free_bytes() < 5 * MiB,
             "out_of_memory does not carry a largest free block below the request");
  }
  r.expect(same_pool_stats(before, p->stats()), "a refused allocation changed the pool's stats");
  void* b = pool_allocate(*p, stream, 2 * MiB);  // what is left still serves
  r.expect(b != nullptr, "after a refusal, what is left does not serve");
  pool_deallocate(*p, stream, b, 2 * MiB);
  pool_deallocate(*p, stream, a, 5 * MiB);
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

// Whether `f` throws stash::logic_error whose message contains `text`.
template <class F>
bool throws_logic_error_saying(F&& f, std::string const& text)
{
  try {
    f();
  } catch (logic_error const& e) {
    return std::string(e.what()).find(text) != std::string::npos;
  } catch (...) {
    return false;
  }
  return false;
}

// Frees through `free` under a recording misuse handler: it must not throw, must report exactly
// one misuse of `kind` and must leave the stats as `before`.
template <class Pool, class Free>
void expect_misuse(Pool& p, pool_stats const& before, misuse_kind kind, std::string const& what,
                   Free&& free, conformance_report& r)
{
  scoped_misuse_handler const recording;
  std::uint64_t const count = misuse_count();
  bool threw                = false;
  try {
    free();
  } catch (...) {
    threw = true;
  }
  r.expect(!threw, what + ": deallocate threw (it must report to the misuse handler)");
  auto const e = take_misuse();
  r.expect(misuse_count() == count + 1 && e.has_value(),
           what + ": not reported to the misuse handler exactly once");
  r.expect(!e || e->kind() == kind, what + ": reported as another kind of misuse");
  r.expect(same_pool_stats(before, p.stats()), what + ": changed the pool's stats");
}

template <class Pool>
void check_misuse(pool_factory<Pool> const& make, stream_ref stream, conformance_report& r)
{
  if constexpr (stash::detail::async_spelled_pool<Pool>) {
    r.expect(noexcept(std::declval<Pool&>().deallocate_async(nullptr, 0, 0, stream)),
             "deallocate_async is not noexcept (cuda::mr's deallocation never throws)");
  }
  auto p            = make(64 * MiB);
  void* a           = pool_allocate(*p, stream, 1000);
  void* b           = pool_allocate(*p, stream, 3000, 64);
  auto const before = p->stats();
  int foreign       = 0;
  expect_misuse(
      *p, before, misuse_kind::unknown_pointer, "freeing a foreign pointer",
      [&] { pool_deallocate(*p, stream, &foreign, sizeof(foreign)); }, r);
  expect_misuse(
      *p, before, misuse_kind::wrong_size, "freeing with another size",
      [&] { pool_deallocate(*p, stream, a, 999); }, r);
  expect_misuse(
      *p, before, misuse_kind::bad_alignment, "freeing with another alignment",
      [&] { pool_deallocate(*p, stream, b, 3000, 128); }, r);
  expect_misuse(
      *p, before, misuse_kind::bad_alignment, "freeing with an alignment of 3",
      [&] { pool_deallocate(*p, stream, b, 3000, 3); }, r);
  // Nothing was lost: both blocks free as allocated.
  pool_deallocate(*p, stream, b, 3000, 64);
  pool_deallocate(*p, stream, a, 1000);
  auto const after_free = p->stats();
  r.expect(after_free.in_use_bytes == 0, "after rejected frees, the right ones left bytes in use");
  expect_misuse(
      *p, after_free, misuse_kind::unknown_pointer, "a double free",
      [&] { pool_deallocate(*p, stream, a, 1000); }, r);
}

// Every power of two from 1 to 4096 B is honoured (and freed with the same), blocks of several
// sizes at once; a non-power-of-two alignment is a logic_error saying so, an alignment above the
// page one saying it is above the largest honoured, and neither changes the pool.
template <class Pool>
void check_alignments(pool_factory<Pool> const& make, stream_ref stream, conformance_report& r)
{
  auto p = make(64 * MiB);
  struct block {
    void* ptr;
    std::size_t bytes;
    std::size_t align;
  };
  std::vector<block> blocks;
  live_blocks addresses;
  for (std::size_t align = 1; align <= 4096; align *= 2) {
    for (std::size_t bytes : {std::size_t{1}, align, std::size_t{3 * 1000 + 7}}) {
      void* q = pool_allocate(*p, stream, bytes, align);
      r.expect(q != nullptr && reinterpret_cast<std::uintptr_t>(q) % align == 0,
               "a block asked at alignment " + std::to_string(align) + " B is not aligned so");
      r.expect(q == nullptr || addresses.insert(q, bytes),
               "over-aligned blocks overlap (alignment " + std::to_string(align) + " B)");
      if constexpr (pool_is_host_accessible<Pool>()) {
        if (q != nullptr) { std::memset(q, 0xA5, bytes); }
      }
      blocks.push_back({q, bytes, align});
    }
  }
  auto const before = p->stats();
  r.expect(throws_logic_error_saying([&] { (void)pool_allocate(*p, stream, 100, 3); },
                                     "is not a power of two"),
           "alignment 3 is not a logic_error saying it is not a power of two");
  r.expect(throws_logic_error_saying([&] { (void)pool_allocate(*p, stream, 100, 8192); },
                                     "above the largest"),
           "alignment 8192 is not a logic_error saying it is above the largest honoured");
  r.expect(same_pool_stats(before, p->stats()), "a refused alignment changed the stats");
  for (auto const& b : blocks) {
    if (b.ptr != nullptr) { pool_deallocate(*p, stream, b.ptr, b.bytes, b.align); }
  }
  r.expect(p->stats().in_use_bytes == 0, "over-aligned blocks left bytes in use once freed");
}

// Sizes whose rounding would wrap 64 bits are out_of_memory carrying the request, and change
// nothing; the pool serves after.
template <class Pool>
void check_huge_sizes(pool_factory<Pool> const& make, stream_ref stream, conformance_report& r)
{
  auto p                    = make(64 * MiB);
  void* a                   = pool_allocate(*p, stream, 4096);
  auto const before         = p->stats();
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  for (std::size_t const bytes : {max - 100, max - 511, max - (std::size_t{2} << 20) + 1, max}) {
    for (std::size_t const align : {std::size_t{256}, std::size_t{4096}}) {
      try {
        (void)pool_allocate(*p, stream, bytes, align);
        r.expect(false, "a size near 2^64 (" + std::to_string(bytes) + " B) was served");
      } catch (out_of_memory const& e) {
        r.expect(e.requested_bytes() == bytes,
                 "out_of_memory for a size near 2^64 does not "
                 "carry the request");
      }
      r.expect(same_pool_stats(before, p->stats()), "a refused size near 2^64 changed the stats");
    }
  }
  void* b = pool_allocate(*p, stream, 1000);
  r.expect(b != nullptr, "after refusing a size near 2^64 the pool does not serve");
  pool_deallocate(*p, stream, b, 1000);
  pool_deallocate(*p, stream, a, 4096);
}

}  // namespace detail

/// @brief Runs the pool conformance checks (see the file comment) on pools made by `make`, used
/// on `stream`. An exception escaping a check is reported as a failure.
/// @tparam Pool A stash::pool with stats() (wrap one without in stash::statistics_adaptor).
/// @param make Builds a fresh pool with a budget.
/// @param stream The stream passed to allocate / deallocate.
/// @return The report (ok() when every check passed).
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
  guarded("alignments", [&] { detail::check_alignments(make, stream, r); });
  guarded("sizes near 2^64", [&] { detail::check_huge_sizes(make, stream, r); });
  return r;
}

}  // namespace stash::testing
