// A trace_analysis for tests whose verdict does not depend on the cost model (validation, planned
// curves): one fixed preset, named here once.
#pragma once

#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace.hpp>

namespace stash::test {

/// The analysis of `t` on the pcie3_x16 preset with default cost parameters.
[[nodiscard]] inline trace_analysis analysis_of(trace const& t)
{
  return trace_analysis(t, cost_model(hardware_preset("pcie3_x16")));
}

}  // namespace stash::test
