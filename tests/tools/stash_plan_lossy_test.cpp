// stash-plan's --lossy: the opt-in to reduced precision for activations (issue 22 item 6), parsed
// with errors that say which item is wrong and why, and carried to the planners: with it,
// search_swap and search send activations as fp16 where no lossless encoding applies; without
// it, nothing lossy crosses the link.
#include <stash_tools/stash_plan/options.hpp>
#include <stash_tools/stash_plan/policies.hpp>

#include "support/data.hpp"

#include <doctest/doctest.h>

#include <stash/trace/trace_reader.hpp>

#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

bool lossy(std::string const& encoding)
{
  return encoding == "fp16" || encoding == "bf16" || encoding == "fp8_e4m3";
}

}  // namespace

TEST_CASE("stash-plan --lossy: activations=ENC, implying per-storage encodings")
{
  using stash_plan::parse_args;
  auto const o = parse_args({"x.trace", "--policy", "search", "--lossy", "activations=bf16"});
  REQUIRE(o.lossy_activations);
  CHECK(*o.lossy_activations == stash::swap_encoding::bf16);
  CHECK(o.auto_encodings);
  CHECK_FALSE(o.codec);
  auto const fp8 =
      parse_args({"x.trace", "--budget", "50%", "--codec", "auto", "--lossy", "act=fp8_e4m3"});
  CHECK(*fp8.lossy_activations == stash::swap_encoding::fp8_e4m3);
  auto const none = parse_args({"x.trace", "--policy", "search", "--codec", "auto"});
  CHECK_FALSE(none.lossy_activations);
  CHECK(stash_plan::encoding_options_of(none).lossy_activations == std::nullopt);
}

TEST_CASE("stash-plan --lossy: a bad value is a usage error naming the item and why")
{
  using stash_plan::parse_args;
  auto error_of = [](std::vector<std::string> const& args) -> std::string {
    try {
      (void)parse_args(args);
    } catch (stash_plan::usage_error const& e) {
      return e.what();
    }
    return "accepted";
  };
  auto const lossy_with = [&](std::string const& v) {
    return error_of({"x.trace", "--policy", "search", "--lossy", v});
  };
  CHECK(lossy_with("activations=fp32") ==
        "--lossy: item 1 'activations=fp32': unknown lossy encoding 'fp32' (known: fp16, bf16, "
        "fp8_e4m3)");
  CHECK(lossy_with("activations=fp16,gradients=bf16") ==
        "--lossy: item 2 'gradients=bf16': the planner weighs lossy encodings for activations "
        "only; 'gradients' stays lossless");
  CHECK(lossy_with("weights=fp16") ==
        "--lossy: item 1 'weights=fp16': unknown storage kind 'weights' (known: activations)");
  CHECK(lossy_with("activations") == "--lossy: item 1 'activations': expected KIND=ENCODING");
  CHECK(lossy_with("activations=fp16,") == "--lossy: item 2 '': expected KIND=ENCODING");
  CHECK(lossy_with("activations=fp16,act=bf16") ==
        "--lossy: item 2 'act=bf16': activations are already given an encoding");
  CHECK(lossy_with("") == "--lossy: empty list (expected e.g. activations=fp16)");
  CHECK(error_of({"x.trace", "--policy", "search", "--lossy"}) == "--lossy: missing value");
  CHECK(error_of({"x.trace", "--policy", "search", "--codec", "zvc", "--ratio", "2", "--lossy",
                  "activations=fp16"}) ==
        "--lossy chooses an encoding per storage: it needs --codec auto (or no --codec), not "
        "--codec zvc");
  CHECK(error_of({"x.trace", "--lossy", "activations=fp16"}) ==
        "--lossy only affects simulated times: add --policy NAME|all, --budget or --svg");
}

TEST_CASE("stash-plan --lossy carries the opt-in to search_swap and search")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/transformer_encoder_b8.trace"));
  auto run     = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"t.trace",  "--hw",        "pcie4_x16", "--budget", "50%",
                                  "--policy", "search_swap", "--policy",  "search"};
    args.insert(args.end(), extra.begin(), extra.end());
    return stash_plan::run_policies(t, stash_plan::parse_args(args));
  };
  auto const lossless = run({"--codec", "auto"});
  auto const with     = run({"--lossy", "activations=fp16"});
  REQUIRE(lossless.policies.size() == 2);
  REQUIRE(with.policies.size() == 2);
  for (std::size_t k = 0; k < 2; ++k) {
    CAPTURE(with.policies[k].name);
    for (auto const& u : lossless.policies[k].encodings) { CHECK_FALSE(lossy(u.encoding)); }
    std::size_t halves = 0;
    for (auto const& u : with.policies[k].encodings) {
      if (lossy(u.encoding)) {
        CHECK(u.encoding == "fp16");
        CHECK(u.wire_bytes <= u.bytes / 2 + u.entries);  // half, rounded up per entry
        halves += u.entries;
      }
    }
    CHECK(halves > 0);
    REQUIRE(with.policies[k].fits);
    REQUIRE(lossless.policies[k].fits);
    CHECK(with.policies[k].iteration_ms < lossless.policies[k].iteration_ms);  // predicted
  }
}

}  // namespace STASH_UNITY_ID
