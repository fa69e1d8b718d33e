// lifetime_arena replay, pointer by pointer: every allocation of a replayed iteration is at the
// arena's base plus the offset its plan gave that allocation, on real recorded traces (the
// synthetic iterations of lifetime_arena_test.cpp cannot see an allocation put at the wrong
// offset when that happens not to alias a live block).
#include "support/data.hpp"

#include <stash/core/virtual_upstream.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// Addresses without memory (the traces need GBs), one address space shared by every copy (the
// arena and its fallback pool), and a log of every upstream allocation, so a test can find the
// arena block the plan is laid out in.
class logging_upstream {
 public:
  static constexpr bool is_device_accessible = false;
  static constexpr bool is_host_accessible   = false;

  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    void* p = state_->space.allocate(bytes, alignment);
    state_->log.emplace_back(p, bytes);
    return p;
  }
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    state_->space.deallocate(p, bytes, alignment);
  }
  [[nodiscard]] std::vector<std::pair<void*, std::size_t>> const& log() const
  {
    return state_->log;
  }
  friend bool operator==(logging_upstream const& a, logging_upstream const& b) noexcept
  {
    return a.state_ == b.state_;
  }

 private:
  struct shared {
    stash::virtual_upstream space;
    std::vector<std::pair<void*, std::size_t>> log;
  };
  std::shared_ptr<shared> state_ = std::make_shared<shared>();
};
static_assert(stash::upstream_resource<logging_upstream>);

using logged_arena        = stash::lifetime_arena<logging_upstream>;
cudaStream_t const stream = reinterpret_cast<cudaStream_t>(0x1000);

// One iteration of `t` through `arena`: every storage allocated at its alloc event and freed at
// its free event, those never freed after the last event, all inside the iteration (so every
// allocation has a planned slot). Returns the pointers in allocation order.
std::vector<std::uintptr_t> run_iteration(stash::trace const& t, logged_arena& arena)
{
  std::vector<std::uintptr_t> in_order;
  std::vector<void*> ptrs(t.storages().size(), nullptr);
  arena.begin_iteration();
  for (auto const& e : t.events()) {
    // An op or phase event's index is not a storage's: read the size only for allocs and frees.
    if (e.kind == stash::event_kind::alloc) {
      ptrs[e.index] = arena.allocate_async(t.storages()[e.index].bytes, stream);
      in_order.push_back(reinterpret_cast<std::uintptr_t>(ptrs[e.index]));
    } else if (e.kind == stash::event_kind::free) {
      arena.deallocate_async(ptrs[e.index], t.storages()[e.index].bytes, stream);
      ptrs[e.index] = nullptr;
    }
  }
  for (std::size_t id = 0; id < ptrs.size(); ++id) {
    if (ptrs[id] != nullptr) { arena.deallocate_async(ptrs[id], t.storages()[id].bytes, stream); }
  }
  arena.end_iteration();
  return in_order;
}

}  // namespace

TEST_CASE("lifetime_arena replays every allocation of real traces at base + its planned offset")
{
  int last_not_at_zero = 0;
  for (auto const* name : {"alexnet_b128", "resnet18_b32", "mobilenet_v2_b32",
                           "transformer_encoder_b8", "squeezenet1_1_b64"}) {
    CAPTURE(name);
    auto const t =
        stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
    logging_upstream upstream;
    logged_arena arena(upstream);
    auto const recorded = run_iteration(t, arena);
    REQUIRE(arena.state() == stash::arena_state::replaying);
    // The arena is the one block taken at the end of the recorded iteration; the fallback pool
    // gave its cached segments back just before.
    REQUIRE_FALSE(upstream.log().empty());
    auto const [arena_ptr, arena_size] = upstream.log().back();
    REQUIRE(arena_size == arena.arena_bytes());
    auto const base    = reinterpret_cast<std::uintptr_t>(arena_ptr);
    auto const& offset = arena.current_plan().offsets;
    // Every allocation was freed within the iteration: each has a slot, numbered in order.
    REQUIRE(offset.size() == recorded.size());

    for (int iteration = 0; iteration < 2; ++iteration) {
      CAPTURE(iteration);
      auto const replayed = run_iteration(t, arena);
      REQUIRE(replayed.size() == offset.size());
      std::size_t wrong = 0, first_wrong = offset.size();
      for (std::size_t k = 0; k < replayed.size(); ++k) {
        if (replayed[k] != base + offset[k]) {
          ++wrong;
          first_wrong = std::min(first_wrong, k);
        }
      }
      CAPTURE(first_wrong);
      CHECK(wrong == 0);
      CHECK(arena.stats().fallbacks == 0);
      CHECK(arena.stats().in_use_bytes == 0);
    }
    // Not a vacuous comparison: the plans put most allocations away from the arena's base.
    std::size_t nonzero = 0;
    for (auto const o : offset) { nonzero += o != 0 ? 1 : 0; }
    CHECK(nonzero * 2 > offset.size());
    last_not_at_zero += offset.back() != 0 ? 1 : 0;
  }
  // ... the last allocation too, on some of the traces.
  CHECK(last_not_at_zero > 0);
}

}  // namespace STASH_UNITY_ID
