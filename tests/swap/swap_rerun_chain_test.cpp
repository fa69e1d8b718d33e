// search's chained swap re-runs (swap/detail/swap_rerun_chain.hpp) on a hand trace shaped like a
// dropout: D = S x M, with S cheap to re-run (itself re-run for its own backward use) and M a
// random mask that can only cross the link. A plan that swaps D (as large as M) becomes D's
// re-run at its backward use, S's re-run moved there and M's swap cut to end there; the link
// carries one copy less and the simulated iteration is shorter.
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/swap/detail/swap_rerun_chain.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/link_bound_model.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// S = relu(x), M = a dropout mask (bernoulli_: rng, never re-run), D = S x M; five padding ops
// and H make the forward's peak; the backward reads D, then M, then S.
std::string const dropout = R"(# stash-trace v1 model=dropout dtype=float32
t 0 8000 input x
t 1 8 temp z
p forward
t 2 8000 act S
o aten::relu 0 2
t 3 8000 act M
o aten::empty_like 2 3
o aten::bernoulli_.float 3 3
t 4 8000 act D
o aten::mul.Tensor 2,3 4
o aten::mm 0 1
o aten::mm 0 1
o aten::mm 0 1
o aten::mm 0 1
o aten::mm 0 1
t 5 30000 act H
o aten::mm 0 5
p backward
t 6 1000 temp g
o my::bwd 5 6
f 5
o my::bwd 0,6 1
o my::bwd 0,6 1
o my::bwd 0,6 1
o my::bwd 0,6 1
o my::bwd 0,6 1
o my::bwd 4,6 6
f 4
o my::bwd 3,6 6
f 3
o my::bwd 2,6 6
f 2
o my::bwd 0,6 6
f 6
)";

double time_of(stash::trace_analysis const& a, std::uint64_t budget,
               std::vector<stash::swap_entry> swaps, std::vector<stash::recompute_entry> rcs)
{
  auto const s = stash::make_schedule(a, "hand", budget, std::move(swaps), std::move(rcs));
  stash::validate_schedule(a, s);
  auto const r = stash::simulate(a, s);
  return r.fits ? r.iteration_s : 1e9;
}

}  // namespace

TEST_CASE("a swapped dropout product becomes its re-run, its reads' re-run moved and swap cut")
{
  auto const t = stash::parse_trace(dropout, "dropout");
  stash::trace_analysis const a(t, stash::test::link_bound_model(1e10));
  auto const budget = a.peak_live_bytes() - 16000;
  // Ops: 0 relu (S), 1 empty_like, 2 bernoulli_ (M), 3 mul (D), 4-8 padding, 9 H, 10 bwd(H),
  // 11-15 padding, 16 reads D, 17 reads M, 18 reads S.
  std::uint64_t const d_use = 16, m_use = 17, s_use = 18;
  auto const bytes = t.storages()[2].bytes;
  // M and D cross the link; S is re-run for its own use.
  std::vector<stash::swap_entry> const swaps{{3, 3, m_use, 4, 13, bytes},
                                             {4, 3, d_use, 4, 13, bytes}};
  std::vector<stash::recompute_entry> const rcs{{2, 3, s_use, s_use, bytes}};
  double const start = time_of(a, budget, swaps, rcs);
  REQUIRE(start < 1e9);

  auto const p = stash::detail::chained_swap_reruns(a, budget, swaps, rcs, {});
  REQUIRE(p.has_value());
  REQUIRE(p->swaps.size() == 1);
  CHECK(p->swaps[0].id == 3);
  CHECK(p->swaps[0].next_use == d_use);  // M back for D's re-run
  CHECK(p->swaps[0].prefetch_at <= 13);
  REQUIRE(p->recomputes.size() == 2);
  CHECK(p->recomputes[0].id == 2);  // S's re-run moved to D's use, before D's
  CHECK(p->recomputes[0].at == d_use);
  CHECK(p->recomputes[0].next_use == s_use);
  CHECK(p->recomputes[1].id == 4);
  CHECK(p->recomputes[1].at == d_use);
  auto const s = stash::make_schedule(a, "chain", budget, p->swaps, p->recomputes);
  CHECK_NOTHROW(stash::validate_schedule(a, s));
  CHECK(s.device_peak <= budget);
  double const chained = time_of(a, budget, p->swaps, p->recomputes);
  CHECK(chained < start);  // one 8 kB copy each way less, for a 2.4 us mul

  // S's re-run cannot move (no nesting allowed): nothing applies.
  stash::detail::swap_rerun_chain_limits const flat{0, 64};
  CHECK_FALSE(stash::detail::chained_swap_reruns(a, budget, swaps, rcs, flat).has_value());
  // S re-run before D's use (its gap would be split by D's re-run): nothing applies.
  std::vector<stash::recompute_entry> const early{{2, 3, s_use, 12, bytes}};
  CHECK_FALSE(stash::detail::chained_swap_reruns(a, budget, swaps, early, {}).has_value());
  // S kept, M swapped: D's re-run needs only M's cut.
  auto const kept = stash::detail::chained_swap_reruns(a, budget, swaps, {}, {});
  REQUIRE(kept.has_value());
  REQUIRE(kept->recomputes.size() == 1);
  CHECK(kept->recomputes[0].id == 4);
  CHECK(kept->swaps[0].next_use == d_use);
}

}  // namespace STASH_UNITY_ID
