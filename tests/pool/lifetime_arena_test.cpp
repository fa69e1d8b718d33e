
#include <stash/core/host_upstream.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/testing/pool_conformance.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

namespace STASH_UNITY_ID {

namespace {
using host_arena = stash::lifetime_arena<stash::host_upstream>;
static_assert(stash::pool<host_arena>);

cudaStream_t const main_stream = reinterpret_cast<cudaStream_t>(0x1000);
cudaStream_t const side_stream = reinterpret_cast<cudaStream_t>(0x2000);

stash::lifetime_arena_options with_budget(std::size_t budget)
{
  stash::lifetime_arena_options o;
  o.budget = budget;
  return o;
}

// One step of a synthetic iteration: allocate (size > 0) or free the slot's block.
struct step {
  int slot;
  std::size_t bytes;  // 0: free
};

// A forward/backward-shaped iteration: activations allocated in order, freed in reverse, with
// short-lived workspaces in between.
std::vector<step> training_like_iteration(std::size_t scale = 1)
{
  std::vector<step> s;
  int const layers = 12;
  for (int l = 0; l < layers; ++l) {
    s.push_back({100 + l, scale * (1000 + 37 * std::size_t(l)) * 256});  // workspace
    s.push_back({l, scale * (4096 + 512 * std::size_t(l % 5)) * 64});    // activation
    s.push_back({100 + l, 0});
  }
  for (int l = layers - 1; l >= 0; --l) {
    s.push_back({200 + l, scale * (4096 + 512 * std::size_t(l % 5)) * 64});  // gradient
    s.push_back({l, 0});
    s.push_back({200 + l, 0});
  }
  return s;
}

// Runs one iteration through the arena, checking that no two live blocks overlap and that every
// block keeps its contents until freed.
struct iteration_runner {
  host_arena& arena;
  stash::testing::live_blocks addresses{};
  std::map<int, std::pair<void*, std::size_t>> live{};
  bool ok = true;

  void run(std::vector<step> const& steps, cudaStream_t stream = main_stream)
  {
    arena.begin_iteration();
    for (auto const& st : steps) {
      if (st.bytes > 0) {
        void* p = arena.allocate_async(st.bytes, stream);
        ok      = ok && addresses.insert(p, st.bytes);
        std::memset(p, st.slot & 0xFF, st.bytes);
        live[st.slot] = {p, st.bytes};
      } else {
        auto [p, n]   = live.at(st.slot);
        auto const* b = static_cast<unsigned char const*>(p);
        ok            = ok && b[0] == (st.slot & 0xFF) && b[n - 1] == (st.slot & 0xFF);
        arena.deallocate_async(p, n, stream);
        addresses.erase(p);
        live.erase(st.slot);
      }
    }
    arena.end_iteration();
  }
};
}  // namespace

TEST_CASE("pool conformance: lifetime_arena over host memory (outside iterations: the fallback)")
{
  auto const report = stash::testing::check_pool<host_arena>(
      [](std::size_t budget) {
        return std::make_unique<host_arena>(stash::host_upstream{}, with_budget(budget));
      },
      main_stream);
  CHECK_MESSAGE(report.ok(), report.summary());
}

TEST_CASE("lifetime_arena records one iteration, then replays every allocation from its plan")
{
  host_arena arena;
  iteration_runner runner{arena};
  auto const iteration = training_like_iteration();
  CHECK(arena.state() == stash::arena_state::recording);
  runner.run(iteration);
  REQUIRE(arena.state() == stash::arena_state::replaying);
  CHECK(arena.plan_failure().empty());
  auto const footprint = arena.arena_bytes();
  CHECK(footprint == arena.current_plan().footprint);
  CHECK(footprint > 0);

  for (int i = 0; i < 3; ++i) { runner.run(iteration); }
  CHECK(runner.ok);
  auto const s = arena.stats();
  CHECK(s.fallbacks == 0);
  CHECK(s.in_use_bytes == 0);
  CHECK(arena.replans() == 0);
  // The arena is no larger than what the caching pool reserved while recording.
  CHECK(footprint <= arena.fallback().stats().peak_reserved_bytes);
}

TEST_CASE(
    "lifetime_arena: a deviating allocation goes to the fallback, and a settled pattern is "
    "re-planned")
{
  stash::lifetime_arena_options o;
  o.settle_iterations = 2;
  host_arena arena(stash::host_upstream{}, o);
  iteration_runner runner{arena};
  auto const iteration = training_like_iteration();
  runner.run(iteration);
  REQUIRE(arena.state() == stash::arena_state::replaying);

  auto changed = iteration;
  changed[4].bytes += 4096;  // the second activation grows (a dynamic shape)
  runner.run(changed);
  CHECK(runner.ok);
  CHECK(arena.stats().fallbacks == 1);
  CHECK(arena.replans() == 0);
  runner.run(changed);  // seen twice in a row: planned anew
  CHECK(arena.replans() == 1);
  auto const fallbacks = arena.stats().fallbacks;
  runner.run(changed);
  runner.run(changed);
  CHECK(runner.ok);
  CHECK(arena.stats().fallbacks == fallbacks);  // the new plan serves it
}

TEST_CASE("lifetime_arena never overlaps a block that lives past its recorded end")
{
  host_arena arena;
  iteration_runner runner{arena};
  auto const iteration = training_like_iteration();
  runner.run(iteration);
  REQUIRE(arena.state() == stash::arena_state::replaying);

  // Keep every workspace alive to the end of the iteration: later blocks planned on top of them
  // must not be handed the same memory.
  std::vector<step> late;
  for (auto const& st : iteration) {
    if (st.bytes == 0 && st.slot >= 100 && st.slot < 200) { continue; }
    late.push_back(st);
  }
  for (int l = 0; l < 12; ++l) { late.push_back({100 + l, 0}); }
  runner.run(late);
  CHECK(runner.ok);
  CHECK(arena.stats().fallbacks > 0);
  CHECK(arena.stats().in_use_bytes == 0);
}

TEST_CASE("lifetime_arena: blocks outliving the iteration are persistent and fenced")
{
  host_arena arena;
  iteration_runner runner{arena};
  std::vector<step> first = {{1, 1 << 20}, {2, 1 << 20}, {2, 0}, {3, 4096}, {3, 0}};  // 1 persists
  runner.run(first);
  REQUIRE(arena.state() == stash::arena_state::replaying);
  // The persistent block came from the fallback and is not part of the plan.
  CHECK(arena.current_plan().offsets.size() == 2);
  std::vector<step> next = {{2, 1 << 20}, {2, 0}, {3, 4096}, {3, 0}};
  // Index 0 is now 2's allocation (1 MiB, recorded as the persistent one): served by the
  // fallback as expected, and never overlapping block 1, which is still live.
  runner.run(next);
  CHECK(runner.ok);
}

TEST_CASE("lifetime_arena: other streams are served by the fallback pool")
{
  host_arena arena;
  iteration_runner runner{arena};
  auto const iteration = training_like_iteration();
  runner.run(iteration, main_stream);
  REQUIRE(arena.state() == stash::arena_state::replaying);
  auto const before = arena.fallback().stats().allocations;
  runner.run(iteration, side_stream);
  CHECK(runner.ok);
  // Every side-stream allocation came from the fallback pool; none was numbered, so none counts
  // as a deviation of the arena's own sequence.
  CHECK(arena.fallback().stats().allocations - before == 36);
  CHECK(arena.stats().fallbacks == 0);
  runner.run(iteration, main_stream);  // the arena's stream still replays its plan
  CHECK(runner.ok);
  CHECK(arena.stats().fallbacks == 0);
  CHECK(arena.fallback().stats().allocations - before == 36);
}

TEST_CASE("lifetime_arena: a budget too small for the plan keeps it recording, and still serving")
{
  auto const iteration = training_like_iteration();
  // First find the footprint the plan needs.
  std::size_t footprint = 0;
  {
    host_arena probe;
    iteration_runner r{probe};
    r.run(iteration);
    footprint = probe.arena_bytes();
  }
  REQUIRE(footprint > 0);
  // Room for the caching pool's segments one at a time, not for the arena next to them.
  host_arena arena(stash::host_upstream{}, with_budget(footprint + footprint / 2));
  iteration_runner runner{arena};
  runner.run(iteration);
  runner.run(iteration);
  CHECK(runner.ok);
  if (arena.state() == stash::arena_state::recording) {
    CHECK_FALSE(arena.plan_failure().empty());
  } else {
    CHECK(arena.stats().reserved_bytes <= footprint + footprint / 2);
  }
  CHECK(arena.stats().peak_reserved_bytes <= footprint + footprint / 2);
}

TEST_CASE("lifetime_arena: out_of_memory carries the arena's figures and leaves it intact")
{
  host_arena arena(stash::host_upstream{}, with_budget(4 * stash::MiB));
  arena.begin_iteration();
  void* a           = arena.allocate_async(3 * stash::MiB, main_stream);
  auto const before = arena.stats();
  try {
    (void)arena.allocate_async(3 * stash::MiB, main_stream);
    FAIL("allocation beyond the budget succeeded");
  } catch (stash::out_of_memory const& e) {
    CHECK(std::string(e.what()).find("lifetime_arena") != std::string::npos);
    CHECK(e.budget_bytes() == 4 * stash::MiB);
    CHECK(e.in_use_bytes() == 3 * stash::MiB);
  }
  CHECK(stash::testing::same_pool_stats(before, arena.stats()));
  arena.deallocate_async(a, 3 * stash::MiB, main_stream);
  arena.end_iteration();
  CHECK_THROWS_AS(arena.end_iteration(), stash::logic_error);
}

namespace {
// manual_order without its wait(): the arena must fall back instead of waiting.
struct no_wait_order {
  stash::manual_order inner;
  using marker = stash::manual_order::marker;
  marker record(stash::stream_ref s) { return inner.record(s); }
  bool passed(marker const& m) const { return inner.passed(m); }
  void release(marker& m) noexcept { inner.release(m); }
};
static_assert(stash::stream_order<no_wait_order>);
static_assert(!stash::stream_order_with_wait<no_wait_order>);

// Two same-size blocks with disjoint lifetimes: the plan puts the second on top of the first.
template <class Arena>
void two_blocks(Arena& arena, cudaStream_t free_first_on, std::size_t bytes = 1 << 20)
{
  arena.begin_iteration();
  void* a = arena.allocate_async(bytes, main_stream);
  arena.deallocate_async(a, bytes, free_first_on);
  void* b = arena.allocate_async(bytes, main_stream);
  arena.deallocate_async(b, bytes, main_stream);
  arena.end_iteration();
}
}  // namespace

TEST_CASE("lifetime_arena: a block freed on another stream is reused after a device-side wait")
{
  stash::manual_order order;
  stash::lifetime_arena<stash::host_upstream, stash::greedy_planner, stash::manual_order> arena(
      stash::host_upstream{}, {}, stash::greedy_planner{}, order);
  two_blocks(arena, main_stream);
  REQUIRE(arena.state() == stash::arena_state::replaying);
  REQUIRE(arena.arena_bytes() == 1 << 20);  // one slot shared by both blocks

  // The first block is now freed on a side stream whose work has not finished: the second block
  // still goes to its planned place, with the main stream waiting for the side stream's marker.
  two_blocks(arena, side_stream);
  REQUIRE(order.waits().size() == 1);
  CHECK(order.waits()[0].first == main_stream);
  CHECK_FALSE(order.passed(order.waits()[0].second));
  CHECK(arena.fence_waits() == 1);
  CHECK(arena.stats().fallbacks == 0);

  // Once the side stream's work has passed, no wait is needed.
  order.finish(side_stream);
  arena.begin_iteration();
  void* a = arena.allocate_async(1 << 20, main_stream);
  arena.deallocate_async(a, 1 << 20, side_stream);
  order.finish(side_stream);
  void* b = arena.allocate_async(1 << 20, main_stream);
  CHECK(b == a);
  arena.deallocate_async(b, 1 << 20, main_stream);
  arena.end_iteration();
  CHECK(order.waits().size() == 1);
  CHECK(arena.fence_waits() == 1);
}

TEST_CASE(
    "lifetime_arena: an order that cannot wait falls back while the fence is pending, without "
    "re-planning")
{
  no_wait_order order;
  stash::lifetime_arena<stash::host_upstream, stash::greedy_planner, no_wait_order> arena(
      stash::host_upstream{}, {}, stash::greedy_planner{}, order);
  two_blocks(arena, main_stream);
  REQUIRE(arena.state() == stash::arena_state::replaying);
  for (int i = 0; i < 4; ++i) {
    order.inner.finish(side_stream);  // the previous iteration's side-stream work is done
    two_blocks(arena, side_stream);
  }
  // Each iteration's second block met a pending fence and took fallback memory, never the
  // block still in use on the side stream...
  CHECK(arena.stats().fallbacks == 4);
  CHECK(arena.fence_waits() == 0);
  // ... and the same sequence is not planned anew: a new plan would meet the same fence.
  CHECK(arena.replans() == 0);
  CHECK(arena.state() == stash::arena_state::replaying);
}

namespace {
// The family of iterations of the tests below: `scales` run in order through an arena with the
// given options; returns the arena's figures after the run.
struct family_result {
  std::uint64_t fallbacks{};
  std::uint64_t replans{};
  std::size_t arena_bytes{};
  bool ok{};
  stash::arena_state state{};
};
family_result run_family(stash::lifetime_arena_options const& o,
                         std::vector<std::size_t> const& scales)
{
  host_arena arena(stash::host_upstream{}, o);
  iteration_runner runner{arena};
  for (auto s : scales) { runner.run(training_like_iteration(s)); }
  return {arena.stats().fallbacks, arena.replans(), arena.arena_bytes(), runner.ok, arena.state()};
}
}  // namespace

TEST_CASE("lifetime_arena, largest sizes: a variable-length family is planned once and replays")
{
  // Three recorded iterations (scales 1, 3, 2: the sizes vary, the sequence does not), then a
  // dozen more of those shapes in another order.
  std::vector<std::size_t> scales{1, 3, 2};
  for (std::size_t i = 0; i < 12; ++i) { scales.push_back(1 + (i * 7) % 3); }
  stash::lifetime_arena_options o;
  o.sizes             = stash::arena_sizes::largest;
  o.record_iterations = 3;
  auto const family   = run_family(o, scales);
  CHECK(family.ok);
  CHECK(family.state == stash::arena_state::replaying);
  CHECK(family.fallbacks == 0);
  CHECK(family.replans == 0);
  // Every slot is planned at its largest size, here those of scale 3: the footprint is that of
  // the scale-3 iteration's own plan.
  auto const largest = run_family({}, {3});
  CHECK(family.arena_bytes == largest.arena_bytes);

  // Exact sizes (the default) on the same run: the smaller and larger shapes fall back, and the
  // alternating pattern never settles enough for a plan that serves them all.
  auto const exact = run_family({}, scales);
  CHECK(exact.ok);
  CHECK(exact.fallbacks > 0);
}

TEST_CASE(
    "lifetime_arena, largest sizes: a larger member falls back, then the family is re-planned")
{
  stash::lifetime_arena_options o;
  o.sizes             = stash::arena_sizes::largest;
  o.settle_iterations = 2;
  host_arena arena(stash::host_upstream{}, o);
  iteration_runner runner{arena};
  runner.run(training_like_iteration(1));
  REQUIRE(arena.state() == stash::arena_state::replaying);
  auto const small = arena.arena_bytes();
  runner.run(training_like_iteration(1));
  CHECK(arena.stats().fallbacks == 0);
  runner.run(training_like_iteration(2));  // larger than every slot: all of it falls back
  auto const after_one = arena.stats().fallbacks;
  CHECK(after_one > 0);
  CHECK(arena.replans() == 0);
  runner.run(training_like_iteration(2));  // twice in a row: planned anew at the larger sizes
  CHECK(arena.replans() == 1);
  CHECK(arena.arena_bytes() > small);
  auto const settled = arena.stats().fallbacks;
  for (std::size_t s : {1, 2, 1, 2}) { runner.run(training_like_iteration(s)); }
  CHECK(runner.ok);
  CHECK(arena.stats().fallbacks == settled);  // both shapes replay from the new plan
  CHECK(arena.replans() == 1);
}

TEST_CASE("lifetime_arena, largest sizes with size classes: small growth stays in its slot")
{
  auto const iteration = training_like_iteration();
  auto grown           = iteration;
  grown[4].bytes += 4096;  // the second activation grows a little (294912 -> 299008 B)
  stash::lifetime_arena_options o;
  o.sizes        = stash::arena_sizes::largest;
  o.size_classes = 4;  // 294912 B is planned as its class, 327680 B (1.25 x 2^18)
  for (bool classes : {false, true}) {
    CAPTURE(classes);
    auto opts = o;
    if (!classes) { opts.size_classes = 0; }
    host_arena arena(stash::host_upstream{}, opts);
    iteration_runner runner{arena};
    runner.run(iteration);
    runner.run(grown);
    runner.run(iteration);
    CHECK(runner.ok);
    CHECK(arena.replans() == 0);
    CHECK(arena.stats().fallbacks == (classes ? 0U : 1U));
  }
}

TEST_CASE("lifetime_arena: over-aligned allocations are planned at their alignment and replay")
{
  host_arena arena;
  // Sizes that are not multiples of a page: only a plan at 4096 B puts every block on a page.
  std::size_t const sizes[]  = {1000, 5000, 300, 7000};
  std::size_t const aligns[] = {4096, 512, 4096, 2048};
  for (int it = 0; it < 3; ++it) {
    arena.begin_iteration();
    std::vector<void*> ptrs;
    for (int k = 0; k < 4; ++k) {
      ptrs.push_back(arena.allocate_async(sizes[k], aligns[k], main_stream));
      CHECK(reinterpret_cast<std::uintptr_t>(ptrs.back()) % aligns[k] == 0);
    }
    for (int k = 3; k >= 0; --k) {
      arena.deallocate_async(ptrs[k], sizes[k], aligns[k], main_stream);
    }
    arena.end_iteration();
  }
  REQUIRE(arena.state() == stash::arena_state::replaying);
  CHECK(arena.current_plan().alignment == 4096);
  CHECK(arena.stats().fallbacks == 0);  // every replayed allocation came from the arena
  // A larger alignment than planned is a deviation served by the fallback pool, aligned.
  arena.begin_iteration();
  void* p = arena.allocate_async(sizes[0], 4096, main_stream);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 4096 == 0);
  arena.deallocate_async(p, sizes[0], 4096, main_stream);
  arena.end_iteration();
}

TEST_CASE("lifetime_arena: a higher alignment than planned falls back, then is re-planned")
{
  stash::lifetime_arena_options o;
  o.settle_iterations = 2;
  host_arena arena(stash::host_upstream{}, o);
  auto run = [&](std::size_t align) {
    arena.begin_iteration();
    void* a = arena.allocate_async(3000, align, main_stream);
    void* b = arena.allocate_async(5000, main_stream);
    CHECK(reinterpret_cast<std::uintptr_t>(a) % align == 0);
    arena.deallocate_async(b, 5000, main_stream);
    arena.deallocate_async(a, 3000, align, main_stream);
    arena.end_iteration();
  };
  run(256);
  run(256);
  REQUIRE(arena.state() == stash::arena_state::replaying);
  CHECK(arena.current_plan().alignment == 256);
  run(4096);  // deviates: the fallback serves it
  CHECK(arena.stats().fallbacks == 1);
  run(4096);  // settled: planned anew at a page
  CHECK(arena.replans() == 1);
  CHECK(arena.current_plan().alignment == 4096);
  auto const fallbacks = arena.stats().fallbacks;
  run(4096);
  CHECK(arena.stats().fallbacks == fallbacks);
}

}  // namespace STASH_UNITY_ID
