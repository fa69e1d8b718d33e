// Recompute entries on hand-made traces whose answers are worked out by hand.
//
// Machine: 1 GB/s device memory (every op is memory-bound: 1 byte read or written = 1 ns), no
// launch overhead. Trace (x input 1000 B; a 4000 B, b 2000 B, c 1000 B activations; g 1000 B):
//   op0 relu   x -> a        5 us       op3 my::bwd  c -> g       2 us
//   op1 mul    a -> b        6 us       op4 my::bwd  a,b,g -> g   8 us
//   op2 sum    b -> c        3 us
// Live bytes: op0 5000, op1 7000, op2 8000, op3 9000 (x+a+b+c+g), op4 8000: the peak is 9000.
#include <stash/sim/cost_model.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/approx.hpp"
#include "support/chain_trace.hpp"
#include "support/link_bound_model.hpp"
#include "support/planned_reference.hpp"
#include "support/rerun_read_trace.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

std::string const& chain_text = stash::test::chain_trace_text;

stash::cost_model model() { return stash::test::link_bound_model(1e9); }

stash::recompute_entry drop_a() { return {1, 1, 4, 4, 4000}; }
stash::recompute_entry drop_b() { return {2, 2, 4, 4, 2000}; }

std::string error_of(stash::trace_analysis const& a, stash::schedule const& s)
{
  try {
    stash::validate_schedule(a, s);
  } catch (stash::schedule_error const& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("a recompute chain: the writers, their reads, time and transient bytes")
{
  auto const t = stash::parse_trace(chain_text, "chain");
  stash::trace_analysis const a(t, model());
  auto const c = stash::recompute_chain_of(a, 1, 1, 4);
  REQUIRE(c.valid());
  CHECK(c.ops == std::vector<std::uint64_t>{0});
  CHECK(c.reads == std::vector<stash::storage_id>{0});
  CHECK(c.seconds == stash::test::approx_s(5e-6));
  CHECK(c.transient_bytes == 0);
  CHECK(stash::recompute_chain_of(a, 0, 0, 4).refusal ==
        "only activations and temporaries are "
        "recomputed");
  // g is written by my::bwd, which the table does not know.
  CHECK(stash::recompute_chain_of(a, 4, 3, 4).refusal.find("may not be re-run") !=
        std::string::npos);
}

TEST_CASE("recomputing a: planned and simulated peak 8000, the iteration 5 us longer")
{
  auto const t = stash::parse_trace(chain_text, "chain");
  stash::trace_analysis const a(t, model());
  auto const none = stash::simulate(a, stash::make_schedule(a, "none", 9000, {}));
  CHECK(none.iteration_s == stash::test::approx_s(24e-6));
  CHECK(none.device_peak == 9000);
  auto const s = stash::make_schedule(a, "hand", 8000, {}, {drop_a()});
  CHECK(s.device_peak == 8000);
  CHECK(s.recomputed_bytes() == 4000);
  auto const r = stash::simulate(a, s);
  REQUIRE(r.fits);
  CHECK(r.iteration_s == stash::test::approx_s(29e-6));
  CHECK(r.recompute_s == stash::test::approx_s(5e-6));
  CHECK(r.compute_s == stash::test::approx_s(24e-6));
  CHECK(r.stall_s == 0.0);
  CHECK(r.device_peak == 8000);
  CHECK(r.op_start[4] == stash::test::approx_s(21e-6));
  std::size_t recompute_spans = 0;
  for (auto const& span : r.timeline) {
    if (span.kind == stash::timeline_span::kind_t::recompute) {
      ++recompute_spans;
      CHECK(span.start == stash::test::approx_s(16e-6));
      CHECK(span.end == stash::test::approx_s(21e-6));
    }
  }
  CHECK(recompute_spans == 1);
  // One byte less and the re-run cannot take a's bytes back.
  auto tight   = s;
  tight.budget = 7999;
  auto const f = stash::simulate(a, tight);
  CHECK_FALSE(f.fits);
  REQUIRE(f.failure);
  CHECK(f.failure->op == 4);
  CHECK(f.failure->needed_bytes == 4000);
}

TEST_CASE("a chain in one batch: b's re-run reads a rematerialised just before")
{
  auto const t = stash::parse_trace(chain_text, "chain");
  stash::trace_analysis const a(t, model());
  auto const s = stash::make_schedule(a, "hand", 8000, {}, {drop_a(), drop_b()});
  CHECK(s.device_peak == 8000);
  auto const r = stash::simulate(a, s);
  REQUIRE(r.fits);
  CHECK(r.recompute_s == stash::test::approx_s(11e-6));
  CHECK(r.iteration_s == stash::test::approx_s(35e-6));
  CHECK(r.device_peak == 8000);
  // The other order reads a before it is back.
  stash::schedule wrong = s;
  wrong.recomputes      = {drop_b(), drop_a()};
  auto const message    = error_of(a, wrong);
  CHECK(message.find("recompute entry 0: storage 2 'b': its re-run reads storage 1 'a', which is "
                     "not resident before op 4") != std::string::npos);
}

TEST_CASE("a swap and a recompute before one op: the prefetch overlaps the re-run")
{
  auto const t = stash::parse_trace(chain_text, "chain");
  stash::trace_analysis const a(t, model());
  // b leaves after op2 (offload issued at op2) and comes back for op4 (prefetch issued at op4,
  // i.e. when op3 ends at 16 us; 2000 B at 1 GB/s = 2 us, while a's 5 us re-run runs).
  auto const s =
      stash::make_schedule(a, "hand", 8000, {stash::swap_entry{2, 2, 4, 2, 4, 2000}}, {drop_a()});
  // Planned: op3 x+c+g = 3000; back for op4: x + g + a + b = 8000.
  CHECK(s.device_peak == 8000);
  auto const r = stash::simulate(a, s);
  REQUIRE(r.fits);
  CHECK(r.recompute_s == stash::test::approx_s(5e-6));
  CHECK(r.stall_s == 0.0);
  CHECK(r.iteration_s == stash::test::approx_s(29e-6));
  CHECK(r.d2h_bytes == 2000);
  CHECK(r.device_peak == 8000);
}

TEST_CASE("the validator names the recompute entry and the rule it breaks")
{
  auto const t = stash::parse_trace(chain_text, "chain");
  stash::trace_analysis const a(t, model());
  auto const base = stash::make_schedule(a, "hand", 9000, {}, {drop_a()});
  auto bad        = [&](stash::recompute_entry e) {
    auto s       = base;
    s.recomputes = {e};
    return error_of(a, s);
  };
  CHECK(bad({9, 1, 4, 4, 4000}).find("recompute entry 0: storage id 9 does not exist") !=
        std::string::npos);
  CHECK(bad({1, 1, 4, 4, 4001}).find("bytes 4001 differ") != std::string::npos);
  CHECK(bad({1, 0, 4, 4, 4000}).find("not consecutive accesses") != std::string::npos);
  CHECK(bad({1, 1, 4, 1, 4000}).find("at 1 must be in (last_use 1, next_use 4]") !=
        std::string::npos);
  CHECK(bad({4, 3, 4, 4, 1000}).find("cannot be recomputed: op 3 'my::bwd' may not be re-run") !=
        std::string::npos);
  // A swap entry of the same gap overlaps.
  auto both        = base;
  both.entries     = {stash::swap_entry{1, 1, 4, 2, 4, 4000}};
  both.device_peak = stash::planned_peak(a, both.entries, both.recomputes);
  CHECK(error_of(a, both).find("overlaps another entry") != std::string::npos);
  // A re-run whose read is swapped out across `at`.
  auto swapped_read        = stash::make_schedule(a, "hand", 9000, {}, {drop_b()});
  swapped_read.entries     = {stash::swap_entry{1, 1, 4, 2, 3, 4000}};
  swapped_read.device_peak = stash::planned_peak(a, swapped_read.entries, swapped_read.recomputes);
  CHECK(error_of(a, swapped_read).find("which is not resident before op 4") != std::string::npos);
  try {
    auto s             = base;
    s.recomputes       = {drop_b(), drop_a()};
    s.recomputes[0].at = 3;  // b is back at op 3, a not yet: fine for order, b reads a: away
    stash::validate_schedule(a, s);
    FAIL("no schedule_error");
  } catch (stash::schedule_error const& e) {
    CHECK(e.recompute_entry() == std::size_t{0});
    CHECK_FALSE(e.entry().has_value());
  }
  CHECK(error_of(a, base).empty());
}

TEST_CASE("an op the trace declares not recomputable refuses; skip_state writes are skipped")
{
  auto const t = stash::parse_trace(R"(# stash-trace v1 recompute@1=no
t 0 1000 param w
t 1 8 param running_mean
p forward
t 2 1000 act y
o aten::native_batch_norm 0,1 1,2
t 3 1000 act z
o aten::relu 2 3
o my::use 2,3 -
)",
                                    "bn");
  stash::trace_analysis const a(t, model());
  auto const y = stash::recompute_chain_of(a, 2, 0, 2);
  REQUIRE(y.valid());
  CHECK(y.ops == std::vector<std::uint64_t>{0});
  CHECK(stash::recompute_chain_of(a, 3, 1, 2).refusal.find("'aten::relu' may not be re-run") !=
        std::string::npos);
}

// A batch right after an op with no end frees (the next line is a phase): the planned bytes of
// its re-runs must count the batch's storages, which come back with that op's end. They used to
// be read at op2's own event, where a is already away: a's re-run planned at 2000 B, b's at
// 6000 B, 4000 B short each; where the entries after the first outweighed that level the size_t
// went below zero (dtr at 40% of recompute_mlp.hpp's step reported a peak of 2^64 - 1024).
TEST_CASE("re-runs after an op with no end frees: the batch is counted, never below zero")
{
  auto const t = stash::parse_trace(R"(# stash-trace v1 model=nofree
t 0 1000 input x
p forward
t 1 4000 act a
o aten::relu 0 1
t 2 4000 act b
o aten::relu 1 2
t 3 1000 act c
o aten::sum.dim_IntList 2 3
p backward
o my::bwd 1,2,3 3
f 1
f 2
f 3
)",
                                    "nofree");
  stash::trace_analysis const a(t, model());
  REQUIRE(a.peak_live_bytes() == 10000);
  // a and b dropped after their forward uses, re-run (a, then b from a) before op3.
  auto const s =
      stash::make_schedule(a, "hand", 10000, {}, {{1, 1, 3, 3, 4000}, {2, 2, 3, 3, 4000}});
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  auto const curve = stash::planned_device_curve(a, s.entries, s.recomputes);
  // a's re-run: x + c + a (b still to come); b's: x + c + a + b.
  CHECK(stash::recompute_run_bytes(a, curve, s.recomputes) ==
        std::vector<std::uint64_t>{6000, 10000});
  CHECK(stash::test::reference_run_bytes(a, s) == std::vector<std::uint64_t>{6000, 10000});
  CHECK(s.device_peak == 10000);
  CHECK(s.device_peak == stash::test::reference_planned_peak(a, s));
  auto const r = stash::simulate(a, s, {false, stash::sim_memory::unconstrained});
  CHECK(r.device_peak == s.device_peak);
  auto tight   = s;
  tight.budget = 9999;
  CHECK_FALSE(stash::simulate(a, tight).fits);
}

TEST_CASE("a planned curve or re-run below zero is a schedule_error, never a wrapped size")
{
  auto const t = stash::parse_trace(chain_text, "chain");
  stash::trace_analysis const a(t, model());
  // a (4000 B) listed three times for one gap (an invalid schedule, as a buggy planner might
  // hand make_schedule): 12000 B away at op 2's event, where 8000 B are live.
  std::vector<stash::swap_entry> const bad(3, stash::swap_entry{1, 1, 4, 2, 4, 4000});
  try {
    (void)stash::planned_device_curve(a, bad);
    FAIL("no schedule_error");
  } catch (stash::schedule_error const& e) {
    CHECK(std::string(e.what()).find("planned device bytes below zero at event") !=
          std::string::npos);
  }
  CHECK_NOTHROW((void)stash::planned_device_curve(a, std::vector(1, bad.front())));
  // A curve that is not the schedule's (all zero) under a batch of two: a's re-run would be
  // planned at 0 - 2000 B.
  std::vector<stash::recompute_entry> const batch{drop_a(), drop_b()};
  std::vector<std::uint64_t> const zeros(t.events().size(), 0);
  try {
    (void)stash::recompute_run_bytes(a, zeros, batch);
    FAIL("no schedule_error");
  } catch (stash::schedule_error const& e) {
    CHECK(e.recompute_entry() == std::size_t{0});
    CHECK(e.reason().find("below zero while it runs") != std::string::npos);
  }
}

// In-place ops (the trace records their argument as a read and a write of one storage, as
// data/traces record `o aten::relu_ 194 194`):
//   op0 native_batch_norm x, rm -> rm (running stats, skipped on re-run), y, sm (fresh)
//   op1 relu_ y (in place)        op2 relu x -> id
//   op3 mul y -> z                op4 add_ z, id -> z (in place)      op5 relu_ z (in place)
//   op6 mul z -> q                op7 mul q -> pre (reads q before op8 overwrites it)
//   op8 relu_ q (in place)        op9 my::bwd reads y, sm, z, q, pre, id
std::string const inplace_text = R"(# stash-trace v1 model=inplace
t 0 1000 input x
t 1 8 param running_mean
p forward
t 2 1000 act y
t 3 8 act save_mean
o aten::native_batch_norm 0,1 1,2,3
o aten::relu_ 2 2
t 4 1000 act id
o aten::relu 0 4
t 5 1000 act z
o aten::mul.Tensor 2 5
o aten::add_.Tensor 5,4 5
o aten::relu_ 5 5
t 6 1000 act q
o aten::mul.Tensor 5 6
t 7 1000 act pre
o aten::mul.Tensor 6 7
o aten::relu_ 6 6
p backward
o my::bwd 2,3,5,6,7,4 -
f 2
f 3
f 4
f 5
f 6
f 7
)";

TEST_CASE("in-place ops: a chain re-runs the producer then the in-place ops over the storage")
{
  auto const t = stash::parse_trace(inplace_text, "inplace");
  stash::trace_analysis const a(t, model());
  // y after op3: BN (its running statistics skipped, save_mean a transient result), then relu_.
  auto const y = stash::recompute_chain_of(a, 2, 3, 9);
  REQUIRE(y.valid());
  CHECK(y.ops == std::vector<std::uint64_t>{0, 1});
  CHECK(y.reads == std::vector<stash::storage_id>{0, 1});
  CHECK(y.transient_bytes == 8);
  // z after op6: mul from y, add_ of id, relu_; it reads y and id, both unchanged since.
  auto const z = stash::recompute_chain_of(a, 5, 6, 9);
  REQUIRE(z.valid());
  CHECK(z.ops == std::vector<std::uint64_t>{3, 4, 5});
  CHECK(z.reads == std::vector<stash::storage_id>{2, 4});
  // y and z in one batch before op9: z's mul reads the y the batch's first entry rebuilt.
  auto const s =
      stash::make_schedule(a, "hand", 1u << 20, {}, {{2, 3, 9, 9, 1000}, {5, 6, 9, 9, 1000}});
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  CHECK(s.device_peak == stash::test::reference_planned_peak(a, s));
  auto const r = stash::simulate(a, s, {false, stash::sim_memory::unconstrained});
  CHECK(r.device_peak == s.device_peak);
  // The other order reads y before it is back.
  auto wrong       = s;
  wrong.recomputes = {s.recomputes[1], s.recomputes[0]};
  CHECK(error_of(a, wrong).find("its re-run reads storage 2 'y', which is not resident") !=
        std::string::npos);
}

TEST_CASE("in-place ops: a re-run that needs a read's value from before an in-place write")
{
  auto const t = stash::parse_trace(inplace_text, "inplace");
  stash::trace_analysis const a(t, model());
  // pre = mul(q) at op7; relu_ overwrites q at op8: before op9 the device holds only the new q,
  // so the chain first rebuilds q's old value (mul z -> q, op6) into a transient buffer.
  auto const late = stash::recompute_chain_of(a, 7, 7, 9);
  REQUIRE(late.valid());
  CHECK(late.ops == std::vector<std::uint64_t>{6, 7});
  CHECK(late.reads == std::vector<stash::storage_id>{5});
  CHECK(late.transients == std::vector<stash::storage_id>{6});
  CHECK(late.transient_bytes == 1000);  // q's rebuilt copy, held while the chain runs
  CHECK(late.seconds == stash::test::approx_s(4e-6));  // two 2000-byte ops at 1 GB/s
  auto const s = stash::make_schedule(a, "hand", 1u << 20, {}, {{7, 7, 9, 9, 1000}});
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  CHECK(s.device_peak == stash::test::reference_planned_peak(a, s));
  // The re-runs before op9 hold x, running_mean, y, save_mean, id, z and q (5016 B), pre back
  // (1000 B) and q's rebuilt copy (1000 B): 7016 B, above every op's step (6016 B). The
  // simulator counts the transient copy at that peak too.
  CHECK(s.device_peak == 7016);
  auto const r = stash::simulate(a, s);
  REQUIRE(r.fits);
  CHECK(r.device_peak == 7016);
  // Re-run before op8, while q still holds what op7 read: valid.
  auto const early = stash::recompute_chain_of(a, 7, 7, 8);
  REQUIRE(early.valid());
  CHECK(early.ops == std::vector<std::uint64_t>{7});
  // q itself after op8 is rebuilt from z through mul then relu_: the in-place op over the
  // target is part of its chain, so the post-relu value comes back.
  auto const q = stash::recompute_chain_of(a, 6, 8, 9);
  CHECK(q.ops == std::vector<std::uint64_t>{6, 8});
}

TEST_CASE("chain_memo: a chain per op it is needed back at, as recompute_chain_of's")
{
  // pre after op7: back before op8 its chain is mul alone; before op9 (after relu_ overwrote q)
  // it first rebuilds q's old value. The memo keeps both, one per `at`.
  auto const t = stash::parse_trace(inplace_text, "inplace");
  stash::trace_analysis const a(t, model());
  stash::detail::chain_memo memo(a);
  auto const& early = memo(7, 7, 8);
  auto const& late  = memo(7, 7, 9);
  CHECK(early.ops == std::vector<std::uint64_t>{7});
  CHECK(late.ops == std::vector<std::uint64_t>{6, 7});
  CHECK(late.transients == std::vector<stash::storage_id>{6});
  CHECK(memo.size() == 2);
  CHECK(&memo(7, 7, 8) == &early);
}

TEST_CASE("shared re-runs: q's entry adopts the rebuild of q that pre's chain runs before it")
{
  auto const t = stash::parse_trace(inplace_text, "inplace");
  stash::trace_analysis const a(t, model());
  // pre's chain at op9 rebuilds q (mul z -> q, op6) as a transient; q's own chain is op6 then
  // op8 (relu_). In one batch, pre first, q adopts the rebuild and re-runs relu_ only.
  std::vector<stash::recompute_entry> const rc{{7, 7, 9, 9, 1000}, {6, 8, 9, 9, 1000}};
  auto const shared = stash::shared_reruns_of(a, rc);
  REQUIRE(shared.size() == 2);
  CHECK(!shared[0].adopts);
  CHECK(shared[0].hands == std::vector<std::pair<stash::storage_id, std::size_t>>{{6, 1}});
  CHECK(shared[1].adopts == std::optional<std::size_t>{0});
  CHECK(shared[1].skipped == std::vector<std::uint64_t>{6});
  CHECK(shared[0].seconds == stash::test::approx_s(4e-6));  // mul and mul, as alone
  CHECK(shared[1].seconds == stash::test::approx_s(2e-6));  // relu_ only
  // q first: its chain ends with relu_, so pre cannot read q's old value from it.
  std::vector<stash::recompute_entry> const reversed{rc[1], rc[0]};
  for (auto const& x : stash::shared_reruns_of(a, reversed)) {
    CHECK(!x.adopts);
    CHECK(x.hands.empty());
  }
  // The simulator prices the batch so: the shared op6 (2 us) once.
  auto s = stash::make_schedule(a, "hand", 1u << 20, {}, rc);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  auto const alone = stash::simulate(a, s);
  s.shared_reruns  = true;
  auto const once  = stash::simulate(a, s);
  CHECK(alone.recompute_s == stash::test::approx_s(8e-6));
  CHECK(once.recompute_s == stash::test::approx_s(6e-6));
  CHECK(once.iteration_s == stash::test::approx_s(alone.iteration_s - 2e-6));
  // The same with the chains taken from a memo (as the planners simulate).
  stash::detail::chain_memo memo(a);
  auto const by_memo = stash::shared_reruns_of(a, rc, memo);
  REQUIRE(by_memo.size() == 2);
  CHECK(by_memo[1].adopts == std::optional<std::size_t>{0});
  CHECK(by_memo[1].skipped == std::vector<std::uint64_t>{6});
  CHECK(by_memo[1].seconds == shared[1].seconds);
  auto const memo_run = stash::detail::simulate_unvalidated(a, s, {}, memo);
  CHECK(memo_run.recompute_s == once.recompute_s);
  CHECK(memo_run.iteration_s == once.iteration_s);
  CHECK(memo.size() == 2);
}

// A rebuilt input whose own input was overwritten in place too: one level only, refused.
//   op0 mul x -> q    op1 mul q -> pre    op2 relu_ x (input, in place)    op3 relu_ q
std::string const twice_overwritten_text = R"(# stash-trace v1 model=twice
t 0 1000 input x
p forward
t 1 1000 act q
o aten::mul.Tensor 0 1
t 2 1000 act pre
o aten::mul.Tensor 1 2
o aten::relu_ 0 0
o aten::relu_ 1 1
p backward
o my::bwd 1,2 -
f 1
f 2
)";

TEST_CASE("a rebuilt input that cannot be rebuilt: the chain is refused, naming both reads")
{
  auto const t = stash::parse_trace(twice_overwritten_text, "twice");
  stash::trace_analysis const a(t, model());
  auto const pre = stash::recompute_chain_of(a, 2, 1, 4);
  CHECK(pre.refusal ==
        "its input storage 1 is overwritten by op 3 'aten::relu_' before op 4: op 1 read the "
        "value from before that write, which is no longer on the device; rebuilding its input "
        "storage 1: its input storage 0 is overwritten by op 2 'aten::relu_' before op 4: op 0 "
        "read the value from before that write, which is no longer on the device");
  auto const s = stash::make_schedule(a, "hand", 1u << 20, {}, {{2, 1, 4, 4, 1000}});
  CHECK(error_of(a, s).find("cannot be recomputed: its input storage 1 is overwritten by op 3") !=
        std::string::npos);
}

TEST_CASE("a re-run's read splits the gap: its storage comes back for the re-run, leaves again")
{
  auto const t = stash::parse_trace(stash::test::rerun_read_trace_text, "redrop");
  stash::trace_analysis const a(t, model());
  stash::recompute_entry const drop{1, 1, 3, 3, 4000};
  stash::swap_entry const first{0, 0, 3, 1, 3, 1000};
  stash::swap_entry again{0, 3, 5, 4, 5, 1000};
  again.redrop = true;
  // Only the first half: x stays from op3 to op5, op4 needs x + g + h.
  auto const half = stash::make_schedule(a, "hand", 7000, {first}, {drop});
  CHECK(error_of(a, half).empty());
  CHECK(half.device_peak == 8000);
  auto const s = stash::make_schedule(a, "hand", 7000, {first, again}, {drop});
  REQUIRE(error_of(a, s).empty());
  CHECK(s.device_peak == 7000);
  CHECK(s.device_peak == stash::test::reference_planned_peak(a, s));
  auto const r = stash::simulate(a, s);
  REQUIRE(r.fits);
  // op0 0-5, op1 5-11 (x's copy 5-6), op2 11-14; x back 14-15 (the re-run waits: a transfer
  // stall), a re-run 15-20, op3 20-26; x dropped at 26 (no copy), op4 26-33; x back 33-34
  // (stall), op5 34-37.
  CHECK(r.iteration_s == stash::test::approx_s(37e-6));
  CHECK(r.recompute_s == stash::test::approx_s(5e-6));
  CHECK(r.stall_s == stash::test::approx_s(2e-6));
  CHECK(r.stall_by_cause[static_cast<std::size_t>(stash::stall_cause::transfer)] ==
        stash::test::approx_s(2e-6));
  CHECK(r.d2h_bytes == 1000);  // the redrop copies nothing
  CHECK(r.h2d_bytes == 2000);
  CHECK(r.device_peak == 7000);
  // Leaving right after the re-run (offload_at = 3, before op3's step): x is off during op3
  // (a + g = 5000 B there; the re-run itself ran with x, g and a: 6000 B), dropped at 20 us.
  auto early                  = s;
  early.entries[1].offload_at = 3;
  early.device_peak           = stash::planned_peak(a, early.entries, early.recomputes);
  REQUIRE(error_of(a, early).empty());
  CHECK(early.device_peak == 7000);
  auto const curve = stash::planned_device_curve(a, early.entries, early.recomputes);
  CHECK(curve[a.ops().event[3]] == 5000);
  CHECK(stash::recompute_run_bytes(a, curve, early.recomputes, early.entries) ==
        std::vector<std::uint64_t>{6000});
  early.budget = 6000;  // op4 needs g + h = 7000: does not fit; 7000 does
  CHECK_FALSE(stash::simulate(a, early).fits);
  early.budget = 7000;
  auto const e = stash::simulate(a, early);
  REQUIRE(e.fits);
  CHECK(e.iteration_s == stash::test::approx_s(37e-6));
  CHECK(e.d2h_bytes == 1000);
  CHECK(stash::splits_gaps(a, s));
  CHECK(stash::splits_gaps(a, half));  // first's gap (0, 3) ends at a re-run use
  CHECK_FALSE(stash::splits_gaps(a, stash::make_schedule(a, "hand", 9000, {}, {drop})));
  // Without redrop, the second departure is a second copy of x.
  auto copied              = s;
  copied.entries[1].redrop = false;
  auto const c             = stash::simulate(a, copied);
  REQUIRE(c.fits);
  CHECK(c.d2h_bytes == 2000);
}

TEST_CASE("the validator's rules for re-run uses and redrop entries")
{
  auto const t = stash::parse_trace(stash::test::rerun_read_trace_text, "redrop");
  stash::trace_analysis const a(t, model());
  stash::recompute_entry const drop{1, 1, 3, 3, 4000};
  stash::swap_entry const first{0, 0, 3, 1, 3, 1000};
  stash::swap_entry again{0, 3, 5, 4, 5, 1000};
  again.redrop = true;
  auto check   = [&](std::vector<stash::swap_entry> sw, std::vector<stash::recompute_entry> rc) {
    auto s        = stash::make_schedule(a, "hand", 9000, sw, rc);
    s.device_peak = stash::planned_peak(a, s.entries, s.recomputes);
    return error_of(a, s);
  };
  // No re-run reads x at op3: (0, 3) and (3, 5) are no gaps of x.
  CHECK(check({first}, {}).find("not consecutive accesses") != std::string::npos);
  // x swapped across the re-run: away for it.
  CHECK(check({stash::swap_entry{0, 0, 5, 1, 5, 1000}}, {drop})
            .find("its re-run reads storage 0 'x', which is not resident before op 3") !=
        std::string::npos);
  // A redrop needs the swap entry whose host copy it keeps.
  CHECK(check({again}, {drop}).find("a redrop entry needs a swap entry") != std::string::npos);
  auto other_encoding     = again;
  other_encoding.encoding = stash::swap_encoding::raw;
  CHECK(check({first, other_encoding}, {drop}).find("a redrop entry needs") != std::string::npos);
  // Leaving again is issued at the re-run use (early) or after it, never before.
  auto before       = again;
  before.offload_at = 2;
  CHECK(check({first, before}, {drop}).find("must not precede the re-run use at op 3") !=
        std::string::npos);
  // A redrop starts at a re-run use only.
  auto at_access   = first;
  at_access.redrop = true;
  CHECK(check({at_access}, {drop}).find("must start at a re-run use") != std::string::npos);
  // Second departure without a first: a copy of the resident x after its re-run use.
  auto fresh   = again;
  fresh.redrop = false;
  CHECK(check({fresh}, {drop}).empty());
}

// A recompute entry whose last use is a re-run use leaves right after that batch (an early
// departure), before the op's own step. x (3000 B) is read by op1 and op6; a (4000 B), dropped
// after op2, is re-run before op4 by re-running op1, which reads x: x's gap splits at op4, and x
// is dropped over (4, 6) and re-run before op6 (from `in`, kept to the end).
//   op0 relu in -> x   op2 mul a -> b     op4 bwd a,g -> k (2000 B, freed after it)
//   op1 relu x -> a    op3 bwd b -> g     op5 bwd g -> g    op6 bwd x,g -> g
std::string const early_drop_text = R"(# stash-trace v1 model=early_drop dtype=float32
t 0 100 input in
p forward
t 1 3000 act x
o aten::relu 0 1
t 2 4000 act a
o aten::relu 1 2
t 3 500 act b
o aten::mul.Tensor 2 3
p backward
t 4 100 temp g
o my::bwd 3 4
f 3
t 5 2000 temp k
o my::bwd 2,4 5
f 2
f 5
o my::bwd 4 4
o my::bwd 1,4 4
f 1
f 4
)";

TEST_CASE("a recompute entry that starts at a re-run use drops its storage right after the batch")
{
  auto const t = stash::parse_trace(early_drop_text, "early_drop");
  stash::trace_analysis const a(t, model());
  stash::recompute_entry const drop_a{2, 2, 4, 4, 4000};
  stash::recompute_entry const drop_x{1, 4, 6, 6, 3000};
  auto const s = stash::make_schedule(a, "hand", 1u << 20, {}, {drop_a, drop_x});
  REQUIRE(error_of(a, s).empty());
  // Peaks: op2 holds in, x, a, b (7600 B); the re-run of op1 before op4 holds in, x, g and a
  // (7200 B); op4's step, x gone after the batch, holds in, g, a and k (6200 B). Were x released
  // only when op4 ends, op4 would hold 9200 B.
  CHECK(s.device_peak == 7600);
  CHECK(stash::test::reference_planned_peak(a, s) == 7600);
  auto const curve = stash::planned_device_curve(a, s.entries, s.recomputes);
  CHECK(curve[a.ops().event[4]] == 6200);
  auto run     = s;
  run.budget   = 7600;
  auto const r = stash::simulate(a, run);
  REQUIRE(r.fits);
  CHECK(r.device_peak == 7600);
  CHECK(r.recompute_s > 0.0);
}

TEST_CASE("recompute_off_run: where the planned curve counts a recompute entry away, none outside")
{
  auto const t = stash::parse_trace(chain_text, "chain");
  stash::trace_analysis const a(t, model());
  auto const run = stash::recompute_off_run(a, drop_a());
  REQUIRE(run);
  CHECK(run->first == a.ops().event[1] + 1);  // after a's last use before the gap
  CHECK(run->first <= run->second);
  // The curve with a dropped is the curve without, less a's bytes over that run exactly.
  auto const none    = stash::planned_device_curve(a, {});
  auto const dropped = stash::planned_device_curve(a, {}, std::vector{drop_a()});
  REQUIRE(none.size() == dropped.size());
  for (std::uint64_t i = 0; i < none.size(); ++i) {
    bool const away = run->first <= i && i <= run->second;
    CHECK(none[i] - dropped[i] == (away ? 4000U : 0U));
  }
  CHECK_FALSE(stash::recompute_off_run(a, {1, 1, 4, 99, 4000}));  // at past the trace's end
  CHECK_FALSE(stash::recompute_off_run(a, {99, 1, 4, 4, 4000}));  // no such storage
}

TEST_CASE("chain_memo: recompute_chain_of's chain, computed once; validation but the peak rule")
{
  auto const t = stash::parse_trace(chain_text, "chain");
  stash::trace_analysis const a(t, model());
  stash::detail::chain_memo memo(a);
  auto const& c = memo(1, 1, 4);
  auto const d  = stash::recompute_chain_of(a, 1, 1, 4);
  CHECK(c.ops == d.ops);
  CHECK(c.reads == d.reads);
  CHECK(c.transient_bytes == d.transient_bytes);
  CHECK(&memo(1, 1, 4) == &c);
  CHECK(memo(0, 0, 4).refusal == stash::recompute_chain_of(a, 0, 0, 4).refusal);
  // A device_peak that is not the planned peak: only validate_schedule checks that rule.
  auto s = stash::make_schedule(a, "hand", 8000, {}, {drop_a()});
  ++s.device_peak;
  CHECK(error_of(a, s).find("is not the planned peak") != std::string::npos);
  CHECK_NOTHROW(stash::detail::validate_schedule_but_peak(a, s, memo));
  s.recomputes.front().at = 1;  // not after its last use: both refuse it
  CHECK_FALSE(error_of(a, s).empty());
  CHECK_THROWS_AS(stash::detail::validate_schedule_but_peak(a, s, memo), stash::schedule_error);
}

}  // namespace STASH_UNITY_ID
