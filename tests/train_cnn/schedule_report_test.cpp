// The schedule line both train_cnn builds print (GPU review 2026-11-26b, W2): the fit is decided
// on the schedule's peak in the order the run's budget counts bytes, with the planner's curve
// beside it, so the CUDA build no longer says "DOES NOT FIT" for a schedule its run holds.
#include <stash_tools/train_cnn/schedule_report.hpp>

#include "support/analysis.hpp"
#include "support/tiny_trace.hpp"

#include <stash/core/units.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace STASH_UNITY_ID {

TEST_CASE("train_cnn schedule line: the fit is decided on the run-order peak, the curve beside it")
{
  auto const t = stash::parse_trace(stash::test::tiny_trace_text, "tiny");
  // a (4000 B) leaves after op1 and comes back for op3.
  auto s        = stash::make_schedule(stash::test::analysis_of(t), "hand", 9000,
                                       {stash::swap_entry{1, 1, 3, 2, 3, 4000}});
  auto const at = train_cnn::run_order_peak(t, s);
  CHECK(at == 8000);  // x + b + c while op2 runs: a left when op2 started
  // A planner's curve over the budget (search_swap's timed one holds an offload's bytes until its
  // copy would have crossed the link): the CUDA build's line used to say "DOES NOT FIT" on it
  // (schedule::fits()) for a schedule whose run holds the budget.
  s.device_peak = 10000;
  CHECK_FALSE(s.fits());
  CHECK(train_cnn::run_order_fits(s, at) == true);
  CHECK(train_cnn::schedule_line(s, at) ==
        "  schedule (hand): 1 tensors leave the device; peak " + stash::format_bytes(8000) +
            " in this run's order (planner's curve " + stash::format_bytes(s.device_peak) +
            "), no-offload peak " + stash::format_bytes(12000) + ", fits the budget\n");
  s.budget = 7999;
  CHECK(train_cnn::run_order_fits(s, at) == false);
  CHECK(train_cnn::schedule_line(s, at).ends_with(", DOES NOT FIT the budget\n"));
  s.budget = std::numeric_limits<std::uint64_t>::max();
  CHECK_FALSE(train_cnn::run_order_fits(s, at).has_value());
  CHECK(train_cnn::schedule_line(s, at).ends_with(", no budget\n"));
}

}  // namespace STASH_UNITY_ID
