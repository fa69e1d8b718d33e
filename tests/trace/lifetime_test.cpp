// Lifetime analysis and the lower bound L on hand-made traces whose answers can be worked out on
// paper: nested, disjoint, op workspaces and persistent storages.
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace_recorder.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace STASH_UNITY_ID {

using stash::phase;
using stash::storage_kind;

namespace {

// Live bytes at every time step, summed directly from the intervals: the definition, O(n * T).
std::uint64_t brute_force_peak(std::vector<stash::lifetime_interval> const& intervals)
{
  std::uint64_t end = 0;
  for (auto const& i : intervals) { end = std::max(end, i.end); }
  std::uint64_t best = 0;
  for (std::uint64_t t = 0; t < end; ++t) {
    std::uint64_t live = 0;
    for (auto const& i : intervals) {
      if (i.begin <= t && t < i.end) { live += i.bytes; }
    }
    best = std::max(best, live);
  }
  return best;
}

}  // namespace

TEST_CASE("nested lifetimes add up")
{
  stash::trace_recorder rec;
  auto const a = rec.allocate(100, storage_kind::temp, "a");  // event 0
  auto const b = rec.allocate(50, storage_kind::temp, "b");   // event 1
  rec.deallocate(b);                                          // event 2
  auto const c = rec.allocate(30, storage_kind::temp, "c");   // event 3
  rec.deallocate(c);                                          // event 4
  rec.deallocate(a);                                          // event 5
  auto const life = stash::analyze_lifetimes(rec.trace());
  CHECK(life.event_count == 6);
  CHECK(life.peak_live_bytes == 150);
  CHECK(life.peak_event == 1);
  CHECK(life.storages[a].alloc_event == 0);
  CHECK(life.storages[a].free_event == 5);
  CHECK(life.storages[a].end_event == 5);
  CHECK(life.storages[c].alloc_event == 3);
  CHECK(life.storages[c].end_event == 4);
  CHECK_FALSE(life.peak_phase.has_value());
  CHECK_FALSE(life.peak_op.has_value());

  auto const intervals = stash::lifetime_intervals(rec.trace());
  REQUIRE(intervals.size() == 3);
  CHECK(intervals[b].begin == 1);
  CHECK(intervals[b].end == 2);
  CHECK(stash::peak_live(intervals) == stash::live_peak{150, 1});
  CHECK(brute_force_peak(intervals) == 150);
}

TEST_CASE("disjoint lifetimes do not add up; a free and an alloc at adjacent events do not overlap")
{
  stash::trace_recorder rec;
  auto const a = rec.allocate(100, storage_kind::temp);
  rec.deallocate(a);
  auto const b = rec.allocate(70, storage_kind::temp);
  rec.deallocate(b);
  auto const c = rec.allocate(120, storage_kind::temp);
  rec.deallocate(c);
  auto const life = stash::analyze_lifetimes(rec.trace());
  CHECK(life.peak_live_bytes == 120);
  CHECK(life.peak_event == 4);
  CHECK(stash::peak_live_bytes(stash::lifetime_intervals(rec.trace())) == 120);
}

TEST_CASE("an op's workspace, allocated and freed before its o line, counts at its peak")
{
  stash::trace_recorder rec;
  auto const x = rec.allocate(1000, storage_kind::input, "x");                    // event 0
  rec.phase(phase::forward);                                                      // 1
  auto const ws = rec.allocate(4000, storage_kind::temp, "conv/convolution.ws");  // 2: peak 5000
  auto const y  = rec.allocate(2000, storage_kind::act, "conv/convolution");      // 3: peak 7000
  rec.deallocate(ws);                                                             // 4
  rec.op("aten::convolution", {x}, {y});                                          // 5
  rec.phase(phase::backward);                                                     // 6
  auto const g = rec.allocate(2000, storage_kind::temp, "grad");                  // 7: 5000
  rec.op("aten::relu_backward", {g, y}, {g});                                     // 8
  rec.deallocate(y);
  rec.deallocate(g);
  auto const life = stash::analyze_lifetimes(rec.trace());
  CHECK(life.peak_live_bytes == 7000);
  CHECK(life.peak_event == 3);
  CHECK(life.peak_phase == phase::forward);
  CHECK(life.peak_op == 0);  // the convolution the workspace belongs to
  CHECK(life.live_at_peak_by_kind[static_cast<std::size_t>(storage_kind::temp)] == 4000);
  CHECK(life.live_at_peak_by_kind[static_cast<std::size_t>(storage_kind::act)] == 2000);
  CHECK(life.live_at_peak_by_kind[static_cast<std::size_t>(storage_kind::input)] == 1000);
  CHECK(life.activation_bytes == 2000);
  CHECK(life.bytes_of(storage_kind::temp) == 6000);
  CHECK(life.count_by_kind[static_cast<std::size_t>(storage_kind::temp)] == 2);

  // Accesses: the workspace is never named by an op; g is read and written by one op.
  CHECK(life.storages[ws].accesses.empty());
  CHECK_FALSE(life.storages[ws].first_access().has_value());
  REQUIRE(life.storages[g].accesses.size() == 1);
  CHECK(life.storages[g].accesses[0] == stash::storage_access{8, 1, true, true});
  REQUIRE(life.storages[y].accesses.size() == 2);
  CHECK(life.storages[y].first_access() == stash::storage_access{5, 0, false, true});
  CHECK(life.storages[y].last_access() == stash::storage_access{8, 1, true, false});
  CHECK(life.storages[x].persistent());
  CHECK(life.storages[x].end_event == life.event_count);
}

TEST_CASE("persistent storages stay live to the end of the iteration")
{
  stash::trace_recorder rec;
  auto const p = rec.allocate(5, storage_kind::param, "w");
  rec.allocate(7, storage_kind::optstate, "w.momentum");
  auto const t = rec.allocate(3, storage_kind::temp);
  rec.op("aten::add_", {p, t}, {p});
  rec.deallocate(t);
  auto const late = rec.allocate(10, storage_kind::grad, "w.grad");  // never freed either
  auto const life = stash::analyze_lifetimes(rec.trace());
  CHECK(life.event_count == 6);
  CHECK(life.peak_live_bytes == 22);  // 5 + 7 + 10 at the last event; 15 earlier
  CHECK(life.peak_event == 5);
  CHECK(life.peak_op == 0);  // no op after the peak: the last op before it
  CHECK(life.storages[p].persistent());
  CHECK(life.storages[late].end_event == 6);
  auto const intervals = stash::lifetime_intervals(rec.trace());
  CHECK(intervals[p].end == 6);
  CHECK(intervals[late].begin == 5);
  CHECK(stash::peak_live(intervals) == stash::live_peak{22, 5});
}

TEST_CASE("an empty trace has no peak")
{
  stash::trace_recorder rec;
  auto const life = stash::analyze_lifetimes(rec.trace());
  CHECK(life.peak_live_bytes == 0);
  CHECK_FALSE(life.peak_event.has_value());
  CHECK(stash::peak_live(stash::lifetime_intervals(rec.trace())) == stash::live_peak{0, 0});
}

TEST_CASE("peak_live on raw intervals: half-open ends, unsorted input, bad intervals")
{
  std::vector<stash::lifetime_interval> const intervals = {
      {0, 10, 20, 5}, {1, 0, 10, 7}, {2, 20, 30, 9}, {3, 15, 25, 4}, {4, 5, 12, 1}};
  // At 10: ids 0 and 4 (id 1 ended at 10) = 6; at 15: 0, 3 = 9; at 20: 2, 3 = 13; at 5: 1, 4 = 8.
  CHECK(stash::peak_live(intervals) == stash::live_peak{13, 20});
  CHECK(brute_force_peak(intervals) == 13);

  std::vector<stash::lifetime_interval> const empty_interval = {{0, 3, 3, 5}};
  CHECK_THROWS_AS((void)stash::peak_live(empty_interval), stash::logic_error);
  std::vector<stash::lifetime_interval> const huge = {{0, 0, 2, ~std::uint64_t{0}}, {1, 1, 2, 1}};
  CHECK_THROWS_AS((void)stash::peak_live(huge), stash::logic_error);
}

}  // namespace STASH_UNITY_ID
