// Wrap entries (sim/schedule.hpp): a persistent storage off the device from its last access of
// one iteration to its first of the next. A hand-sized trace whose momentum-like buffer m has no
// gap inside the iteration, so only a wrap entry can move it.
//
// Machine as in simulator_test.cpp: 1 GB/s device memory (1 byte read or written = 1 ns), 1 GB/s
// both ways over the link, no latency.
#include <stash/sim/cost_model.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/approx.hpp"
#include "support/wrap_trace.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

namespace STASH_UNITY_ID {

namespace {

std::string const& wrap_trace = stash::test::wrap_trace_text;

stash::cost_model model()
{
  stash::hardware const hw{"round", "test", 1e9, 1e9, 0.0, 1e9, 1e12, 0.0, 1u << 30};
  stash::cost_params p;
  p.compute_efficiency = 1.0;
  p.memory_efficiency  = 1.0;
  return stash::cost_model(hw, p);
}

stash::swap_entry wrap_of(stash::storage_id id, std::uint64_t last, std::uint64_t first,
                          std::uint64_t offload_at, std::uint64_t prefetch_at, std::uint64_t bytes)
{
  return stash::swap_entry{
      id, last, first, offload_at, prefetch_at, bytes, stash::swap_encoding::configured, true};
}

}  // namespace

TEST_CASE("a wrap entry's copy-out follows its copy-in")
{
  // f is a frozen weight: persistent and only read (ops 1 and 2), so no write forbids an early
  // offload; before op 1 (its first access, which its prefetch must precede) the device holds
  // nothing of it to copy.
  auto const t = stash::parse_trace(R"(# stash-trace v1 model=frozen dtype=float32
t 0 4000 param f
p forward
t 1 1000 input x
t 2 1000 act y
o aten::relu 1 2
o aten::mm 0,2 2
o aten::mm 0,2 2
f 1
f 2
)",
                                    "frozen");
  stash::trace_analysis const a(t, model());
  REQUIRE(stash::may_wrap(a, 0));
  auto valid = [&](std::uint64_t offload_at) {
    try {
      stash::validate_schedule(
          a, stash::make_schedule(a, "hand", 1u << 30, {wrap_of(0, 2, 1, offload_at, 0, 4000)}));
      return true;
    } catch (stash::schedule_error const&) {
      return false;
    }
  };
  CHECK_FALSE(valid(0));  // issued at the iteration's start, beside its own prefetch
  CHECK(valid(1));        // early, while it is still read: allowed, nothing writes it
  CHECK(valid(3));        // when the last op ends
}

TEST_CASE("a wrap entry is valid only for a persistent storage from its last access to its first")
{
  auto const t = stash::parse_trace(wrap_trace, "wrap");
  stash::trace_analysis const a(t, model());
  CHECK(stash::may_wrap(a, 0));
  CHECK(stash::may_wrap(a, 1));
  CHECK_FALSE(stash::may_wrap(a, 3));  // y is freed: it does not cross the iteration boundary
  auto valid = [&](std::vector<stash::swap_entry> entries) {
    try {
      stash::validate_schedule(a, stash::make_schedule(a, "hand", 1u << 30, std::move(entries)));
      return true;
    } catch (stash::schedule_error const&) {
      return false;
    }
  };
  CHECK(valid({wrap_of(1, 3, 3, 4, 0, 2000)}));  // offloaded when op3 (the last op) ends
  CHECK(valid({wrap_of(1, 3, 3, 4, 3, 2000)}));
  CHECK(valid({wrap_of(0, 3, 0, 4, 0, 4000)}));
  CHECK_FALSE(valid({wrap_of(0, 3, 0, 3, 0, 4000)}));  // op3 writes w after its offload starts
  CHECK_FALSE(valid({wrap_of(1, 3, 3, 5, 0, 2000)}));  // offload_at past the op count
  CHECK_FALSE(valid({wrap_of(0, 3, 0, 4, 1, 4000)}));  // prefetched after its first use
  CHECK_FALSE(valid({wrap_of(0, 0, 3, 4, 0, 4000)}));  // not from the last access to the first
  CHECK_FALSE(valid({wrap_of(3, 1, 0, 2, 0, 1000)}));  // y is not persistent
  CHECK_FALSE(valid({wrap_of(1, 3, 3, 4, 0, 2000), wrap_of(1, 3, 3, 4, 2, 2000)}));
  // A gap inside the iteration and the wrap of the same storage: a ring of two entries.
  stash::swap_entry const inner{0, 0, 3, 1, 3, 4000};
  CHECK(valid({inner, wrap_of(0, 3, 0, 4, 0, 4000)}));
  auto late       = inner;
  late.offload_at = 4;  // past op3: not an entry inside the iteration
  CHECK_FALSE(valid({late, wrap_of(0, 3, 0, 4, 0, 4000)}));
  // Indices outside the trace: make_schedule's curve skips them (it read and wrote past the op
  // index before validate_schedule could refuse them; ASan), validate_schedule refuses them.
  CHECK_FALSE(valid({wrap_of(1, 3, 3, 4, 9, 2000)}));            // the head's prefetch past op3
  CHECK_FALSE(valid({wrap_of(7, 3, 3, 4, 2, 2000)}));            // no storage 7
  CHECK_FALSE(valid({stash::swap_entry{0, 0, 3, 1, 0, 4000}}));  // prefetch_at 0: event -1
  CHECK_FALSE(valid({stash::swap_entry{0, 9, 12, 10, 11, 4000}}));
  for (auto const r :
       {stash::recompute_entry{3, 1, 2, 0, 1000}, stash::recompute_entry{3, 9, 12, 11, 1000}}) {
    CHECK_THROWS_AS(stash::validate_schedule(a, stash::make_schedule(a, "hand", 1u << 30, {}, {r})),
                    stash::schedule_error);
  }
}

TEST_CASE("the planned curve counts a wrapped storage off at the head and the tail")
{
  auto const t = stash::parse_trace(wrap_trace, "wrap");
  stash::trace_analysis const a(t, model());
  std::vector<stash::swap_entry> const entries{wrap_of(1, 3, 3, 4, 2, 2000)};
  auto const curve = stash::planned_device_curve(a, entries);
  auto const& ev   = a.ops().event;
  CHECK(curve[0] == 4000);       // w allocated
  CHECK(curve[1] == 4000);       // m allocated on the host: it starts a replayed iteration there
  CHECK(curve[ev[1]] == 11000);  // op1 runs without m: 13000 - 2000
  CHECK(curve[ev[2]] == 8000);   // m prefetched at op2
  CHECK(curve.back() == 4000);   // offloaded after op3
  CHECK(stash::planned_peak(a, entries) == 11000);
  // Without the wrap nothing is below the trace's 13000 B peak: m has no gap inside it.
  CHECK(stash::planned_peak(a, {}) == 13000);
}

TEST_CASE("the simulator runs a wrap entry's head prefetch on the H2D queue and waits for its tail")
{
  auto const t = stash::parse_trace(wrap_trace, "wrap");
  stash::trace_analysis const a(t, model());
  auto const compute = stash::simulate(a, stash::make_schedule(a, "none", 1u << 30, {})).compute_s;
  SUBCASE("m off between op3 and op3: fits 11000 B, the tail offload is a final stall")
  {
    auto const s = stash::make_schedule(a, "hand", 11000, {wrap_of(1, 3, 3, 4, 2, 2000)});
    REQUIRE(s.fits());
    auto const r = stash::simulate(a, s);
    REQUIRE(r.fits);
    CHECK(r.device_peak == 11000);
    CHECK(r.d2h_bytes == 2000);
    CHECK(r.h2d_bytes == 2000);
    // m's prefetch (2 us) runs beside op2 and is there for op3; its offload (2 us) starts when
    // op3 ends and the iteration waits for it.
    REQUIRE(r.stalls.size() == 1);
    CHECK(r.stalls[0].op == 4);
    CHECK(r.stalls[0].storage == 1);
    CHECK(r.stalls[0].cause == stash::stall_cause::offload_pending);
    CHECK(r.stalls[0].seconds == stash::test::approx_s(2e-6));
    CHECK(r.iteration_s == stash::test::approx_s(compute + 2e-6));
    // The same budget without the wrap entry does not fit.
    CHECK_FALSE(stash::simulate(a, stash::make_schedule(a, "none", 11000, {})).fits);
  }
  SUBCASE("two head prefetches at op 0 share the H2D engine; two tail offloads the D2H one")
  {
    auto const s = stash::make_schedule(
        a, "hand", 1u << 30, {wrap_of(1, 3, 3, 4, 0, 2000), wrap_of(0, 3, 0, 4, 0, 4000)});
    auto const r = stash::simulate(a, s);
    REQUIRE(r.fits);
    // m [0, 2 us], then w [2, 6 us]: op0 waits 6 us for w, queued behind m.
    CHECK(r.op_start[0] == stash::test::approx_s(6e-6));
    REQUIRE(r.stalls.size() == 2);
    CHECK(r.stalls[0].op == 0);
    CHECK(r.stalls[0].storage == 0);
    CHECK(r.stalls[0].cause == stash::stall_cause::h2d_busy);
    CHECK(r.stalls[1].op == 4);
    CHECK(r.stalls[1].seconds == stash::test::approx_s(6e-6));  // m then w, 2 + 4 us
    CHECK(r.iteration_s == stash::test::approx_s(compute + 12e-6));
  }
}

}  // namespace STASH_UNITY_ID
