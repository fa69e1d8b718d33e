// A hand-sized trace for recompute chains, shared by the sim and swap tests (issue 22).
#pragma once

#include <string>

namespace stash::test {

// x (input) is read by op0; a (4000 B) is written by op0 (relu x) and read by op1 and op4, so a
// dropped a is re-run from x, and b from a: a chain.
//   op0 relu x -> a   op1 mul a -> b   op2 sum b -> c   op3 bwd c -> g   op4 bwd a,b,g -> g
inline std::string const chain_trace_text = R"(# stash-trace v1 model=chain dtype=float32
t 0 1000 input x
p forward
t 1 4000 act a
o aten::relu 0 1
t 2 2000 act b
o aten::mul.Tensor 1 2
t 3 1000 act c
o aten::sum.dim_IntList 2 3
p backward
t 4 1000 temp g
o my::bwd 3 4
f 3
o my::bwd 1,2,4 4
f 1
f 2
f 4
)";

}  // namespace stash::test
