// The simulator on a four-op trace whose timeline can be worked out by hand.
//
// Machine: 1 GB/s device memory (every op is memory-bound: 1 byte = 1 ns), 1 GB/s H2D, no
// latency, no launch overhead. Ops: op0 5 us, op1 5 us, op2 7 us, op3 6 us (bytes read +
// written). Storage a (4000 B) is written by op0, read by op1 and op3.
#include <stash/sim/cost_model.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/trace/trace_reader.hpp>
#include "support/tiny_trace.hpp"

#include "support/analysis.hpp"
#include "support/approx.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

namespace STASH_UNITY_ID {

namespace {

std::string const& tiny = stash::test::tiny_trace_text;

stash::cost_model model(double d2h_bytes_per_s = 1e9)
{
  stash::hardware const hw{"round", "test", d2h_bytes_per_s, 1e9, 0.0, 1e9, 1e12, 0.0, 1u << 30};
  stash::cost_params p;
  p.compute_efficiency = 1.0;
  p.memory_efficiency  = 1.0;
  return stash::cost_model(hw, p);
}

// A budget no schedule of the tiny trace reaches: the timing tests below are not about memory.
constexpr std::uint64_t roomy = 1u << 30;

stash::schedule offload_a(stash::trace const& t, std::uint64_t offload_at,
                          std::uint64_t prefetch_at, std::uint64_t budget = roomy)
{
  return stash::make_schedule(stash::test::analysis_of(t), "hand", budget,
                              {stash::swap_entry{1, 1, 3, offload_at, prefetch_at, 4000}});
}

}  // namespace

TEST_CASE("without swaps the iteration is the sum of op times and the peak the trace's")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  auto const r =
      stash::simulate(stash::trace_analysis(t, model()),
                      stash::make_schedule(stash::test::analysis_of(t), "none", roomy, {}));
  CHECK(r.iteration_s == stash::test::approx_s(23e-6));
  CHECK(r.compute_s == stash::test::approx_s(23e-6));
  CHECK(r.stall_s == 0.0);
  CHECK(r.stalls.empty());
  CHECK(r.device_peak == 12000);  // x + a + b + c while op2 runs
  CHECK(r.d2h_bytes == 0);
  REQUIRE(r.op_start.size() == 4);
  CHECK(r.op_start[2] == stash::test::approx_s(10e-6));
  CHECK(r.timeline.size() == 4);
}

TEST_CASE("a late prefetch stalls the op that needs it for exactly the transfer time")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  auto const s = offload_a(t, 1, 3);
  CHECK(s.device_peak == 8000);  // a is off the device while op2 holds c
  // D2H issued when op1 starts (5 us): [5, 9]. Prefetch issued when op3 is reached (17 us):
  // [17, 21]. op3 waits 4 us.
  auto const r = stash::simulate(stash::trace_analysis(t, model()), s);
  CHECK(r.iteration_s == stash::test::approx_s(27e-6));
  CHECK(r.stall_s == stash::test::approx_s(4e-6));
  REQUIRE(r.stalls.size() == 1);
  CHECK(r.stalls[0].op == 3);
  CHECK(r.stalls[0].storage == 1);
  CHECK(r.stalls[0].cause == stash::stall_cause::transfer);
  CHECK(r.stalls[0].seconds == stash::test::approx_s(4e-6));
  CHECK(r.op_start[3] == stash::test::approx_s(21e-6));
  CHECK(r.device_peak == 8000);
  CHECK(r.d2h_bytes == 4000);
  CHECK(r.h2d_bytes == 4000);
  int offloads = 0, prefetches = 0, stalls = 0;
  for (auto const& span : r.timeline) {
    if (span.kind == stash::timeline_span::kind_t::offload) {
      ++offloads;
      CHECK(span.start == stash::test::approx_s(5e-6));
      CHECK(span.end == stash::test::approx_s(9e-6));
    }
    if (span.kind == stash::timeline_span::kind_t::prefetch) {
      ++prefetches;
      CHECK(span.start == stash::test::approx_s(17e-6));
    }
    if (span.kind == stash::timeline_span::kind_t::stall) { ++stalls; }
  }
  CHECK(offloads == 1);
  CHECK(prefetches == 1);
  CHECK(stalls == 1);
}

TEST_CASE("an early prefetch hides the transfer but saves no memory")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  auto const s = offload_a(t, 1, 2);
  CHECK(s.device_peak == 12000);
  auto const r = stash::simulate(stash::trace_analysis(t, model()), s);
  CHECK(r.stall_s == 0.0);
  CHECK(r.iteration_s == stash::test::approx_s(23e-6));
  CHECK(r.device_peak == 12000);
}

TEST_CASE("a prefetch waiting for a slow offload is reported as such")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  // D2H at 0.25 GB/s: 16 us, [5, 21]. Prefetch issued at 10 us waits until 21, ends at 25;
  // op3, reached at 17 us, stalls 8 us.
  auto const r = stash::simulate(stash::trace_analysis(t, model(0.25e9)), offload_a(t, 1, 2));
  REQUIRE(r.stalls.size() == 1);
  CHECK(r.stalls[0].cause == stash::stall_cause::offload_pending);
  CHECK(r.stall_s == stash::test::approx_s(8e-6));
  CHECK(r.iteration_s == stash::test::approx_s(31e-6));
}

TEST_CASE("the device keeps an offloaded storage until its copy is done")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  // D2H at 0.4 GB/s: 10 us, [5, 15], so a still holds its bytes when c arrives at 10 us.
  auto const r = stash::simulate(stash::trace_analysis(t, model(0.4e9)), offload_a(t, 1, 3),
                                 stash::sim_options{true, stash::sim_memory::unconstrained});
  CHECK(r.device_peak == 12000);
  auto const fast = stash::simulate(stash::trace_analysis(t, model()), offload_a(t, 1, 3));
  CHECK(fast.device_peak == 8000);
}

TEST_CASE("simulate rejects an invalid schedule")
{
  auto const t             = stash::parse_trace(tiny, "tiny");
  auto s                   = offload_a(t, 1, 3);
  s.entries[0].prefetch_at = 1;
  CHECK_THROWS_AS((void)stash::simulate(stash::trace_analysis(t, model()), s),
                  stash::schedule_error);
}

TEST_CASE("with the budget enforced, an op waits for an offload to release its bytes")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  // Budget 8000 (the planned peak). D2H at 0.4 GB/s: [5, 15]; op2, reached at 10 us, needs c's
  // 6000 B with x + a + b = 6000 B held: it waits for a's release at 15 us (memory, 5 us), runs
  // [15, 22]; a's prefetch, issued then, arrives at 26 us (transfer, 4 us); op3 runs [26, 32].
  auto const r = stash::simulate(stash::trace_analysis(t, model(0.4e9)), offload_a(t, 1, 3, 8000));
  CHECK(r.fits);
  CHECK_FALSE(r.failure);
  CHECK(r.device_peak == 8000);
  CHECK(r.op_start[2] == stash::test::approx_s(15e-6));
  CHECK(r.iteration_s == stash::test::approx_s(32e-6));
  REQUIRE(r.stalls.size() == 2);
  CHECK(r.stalls[0].op == 2);
  CHECK(r.stalls[0].cause == stash::stall_cause::memory);
  CHECK_FALSE(r.stalls[0].storage);
  CHECK(r.stalls[0].seconds == stash::test::approx_s(5e-6));
  CHECK(r.stalls[1].op == 3);
  CHECK(r.stalls[1].cause == stash::stall_cause::transfer);
  CHECK(r.stalls[1].storage == 1);
  auto const memory = static_cast<std::size_t>(stash::stall_cause::memory);
  CHECK(r.stall_by_cause[memory] == stash::test::approx_s(5e-6));
  CHECK(r.stall_s == stash::test::approx_s(9e-6));
  // The same schedule with the budget lifted: no memory wait, the peak above the budget.
  auto const free =
      stash::simulate(stash::trace_analysis(t, model(0.4e9)), offload_a(t, 1, 3, 8000),
                      stash::sim_options{true, stash::sim_memory::unconstrained});
  CHECK(free.iteration_s == stash::test::approx_s(27e-6));
  CHECK(free.device_peak == 12000);
}

TEST_CASE("an iteration that cannot fit its budget says where it got stuck")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  stash::trace_analysis const a(t, model());
  // Nothing swapped at 8000 B: op2 needs 6000 B with 6000 of 8000 held, and nothing will free.
  auto const none = stash::simulate(a, stash::make_schedule(a, "none", 8000, {}));
  CHECK_FALSE(none.fits);
  REQUIRE(none.failure);
  CHECK(none.failure->op == 2);
  CHECK_FALSE(none.failure->storage);
  CHECK(none.failure->needed_bytes == 6000);
  CHECK(none.failure->free_bytes == 2000);
  CHECK(none.iteration_s == std::numeric_limits<double>::infinity());
  // An early prefetch takes a's bytes back at op2's start, before op2's allocation: op2 starves.
  auto const early = stash::simulate(a, offload_a(t, 1, 2, 8000));
  CHECK_FALSE(early.fits);
  REQUIRE(early.failure);
  CHECK(early.failure->op == 2);
}

TEST_CASE("codec kernels slow compute by their configured share")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  stash::hardware const hw{"round", "test", 1e9, 1e9, 0.0, 1e9, 1e12, 0.0, 1u << 30};
  stash::cost_params p;
  p.compute_efficiency       = 1.0;
  p.memory_efficiency        = 1.0;
  p.use_codec                = true;
  p.codec_ratio              = 2.0;
  p.codec_bandwidth_fraction = 1.0;  // 4000 B at 1 GB/s: 4 us per encode or decode
  auto const shared_model    = [&](double share) {
    auto q                = p;
    q.codec_compute_share = share;
    return stash::cost_model(hw, q);
  };
  auto const alone =
      stash::simulate(stash::trace_analysis(t, shared_model(0.0)), offload_a(t, 1, 2));
  auto const half =
      stash::simulate(stash::trace_analysis(t, shared_model(0.5)), offload_a(t, 1, 2));
  // Half of the 4 us encode is charged to op1 and half of the 4 us decode to op3.
  CHECK(half.compute_s == stash::test::approx_s(alone.compute_s + 4e-6));
  CHECK_THROWS_AS((void)shared_model(1.5), stash::logic_error);
}

namespace {

// x (id 0) is only read, at ops 0, 1 and 3: an entry for its gap (1, 3) has no write to keep its
// offload late, so the prefetch and offload rules below are all that stand in the way.
std::string const reads_text = R"(# stash-trace v1 model=reads dtype=float32
p forward
t 0 1000 input x
t 1 2000 act a
o aten::relu 0 1
t 2 2000 act b
o aten::relu 0 2
t 3 2000 act c
o aten::relu 1 3
o aten::add 0,3 2
f 1
f 2
f 3
)";

/// validate_schedule's reason for `entry` in place of a valid schedule's only entry, "" if none.
std::string rule_broken(stash::trace const& t, stash::swap_entry valid, stash::swap_entry entry)
{
  auto const a = stash::test::analysis_of(t);
  auto s       = stash::make_schedule(a, "hand", roomy, {valid});
  stash::validate_schedule(a, s);  // the baseline is valid
  s.entries = {entry};
  try {
    stash::validate_schedule(a, s);
  } catch (stash::schedule_error const& e) {
    return e.reason();
  }
  return "";
}

}  // namespace

TEST_CASE("the validator wants last_use < prefetch_at and offload_at < prefetch_at, strictly")
{
  auto const reads = stash::parse_trace(reads_text, "reads");
  stash::swap_entry const x{0, 1, 3, 0, 2, 1000};
  CHECK(rule_broken(reads, x, x).empty());
  // A prefetch issued at the last use itself: x would be brought back while still in use.
  CHECK(rule_broken(reads, x, {0, 1, 3, 0, 1, 1000}) ==
        "storage 0 'x': prefetch_at 1 must be in (last_use 1, next_use 3]");
  // An offload issued at the op that prefetches it (a's gap in the tiny trace: (1, 3)).
  auto const t = stash::parse_trace(tiny, "tiny");
  stash::swap_entry const a{1, 1, 3, 1, 2, 4000};
  CHECK(rule_broken(t, a, a).empty());
  CHECK(rule_broken(t, a, {1, 1, 3, 2, 2, 4000}) ==
        "storage 1 'a': offload_at 2 must precede prefetch_at 2");
}

TEST_CASE("a late codec prefetch stalls for the H2D copy and the decode kernel")
{
  auto const t = stash::parse_trace(tiny, "tiny");
  stash::hardware const hw{"round", "test", 1e9, 1e9, 0.0, 1e9, 1e12, 0.0, 1u << 30};
  stash::cost_params p;
  p.compute_efficiency       = 1.0;
  p.memory_efficiency        = 1.0;
  p.use_codec                = true;
  p.codec_ratio              = 2.0;  // 2000 B on the wire: 2 us each way
  p.codec_bandwidth_fraction = 1.0;  // 4000 B at 1 GB/s: 4 us per encode or decode
  p.codec_compute_share      = 0.0;  // the op times stay 5, 5, 7, 6 us
  // Offload at op1 (5 us): encode and D2H end at 11 us. Prefetch issued at op3 (17 us): H2D
  // [17, 19], decode [19, 23]; op3 waits 6 us.
  auto const r =
      stash::simulate(stash::trace_analysis(t, stash::cost_model(hw, p)), offload_a(t, 1, 3));
  REQUIRE(r.stalls.size() == 1);
  CHECK(r.stalls[0].op == 3);
  CHECK(r.stalls[0].seconds == stash::test::approx_s(6e-6));
  CHECK(r.iteration_s == stash::test::approx_s(29e-6));
}

}  // namespace STASH_UNITY_ID
