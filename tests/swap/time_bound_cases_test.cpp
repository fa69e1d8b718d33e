// iteration_time_lower_bound's per-op relaxation (swap/detail/time_bound.hpp) on hand-made
// traces whose bound follows from the file comment by hand: which storages may be away at an op
// over the budget (inside a gap of their accesses, not at its ends), which of them a re-run may
// restore, and that a re-run comes after the compute that follows the op. Each case compares the
// bound with the figure the relaxation gives, not only with a schedule's time: a bound that is
// merely lower (still a bound) fails here. Every time is predicted by the cost model.
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/encoding_choice.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/trace/trace.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>

namespace STASH_UNITY_ID {

namespace {

using stash::storage_kind;

constexpr std::uint64_t mib = std::uint64_t{1} << 20;
constexpr std::uint64_t kib = std::uint64_t{1} << 10;

stash::cost_model pcie3()
{
  return stash::cost_model(stash::hardware_preset("pcie3_x16"), stash::cost_params{});
}

// The least time that swaps `x` bytes away over op i and back, the D2H copy inside the compute
// before op i and the H2D copy inside the compute from it (the bound when nothing is re-run).
double swap_time(stash::trace_analysis const& a, std::uint64_t i, double x)
{
  auto const& hw      = a.model().hw();
  double const before = a.op_start(i), after = a.compute_seconds() - before;
  return std::max(before, x / hw.pcie_d2h_bytes_per_s) +
         std::max(after, x / hw.pcie_h2d_bytes_per_s);
}

}  // namespace

TEST_CASE("time bound: a storage is not away at the op that reads it, where its gap starts")
{
  // p (a parameter, 64 MiB) is read by op0 and op3; q (64 MiB, written by op0) is read by op1
  // and op3; op1 writes t (64 MiB). At op1 only p may be away: q is read there, the start of its
  // gap (1, 3). p is state and nothing else can leave, so the bound is p's swap around op1, far
  // above the compute time; q counted as away at op1 would be re-run in a few microseconds.
  stash::trace t;
  auto const p  = t.add_alloc(64 * mib, storage_kind::param, "p");
  auto const in = t.add_alloc(kib, storage_kind::input, "in");
  auto const q  = t.add_alloc(64 * mib, storage_kind::act, "q");
  t.add_op("aten::mul.Tensor", {p, in}, {q});
  auto const tt = t.add_alloc(64 * mib, storage_kind::act, "t");
  t.add_op("aten::add.Tensor", {q}, {tt});
  auto const u = t.add_alloc(kib, storage_kind::act, "u");
  t.add_op("aten::add.Tensor", {tt}, {u});
  t.add_free(tt);
  auto const v = t.add_alloc(kib, storage_kind::act, "v");
  t.add_op("aten::add.Tensor", {p, q, u}, {v});
  stash::trace_analysis const a(t, pcie3());
  auto const budget = stash::memory_lower_bound_bytes(a);
  // op1 holds p, in, q and t: 192 MiB + 1 KiB; only p (64 MiB) may leave there.
  REQUIRE(a.memory_steps()[1].live_peak > budget);
  auto const x = static_cast<double>(a.memory_steps()[1].live_peak - budget);
  CHECK(x > 60.0 * mib);
  double const bound = stash::iteration_time_lower_bound(a, budget);
  CHECK(bound >= swap_time(a, 1, x) * (1 - 1e-9));
  CHECK(bound > 2 * a.compute_seconds());
  MESSAGE("bound " << bound << " s, compute " << a.compute_seconds() << " s");
}

TEST_CASE("time bound: a storage whose gap ends at an op over the budget is used there")
{
  // p (a parameter, 64 MiB) is read by op0 and op3; s (64 MiB, written by op0) is read by op2,
  // which writes t (64 MiB). At op2 only p may be away (s is read there, the end of its gap
  // (0, 2)), so the bound is p's swap around op2; s counted as away at op2 would be re-run.
  stash::trace t;
  auto const p  = t.add_alloc(64 * mib, storage_kind::param, "p");
  auto const in = t.add_alloc(kib, storage_kind::input, "in");
  auto const s  = t.add_alloc(64 * mib, storage_kind::act, "s");
  t.add_op("aten::mul.Tensor", {p, in}, {s});
  auto const k = t.add_alloc(kib, storage_kind::act, "k");
  t.add_op("aten::add.Tensor", {in}, {k});
  auto const tt = t.add_alloc(64 * mib, storage_kind::act, "t");
  t.add_op("aten::add.Tensor", {s, k}, {tt});
  t.add_free(s);
  auto const v = t.add_alloc(kib, storage_kind::act, "v");
  t.add_op("aten::add.Tensor", {p, tt}, {v});
  stash::trace_analysis const a(t, pcie3());
  auto const budget = stash::memory_lower_bound_bytes(a);
  REQUIRE(a.memory_steps()[2].live_peak > budget);
  auto const x = static_cast<double>(a.memory_steps()[2].live_peak - budget);
  CHECK(x > 60.0 * mib);
  double const bound = stash::iteration_time_lower_bound(a, budget);
  CHECK(bound >= swap_time(a, 2, x) * (1 - 1e-9));
  CHECK(bound > 2 * a.compute_seconds());
}

TEST_CASE("time bound: a storage whose first writer reads it cannot be re-run")
{
  // s (64 MiB) is created by op0 in place (op0 reads it: its old bytes are not the trace's to
  // re-make), read by op2; op1 writes t (64 MiB, freed after it). At op1 s is the only storage
  // that may be away: swapped, not re-run, so the bound is its swap around op1.
  stash::trace t;
  auto const w = t.add_alloc(kib, storage_kind::param, "w");
  auto const s = t.add_alloc(64 * mib, storage_kind::act, "s");
  t.add_op("aten::add.Tensor", {s, w}, {s});
  auto const tt = t.add_alloc(64 * mib, storage_kind::act, "t");
  t.add_op("aten::mul.Tensor", {w}, {tt});
  t.add_free(tt);
  auto const v = t.add_alloc(kib, storage_kind::act, "v");
  t.add_op("aten::add.Tensor", {s}, {v});
  stash::trace_analysis const a(t, pcie3());
  auto const budget = stash::memory_lower_bound_bytes(a);
  REQUIRE(a.memory_steps()[1].live_peak > budget);
  auto const x = static_cast<double>(a.memory_steps()[1].live_peak - budget);
  CHECK(x > 60.0 * mib);
  double const bound = stash::iteration_time_lower_bound(a, budget);
  CHECK(bound >= swap_time(a, 1, x) * (1 - 1e-9));
  CHECK(bound > 2 * a.compute_seconds());
}

TEST_CASE("time bound: a re-run restoring a storage runs after the compute that follows the op")
{
  // s (64 MiB) is written by op0 from `in` (30 MiB, an input kept to the end, so s can be re-run
  // for real) and read by op2; op1 writes t (64 MiB) from w, freed after it. Half of s must be away
  // at op1. Its writer op0 moves 94 MiB for s's 64, a dearer byte than any other op's (the
  // cheapest, op1, moves 65 MiB for 64): the re-run of s costs t0 / 64 MiB a byte. Swapping costs
  // nothing while the D2H copy fits in op0's time (t0 x the link's bytes/s), and each byte beyond
  // it costs a PCIe byte (far dearer); the rest is re-run after op1 and everything after it:
  //   T >= C + (x - t0 x d2h) x t0 / 64 MiB.
  // A re-run allowed to overlap the compute after op1 would leave T at C plus the cheapest-op
  // floor only.
  stash::trace t;
  auto const w  = t.add_alloc(mib, storage_kind::param, "w");
  auto const in = t.add_alloc(30 * mib, storage_kind::input, "in");
  auto const s  = t.add_alloc(64 * mib, storage_kind::act, "s");
  t.add_op("aten::add.Tensor", {in}, {s});
  auto const tt = t.add_alloc(64 * mib, storage_kind::act, "t");
  t.add_op("aten::mul.Tensor", {w}, {tt});
  t.add_free(tt);
  auto const o = t.add_alloc(mib, storage_kind::act, "o");
  t.add_op("aten::add.Tensor", {s}, {o});
  t.add_free(s);
  auto const z = t.add_alloc(64 * mib, storage_kind::act, "z");
  t.add_op("aten::mul.Tensor", {o}, {z});
  t.add_free(z);
  auto const z2 = t.add_alloc(64 * mib, storage_kind::act, "z2");
  t.add_op("aten::mul.Tensor", {o}, {z2});
  stash::trace_analysis const a(t, pcie3());
  double const x    = 32.0 * mib;
  auto const budget = a.memory_steps()[1].live_peak - 32 * mib;
  REQUIRE(budget >= stash::memory_lower_bound_bytes(a));
  double const c      = a.compute_seconds();
  double const t0     = a.op_seconds()[0];
  double const after1 = c - a.op_start(1);
  REQUIRE(after1 > t0);  // the compute after op1 could hide the whole re-run
  double const free_swap = t0 * a.model().hw().pcie_d2h_bytes_per_s;
  REQUIRE(free_swap < x / 4);
  double const expected = c + (x - free_swap) * t0 / (64.0 * mib);
  double const bound    = stash::iteration_time_lower_bound(a, budget);
  CHECK(bound >= expected * (1 - 1e-6));
  CHECK(bound <= expected * (1 + 1e-6));
  CHECK(bound < swap_time(a, 1, x));  // re-running is cheaper than swapping it all  // re-running
                                      // is cheaper than swapping it all
  MESSAGE("bound " << bound << " s, expected " << expected << " s, compute " << c << " s");
}

TEST_CASE("time bound with per-storage encodings: each storage at its own ratio, best first")
{
  // z (64 MiB, a ReLU output: zvc, 1.6x) and p (a parameter, 64 MiB: raw) are both in a gap at
  // op2, which writes t (96 MiB); 96 MiB must be away there. The links carry z's 40 MiB of wire
  // bytes for its 64 first (the fewest link seconds per byte first, its codec kernel included),
  // then 32 MiB of p raw, D2H inside the compute before op2 and H2D inside the compute from it.
  // The bound before this one let every byte cross at 32x (3 MiB each way), whether or not an
  // encoding applies to it.
  stash::trace t;
  auto const p = t.add_alloc(64 * mib, storage_kind::param, "p");
  auto const x = t.add_alloc(kib, storage_kind::input, "x");
  auto const z = t.add_alloc(64 * mib, storage_kind::act, "z");
  t.add_op("aten::relu", {x}, {z});
  auto const k = t.add_alloc(kib, storage_kind::act, "k");
  t.add_op("aten::mul.Tensor", {p, x}, {k});
  auto const tt = t.add_alloc(96 * mib, storage_kind::act, "t");
  t.add_op("aten::mul.Tensor", {k}, {tt});
  t.add_free(tt);
  auto const v = t.add_alloc(kib, storage_kind::act, "v");
  t.add_op("aten::add.Tensor", {z, p, k}, {v});
  stash::trace_analysis const a(t, pcie3());
  stash::encoding_options const enc;
  CHECK(stash::choose_encoding(a, stash::swap_entry{z, 0, 3, 1, 3, 64 * mib}, enc) ==
        stash::swap_encoding::zvc);
  CHECK(stash::choose_encoding(a, stash::swap_entry{p, 1, 3, 2, 3, 64 * mib}, enc) ==
        stash::swap_encoding::raw);
  auto const budget = stash::memory_lower_bound_bytes(a);
  REQUIRE(a.memory_steps()[2].live_peak > budget);
  auto const x2 = static_cast<double>(a.memory_steps()[2].live_peak - budget);
  REQUIRE(x2 > 64.0 * mib);
  // Each link's seconds: z at 1.6x plus its codec kernel's time per byte (encode before D2H,
  // decode after H2D, on the same copy engine), then the rest of p raw.
  auto const& hw      = a.model().hw();
  double const zvc    = a.model().encoding_ratio(stash::swap_encoding::zvc);
  double const kernel = 1.0 / (hw.device_bytes_per_s * a.model().params().codec_bandwidth_fraction);
  double const z_bytes = 64.0 * mib, rest = x2 - z_bytes;
  double const d2h =
      z_bytes * (1 / (zvc * hw.pcie_d2h_bytes_per_s) + kernel) + rest / hw.pcie_d2h_bytes_per_s;
  double const h2d =
      z_bytes * (1 / (zvc * hw.pcie_h2d_bytes_per_s) + kernel) + rest / hw.pcie_h2d_bytes_per_s;
  double const before = a.op_start(2), after = a.compute_seconds() - before;
  double const expected = std::max(before, d2h) + std::max(after, h2d);
  stash::time_bound_options const swaps{std::nullopt, false, false, enc};
  double const bound = stash::iteration_time_lower_bound(a, budget, swaps);
  CHECK(bound >= expected * (1 - 1e-6));
  CHECK(bound <= expected * (1 + 1e-6));
  // Tighter than every byte at the best ratio of any encoding, looser than every byte raw.
  double const weak = stash::iteration_time_lower_bound(a, budget, {32.0, false, false});
  double const raw  = stash::iteration_time_lower_bound(a, budget, {std::nullopt, false, false});
  CHECK(weak < expected * 0.5);
  CHECK(raw > expected * 1.2);
  // With re-runs and wrap entries too (z may be re-run, p may wrap): still above the weak one.
  stash::time_bound_options const all{std::nullopt, true, true, enc};
  double const any      = stash::iteration_time_lower_bound(a, budget, all);
  double const any_weak = stash::iteration_time_lower_bound(a, budget, {32.0, true, true});
  CHECK(any <= bound);
  CHECK(any > any_weak * 1.5);
  MESSAGE("bound " << bound << " s, expected " << expected << " s, weak " << weak << " s, raw "
                   << raw << " s; with re-runs and wraps " << any << " s (weak " << any_weak
                   << " s)");
}

TEST_CASE("time bound with per-storage encodings: a wrap entry's offload before its first access")
{
  // p (a parameter, 64 MiB) is read only by op3: a wrap entry can keep it on the host until op3
  // and away at op1, over the budget by p's bytes. An offload issued at op0, before its prefetch,
  // would copy bytes not yet on the device: the validator refuses it (it once accepted it, and
  // the bound allows for it still). Issued at op3, its first and last access, it is valid and
  // the bound stays below it; on a link whose D2H runs at a third of H2D's rate, the bound
  // charges the H2D after op1's peak.
  stash::trace t;
  auto const p  = t.add_alloc(64 * mib, storage_kind::param, "p");
  auto const x  = t.add_alloc(64 * mib, storage_kind::input, "x");
  auto const y  = t.add_alloc(64 * mib, storage_kind::input, "y");
  auto const av = t.add_alloc(64 * mib, storage_kind::act, "a");
  t.add_op("aten::mm", {x, y}, {av});  // ~31 ms on pcie3_x16's device
  t.add_free(x);
  t.add_free(y);
  auto const b = t.add_alloc(128 * mib, storage_kind::act, "b");
  auto const z = t.add_alloc(kib, storage_kind::act, "z");
  t.add_op("aten::relu", {av}, {b, z});  // z: a ReLU output in a gap, so a second link class
  t.add_free(b);
  auto const c = t.add_alloc(kib, storage_kind::act, "c");
  t.add_op("aten::add.Tensor", {c}, {c});
  auto const o = t.add_alloc(kib, storage_kind::act, "o");
  t.add_op("aten::add.Tensor", {p, av, z}, {o});
  auto hw = stash::hardware_preset("pcie3_x16");
  hw.pcie_d2h_bytes_per_s /= 3;
  stash::trace_analysis const a(t, stash::cost_model(hw));
  auto const budget = a.memory_steps()[1].live_peak - 64 * mib;
  REQUIRE(budget >= stash::memory_lower_bound_bytes(a, true));
  double const d2h = 64.0 * mib / hw.pcie_d2h_bytes_per_s;
  double const h2d = 64.0 * mib / hw.pcie_h2d_bytes_per_s;
  REQUIRE(a.op_start(1) > d2h);  // the D2H fits inside op0
  auto const early = stash::make_schedule(
      a, "early offload", budget,
      {stash::swap_entry{p, 3, 3, 0, 2, 64 * mib, stash::swap_encoding::raw, true}});
  CHECK_THROWS_AS(stash::validate_schedule(a, early), stash::schedule_error);
  auto const s = stash::make_schedule(
      a, "offload at its access", budget,
      {stash::swap_entry{p, 3, 3, 3, 2, 64 * mib, stash::swap_encoding::raw, true}});
  stash::validate_schedule(a, s);
  auto const r = stash::simulate(a, s, {false});
  REQUIRE(r.fits);
  stash::time_bound_options const options{std::nullopt, false, true, stash::encoding_options{}};
  double const bound = stash::iteration_time_lower_bound(a, budget, options);
  CHECK(r.iteration_s >= bound);
  // The raw bound (one ratio for every storage) sums the windows, so it holds here too.
  CHECK(r.iteration_s >= stash::iteration_time_lower_bound(a, budget, {std::nullopt, false, true}));
  CHECK(bound >= (a.op_start(1) + h2d) * (1 - 1e-9));  // the H2D was
  MESSAGE("simulated " << r.iteration_s << " s, bound " << bound << " s; D2H " << d2h << " s, H2D "
                       << h2d << " s, compute before op1 " << a.op_start(1) << " s");
}

}  // namespace STASH_UNITY_ID
