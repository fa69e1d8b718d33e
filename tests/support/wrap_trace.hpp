// A hand-sized trace for wrap entries (sim/schedule.hpp), shared by the sim and swap tests.
#pragma once

#include <string>

namespace stash::test {

// w (id 0, param) is read at op0 and updated at op3; m (id 1, optstate) only at op3. Live
// bytes: op0 8000, op1 13000 (big), op2 8000, op3 7000; after op3 w + m = 6000.
inline std::string const wrap_trace_text = R"(# stash-trace v1 model=wrap dtype=float32
t 0 4000 param w
t 1 2000 optstate m
p forward
t 2 1000 input x
t 3 1000 act y
o aten::mm 0,2 3
f 2
t 4 6000 temp big
o aten::relu 3 4
f 4
p backward
t 5 1000 grad g
o aten::mm 3 5
f 3
p optimizer
o aten::add_ 5,1,0 0,1
f 5
)";

}  // namespace stash::test
