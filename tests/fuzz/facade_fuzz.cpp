// libFuzzer target: stash::allocator against the reference model of tests/support/facade_model.hpp
// (issue 24 item 3). The input chooses the setup (persistent tensors, swap policy, device and
// host budgets), an iteration's body and the misuse and faults injected between its steps; any
// difference from the model aborts with the violations (libFuzzer keeps the input).
#include "../support/facade_model.hpp"
#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size)
{
  if (size > 4096) { return 0; }  // a run's cost grows with its body: keep each one short
  stash::test::facade_model::harness h(std::span<std::uint8_t const>(data, size));
  std::string const violations = h.run();
  if (!violations.empty()) {
    std::fputs(violations.c_str(), stderr);
    stash::fuzz::contract_violation("stash::allocator differs from the facade model");
  }
  return 0;
}
