// A hand-sized trace whose re-run reads split a gap (issue 22, sim/schedule.hpp re-run uses),
// shared by the sim and swap tests.
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace stash::test {

// Issue 22, one entry per gap: a re-run's read is a use that splits its storage's gap. x (input,
// 1000 B) is read by op0 and op5; a (4000 B), dropped after op1, is re-run before op3 by
// re-running op0, which reads x. h (6000 B) is op4's result, freed right after it.
//   op0 relu x -> a 5 us   op2 bwd b -> g 3 us       op4 bwd g -> h 7 us
//   op1 mul a -> b 6 us    op3 bwd a,g -> g 6 us     op5 bwd x,g -> g 3 us
// x swapped over (0, 3) comes back for the re-run; it may leave again at once, over the sub-gap
// (3, 5), keeping its host copy (redrop): op4 then needs g + h = 7000 B, not 8000.
inline std::string const rerun_read_trace_text = R"(# stash-trace v1 model=rerun_read dtype=float32
t 0 1000 input x
p forward
t 1 4000 act a
o aten::relu 0 1
t 2 2000 act b
o aten::mul.Tensor 1 2
p backward
t 3 1000 temp g
o my::bwd 2 3
f 2
o my::bwd 1,3 3
f 1
t 4 6000 temp h
o my::bwd 3 4
f 4
o my::bwd 0,3 3
f 3
)";

// The schedule stash::allocator executes for that program (recompute_replay_test.cpp, and on
// CUDA recompute_gpu_test.cu): x leaves after op0 and comes back for the re-run at op3 (a re-run
// use only), then leaves again (early: right after the re-runs; `late`: when op 3 + late starts),
// as a redrop of its host copy or with a copy of its own, and comes back for op5.
struct rerun_read_policy {
  bool redrop        = true;
  std::uint64_t late = 0;
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "rerun_read"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    auto const& st = a.trace().storages();
    auto id        = [&](std::string_view label) {
      return stash::storage_id(
                 std::find_if(st.begin(), st.end(), [&](auto const& r) { return r.label == label; }) -
                 st.begin());
    };
    auto const x = id("x"), act = id("a");
    stash::swap_entry second{x, 3, 5, 3 + late, 5, st[x].bytes};
    second.redrop = redrop;
    return stash::make_schedule(a, std::string(name()), budget,
                                {stash::swap_entry{x, 0, 3, 1, 3, st[x].bytes}, second},
                                {stash::recompute_entry{act, 1, 3, 3, st[act].bytes}});
  }
};

}  // namespace stash::test
