// The keep / swap / recompute planner `search` and its baselines `checkpoint` and `dtr`: on hand
// traces with known answers, and a sample of the sweep over every recorded trace, both presets,
// budgets from the peak down (tests/sweep has all of it): `search` fits wherever any registered
// policy fits and is never slower than any (0.5% slack).
#include <stash/sim/hardware.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/swap/checkpoint.hpp>
#include <stash/swap/dtr.hpp>
#include <stash/swap/joint_search.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/approx.hpp"
#include "support/data.hpp"
#include "support/dominance.hpp"
#include "support/link_bound_model.hpp"
#include "support/rerun_read_trace.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// A chain x -> a -> b -> c in forward; backward reads c, then b, then a (like a 3-layer MLP).
// 1 GB/s device memory, memory-bound ops: 1 byte read or written = 1 ns.
std::string const mlp = R"(# stash-trace v1 model=mlp dtype=float32
t 0 1000 input x
p forward
t 1 4000 act a
o aten::relu 0 1
t 2 4000 act b
o aten::relu 1 2
t 3 4000 act c
o aten::relu 2 3
p backward
t 4 1000 temp g
o my::bwd 3 4
f 3
o my::bwd 2,4 4
f 2
o my::bwd 1,4 4
f 1
f 4
)";

// A parameter w read by the first forward op and by the backward, idle in between, while the
// activations leave no gap: at 12000 B (peak 17000) only w can make room.
std::string const idle_param = R"(# stash-trace v1 model=idle_param dtype=float32
t 0 8000 param w
t 1 1000 input x
p forward
t 2 1000 act a
o aten::mm 1,0 2
t 3 6000 act big
o aten::relu 2 3
t 4 1000 act c
o aten::relu 3 4
f 3
p backward
t 5 1000 temp g
o my::bwd 4,0 5
f 4
f 2
f 5
)";

stash::cost_model round_model() { return stash::test::link_bound_model(1e9); }

}  // namespace

TEST_CASE("dtr evicts the stalest cheap activation; search matches it where swapping is slower")
{
  auto const t = stash::parse_trace(mlp, "mlp");
  stash::trace_analysis const a(t, round_model());
  // Peak 14000 (x + a + b + c + g at op3). At 10000 one of a, b must go over op2..op3.
  REQUIRE(a.peak_live_bytes() == 14000);
  auto const d = stash::dtr{}.plan(a, 10000);
  CHECK_NOTHROW(stash::validate_schedule(a, d));
  REQUIRE(d.recomputes.size() == 1);
  CHECK(d.recomputes[0].id == 1);  // a: last used at op1, staler than b at the overflow
  CHECK(d.fits());
  auto const rd = stash::simulate(a, d);
  REQUIRE(rd.fits);
  CHECK(rd.recompute_s == stash::test::approx_s(5e-6));  // relu x -> a: 1000 + 4000 B
  auto const s = stash::joint_search{}.plan(a, 10000);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  auto const rs = stash::simulate(a, s);
  REQUIRE(rs.fits);
  CHECK(rs.iteration_s <= rd.iteration_s);
  CHECK(s.policy == "search");
}

TEST_CASE("checkpoint keeps segment inputs and recomputes inside segments, in one batch")
{
  auto const t = stash::parse_trace(mlp, "mlp");
  stash::trace_analysis const a(t, round_model());
  // One segment: a and b live inside it (c is read by the backward only, so it is dropped too).
  auto const one = stash::checkpoint{.segments = 1}.plan(a, 14000);
  CHECK_NOTHROW(stash::validate_schedule(a, one));
  REQUIRE(one.recomputes.size() == 3);
  for (auto const& e : one.recomputes) { CHECK(e.at == 3); }  // the first backward op
  CHECK(one.recomputes[0].id == 1);
  CHECK(one.recomputes[1].id == 2);
  CHECK(one.recomputes[2].id == 3);
  // Three segments: a and b are read by the next segment (segment inputs, kept); c, inside the
  // last one, is dropped and recomputed before the backward reads it.
  auto const three = stash::checkpoint{.segments = 3}.plan(a, 14000);
  REQUIRE(three.recomputes.size() == 1);
  CHECK(three.recomputes[0].id == 3);
}

TEST_CASE("search with also_any_kind off plans no parameter (a loop whose persistent state stays)")
{
  auto const t = stash::parse_trace(idle_param, "idle_param");
  stash::trace_analysis const a(t, round_model());
  REQUIRE(a.peak_live_bytes() == 17000);
  auto const any = stash::joint_search{}.plan(a, 12000);
  CHECK(any.fits());
  bool moves_w = false;
  for (auto const& e : any.entries) { moves_w = moves_w || e.id == 0; }
  CHECK(moves_w);
  stash::joint_search activations_only;
  activations_only.also_any_kind = false;
  auto const acts                = activations_only.plan(a, 12000);
  for (auto const& e : acts.entries) {
    CHECK(t.storages()[e.id].kind != stash::storage_kind::param);
  }
  CHECK_FALSE(acts.fits());
}

TEST_CASE("the registry knows search, checkpoint and dtr")
{
  for (auto const* name : {"search", "checkpoint", "dtr", "search_swap"}) {
    CHECK(stash::make_swap_policy(name).name() == name);
  }
}

// The sweep over every recorded trace is tests/sweep (stash_sweep_tests, built plain: it checks
// results, and took ~200 CPU s of the ASan suite); here a sample of its points, through the same
// check, so that ASan + UBSan see that code: three traces, one preset each, at a budget where
// search keeps or swaps only and at two where it re-runs layers (~0.5 CPU s plain).
TEST_CASE("search's dominance sweep, a sample: fits wherever any policy fits, never slower (0.5%)")
{
  struct point {
    char const* trace;
    char const* preset;
    double fraction;
  };
  int compared = 0, recomputing = 0;
  for (auto const& p :
       {point{"resnet18_b32", "pcie4_x16", 0.9}, point{"transformer_encoder_b8", "h100_sxm", 0.7},
        point{"squeezenet1_1_b64", "pcie4_x16", 0.5}}) {
    CAPTURE(p.trace);
    CAPTURE(p.preset);
    CAPTURE(p.fraction);
    auto const t =
        stash::read_trace(stash::test::data_path(std::string("traces/") + p.trace + ".trace"));
    stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset(p.preset)));
    auto const budget =
        static_cast<std::uint64_t>(p.fraction * static_cast<double>(a.peak_live_bytes()));
    auto const r = stash::test::check_search_point(a, budget);
    compared += r.compared ? 1 : 0;
    recomputing += r.recomputes ? 1 : 0;
  }
  CHECK(compared == 3);
  CHECK(recomputing >= 1);  // not only the swap seed
}

TEST_CASE("lossy only by consent: search weighs fp16 for activations only when opted in")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/transformer_encoder_b8.trace"));
  stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset("pcie4_x16")));
  auto const budget   = a.peak_live_bytes() / 2;
  auto const lossless = stash::joint_search{.encodings = stash::encoding_options{}}.plan(a, budget);
  auto const lossy =
      stash::joint_search{
          .encodings = stash::encoding_options{.lossy_activations = stash::swap_encoding::fp16}}
          .plan(a, budget);
  auto const is_lossy = [](stash::swap_encoding e) {
    return e == stash::swap_encoding::fp16 || e == stash::swap_encoding::bf16 ||
           e == stash::swap_encoding::fp8_e4m3;
  };
  for (auto const& e : lossless.entries) { CHECK_FALSE(is_lossy(e.encoding)); }
  std::size_t halves = 0;
  for (auto const& e : lossy.entries) {
    if (is_lossy(e.encoding)) {
      CHECK(a.trace().storages()[e.id].kind == stash::storage_kind::act);
      ++halves;
    }
  }
  CHECK(halves > 0);
  auto const r_lossless = stash::simulate(a, lossless, {false});
  auto const r_lossy    = stash::simulate(a, lossy, {false});
  REQUIRE(r_lossless.fits);
  REQUIRE(r_lossy.fits);
  // Half the bytes over the link: the transformer's activations are not ReLU-sparse.
  CHECK(r_lossy.iteration_s < r_lossless.iteration_s);
  MESSAGE("transformer at 50% on pcie4_x16 (predicted): "
          << r_lossless.iteration_s * 1e3 << " ms lossless, " << r_lossy.iteration_s * 1e3
          << " ms with fp16 activations");
}

TEST_CASE("search with encodings is never slower than search without them")
{
  // alexnet at 50% on h100_sxm: the search with encodings alone took another path and ended
  // 0.59 ms slower than without (predicted, 30.11 vs 29.53 ms). joint_search with encodings
  // also runs the search without them (sharing its constructions) and keeps the faster plan.
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset("h100_sxm")));
  auto const budget = a.peak_live_bytes() / 2;
  stash::joint_search_stats raw_stats, enc_stats;
  auto const raw = stash::joint_search{}.plan(a, budget, raw_stats);
  auto const encoded =
      stash::joint_search{.encodings = stash::encoding_options{}}.plan(a, budget, enc_stats);
  auto const r_raw = stash::simulate(a, raw, {false});
  auto const r_enc = stash::simulate(a, encoded, {false});
  REQUIRE(r_raw.fits);
  REQUIRE(r_enc.fits);
  CHECK_NOTHROW(stash::validate_schedule(a, encoded));
  CHECK(r_enc.iteration_s <= r_raw.iteration_s);
  CHECK(enc_stats.simulations > raw_stats.simulations);  // both searches counted
  MESSAGE("alexnet at 50% on h100_sxm (predicted): "
          << r_raw.iteration_s * 1e3 << " ms raw, " << r_enc.iteration_s * 1e3
          << " ms with encodings (" << encoded.note << ")");
}

TEST_CASE("search's polish: the prefetch advances do not take the place of a faster path")
{
  // alexnet at 851,333,422 B (68.3% of the peak, 1.05x the swap bound) on h100_sxm: with the
  // prefetch advances inside the polish's rounds, one advance right after the chained swap
  // re-runs was kept (19.49 ms), and the moves from it ended there; without the advances the
  // moves from those re-runs reach 18.25 ms (predicted). Where the first path kept an advance and
  // its moves stopped before their simulations ran out, the polish runs its rounds again without
  // the advances from the same plan and keeps the faster (the advances then follow from it).
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset("h100_sxm")));
  std::uint64_t const budget = 851333422;
  auto const s               = stash::joint_search{}.plan(a, budget);
  auto const r               = stash::simulate(a, s, {false});
  REQUIRE(r.fits);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  CHECK(r.iteration_s * 1e3 < 18.26);
  MESSAGE("alexnet at 68.3% on h100_sxm (predicted): " << r.iteration_s * 1e3 << " ms (" << s.note
                                                       << ")");
}

TEST_CASE("search's redrop repair: a storage a re-run reads leaves again right after it")
{
  auto const t = stash::parse_trace(stash::test::rerun_read_trace_text, "rerun_read");
  stash::trace_analysis const a(t, round_model());
  auto const pinned =
      stash::make_schedule(a, "hand", 7000, {}, {stash::recompute_entry{1, 1, 3, 3, 4000}});
  CHECK(pinned.device_peak == 8000);
  auto const s = stash::detail::with_redrops(a, pinned, false);
  REQUIRE(s.entries.size() == 1);
  // x leaves right after the re-run (offload_at 3: before op3's step) and comes back after op4,
  // the last op over the budget.
  CHECK(s.entries[0] == stash::swap_entry{0, 3, 5, 3, 5, 1000});
  CHECK(s.device_peak == 7000);
  CHECK(stash::splits_gaps(a, s));
  auto const r = stash::simulate(a, s);
  CHECK(r.fits);
  // Only activations and temporaries with activations_only: x is an input, nothing to do.
  CHECK(stash::detail::with_redrops(a, pinned, true).entries.empty());
  // A schedule that fits is left alone.
  auto roomy      = pinned;
  roomy.budget    = 8000;
  auto const same = stash::detail::with_redrops(a, roomy, false);
  CHECK(same.entries.empty());
  CHECK(same.recomputes == roomy.recomputes);
  // search plans it by default (stash::allocator runs it); joint_search::redrop off does not.
  stash::joint_search no_redrop;
  no_redrop.redrop = false;
  CHECK_FALSE(stash::splits_gaps(a, no_redrop.plan(a, 7000)));
  auto const planned = stash::joint_search{}.plan(a, 7000);
  CHECK(planned.fits());
  CHECK_NOTHROW(stash::validate_schedule(a, planned));
}

TEST_CASE("search's redrop repair: after a swap entry ending at the re-run, a redrop of its copy")
{
  // x already swapped over (0, 3) for the re-run: its host copy still holds its value, so the
  // second departure right after the re-run sends x back to that copy (a redrop, no second
  // copy), the cheaper of the two options that cut the excess equally.
  auto const t = stash::parse_trace(stash::test::rerun_read_trace_text, "rerun_read");
  stash::trace_analysis const a(t, round_model());
  auto const swapped =
      stash::make_schedule(a, "hand", 7000, {stash::swap_entry{0, 0, 3, 1, 3, 1000}},
                           {stash::recompute_entry{1, 1, 3, 3, 4000}});
  CHECK(swapped.device_peak == 8000);
  auto const s = stash::detail::with_redrops(a, swapped, false);
  REQUIRE(s.entries.size() == 2);
  auto expected   = stash::swap_entry{0, 3, 5, 3, 5, 1000};
  expected.redrop = true;
  CHECK(s.entries[0] == swapped.entries[0]);
  CHECK(s.entries[1] == expected);
  CHECK(s.device_peak == 7000);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  auto const r = stash::simulate(a, s);
  CHECK(r.fits);
  CHECK(r.d2h_bytes == 1000);  // one copy of x, kept for the redrop
}

TEST_CASE(
    "search's redrop repair reads no encodings: the raw repair, encoded, is the encoded one's")
{
  // joint_search with encodings repairs a plan once for both of its searches (seed_memo):
  // encode_redropped(with_redrops(s)) must be with_redrops(with_encodings(s)). x as an activation
  // takes fp16 under the lossy option; its redrop keeps the encoding of the copy it redrops to.
  auto text     = stash::test::rerun_read_trace_text;
  auto const at = text.find("input x");
  REQUIRE(at != std::string::npos);
  text.replace(at, 7, "act x");
  auto const t = stash::parse_trace(text, "rerun_read_act");
  stash::trace_analysis const a(t, round_model());
  stash::encoding_options const fp16{.lossy_activations = stash::swap_encoding::fp16};
  auto const pinned =
      stash::make_schedule(a, "hand", 7000, {}, {stash::recompute_entry{1, 1, 3, 3, 4000}});
  auto const swapped =
      stash::make_schedule(a, "hand", 7000, {stash::swap_entry{0, 0, 3, 1, 3, 1000}},
                           {stash::recompute_entry{1, 1, 3, 3, 4000}});
  for (auto const& s : {pinned, swapped}) {
    auto const direct = stash::detail::with_redrops(a, stash::with_encodings(a, s, fp16), false);
    auto const shared = stash::detail::encode_redropped(a, stash::detail::with_redrops(a, s, false),
                                                        s.entries.size(), fp16);
    REQUIRE(direct.entries.size() == s.entries.size() + 1);
    CHECK(shared.entries == direct.entries);
    CHECK(shared.recomputes == direct.recomputes);
    CHECK(shared.device_peak == direct.device_peak);
  }
  auto const redropped =
      stash::detail::with_redrops(a, stash::with_encodings(a, swapped, fp16), false);
  CHECK(redropped.entries[0].encoding == stash::swap_encoding::fp16);
  CHECK(redropped.entries[1].redrop);
  CHECK(redropped.entries[1].encoding == stash::swap_encoding::fp16);
}

namespace {

// R (1000 B) is written by op0 from X (8000 B, an input kept to the end) and read by op1 and
// op5; S (1000 B) is written by op1 from R and read by op3. Both are dropped after op1 and
// re-run before op3, R first (S's re-run reads it): R is rebuilt at op3, where its next access
// is op5, and op4 (h, 3000 B) is 1000 B over an 11100-byte budget.
//   op0 relu X -> R   op2 relu X -> T       op4 bwd g -> h (freed after it)
//   op1 mul R -> S    op3 bwd S,T -> g      op5 bwd R,g -> g
std::string const rebuilt_read_text = R"(# stash-trace v1 model=rebuilt_read dtype=float32
t 0 8000 input X
p forward
t 1 1000 act R
o aten::relu 0 1
t 2 1000 act S
o aten::mul.Tensor 1 2
t 3 500 act T
o aten::relu 0 3
p backward
t 4 100 temp g
o my::bwd 2,3 4
f 2
f 3
t 5 3000 temp h
o my::bwd 4 5
f 5
o my::bwd 1,4 4
f 1
f 4
)";

}  // namespace

TEST_CASE("search's redrop repair: a storage the batch rebuilt leaves with a copy issued after it")
{
  // R, rebuilt by the re-runs before op3, may leave again after them: its recompute entry is cut
  // to end at op3 and a swap entry takes it over (3, 5). Its copy cannot start before the batch
  // that rebuilds it (offload_at 4, the validator's rule), and it beats a second re-run of op0
  // (9 us of op0 against 2 us over the link), which cuts the excess as much.
  auto const t = stash::parse_trace(rebuilt_read_text, "rebuilt_read");
  stash::trace_analysis const a(t, round_model());
  auto const pinned = stash::make_schedule(
      a, "hand", 11100, {},
      {stash::recompute_entry{1, 1, 5, 3, 1000}, stash::recompute_entry{2, 1, 3, 3, 1000}});
  REQUIRE_NOTHROW(stash::validate_schedule(a, pinned));
  CHECK(pinned.device_peak == 12100);
  auto const s = stash::detail::with_redrops(a, pinned, false);
  CHECK(s.entries == std::vector<stash::swap_entry>{stash::swap_entry{1, 3, 5, 4, 5, 1000}});
  REQUIRE(s.recomputes.size() == 2);
  CHECK(s.recomputes[0] == stash::recompute_entry{1, 1, 3, 3, 1000});
  CHECK(s.recomputes[1] == pinned.recomputes[1]);
  CHECK(s.device_peak == 11100);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
}

TEST_CASE("search offers a schedule once per runner family: a repeat is not simulated again")
{
  auto const t = stash::parse_trace(mlp, "mlp");
  stash::trace_analysis const a(t, round_model());
  auto const d = stash::dtr{}.plan(a, 10000);
  REQUIRE(d.fits());
  stash::detail::joint_incumbent inc;
  stash::joint_search_stats stats;
  CHECK(inc.offer(a, d, "greedy:a", std::nullopt, stats));
  CHECK(stats.simulations == 1);
  CHECK(inc.runners[1].has_value());
  // The same entries from another construction of the same family: nothing new to learn.
  CHECK_FALSE(inc.offer(a, d, "greedy+checkpoint32:b", std::nullopt, stats));
  CHECK(stats.simulations == 1);
  CHECK(inc.repeats == 1);
  // From another family it is simulated: it fills that family's runner slot (a local search
  // starts there).
  CHECK_FALSE(inc.runners[0].has_value());
  CHECK_FALSE(inc.offer(a, d, "seed:dtr", std::nullopt, stats));
  CHECK(stats.simulations == 2);
  CHECK(inc.runners[0].has_value());
  // A schedule that differs in one field is offered.
  auto other = d;
  other.recomputes.clear();
  other.device_peak = a.peak_live_bytes();
  CHECK_FALSE(inc.offer(a, other, "greedy:c", std::nullopt, stats));
  CHECK(inc.repeats == 1);
  CHECK(inc.best->note == "greedy:a");
  // What the chunked seeding screens with before preparing a construction: a fingerprint offered
  // before (per family) is a repeat now and after, and one not offered is not.
  CHECK(inc.offered(inc.fingerprint(d, 1)));
  CHECK(inc.offered(inc.fingerprint(other, 1)));
  CHECK_FALSE(inc.offered(inc.fingerprint(other, 2)));
  CHECK(inc.repeated(inc.fingerprint(d, 0)));
  CHECK(inc.repeats == 2);
  // Without a memo no redrop repair is looked up, so none has a key; with one, a plan over its
  // budget has its entries' key (not yet kept), a plan within it none.
  CHECK_FALSE(inc.repair_key(other).has_value());
  stash::detail::seed_memo memo;
  inc.memo   = &memo;
  inc.redrop = true;
  REQUIRE(other.device_peak > other.budget);
  auto const key = inc.repair_key(other);
  REQUIRE(key.has_value());
  CHECK(*key == inc.fingerprint(other, 0, false));
  CHECK_FALSE(inc.repair_kept(*key));
  CHECK_FALSE(inc.repair_key(d).has_value());
}

TEST_CASE("search plans the same schedule on any number of threads")
{
  // joint_search::threads spreads the greedy's constructions and the local searches over
  // worker threads and consumes their results in the order of one thread: the same plan, the
  // same simulations counted, the same winner. With encodings, both searches and their shared
  // constructions (detail::seed_memo) too.
  auto const t = stash::read_trace(stash::test::data_path("traces/resnet18_b32.trace"));
  stash::trace_analysis const a(t, stash::cost_model(stash::hardware_preset("pcie4_x16")));
  for (auto const share : {0.5, 0.33}) {
    auto const budget =
        static_cast<std::uint64_t>(static_cast<double>(a.peak_live_bytes()) * share);
    for (bool const encoded : {false, true}) {
      CAPTURE(share);
      CAPTURE(encoded);
      stash::joint_search one;
      if (encoded) { one.encodings = stash::encoding_options{}; }
      stash::joint_search_stats one_stats;
      auto const s1 = one.plan(a, budget, one_stats);
      for (unsigned const threads : {2U, 3U}) {
        CAPTURE(threads);
        auto many    = one;
        many.threads = threads;
        stash::joint_search_stats many_stats;
        auto const s = many.plan(a, budget, many_stats);
        CHECK(s.entries == s1.entries);
        CHECK(s.recomputes == s1.recomputes);
        CHECK(s.device_peak == s1.device_peak);
        CHECK(s.shared_reruns == s1.shared_reruns);
        CHECK(s.note == s1.note);
        CHECK(many_stats.simulations == one_stats.simulations);
        CHECK(many_stats.winner == one_stats.winner);
      }
    }
  }
}

// Two random traces (from a differential fuzz of search against mutants of its seeding: random
// forward ops over x, W and earlier activations, a backward that reads them in reverse,
// temporaries k and h for peaks, padding ops), timed on the hand-trace model at 10 GB/s of
// device memory. In the first, a4 = relu(x) and a5 = sigmoid(a4) are read again by the last two
// backward ops.
std::string const batch_rebuild = R"(# stash-trace v1 model=batch_rebuild dtype=float32
t 0 7000 input x
t 1 7000 param W
t 2 19000 param W
t 3 8 temp z
p forward
t 4 9000 act a4
o aten::relu 0 4
t 5 4000 act a5
o aten::sigmoid 4 5
t 6 9000 act a6
o aten::relu 0 6
t 7 6000 act a7
o aten::relu 5 7
p backward
t 8 1000 temp g
o my::bwd 0 8
o aten::mm 0,1 3
o aten::mm 0,1 3
o my::bwd 7,8 8
f 7
o my::bwd 6,8 8
f 6
o my::bwd 5,8 8
f 5
o my::bwd 4,8 8
f 4
f 8
f 3
)";

std::string const feed_back = R"(# stash-trace v1 model=feed_back dtype=float32
t 0 2000 input x
t 1 6000 param W
t 2 8 temp z
p forward
t 3 2000 act a3
o aten::mul.Tensor 0 3
t 4 10000 act a4
o aten::relu 3 4
t 5 5000 temp k5
o aten::mm 0,1 5
f 5
t 6 4000 act a6
o aten::mm 0,1 6
t 7 8000 act a7
o aten::add.Tensor 4,6 7
t 8 2000 act a8
o aten::sigmoid 7,6 8
t 9 5000 act a9
o aten::add.Tensor 0,7 9
p backward
t 10 1000 temp g
o my::bwd 0 10
o my::bwd 9,10 10
f 9
t 11 17000 temp h11
o my::bwd 10 11
f 11
o aten::mm 0,1 2
o my::bwd 8,10 10
f 8
o my::bwd 7,10 10
f 7
o aten::mm 0,1 2
o aten::mm 0,1 2
o my::bwd 6,10 10
f 6
o aten::mm 0,1 2
o aten::mm 0,1 2
o my::bwd 4,10 10
f 4
t 12 14000 temp h12
o my::bwd 10 12
f 12
o my::bwd 3,10 10
f 3
f 10
f 2
)";

// joint_search.hpp, repair(): a construction left over the budget is rebuilt with the re-runs
// that pin a storage banned and, when still over, also with those whose own batch is over the
// budget, both offered. At 85% of this trace's peak only that second rebuild leads to the fastest
// plan search finds: a4 and a5 re-run in one batch before op 9, where a5 is read (a4 is read at
// op 10) (15.60 us); without it
// (mutant seed.no_batch_repair) search keeps a plan that re-runs a6 and a4 apart (15.90 us).
TEST_CASE("search's repair offers the rebuild without the re-runs whose own batch is over")
{
  auto const t = stash::parse_trace(batch_rebuild, "batch_rebuild");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e10));
  REQUIRE(a.peak_live_bytes() == 62008);
  std::uint64_t const budget = 52706;  // 85%
  auto const s               = stash::joint_search{}.plan(a, budget);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  auto const r = stash::simulate(a, s);
  REQUIRE(r.fits);
  CHECK(r.iteration_s < 15.7e-6);
  CHECK(s.entries.empty());
  std::vector<stash::recompute_entry> const batch{{4, 1, 10, 9, 9000}, {5, 3, 9, 9, 4000}};
  CHECK(s.recomputes == batch);
}

// joint_search.hpp, construct(): feed_back (the lead construction built again with the gaps whose
// prefetch stalled the incumbent's simulation kept from swapping) runs once the constructions at
// the budget are offered, before those over it, so it reads the stalls of the incumbent they
// made. At 50% of this trace's peak search then plans 50.60 us; running it only after every
// construction (mutant seed.no_early_feed_back) ends at 53.20 us, with x swapped after op 3 too.
TEST_CASE("search feeds the constructions at the budget back before those over it")
{
  auto const t = stash::parse_trace(feed_back, "feed_back");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e10));
  REQUIRE(a.peak_live_bytes() == 52008);
  std::uint64_t const budget = 26004;  // 50%
  auto const s               = stash::joint_search{}.plan(a, budget);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  auto const r = stash::simulate(a, s);
  REQUIRE(r.fits);
  CHECK(r.iteration_s < 51e-6);
}

}  // namespace STASH_UNITY_ID
