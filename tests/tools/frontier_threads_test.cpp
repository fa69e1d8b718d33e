// stash-plan --frontier on several threads (issue 24, item 4): the same section, bit for bit, at
// any thread count, and stash_tools::run_tasks, which spreads its tasks, runs each once and
// reports the failure a run in order would have. Also in the tsan preset (CMakePresets.json),
// where ThreadSanitizer watches the threads share the analysis and AutoSwap's sweeps.
#include "support/data.hpp"

#include <stash_tools/parallel_tasks.hpp>
#include <stash_tools/stash_plan/frontier.hpp>
#include <stash_tools/stash_plan/options.hpp>

#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// Every field of two frontier sections, doubles by their bits.
void check_same(stash_plan::frontier_section const& x, stash_plan::frontier_section const& y)
{
  CHECK(x.peak_bytes == y.peak_bytes);
  CHECK(x.swap_bound_bytes == y.swap_bound_bytes);
  CHECK(x.swap_bound_activations_bytes == y.swap_bound_activations_bytes);
  CHECK(x.memory_bound_bytes == y.memory_bound_bytes);
  CHECK(x.budgets == y.budgets);
  CHECK(x.policies == y.policies);
  auto const bits = [](std::vector<double> const& v) {
    std::vector<std::uint64_t> out;
    for (double const d : v) { out.push_back(std::bit_cast<std::uint64_t>(d)); }
    return out;
  };
  CHECK(bits(x.lower_bound_ms) == bits(y.lower_bound_ms));
  CHECK(bits(x.swap_lower_bound_ms) == bits(y.swap_lower_bound_ms));
  REQUIRE(x.points.size() == y.points.size());
  for (std::size_t i = 0; i < x.points.size(); ++i) {
    CAPTURE(i);
    CHECK(x.points[i].policy == y.points[i].policy);
    CHECK(x.points[i].budget_bytes == y.points[i].budget_bytes);
    CHECK(x.points[i].fits == y.points[i].fits);
    CHECK(std::bit_cast<std::uint64_t>(x.points[i].iteration_ms) ==
          std::bit_cast<std::uint64_t>(y.points[i].iteration_ms));
    CHECK(x.points[i].offloaded_bytes == y.points[i].offloaded_bytes);
  }
}

}  // namespace

TEST_CASE("--frontier plans the same section on one thread and on several")
{
  stash_plan::options opt;
  opt.frontier = true;
  // search_swap (seeded from AutoSwap's sweeps), two AutoSwap policies (their points read the
  // sweeps), and policies planned budget by budget; `search` (joint_search) is left out for its
  // time under the sanitizers.
  opt.policies = {"no_swap",     "vdnn_all", "auto_swap", "auto_swap_aoa",
                  "search_swap", "dtr",      "checkpoint"};
  struct input {
    char const* trace;
    std::vector<unsigned> threads;  // 3 on two cores too: more threads than cores
  };
  for (auto const& [name, counts] :
       {input{"alexnet_b128", {2, 3}}, input{"transformer_encoder_b8", {2}}}) {
    CAPTURE(name);
    auto const t =
        stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
    opt.threads    = 1;
    auto const one = stash_plan::run_frontier(t, opt);
    REQUIRE(one.points.size() == one.budgets.size() * opt.policies.size());
    REQUIRE(one.budgets.size() > 10);
    for (unsigned const threads : counts) {
      CAPTURE(threads);
      opt.threads = threads;
      check_same(one, stash_plan::run_frontier(t, opt));
    }
  }
}

TEST_CASE("run_tasks runs every task once, on at most the threads asked")
{
  for (std::size_t const threads : {1, 2, 4}) {
    CAPTURE(threads);
    std::vector<std::atomic<int>> runs(200);
    std::vector<std::size_t> worker_of(runs.size(), threads);
    stash_tools::run_tasks(threads, runs.size(), [&](std::size_t i, std::size_t worker) {
      ++runs[i];
      worker_of[i] = worker;
    });
    for (std::size_t i = 0; i < runs.size(); ++i) {
      CAPTURE(i);
      CHECK(runs[i].load() == 1);
      CHECK(worker_of[i] < threads);
    }
  }
  stash_tools::run_tasks(4, 0, [](std::size_t, std::size_t) { FAIL("no task to run"); });
  CHECK(stash_tools::default_threads() >= 1);
  CHECK(stash_tools::default_threads() <= 8);
  CHECK(stash_tools::default_threads(1) == 1);
}

TEST_CASE("run_tasks rethrows the failure of the first failed task in order")
{
  for (std::size_t const threads : {1, 2, 4}) {
    CAPTURE(threads);
    std::atomic<int> ran{0};
    auto const run = [&] {
      stash_tools::run_tasks(threads, 100, [&](std::size_t i, std::size_t) {
        ++ran;
        if (i == 37 || i == 12 || i == 90) {
          throw std::runtime_error("task " + std::to_string(i));
        }
      });
    };
    CHECK_THROWS_WITH_AS(run(), "task 12", std::runtime_error);
    CHECK(ran.load() >= 13);  // every task up to the first failure ran
  }
}

TEST_CASE("--threads: a positive count, with --frontier or a policy section")
{
  auto const opt = stash_plan::parse_args({"--frontier", "--threads", "3", "x.trace"});
  CHECK(opt.threads == 3);
  CHECK_THROWS_AS((void)stash_plan::parse_args({"--frontier", "--threads", "0", "x.trace"}),
                  stash_plan::usage_error);
  CHECK_THROWS_AS((void)stash_plan::parse_args({"--frontier", "--threads", "x", "x.trace"}),
                  stash_plan::usage_error);
  CHECK_THROWS_WITH_AS((void)stash_plan::parse_args({"--threads", "2", "x.trace"}),
                       doctest::Contains("add --frontier"), stash_plan::usage_error);
  CHECK(stash_plan::parse_args({"--policy", "search", "--threads", "2", "x.trace"}).threads == 2);
  CHECK(stash_plan::parse_args({"--frontier", "x.trace"}).threads ==
        stash_tools::default_threads());
}

}  // namespace STASH_UNITY_ID
