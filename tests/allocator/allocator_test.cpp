// The facade end to end on the host backend: a real training step's trace drives
// stash::allocator for several iterations (record, plan, replay), and every tensor's bytes are
// checked whenever an op reads them.
#include "support/allocator_drive.hpp"
#include "support/data.hpp"

#include <stash_tools/train_cnn/budget_guard.hpp>

#include <stash/allocator.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/vdnn.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace_driver.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using host_arena =
    stash::lifetime_arena<stash::host_upstream, stash::greedy_planner, stash::host_stream_order>;

using stash::test::drive;
using stash::test::drive_scale;
using stash::test::scaled_peak;

}  // namespace

TEST_CASE("allocator<caching_pool, vdnn_all>: record, plan, replay a real step with checked bytes")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator_options o;
  stash::allocator<host_caching, stash::vdnn_all, void, stash::host_backend> alloc(backend, pool,
                                                                                   o);
  CHECK(alloc.state() == stash::allocator_state::persistent);
  auto const bad = drive(alloc, backend, s, t, 3);
  CHECK(bad == 0);
  CHECK(alloc.state() == stash::allocator_state::replaying);
  CHECK(alloc.stats().iterations == 3);
  CHECK(alloc.stats().replanned == 1);
  CHECK(alloc.stats().deviations == 0);
  REQUIRE_FALSE(alloc.current_schedule().entries.empty());
  // Both replayed iterations issued every scheduled offload and prefetch.
  CHECK(alloc.stats().scheduled_offloads == 2 * alloc.current_schedule().entries.size());
  CHECK(alloc.stats().scheduled_prefetches == 2 * alloc.current_schedule().entries.size());
  CHECK(alloc.stats().offload.offloads == alloc.stats().scheduled_offloads);
  CHECK(alloc.stats().offload.demand_prefetches == 0);
  // The host staging pool held each raw copy whole: its peak is at least the largest entry.
  std::uint64_t largest = 0;
  for (auto const& e : alloc.current_schedule().entries) { largest = std::max(largest, e.bytes); }
  auto const host = alloc.host_pool_stats();
  CHECK(host.peak_in_use_bytes >= largest);
  CHECK(host.peak_reserved_bytes >= host.peak_in_use_bytes);
}

TEST_CASE(
    "allocator<caching_pool, search_swap>: a policy object with settings replays its schedule")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/resnet18_b32.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator_options o;
  o.device_budget = scaled_peak(t) * 3 / 4;
  stash::search_swap policy;
  policy.max_refinements = 4;  // a setting carried by the object
  stash::allocator<host_caching, stash::search_swap, void, stash::host_backend> alloc(backend, pool,
                                                                                      o, policy);
  auto const bad = drive(alloc, backend, s, t, 3);
  CHECK(bad == 0);
  CHECK(alloc.state() == stash::allocator_state::replaying);
  CHECK(alloc.stats().deviations == 0);
  CHECK(alloc.current_schedule().policy == "search_swap");
  REQUIRE_FALSE(alloc.current_schedule().entries.empty());
  CHECK(alloc.stats().scheduled_offloads > 0);
  CHECK(alloc.stats().scheduled_prefetches > 0);
}

namespace {
// A policy whose schedule names a storage the trace does not have.
struct broken_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "broken"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    auto s = stash::no_swap{}.plan(a, budget);
    s.entries.push_back(stash::swap_entry{999999, 0, 2, 1, 2, 8});
    return s;
  }
};
}  // namespace

TEST_CASE("allocator: a policy's invalid schedule is an error naming the policy")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator<host_caching, broken_policy, void, stash::host_backend> alloc(backend, pool);
  alloc.begin_iteration();
  auto a = alloc.allocate_async(4096, stash::storage_kind::act, "a", s);
  (void)alloc.op("produce", {}, std::vector<stash::tensor_handle>{a}, s);
  (void)alloc.op("consume", std::vector<stash::tensor_handle>{a}, {}, s);
  alloc.deallocate_async(a);
  CHECK_THROWS_WITH_AS(alloc.end_iteration(),
                       doctest::Contains("invalid swap schedule from policy 'broken' entry 0"),
                       stash::schedule_error);
  CHECK(alloc.state() == stash::allocator_state::recording);
}

TEST_CASE("allocator<lifetime_arena, vdnn_conv, zvc>: the arena replays, codecs carry the bytes")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/resnet18_b32.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_arena pool;
  stash::allocator_options o;
  o.device_budget = scaled_peak(t) * drive_scale / 2;
  stash::allocator<host_arena, stash::vdnn_conv, stash::zvc<float>, stash::host_backend> alloc(
      backend, pool, o);
  auto const bad = drive(alloc, backend, s, t, 3);
  CHECK(bad == 0);
  CHECK(pool.state() == stash::arena_state::replaying);
  CHECK(alloc.stats().deviations == 0);
  CHECK(alloc.stats().offload.offloads > 0);
  CHECK(alloc.stats().offload.decode_failures == 0);
  MESSAGE("resnet18 (1/64 scale) through lifetime_arena + vdnn_conv + zvc: "
          << alloc.stats().offload.offloads << " offloads, arena " << pool.arena_bytes()
          << " B, fallbacks " << pool.stats().fallbacks);
}

TEST_CASE(
    "allocator<lifetime_arena, vdnn_all>: the arena learns the swapped tensors' split lifetimes")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/resnet18_b32.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();

  // The arena's footprint for this step without swapping.
  std::size_t resident_footprint = 0;
  {
    host_arena pool;
    stash::allocator<host_arena, stash::no_swap, void, stash::host_backend> alloc(backend, pool);
    CHECK(drive(alloc, backend, s, t, 3) == 0);
    REQUIRE(pool.state() == stash::arena_state::replaying);
    resident_footprint = pool.arena_bytes();
  }

  host_arena pool;
  stash::allocator_options o;
  stash::allocator<host_arena, stash::vdnn_all, void, stash::host_backend> alloc(backend, pool, o);
  // 1: recorded by the allocator (nothing offloaded); its plan swaps, so the arena learns
  // nothing from it (lifetime_arena::relearn) and takes no arena for it; 2: the first replay,
  // recorded by the arena (fallback pool), which plans the split lifetimes at its end; 3-6 replay
  // that plan. (Before review C5 the arena planned step 1, then served steps 2-3 partly from its
  // fallback beside that arena until the new sequence had settled: 3 was a fallback step too.)
  CHECK(drive(alloc, backend, s, t, 2) == 0);
  REQUIRE(pool.state() == stash::arena_state::replaying);
  auto const fallbacks = pool.stats().fallbacks;
  CHECK(drive(alloc, backend, s, t, 4) == 0);
  CHECK(pool.stats().fallbacks == fallbacks);  // every numbered allocation from the plan
  CHECK(pool.replans() == 0);                  // planned once, from the first replayed step
  CHECK(alloc.stats().deviations == 0);
  CHECK(alloc.stats().offload.offloads > 0);
  CHECK(alloc.stats().offload.demand_prefetches == 0);
  auto const swapped_footprint = pool.arena_bytes();
  MESSAGE("resnet18 (1/64 scale) lifetime_arena footprint: "
          << resident_footprint << " B without swapping, " << swapped_footprint
          << " B with vdnn_all (" << alloc.stats().offload.offloads << " offloads, "
          << pool.fence_waits() << " device-side waits for offloaded blocks)");
  // Offloaded activations' memory is reused while they are away.
  CHECK(swapped_footprint < resident_footprint * 3 / 4);
}

TEST_CASE("allocator: a deviating iteration stays correct and triggers a new recording")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator_options o;
  stash::allocator<host_caching, stash::vdnn_all, void, stash::host_backend> alloc(backend, pool,
                                                                                   o);
  CHECK(drive(alloc, backend, s, t, 2) == 0);
  // An extra tensor at the start of the iteration shifts every allocation.
  alloc.begin_iteration();
  auto extra = alloc.allocate_async(4096, stash::storage_kind::temp, "extra", s);
  (void)alloc.op("extra_op", {}, std::vector<stash::tensor_handle>{extra}, s);
  alloc.deallocate_async(extra);
  alloc.end_iteration();
  CHECK(alloc.stats().deviations == 1);
  CHECK_THROWS_AS(alloc.deallocate_async(extra), stash::logic_error);  // freed already
}

namespace {
// A policy that cannot plan the first time it is asked, and plans nothing after that.
struct flaky_policy {
  static inline int calls = 0;
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "flaky"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    if (calls++ == 0) { throw stash::logic_error("flaky_policy: cannot plan this time"); }
    return stash::no_swap{}.plan(a, budget);
  }
};
static_assert(stash::swap_policy<flaky_policy>);
}  // namespace

TEST_CASE(
    "allocator: a policy that fails to plan leaves it recording, and the next iteration plans")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator<host_caching, flaky_policy, void, stash::host_backend> alloc(backend, pool);
  auto step = [&] {
    alloc.begin_iteration();
    auto a = alloc.allocate_async(4096, stash::storage_kind::act, "a", s);
    (void)alloc.op("produce", {}, std::vector<stash::tensor_handle>{a}, s);
    (void)alloc.op("consume", std::vector<stash::tensor_handle>{a}, {}, s);
    alloc.deallocate_async(a);
  };
  step();
  CHECK_THROWS_AS(alloc.end_iteration(), stash::logic_error);
  CHECK(alloc.state() == stash::allocator_state::recording);
  step();
  alloc.end_iteration();
  CHECK(alloc.state() == stash::allocator_state::replaying);
  // The schedule comes from the second recording alone (one iteration, one storage).
  REQUIRE(alloc.recorded_trace() != nullptr);
  CHECK(alloc.recorded_trace()->storages().size() == 1);
  CHECK(alloc.recorded_trace()->ops().size() == 2);
  step();
  alloc.end_iteration();
  CHECK(alloc.stats().deviations == 0);
  backend.synchronize(s);
}

namespace {
// Raw copies taking device scratch of the tensor's size for each offload and each decode, as a
// device codec's staged compressed copy does (the host codecs take none).
struct scratch_raw_transfer : stash::raw_transfer {
  static std::size_t scratch_bytes(std::size_t bytes) noexcept { return bytes; }
};
// The device budget enforced on what the allocator takes from the replayed steps on (train_cnn's
// emulated device).
using budget_pool = train_cnn::budget_guard<host_arena>;

struct scratch_run {
  stash::schedule planned;
  std::uint64_t largest_entry{0};
  std::uint64_t peak{0};
  stash::allocator_stats stats;
};

template <class Codec>
scratch_run run_with_budget(stash::trace const& t, std::uint64_t budget)
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  budget_pool pool(budget, stash::host_upstream{}, stash::lifetime_arena_options{});
  stash::allocator_options o;
  o.device_budget = budget;
  stash::allocator<budget_pool, stash::search_swap, Codec, stash::host_backend> alloc(backend, pool,
                                                                                      o);
  try {
    // One recorded step and one replayed under the schedule (the budget is enforced from it on).
    CHECK(drive(alloc, backend, s, t, 2) == 0);
  } catch (...) {
    backend.synchronize(s);  // the stream's queued writes before the memory goes
    throw;
  }
  scratch_run r{alloc.current_schedule(), 0, pool.enforced_peak(), alloc.stats()};
  for (auto const& e : r.planned.entries) {
    r.largest_entry =
        std::max<std::uint64_t>(r.largest_entry, alloc.recorded_trace()->storages()[e.id].bytes);
  }
  return r;
}
}  // namespace

// GPU review 2026-11-26b, W4: a device codec's scratch comes from the budgeted device pool, so a
// schedule planned for the whole budget could run out at an offload's encode or a prefetch's
// decode. The allocator plans for the budget less the most scratch one transfer takes (never two
// at once in the pool: each call gives its scratch back before it returns).
TEST_CASE("allocator: the policy plans for the device budget less a transfer's device scratch")
{
  auto const t      = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  auto const budget = scaled_peak(t) * 85 / 100;
  auto const plain  = run_with_budget<void>(t, budget);
  CHECK(plain.planned.budget == budget);  // raw copies take no scratch: the budget as given
  CHECK(plain.peak <= budget);

  auto const scratch = run_with_budget<scratch_raw_transfer>(t, budget);
  REQUIRE_FALSE(scratch.planned.entries.empty());
  // Kept: at least the scratch of this schedule's largest transfer (a schedule planned before
  // it may have asked for more: the reserve only grows), and said in the note.
  auto const kept = budget - scratch.planned.budget;
  CHECK(kept >= scratch.largest_entry);
  CHECK(scratch.planned.fits());
  CHECK(scratch.planned.note.find(std::to_string(kept) +
                                  " B of the device budget kept for codec scratch") !=
        std::string::npos);
  CHECK(scratch.stats.failed_offloads == 0);
  CHECK(scratch.stats.failed_prefetches == 0);
  CHECK(scratch.peak <= budget);
  MESSAGE("alexnet (1/64), search_swap at " << budget << " B: without scratch peak " << plain.peak
                                            << " B; with scratch of the tensor's size planned for "
                                            << scratch.planned.budget << " B, peak " << scratch.peak
                                            << " B");
}

namespace {
// A policy whose schedule grows as the room kept for scratch grows: at budget `full - room` it
// offloads the smallest storage labelled a* larger than `room` (none when there is none), across
// the gap of the program below. Its scratch (the tensor's size, scratch_raw_transfer) then always
// exceeds the reserve it was planned with, the case the replans cannot settle. The budgets it was
// asked for are noted.
struct growing_scratch_policy {
  std::uint64_t full{0};
  std::shared_ptr<std::vector<std::uint64_t>> asked{std::make_shared<std::vector<std::uint64_t>>()};
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "growing_scratch"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    asked->push_back(budget);
    std::uint64_t const room = full - budget;
    auto const& st           = a.trace().storages();
    std::optional<stash::storage_id> pick;
    for (stash::storage_id id = 0; id < st.size(); ++id) {
      if (st[id].label.starts_with("a") && st[id].bytes > room &&
          (!pick || st[id].bytes < st[*pick].bytes)) {
        pick = id;
      }
    }
    std::vector<stash::swap_entry> entries;
    if (pick) { entries.push_back(stash::swap_entry{*pick, 0, 2, 1, 2, st[*pick].bytes}); }
    return stash::make_schedule(a, std::string(name()), budget, std::move(entries));
  }
};
static_assert(stash::swap_policy<growing_scratch_policy>);
}  // namespace

// GPU review 2026-11-26d, W6: after three replans with the reserve still growing, the allocator
// kept the last schedule, whose transfers could take more scratch than the budget it kept for
// them (a device codec's offload or prefetch then out of memory on a GPU). Now one last plan keeps
// the most any storage's transfer could take.
TEST_CASE("allocator: a scratch reserve still growing after three replans plans for the most")
{
  constexpr std::uint64_t kib    = 1024;
  constexpr std::uint64_t budget = 72 * kib;  // the program's peak is 64 KiB
  stash::host_backend backend;
  auto const s = backend.create_stream();
  budget_pool pool(budget, stash::host_upstream{}, stash::lifetime_arena_options{});
  stash::allocator_options o;
  o.device_budget = budget;
  growing_scratch_policy const policy{budget};
  stash::allocator<budget_pool, growing_scratch_policy, scratch_raw_transfer, stash::host_backend>
      alloc(backend, pool, o, policy);
  auto step = [&] {  // a1..a5 (4-20 KiB) written by op0, read with x by op2
    alloc.begin_iteration();
    std::vector<stash::tensor_handle> a;
    for (int k = 1; k <= 5; ++k) {
      a.push_back(
          alloc.allocate_async(k * 4 * kib, stash::storage_kind::act, "a" + std::to_string(k), s));
    }
    (void)alloc.op("make", {}, a, s);
    auto x = alloc.allocate_async(4 * kib, stash::storage_kind::act, "x", s);
    (void)alloc.op("mid", {}, std::vector<stash::tensor_handle>{x}, s);
    a.push_back(x);
    (void)alloc.op("use", a, {}, s);
    for (auto h : a) { alloc.deallocate_async(h); }
    alloc.end_iteration();
  };
  step();  // recorded, then planned
  // Reserves 0, 4, 8, 12 KiB each gave a schedule needing more; the fifth plan keeps 20 KiB (a5's
  // transfer, the most any storage's takes), where the policy offloads nothing.
  CHECK(*policy.asked == std::vector<std::uint64_t>{budget, budget - 4 * kib, budget - 8 * kib,
                                                    budget - 12 * kib, budget - 20 * kib});
  auto const& planned = alloc.current_schedule();
  CHECK(planned.budget == budget - 20 * kib);
  for (auto const& e : planned.entries) { CHECK(e.bytes <= budget - planned.budget); }
  step();  // replayed within the budget
  backend.synchronize(s);
  CHECK(alloc.stats().failed_offloads == 0);
  CHECK(alloc.stats().failed_prefetches == 0);
  CHECK(pool.enforced_peak() <= budget);
}

}  // namespace STASH_UNITY_ID
