// The logic behind libstash_torch_alloc's C entry points (examples/pytorch_allocator), driven on
// host memory: a recorded ResNet-18 training step replayed as PyTorch would issue it, step after
// step, through the same c_* functions the shared library exports; configuration and misuse;
// threads; and the device instantiation on a machine without a GPU.
#include <stash_tools/pytorch_allocator/allocator_state.hpp>

#include "support/data.hpp"

#include <stash/core/device.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/testing/pool_conformance.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

namespace ta     = stash::torch_alloc;
using host_state = ta::allocator_state<stash::host_upstream>;

cudaStream_t const main_stream = reinterpret_cast<cudaStream_t>(0x1000);

// A fake environment: only the variables given are set.
ta::env_lookup fake_env(std::map<std::string, std::string> vars = {})
{
  auto shared = std::make_shared<std::map<std::string, std::string> const>(std::move(vars));
  return [shared](char const* name) -> char const* {
    auto const it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

// A quiet state (the errors these tests provoke on purpose would flood stderr).
std::unique_ptr<host_state> make_state(std::map<std::string, std::string> env = {})
{
  return std::make_unique<host_state>(fake_env(std::move(env)), false);
}

stash_torch_stats stats_of(host_state& s)
{
  stash_torch_stats out{};
  REQUIRE(ta::c_stats(s, &out) == 0);
  return out;
}

template <class F>
std::string error_of(F&& f)
{
  try {
    std::forward<F>(f)();
  } catch (std::exception const& e) {
    return e.what();
  }
  return "";
}

bool contains(std::string const& text, std::string const& part)
{
  return text.find(part) != std::string::npos;
}

// Replays a trace's allocations and frees through the C entry-point logic, as PyTorch's
// allocator calls would arrive: storages never freed in the trace (parameters, momentum, the
// input batch) are allocated once, the others in every step. Checks that no two live blocks
// overlap and that every block keeps a tag written into it until it is freed.
class trace_driver {
 public:
  trace_driver(host_state& state, stash::trace const& t) : state_(state), t_(t)
  {
    ptrs_.assign(t.storages().size(), nullptr);
  }

  [[nodiscard]] bool persistent(stash::storage_id id) const { return !t_.free_event(id); }

  // Allocates every persistent storage, outside any step (the model and optimizer exist before
  // the loop). Those of kind `lazy`, if given, are left for the first step's optimizer phase, as
  // PyTorch's SGD creates its momentum buffers in the first optimizer.step().
  void setup(std::optional<stash::storage_kind> lazy = std::nullopt)
  {
    for (stash::storage_id id = 0; id < t_.storages().size(); ++id) {
      if (persistent(id) && t_.storages()[id].kind != lazy) { allocate(id); }
    }
  }

  // One training step: the trace's events for storages freed within it; at the optimizer phase,
  // any persistent storage not allocated yet.
  void step()
  {
    REQUIRE(ta::c_begin_iteration(state_) == 0);
    for (auto const& e : t_.events()) {
      if (e.kind == stash::event_kind::alloc && !persistent(e.index)) {
        allocate(e.index);
      } else if (e.kind == stash::event_kind::free) {
        release(e.index);
      } else if (e.kind == stash::event_kind::phase && e.phase_value() == stash::phase::optimizer) {
        for (stash::storage_id id = 0; id < ptrs_.size(); ++id) {
          if (persistent(id) && ptrs_[id] == nullptr) { allocate(id); }
        }
      }
    }
    REQUIRE(ta::c_end_iteration(state_) == 0);
  }

  void teardown()
  {
    for (stash::storage_id id = 0; id < ptrs_.size(); ++id) {
      if (ptrs_[id] != nullptr) { release(id); }
    }
  }

  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] std::uint64_t allocations() const { return allocations_; }
  [[nodiscard]] std::uint64_t live_bytes() const { return live_bytes_; }

 private:
  void allocate(stash::storage_id id)
  {
    auto const bytes = t_.storages()[id].bytes;
    void* p          = ta::c_malloc(state_, static_cast<ssize_t>(bytes), 0, main_stream);
    if (bytes == 0) {
      ok_ = ok_ && p == nullptr;
      return;
    }
    REQUIRE_MESSAGE(p != nullptr, state_.last_error());
    ok_ = ok_ && addresses_.insert(p, bytes);
    write_tag(p, bytes, id);
    ptrs_[id] = p;
    ++allocations_;
    live_bytes_ += bytes;
  }

  void release(stash::storage_id id)
  {
    auto const bytes = t_.storages()[id].bytes;
    if (ptrs_[id] == nullptr) { return; }  // a 0-byte storage
    ok_ = ok_ && tag_intact(ptrs_[id], bytes, id);
    addresses_.erase(ptrs_[id]);
    ta::c_free(state_, ptrs_[id], static_cast<ssize_t>(bytes), 0, main_stream);
    ptrs_[id] = nullptr;
    live_bytes_ -= bytes;
  }

  // The storage id at both ends of the block: overlapping blocks would overwrite one another's.
  static void write_tag(void* p, std::size_t n, std::uint64_t id)
  {
    auto* b = static_cast<unsigned char*>(p);
    std::memcpy(b, &id, std::min(n, sizeof(id)));
    std::memcpy(b + n - std::min(n, sizeof(id)), &id, std::min(n, sizeof(id)));
  }
  static bool tag_intact(void const* p, std::size_t n, std::uint64_t id)
  {
    auto const* b       = static_cast<unsigned char const*>(p);
    std::size_t const k = std::min(n, sizeof(id));
    return std::memcmp(b + n - k, &id, k) == 0 &&
           (n < 2 * sizeof(id) ? true : std::memcmp(b, &id, k) == 0);
  }

  host_state& state_;
  stash::trace const& t_;
  std::vector<void*> ptrs_;
  stash::testing::live_blocks addresses_;
  bool ok_                   = true;
  std::uint64_t allocations_ = 0;
  std::uint64_t live_bytes_  = 0;
};

// Peak live bytes of the trace (a lower bound on any pool's peak in use), and the same over the
// storages freed within the step only (a lower bound on the arena's planned block).
std::pair<std::uint64_t, std::uint64_t> trace_peaks(stash::trace const& t)
{
  std::uint64_t live = 0, peak = 0, step_live = 0, step_peak = 0;
  for (auto const& e : t.events()) {
    if (e.kind != stash::event_kind::alloc && e.kind != stash::event_kind::free) { continue; }
    auto const bytes   = t.storages()[e.index].bytes;
    bool const in_step = t.free_event(e.index).has_value();
    if (e.kind == stash::event_kind::alloc) {
      live += bytes;
      if (in_step) { step_live += bytes; }
    } else {
      live -= bytes;
      step_live -= bytes;
    }
    peak      = std::max(peak, live);
    step_peak = std::max(step_peak, step_live);
  }
  return {peak, step_peak};
}

// Figures every pool must keep consistent, whatever its policy.
void check_consistent(stash_torch_stats const& s, trace_driver const& d)
{
  CHECK(s.in_use_bytes >= d.live_bytes());  // after rounding: at least what was asked for
  CHECK((s.in_use_bytes == 0) == (d.live_bytes() == 0));
  CHECK(s.in_use_bytes <= s.reserved_bytes);
  CHECK(s.in_use_bytes <= s.peak_in_use_bytes);
  CHECK(s.reserved_bytes <= s.peak_reserved_bytes);
  CHECK(s.peak_in_use_bytes <= s.peak_reserved_bytes);
  CHECK(s.allocations == d.allocations());
  CHECK(s.failed_allocations == 0);
  CHECK(s.device == 0);
}

stash::trace const& resnet18()
{
  static stash::trace const t =
      stash::read_trace(stash::test::data_path("traces/resnet18_b32.trace"));
  return t;
}

}  // namespace

TEST_CASE("pytorch_allocator: parse_budget accepts byte counts with binary units")
{
  CHECK(ta::parse_budget("4096", "b") == 4096);
  CHECK(ta::parse_budget("4096B", "b") == 4096);
  CHECK(ta::parse_budget("4K", "b") == 4 * stash::KiB);
  CHECK(ta::parse_budget("4KiB", "b") == 4 * stash::KiB);
  CHECK(ta::parse_budget("3M", "b") == 3 * stash::MiB);
  CHECK(ta::parse_budget("512MiB", "b") == 512 * stash::MiB);
  CHECK(ta::parse_budget("8GiB", "b") == 8 * stash::GiB);
  CHECK(ta::parse_budget("2T", "b") == 2 * 1024 * stash::GiB);
  CHECK(ta::parse_budget("0", "b") == ta::no_budget);
  CHECK(ta::parse_budget("none", "b") == ta::no_budget);
  // The tools' one grammar (stash_tools/size.hpp): fractions of whole bytes, SI units, a space.
  CHECK(ta::parse_budget("1.5G", "b") == 3 * stash::GiB / 2);
  CHECK(ta::parse_budget("12GB", "b") == 12'000'000'000ULL);
  CHECK(ta::parse_budget("8 GiB", "b") == 8 * stash::GiB);
}

TEST_CASE("pytorch_allocator: parse_budget refuses malformed budgets, naming the source")
{
  for (char const* bad : {"", "-1", "abc", "1.5", "12XB", "8  GiB", "GiB",
                          "99999999999999999999999", "17179869184T"}) {
    CAPTURE(bad);
    std::string const e = error_of([&] { (void)ta::parse_budget(bad, "STASH_BUDGET"); });
    CHECK(contains(e, "STASH_BUDGET='" + std::string(bad) + "'"));
  }
  CHECK(contains(error_of([] { (void)ta::parse_budget("12XB", "x"); }), "unknown unit 'XB'"));
  CHECK(contains(error_of([] { (void)ta::parse_budget("17179869184T", "x"); }), "too large"));
  CHECK_THROWS_AS((void)ta::parse_budget("abc", "x"), stash::logic_error);
}

TEST_CASE("pytorch_allocator: pool names")
{
  CHECK(ta::parse_pool_kind("caching", "p") == ta::pool_kind::caching);
  CHECK(ta::parse_pool_kind("arena", "p") == ta::pool_kind::arena);
  CHECK(ta::parse_pool_kind("async", "p") == ta::pool_kind::async);
  for (char const* bad : {"", "Arena", "ARENA", "cach", "caching "}) {
    CAPTURE(bad);
    std::string const e = error_of([&] { (void)ta::parse_pool_kind(bad, "STASH_POOL"); });
    CHECK(contains(e, "STASH_POOL='" + std::string(bad) + "': unknown pool"));
    CHECK(contains(e, "caching, arena or async"));
  }
}

TEST_CASE("pytorch_allocator: steps of a recorded ResNet-18 iteration through the caching pool")
{
  auto state = make_state();
  REQUIRE(ta::c_configure(*state, "caching", 0) == 0);
  auto const& t                  = resnet18();
  std::uint64_t const trace_peak = trace_peaks(t).first;
  trace_driver d(*state, t);
  d.setup();
  for (int step = 1; step <= 3; ++step) {
    CAPTURE(step);
    d.step();
    CHECK(d.ok());
    auto const s = stats_of(*state);
    check_consistent(s, d);
    CHECK(s.pool == STASH_TORCH_POOL_CACHING);
    CHECK(s.iterations == static_cast<std::uint64_t>(step));
    CHECK(s.fallbacks == 0);
    CHECK(s.arena_bytes == 0);
    CHECK(s.budget_bytes == UINT64_MAX);
    CHECK(s.peak_in_use_bytes >= trace_peak);
  }
  d.teardown();
  CHECK(d.ok());
  CHECK(stats_of(*state).in_use_bytes == 0);
  CHECK(state->last_error().empty());
}

TEST_CASE(
    "pytorch_allocator: the arena records the first step and replays the rest without "
    "fallbacks")
{
  auto state = make_state();
  REQUIRE(ta::c_configure(*state, "arena", 0) == 0);
  auto const& t                      = resnet18();
  auto const [trace_peak, step_peak] = trace_peaks(t);
  trace_driver d(*state, t);
  d.setup();
  REQUIRE(state->arena() != nullptr);
  CHECK(state->arena()->state() == stash::arena_state::recording);

  d.step();
  auto const first = stats_of(*state);
  CHECK(d.ok());
  check_consistent(first, d);
  CHECK(first.pool == STASH_TORCH_POOL_ARENA);
  CHECK(state->arena()->state() == stash::arena_state::replaying);
  CHECK(first.arena_bytes >= step_peak);  // every step-local storage is in the plan
  CHECK(first.fallbacks == 0);            // recording is not deviating

  stash_torch_stats previous = first;
  for (int step = 2; step <= 3; ++step) {
    CAPTURE(step);
    d.step();
    CHECK(d.ok());
    auto const s = stats_of(*state);
    check_consistent(s, d);
    CHECK(s.iterations == static_cast<std::uint64_t>(step));
    CHECK(s.fallbacks == 0);
    CHECK(s.arena_bytes == first.arena_bytes);
    CHECK(s.reserved_bytes == previous.reserved_bytes);  // replay takes nothing new
    CHECK(s.peak_in_use_bytes >= trace_peak);
    previous = s;
  }
  CHECK(state->arena()->replans() == 0);
  d.teardown();
  CHECK(d.ok());
  CHECK(stats_of(*state).in_use_bytes == 0);
  CHECK(state->last_error().empty());
}

TEST_CASE("pytorch_allocator: a first step that also creates the optimizer state settles")
{
  // As in PyTorch, SGD's momentum buffers appear in the first step's optimizer phase only: steps
  // 2.. deviate from the recording, are planned anew once the new sequence repeats, then replay
  // cleanly.
  auto state    = make_state({{"STASH_POOL", "arena"}});
  auto const& t = resnet18();
  trace_driver d(*state, t);
  d.setup(stash::storage_kind::optstate);
  std::vector<std::uint64_t> fallbacks;
  for (int step = 1; step <= 5; ++step) {
    CAPTURE(step);
    d.step();
    CHECK(d.ok());
    auto const s = stats_of(*state);
    check_consistent(s, d);
    fallbacks.push_back(s.fallbacks);
  }
  CHECK(stats_of(*state).pool == STASH_TORCH_POOL_ARENA);
  CHECK(state->arena()->state() == stash::arena_state::replaying);
  CHECK(fallbacks[4] == fallbacks[3]);  // the last two steps replay without a fallback
  CHECK(fallbacks[3] == fallbacks[2]);
  d.teardown();
  CHECK(d.ok());
  CHECK(stats_of(*state).in_use_bytes == 0);
}

TEST_CASE("pytorch_allocator: configuration from the environment and from stash_configure")
{
  SUBCASE("the environment chooses pool and budget at the first allocation")
  {
    auto state = make_state({{"STASH_POOL", "arena"}, {"STASH_BUDGET", "1GiB"}});
    CHECK(stats_of(*state).pool == STASH_TORCH_POOL_NONE);
    void* p = ta::c_malloc(*state, 1000, 0, main_stream);
    REQUIRE(p != nullptr);
    auto const s = stats_of(*state);
    CHECK(s.pool == STASH_TORCH_POOL_ARENA);
    CHECK(s.budget_bytes == stash::GiB);
    CHECK(s.allocations == 1);
    ta::c_free(*state, p, 1000, 0, main_stream);
    CHECK(state->last_error().empty());
  }
  SUBCASE("without variables: the caching pool, no budget")
  {
    auto state = make_state();
    void* p    = ta::c_malloc(*state, 1000, 0, main_stream);
    REQUIRE(p != nullptr);
    CHECK(stats_of(*state).pool == STASH_TORCH_POOL_CACHING);
    CHECK(stats_of(*state).budget_bytes == UINT64_MAX);
    ta::c_free(*state, p, 1000, 0, main_stream);
  }
  SUBCASE("stash_configure overrides the environment, and only before the first allocation")
  {
    auto state = make_state({{"STASH_POOL", "arena"}});
    REQUIRE(ta::c_configure(*state, "caching", 4 * stash::MiB) == 0);
    void* p = ta::c_malloc(*state, 1000, 0, main_stream);
    REQUIRE(p != nullptr);
    CHECK(stats_of(*state).pool == STASH_TORCH_POOL_CACHING);
    CHECK(stats_of(*state).budget_bytes == 4 * stash::MiB);
    CHECK(ta::c_configure(*state, "arena", 0) == -1);
    CHECK(contains(state->last_error(), "too late"));
    CHECK(stats_of(*state).pool == STASH_TORCH_POOL_CACHING);
    ta::c_free(*state, p, 1000, 0, main_stream);
  }
  SUBCASE("a malformed STASH_POOL fails every allocation with the reason")
  {
    auto state = make_state({{"STASH_POOL", "bogus"}});
    CHECK(ta::c_malloc(*state, 1000, 0, main_stream) == nullptr);
    CHECK(contains(state->last_error(), "STASH_POOL='bogus': unknown pool"));
    CHECK(contains(state->last_error(), "stash_malloc(1000 B, device 0)"));
    CHECK(ta::c_malloc(*state, 1000, 0, main_stream) == nullptr);
    auto const s = stats_of(*state);
    CHECK(s.failed_allocations == 2);
    CHECK(s.pool == STASH_TORCH_POOL_NONE);
    // The environment is only the default: a valid stash_configure still rescues the process.
    REQUIRE(ta::c_configure(*state, "caching", 0) == 0);
    void* p = ta::c_malloc(*state, 1000, 0, main_stream);
    CHECK(p != nullptr);
    ta::c_free(*state, p, 1000, 0, main_stream);
  }
  SUBCASE("a malformed STASH_BUDGET fails allocations with the reason")
  {
    auto state = make_state({{"STASH_BUDGET", "12XB"}});
    CHECK(ta::c_malloc(*state, 1000, 0, main_stream) == nullptr);
    CHECK(contains(state->last_error(), "STASH_BUDGET='12XB'"));
  }
  SUBCASE("bad stash_configure arguments are refused and change nothing")
  {
    auto state = make_state();
    CHECK(ta::c_configure(*state, nullptr, 0) == -1);
    CHECK(contains(state->last_error(), "stash_configure: pool name is null"));
    CHECK(ta::c_configure(*state, "Arena", 0) == -1);
    CHECK(contains(state->last_error(), "pool='Arena': unknown pool"));
    // The async pool is device memory by nature; over host memory it cannot be had.
    CHECK(ta::c_configure(*state, "async", 0) == -1);
    CHECK(contains(state->last_error(), "host memory"));
    void* p = ta::c_malloc(*state, 1000, 0, main_stream);
    REQUIRE(p != nullptr);
    CHECK(stats_of(*state).pool == STASH_TORCH_POOL_CACHING);  // still the default
    ta::c_free(*state, p, 1000, 0, main_stream);
  }
  SUBCASE("STASH_POOL=async over host memory is refused")
  {
    auto state = make_state({{"STASH_POOL", "async"}});
    CHECK(ta::c_malloc(*state, 1000, 0, main_stream) == nullptr);
    CHECK(contains(state->last_error(), "host memory"));
  }
}

TEST_CASE("pytorch_allocator: misuse is reported, never raised, and leaves the state usable")
{
  auto state = make_state();
  void* p    = ta::c_malloc(*state, 4096, 0, main_stream);
  REQUIRE(p != nullptr);
  auto const before = stats_of(*state);

  SUBCASE("negative sizes and devices")
  {
    CHECK(ta::c_malloc(*state, -1, 0, main_stream) == nullptr);
    CHECK(contains(state->last_error(), "negative size -1"));
    CHECK(ta::c_malloc(*state, 16, -2, main_stream) == nullptr);
    CHECK(contains(state->last_error(), "invalid device -2"));
    ta::c_free(*state, p, -4096, 0, main_stream);
    CHECK(contains(state->last_error(), "negative size"));
    // Only requests of a positive size count as failed allocations.
    CHECK(stats_of(*state).failed_allocations == 1);
  }
  SUBCASE("one device per process")
  {
    CHECK(ta::c_malloc(*state, 16, 1, main_stream) == nullptr);
    CHECK(contains(state->last_error(), "device 1 requested"));
    CHECK(contains(state->last_error(), "uses device 0"));
    ta::c_free(*state, p, 4096, 1, main_stream);
    CHECK(contains(state->last_error(), "device 1 requested"));
  }
  SUBCASE("frees of unknown pointers, wrong sizes and double frees")
  {
    int not_ours = 0;
    ta::c_free(*state, &not_ours, sizeof(not_ours), 0, main_stream);
    CHECK(contains(state->last_error(), "not allocated by this pool"));
    ta::c_free(*state, p, 4095, 0, main_stream);
    CHECK(contains(state->last_error(), "size differs"));
    CHECK(stats_of(*state).in_use_bytes == before.in_use_bytes);  // nothing was freed
    ta::c_free(*state, p, 4096, 0, main_stream);
    CHECK(stats_of(*state).in_use_bytes == 0);
    ta::c_free(*state, p, 4096, 0, main_stream);
    CHECK(contains(state->last_error(), "already freed"));
    p = ta::c_malloc(*state, 4096, 0, main_stream);  // still serves
    CHECK(p != nullptr);
  }
  SUBCASE("unbalanced iteration brackets")
  {
    CHECK(ta::c_end_iteration(*state) == -1);
    CHECK(contains(state->last_error(), "stash_end_iteration: no step has begun"));
    CHECK(ta::c_begin_iteration(*state) == 0);
    CHECK(ta::c_begin_iteration(*state) == -1);
    CHECK(contains(state->last_error(), "already begun"));
    CHECK(ta::c_end_iteration(*state) == 0);
    CHECK(stats_of(*state).iterations == 1);
  }
  SUBCASE("stats into a null pointer")
  {
    CHECK(ta::c_stats(*state, nullptr) == -1);
    CHECK(contains(state->last_error(), "stash_stats: output pointer is null"));
  }
  SUBCASE("zero bytes is not an error")
  {
    CHECK(ta::c_malloc(*state, 0, 0, main_stream) == nullptr);
    ta::c_free(*state, nullptr, 0, 0, main_stream);
    CHECK(state->last_error().empty());
    CHECK(stats_of(*state).failed_allocations == 0);
    CHECK(stats_of(*state).allocations == 1);
  }
  SUBCASE("a freed pointer before the first allocation")
  {
    auto fresh   = make_state();
    int not_ours = 0;
    ta::c_free(*fresh, &not_ours, sizeof(not_ours), 0, main_stream);
    CHECK(contains(fresh->last_error(), "nothing was allocated yet"));
  }
  if (p != nullptr) { ta::c_free(*state, p, 4096, 0, main_stream); }
  CHECK(stats_of(*state).in_use_bytes == 0);
}

TEST_CASE("pytorch_allocator: beyond the budget stash_malloc returns nullptr with the figures")
{
  for (char const* pool : {"caching", "arena"}) {
    CAPTURE(pool);
    auto state = make_state();
    REQUIRE(ta::c_configure(*state, pool, 4 * stash::MiB) == 0);
    void* big = ta::c_malloc(*state, 3 * stash::MiB, 0, main_stream);
    REQUIRE(big != nullptr);
    CHECK(ta::c_malloc(*state, 2 * stash::MiB, 0, main_stream) == nullptr);
    CHECK(contains(state->last_error(), "stash::out_of_memory"));
    CHECK(contains(state->last_error(), "budget 4194304 B"));
    auto const s = stats_of(*state);
    CHECK(s.failed_allocations == 1);
    CHECK(s.peak_reserved_bytes <= 4 * stash::MiB);
    void* small = ta::c_malloc(*state, 1000, 0, main_stream);  // what fits still comes
    CHECK(small != nullptr);
    ta::c_free(*state, small, 1000, 0, main_stream);
    ta::c_free(*state, big, static_cast<ssize_t>(3 * stash::MiB), 0, main_stream);
    CHECK(stats_of(*state).in_use_bytes == 0);
  }
}

namespace {
// A state whose every member throws: the c_* functions must contain anything, even non-standard
// exceptions.
struct throwing_state {
  std::string error;
  void* allocate(ssize_t, int, cudaStream_t) { throw 42; }
  void deallocate(void*, ssize_t, int, cudaStream_t) { throw std::bad_alloc(); }
  void configure(char const*, std::size_t) { throw "a C string"; }
  void begin_iteration() { throw std::runtime_error("begin"); }
  void end_iteration() { throw 3.5; }
  stash_torch_stats stats() const { throw stash::logic_error("stats"); }
  void record_error(char const* where, char const* what) noexcept
  {
    error = std::string(where) + ": " + what;
  }
};
}  // namespace

TEST_CASE("pytorch_allocator: no exception escapes the C entry points")
{
  static_assert(noexcept(ta::c_malloc(std::declval<host_state&>(), ssize_t{}, 0, cudaStream_t{})));
  static_assert(
      noexcept(ta::c_free(std::declval<host_state&>(), nullptr, ssize_t{}, 0, cudaStream_t{})));
  static_assert(noexcept(ta::c_configure(std::declval<host_state&>(), "", 0)));
  static_assert(noexcept(ta::c_begin_iteration(std::declval<host_state&>())));
  static_assert(noexcept(ta::c_end_iteration(std::declval<host_state&>())));
  static_assert(noexcept(ta::c_stats(std::declval<host_state&>(), nullptr)));

  throwing_state s;
  CHECK(ta::c_malloc(s, 8, 0, main_stream) == nullptr);
  CHECK(s.error == "stash_malloc(8 B, device 0): unknown exception");
  ta::c_free(s, nullptr, 8, 0, main_stream);
  CHECK(contains(s.error, "stash_free("));
  CHECK(contains(s.error, "bad_alloc"));
  CHECK(ta::c_configure(s, "x", 0) == -1);
  CHECK(s.error == "stash_configure: unknown exception");
  CHECK(ta::c_begin_iteration(s) == -1);
  CHECK(s.error == "stash_begin_iteration: begin");
  CHECK(ta::c_end_iteration(s) == -1);
  CHECK(s.error == "stash_end_iteration: unknown exception");
  stash_torch_stats out{};
  CHECK(ta::c_stats(s, &out) == -1);
  CHECK(s.error == "stash_stats: stats");
}

TEST_CASE("pytorch_allocator: last_error truncates into small buffers")
{
  auto state = make_state();
  CHECK(ta::c_configure(*state, "bogus", 0) == -1);
  std::string const full = state->last_error();
  REQUIRE(full.size() > 8);
  char small[8];
  CHECK(state->last_error(small, sizeof(small)) == full.size());
  CHECK(std::string(small) == full.substr(0, 7));
  CHECK(state->last_error(nullptr, 0) == full.size());
}

TEST_CASE("pytorch_allocator: threads allocating and freeing at once")
{
  // PyTorch calls the allocator from the Python thread and from autograd's worker threads.
  for (char const* pool : {"caching", "arena"}) {
    CAPTURE(pool);
    auto state = make_state();
    REQUIRE(ta::c_configure(*state, pool, 0) == 0);
    std::mutex test_mutex;
    stash::testing::live_blocks addresses;
    bool overlap          = false;
    int failed            = 0;
    constexpr int threads = 4, rounds = 1500;
    auto work = [&](unsigned seed) {
      std::mt19937 rng(seed);
      std::uniform_int_distribution<std::size_t> size(1, 256 * 1024);
      std::vector<std::pair<void*, std::size_t>> mine;
      for (int i = 0; i < rounds; ++i) {
        if (mine.empty() || rng() % 3 != 0) {
          std::size_t const n = size(rng);
          void* p             = ta::c_malloc(*state, static_cast<ssize_t>(n), 0, main_stream);
          std::lock_guard lock(test_mutex);
          if (p == nullptr) {
            ++failed;
            continue;
          }
          overlap = overlap || !addresses.insert(p, n);
          mine.emplace_back(p, n);
        } else {
          auto const k      = rng() % mine.size();
          auto const [p, n] = mine[k];
          mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
          {
            // Out of the set before it is freed: another thread may get it right after.
            std::lock_guard lock(test_mutex);
            addresses.erase(p);
          }
          ta::c_free(*state, p, static_cast<ssize_t>(n), 0, main_stream);
        }
      }
      for (auto const& [p, n] : mine) {
        {
          std::lock_guard lock(test_mutex);
          addresses.erase(p);
        }
        ta::c_free(*state, p, static_cast<ssize_t>(n), 0, main_stream);
      }
    };
    std::vector<std::thread> pool_threads;
    for (int i = 0; i < threads; ++i) {
      pool_threads.emplace_back(work, 1234u + static_cast<unsigned>(i));
    }
    for (auto& th : pool_threads) { th.join(); }
    CHECK_FALSE(overlap);
    CHECK(failed == 0);
    auto const s = stats_of(*state);
    CHECK(s.in_use_bytes == 0);
    CHECK(s.failed_allocations == 0);
    CHECK(state->last_error().empty());
  }
}

TEST_CASE("pytorch_allocator: the device instantiation without a GPU fails cleanly")
{
  using device_state = ta::allocator_state<stash::device_upstream>;
  device_state state(fake_env(), false);
  if (stash::gpu_available()) {
    // With a device, the same path allocates real device memory.
    void* p = ta::c_malloc(state, 1 << 20, 0, nullptr);
    REQUIRE_MESSAGE(p != nullptr, state.last_error());
    stash_torch_stats s{};
    REQUIRE(ta::c_stats(state, &s) == 0);
    CHECK(s.in_use_bytes >= (1u << 20));
    CHECK(s.device == 0);
    ta::c_free(state, p, 1 << 20, 0, nullptr);
    CHECK(state.last_error().empty());
    return;
  }
  for (char const* pool : {"caching", "arena", "async"}) {
    CAPTURE(pool);
    device_state fresh(fake_env(), false);
    REQUIRE(ta::c_configure(fresh, pool, 0) == 0);
    CHECK(ta::c_malloc(fresh, 1 << 20, 0, nullptr) == nullptr);
    CHECK(contains(fresh.last_error(), "no usable CUDA device"));
    CHECK(contains(fresh.last_error(), stash::no_gpu_reason()));
    stash_torch_stats s{};
    REQUIRE(ta::c_stats(fresh, &s) == 0);
    CHECK(s.failed_allocations == 1);
    CHECK(s.allocations == 0);
    CHECK(s.pool == STASH_TORCH_POOL_NONE);
    CHECK(s.device == -1);
    ta::c_free(fresh, reinterpret_cast<void*>(0x1000), 64, 0, nullptr);  // not a crash
    CHECK(contains(fresh.last_error(), "nothing was allocated yet"));
    // Iteration brackets and stats need no device.
    CHECK(ta::c_begin_iteration(fresh) == 0);
    CHECK(ta::c_end_iteration(fresh) == 0);
  }
}

}  // namespace STASH_UNITY_ID
