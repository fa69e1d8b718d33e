// A five-storage trace small enough to compute its schedules and timings by hand, shared by the
// swap and sim tests. a (id 1, 4000 B) is written by op0 and read by op1 and op3; b (id 2) is read
// at op2 and written at op3.
#pragma once

#include <string>

namespace stash::test {

inline std::string const tiny_trace_text = R"(# stash-trace v1 model=tiny dtype=float32
p forward
t 0 1000 input x
t 1 4000 act a
o aten::relu 0 1
t 2 1000 act b
o aten::relu 1 2
t 3 6000 temp c
o aten::relu 2 3
f 3
p backward
t 4 1000 temp d
o aten::relu_backward 2,1 4
f 1
f 2
f 4
)";

}  // namespace stash::test
