// stash::allocator against a careless user and a long run (issue 24): handles from another
// allocator or kept after their free, tables that must stay bounded, scheduled offloads that
// fail, sizes near 2^64 and a device budget no schedule can meet.
#include "support/allocator_drive.hpp"
#include "support/data.hpp"
#include "support/sweep_size.hpp"

#include <stash/allocator.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/vdnn.hpp>
#include <stash/testing/fault_injection.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
template <class Policy = stash::vdnn_all, class Codec = void, class Backend = stash::host_backend>
using host_alloc = stash::allocator<host_caching, Policy, Codec, Backend>;

// One iteration of a toy step: `n` activations produced in turn (each from the one before), then
// read in reverse and freed, as a network's forward and backward do.
template <class Allocator, class Stream>
void toy_step(Allocator& alloc, Stream s, std::size_t n, std::size_t bytes)
{
  alloc.begin_iteration();
  alloc.phase(stash::phase::forward);
  std::vector<stash::tensor_handle> acts;
  for (std::size_t i = 0; i < n; ++i) {
    acts.push_back(
        alloc.allocate_async(bytes, stash::storage_kind::act, "a" + std::to_string(i), s));
    auto const reads = i == 0 ? std::span<stash::tensor_handle const>{}
                              : std::span<stash::tensor_handle const>(&acts[i - 1], 1);
    (void)alloc.op("aten::convolution", reads, std::span(&acts[i], 1), s);
  }
  alloc.phase(stash::phase::backward);
  for (std::size_t i = n; i-- > 0;) {
    (void)alloc.op("aten::convolution_backward", std::span(&acts[i], 1), {}, s);
    alloc.deallocate_async(acts[i]);
  }
  alloc.end_iteration();
}

// Iterations of the soak below: a few seconds in CI; STASH_SOAK_ITERATIONS=100000000 for hours.
std::uint64_t soak_iterations(std::uint64_t ci)
{
  char const* knob = std::getenv("STASH_SOAK_ITERATIONS");
  return knob != nullptr ? std::strtoull(knob, nullptr, 10) : ci;
}

}  // namespace

TEST_CASE("allocator: a handle of another allocator, or kept after its free, is refused")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool_a;
  host_caching pool_b;
  host_alloc<> a(backend, pool_a);
  host_alloc<> b(backend, pool_b);
  auto const ta = a.allocate_async(4096, stash::storage_kind::act, "ta", s);
  auto const tb = b.allocate_async(4096, stash::storage_kind::act, "tb", s);
  CHECK(ta.index() == tb.index());  // the same slot number in two allocators
  CHECK(ta != tb);
  CHECK_THROWS_WITH_AS(b.deallocate_async(ta), doctest::Contains("belongs to another allocator"),
                       stash::logic_error);
  CHECK_THROWS_AS((void)b.acquire_async(ta, s), stash::logic_error);
  CHECK_THROWS_AS((void)b.where(ta), stash::logic_error);
  CHECK(b.where(tb) == stash::tensor_state::resident);  // b's own tensor is untouched
  CHECK(pool_b.stats().in_use_bytes >= 4096);

  // A freed tensor's slot is reused; the old handle names the freed tensor, not the new one.
  a.deallocate_async(ta);
  auto const reused = a.allocate_async(4096, stash::storage_kind::act, "reused", s);
  CHECK(reused.index() == ta.index());
  CHECK(reused.generation() != ta.generation());
  CHECK_THROWS_WITH_AS(a.deallocate_async(ta), doctest::Contains("was freed"), stash::logic_error);
  CHECK_THROWS_AS((void)a.acquire_async(ta, s), stash::logic_error);
  CHECK_THROWS_AS((void)a.where(ta), stash::logic_error);
  CHECK(a.where(reused) == stash::tensor_state::resident);
  CHECK_THROWS_WITH_AS(a.deallocate_async(stash::tensor_handle{}), doctest::Contains("no tensor"),
                       stash::logic_error);
  // A forged handle (a generation the slot never had) is refused too.
  CHECK_THROWS_AS(a.deallocate_async(stash::tensor_handle(reused.owner(), reused.index(),
                                                          reused.generation() + 5)),
                  stash::logic_error);
  a.deallocate_async(reused);
  b.deallocate_async(tb);
  backend.synchronize(s);
  a.synchronize();
  b.synchronize();
  CHECK(pool_a.stats().in_use_bytes == 0);
  CHECK(pool_b.stats().in_use_bytes == 0);
}

TEST_CASE("allocator: a long run's tables stay as large as the most tensors alive at once")
{
  // Before slots were reused, each allocation added an entry to the facade's and the manager's
  // tables for good (about 335 B a tensor): 20 per iteration here.
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  host_alloc<stash::vdnn_all, stash::zvc<float>> alloc(backend, pool);
  constexpr std::size_t live = 20;
  // 3,000 iterations in stash_sweep_tests, 300 under ASan (stash_tests): the tables' bound does
  // not depend on the count; STASH_SOAK_ITERATIONS runs it for hours.
  std::uint64_t const iterations =
      soak_iterations(static_cast<std::uint64_t>(stash::test::sweep_size(3000, 300)));
  for (std::uint64_t it = 0; it < iterations; ++it) { toy_step(alloc, s, live, 4096); }
  backend.synchronize(s);
  alloc.synchronize();
  CHECK(alloc.stats().iterations == iterations);
  CHECK(alloc.stats().deviations == 0);
  CHECK(alloc.stats().scheduled_offloads > 0);  // the run swapped
  // Bounded: one slot per tensor alive at once, whatever the number of iterations.
  CHECK(alloc.stats().tensor_slots <= live);
  CHECK(alloc.stats().offload.tensor_slots <= live);
  CHECK(pool.stats().in_use_bytes == 0);
  MESSAGE(iterations << " iterations x " << live << " tensors: " << alloc.stats().tensor_slots
                     << " table slots, " << alloc.stats().scheduled_offloads << " offloads");
}

TEST_CASE("allocator: scheduled offloads the host pool cannot take are counted, never thrown")
{
  // A host pool far too small for vdnn_all's schedule: each offload that does not fit leaves its
  // tensor resident. Before, the first one surfaced from the user's op() as out_of_memory and the
  // iteration could never be ended.
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator_options o;
  o.host_budget = 64 * stash::KiB;
  o.host_step   = 16 * stash::KiB;
  host_alloc<> alloc(backend, pool, o);
  CHECK(stash::test::drive(alloc, backend, s, t, 4) == 0);  // no throw, every read exact
  CHECK(alloc.stats().iterations == 4);
  CHECK(alloc.stats().deviations == 0);
  CHECK(alloc.stats().failed_offloads > 0);
  CHECK(alloc.stats().scheduled_offloads > 0);  // those that fit did go
  CHECK(alloc.stats().offload.offloads == alloc.stats().scheduled_offloads);
  MESSAGE("alexnet, 64 KiB host pool: " << alloc.stats().scheduled_offloads << " offloads, "
                                        << alloc.stats().failed_offloads << " failed");
}

TEST_CASE("allocator: end_iteration closes the iteration whatever its scheduled offloads do")
{
  // Every host-copy allocation of a replayed iteration fails (the fault-injection kit's staging
  // upstream): the offloads are counted as failed, op() and end_iteration() do not throw, and the
  // next iterations begin, replay and offload again.
  using backend_t = stash::testing::fault_injecting_backend<stash::host_backend>;
  stash::testing::fault_injector faults;
  stash::host_backend inner;
  backend_t backend(inner, faults);
  auto const s = inner.create_stream();
  host_caching pool;
  host_alloc<stash::vdnn_all, void, backend_t> alloc(backend, pool);
  toy_step(alloc, s, 8, 4096);  // recorded and planned
  REQUIRE(alloc.state() == stash::allocator_state::replaying);
  REQUIRE_FALSE(alloc.current_schedule().entries.empty());
  unsigned const allocs = 1u << static_cast<unsigned>(stash::testing::fault_kind::allocate);
  faults.arm(0, allocs, std::numeric_limits<std::uint64_t>::max());
  CHECK_NOTHROW(toy_step(alloc, s, 8, 4096));
  CHECK(faults.failures() > 0);
  CHECK(alloc.stats().failed_offloads > 0);
  CHECK(alloc.stats().scheduled_offloads == 0);
  faults.disarm();
  toy_step(alloc, s, 8, 4096);
  toy_step(alloc, s, 8, 4096);
  CHECK(alloc.stats().iterations == 4);
  CHECK(alloc.stats().scheduled_offloads > 0);
  inner.synchronize(s);
  alloc.synchronize();
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("allocator: sizes near 2^64 are out_of_memory, with nothing taken or recorded")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  host_alloc<> alloc(backend, pool);
  alloc.begin_iteration();
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  for (std::size_t bytes : {max, max - 100, max - 4095, max / 2 + 1}) {
    INFO("bytes " << bytes);
    CHECK_THROWS_AS((void)alloc.allocate_async(bytes, stash::storage_kind::act, "huge", s),
                    stash::out_of_memory);
  }
  CHECK(pool.stats().in_use_bytes == 0);
  auto const a = alloc.allocate_async(4096, stash::storage_kind::act, "a", s);
  (void)alloc.op("produce", {}, std::span(&a, 1), s);
  (void)alloc.op("consume", std::span(&a, 1), {}, s);
  alloc.deallocate_async(a);
  alloc.end_iteration();
  REQUIRE(alloc.recorded_trace() != nullptr);
  CHECK(alloc.recorded_trace()->storages().size() == 1);  // the refused ones were not recorded
  CHECK(alloc.stats().tensor_slots == 1);
}

TEST_CASE("allocator: a device budget below the largest storage is an error at planning time")
{
  for (std::uint64_t budget : {std::uint64_t{0}, std::uint64_t{1000}}) {
    INFO("budget " << budget);
    stash::host_backend backend;
    auto const s = backend.create_stream();
    host_caching pool;
    stash::allocator_options o;
    o.device_budget = budget;
    host_alloc<> alloc(backend, pool, o);
    alloc.begin_iteration();
    auto const a = alloc.allocate_async(4096, stash::storage_kind::act, "big", s);
    (void)alloc.op("produce", {}, std::span(&a, 1), s);
    (void)alloc.op("consume", std::span(&a, 1), {}, s);
    alloc.deallocate_async(a);
    try {
      alloc.end_iteration();
      FAIL("a budget below the largest storage was planned");
    } catch (stash::out_of_memory const& e) {
      std::string const what = e.what();
      CHECK(what.find("device_budget (" + std::to_string(budget) + " B)") != std::string::npos);
      CHECK(what.find("'big' of 4096 B") != std::string::npos);
      CHECK(e.requested_bytes() == 4096);
      CHECK(e.budget_bytes() == budget);
    }
    // The iteration was closed; the next one is recorded afresh.
    CHECK(alloc.state() == stash::allocator_state::recording);
    CHECK_NOTHROW(alloc.begin_iteration());
  }
}

namespace {

// toy_step with a size per activation and, optionally, one extra allocation that no op touches.
template <class Allocator, class Stream>
void sized_step(Allocator& alloc, Stream s, std::vector<std::size_t> const& sizes, bool extra)
{
  alloc.begin_iteration();
  alloc.phase(stash::phase::forward);
  std::vector<stash::tensor_handle> acts;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    acts.push_back(
        alloc.allocate_async(sizes[i], stash::storage_kind::act, "a" + std::to_string(i), s));
    auto const reads = i == 0 ? std::span<stash::tensor_handle const>{}
                              : std::span<stash::tensor_handle const>(&acts[i - 1], 1);
    (void)alloc.op("aten::convolution", reads, std::span(&acts[i], 1), s);
  }
  if (extra) {
    alloc.deallocate_async(alloc.allocate_async(512, stash::storage_kind::temp, "x", s));
  }
  alloc.phase(stash::phase::backward);
  for (std::size_t i = sizes.size(); i-- > 0;) {
    (void)alloc.op("aten::convolution_backward", std::span(&acts[i], 1), {}, s);
    alloc.deallocate_async(acts[i]);
  }
  alloc.end_iteration();
}

}  // namespace

TEST_CASE(
    "allocator: a replayed iteration with one size changed, or one allocation more or fewer, "
    "deviates")
{
  // Same number of allocations and ops, one size other than recorded: that storage does not
  // match, the iteration is a deviation and the next one is recorded anew. Then the same ops with
  // one allocation more, or fewer: a deviation too (the allocation count is part of the match).
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  host_alloc<> alloc(backend, pool);
  std::vector<std::size_t> const sizes{4096, 4096, 8192, 4096};
  sized_step(alloc, s, sizes, false);  // recorded
  sized_step(alloc, s, sizes, false);  // replayed as recorded
  REQUIRE(alloc.stats().deviations == 0);
  auto resized = sizes;
  resized[2]   = 8192 + 256;
  sized_step(alloc, s, resized, false);
  CHECK(alloc.stats().deviations == 1);
  sized_step(alloc, s, sizes, false);  // re-recorded
  sized_step(alloc, s, sizes, false);  // replayed
  CHECK(alloc.stats().deviations == 1);
  sized_step(alloc, s, sizes, true);
  CHECK(alloc.stats().deviations == 2);
  sized_step(alloc, s, sizes, true);  // re-recorded, with the extra allocation
  sized_step(alloc, s, sizes, true);  // replayed
  CHECK(alloc.stats().deviations == 2);
  sized_step(alloc, s, sizes, false);  // the same ops, one allocation fewer
  CHECK(alloc.stats().deviations == 3);
  backend.synchronize(s);
  alloc.synchronize();
  CHECK(pool.stats().in_use_bytes == 0);
}

}  // namespace STASH_UNITY_ID
