// train_cnn's codec flags and what --check compares: the lossless codecs keep the bitwise
// comparison, the lossy ones switch it to test accuracy within --accuracy-margin points.
#include <stash_tools/train_cnn/options.hpp>

#include "support/message_of.hpp"

#include <doctest/doctest.h>

#include <exception>
#include <string>

namespace STASH_UNITY_ID {

using namespace train_cnn;
using stash::test::message_of;

TEST_CASE("train_cnn options: every codec name parses to its kind, and the names round-trip")
{
  CHECK(parse_codec("none") == codec_kind::none);
  CHECK(parse_codec("zvc") == codec_kind::zvc);
  CHECK(parse_codec("fp16") == codec_kind::fp16);
  CHECK(parse_codec("bf16") == codec_kind::bf16);
  CHECK(parse_codec("fp8_e4m3") == codec_kind::fp8_e4m3);
  for (auto name : codec_names) {
    CAPTURE(name);
    CHECK(to_string(parse_options({"/d", "--codec", std::string(name)}).codec) == name);
  }
  // Names are exact: no case folding, no aliases that would hide which format was meant.
  for (char const* bad : {"FP16", "fp8", "fp8_e5m2", "fp10", "fp16+zvc", ""}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)parse_codec(bad), usage_error);
  }
  CHECK(message_of([] {
          (void)parse_options({"/d", "--codec", "fp8"});
        }).find("unknown codec 'fp8' (known: none, zvc, fp16, bf16, fp8_e4m3") !=
        std::string::npos);
}

TEST_CASE(
    "train_cnn options: a lossy codec selects the accuracy comparison, a lossless one the bitwise")
{
  CHECK_FALSE(is_lossy(codec_kind::none));
  CHECK_FALSE(is_lossy(codec_kind::zvc));
  CHECK(is_lossy(codec_kind::fp16));
  CHECK(is_lossy(codec_kind::bf16));
  CHECK(is_lossy(codec_kind::fp8_e4m3));
  CHECK(check_kind_for(parse_options({"/d", "--check"}).codec) == check_kind::bitwise);
  CHECK(check_kind_for(parse_options({"/d", "--check", "--codec", "zvc"}).codec) ==
        check_kind::bitwise);
  for (char const* lossy : {"fp16", "bf16", "fp8_e4m3"}) {
    CAPTURE(lossy);
    CHECK(check_kind_for(parse_options({"/d", "--check", "--codec", lossy}).codec) ==
          check_kind::accuracy);
  }
}

TEST_CASE("train_cnn options: --check-steps defaults to 50 for bitwise, one epoch for accuracy")
{
  long const per_epoch = 468;  // 60000 / 128, the last partial batch dropped
  CHECK(check_steps_for(parse_options({"/d", "--check"}), per_epoch) == 50);
  CHECK(check_steps_for(parse_options({"/d", "--check", "--codec", "zvc"}), per_epoch) == 50);
  CHECK(check_steps_for(parse_options({"/d", "--check", "--codec", "bf16"}), per_epoch) ==
        per_epoch);
  // Given explicitly, it is taken as is whatever the codec.
  CHECK(check_steps_for(parse_options({"/d", "--check", "--codec", "fp16", "--check-steps", "20"}),
                        per_epoch) == 20);
  CHECK(check_steps_for(parse_options({"/d", "--check", "--check-steps", "900"}), per_epoch) ==
        900);
}

TEST_CASE("train_cnn options: --accuracy-margin takes points in [0, 100] and nothing else")
{
  CHECK(parse_options({"/d"}).accuracy_margin == doctest::Approx(1.0));
  CHECK(parse_options({"/d", "--accuracy-margin", "0.5"}).accuracy_margin == doctest::Approx(0.5));
  CHECK(parse_options({"/d", "--accuracy-margin", "0"}).accuracy_margin == doctest::Approx(0.0));
  CHECK(parse_options({"/d", "--accuracy-margin", "100"}).accuracy_margin ==
        doctest::Approx(100.0));
  for (char const* bad : {"-1", "100.5", "nan", "inf", "1pp", "1%", "", "one"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)parse_options({"/d", "--accuracy-margin", bad}), usage_error);
  }
  CHECK(message_of([] {
          (void)parse_options({"/d", "--accuracy-margin", "-1"});
        }).find("--accuracy-margin: '-1' is not a number in [0, 100]") != std::string::npos);
  CHECK(message_of([] {
          (void)parse_options({"/d", "--accuracy-margin"});
        }).find("--accuracy-margin: needs a value") != std::string::npos);
}

TEST_CASE("train_cnn options: the CPU build's flags (--budget P%, --device, --arch, raw, --json)")
{
  auto const o = parse_options({"/d", "--budget", "40%", "--device", "cpu", "--arch", "resnet",
                                "--codec", "raw", "--json", "--every", "7", "--trace-out", "t"});
  REQUIRE(o.budget_percent.has_value());
  CHECK(*o.budget_percent == doctest::Approx(40.0));
  CHECK_FALSE(o.budget.has_value());
  CHECK(o.device == device_kind::cpu);
  CHECK(o.arch == cnn_arch::resnet);
  CHECK(o.codec == codec_kind::none);
  CHECK(o.json);
  CHECK(o.every == 7);
  CHECK(o.trace_out == "t");
  CHECK(parse_options({"/d"}).device == device_kind::automatic);
  CHECK(parse_options({"/d", "--policy", "search_swap"}).policy == policy_kind::search_swap);
  CHECK(parse_options({"/d", "--policy", "search"}).policy == policy_kind::search);
  CHECK(parse_options({"/d", "--policy", "checkpoint"}).policy == policy_kind::checkpoint);
  CHECK(parse_options({"/d", "--policy", "dtr"}).policy == policy_kind::dtr);
  CHECK(recomputes(policy_kind::dtr));
  CHECK(!recomputes(policy_kind::search_swap));
  CHECK(parse_options({"/d", "--budget", "64MiB"}).budget == 64u << 20);
  for (char const* bad : {"0%", "101%", "%", "x%", "-5%"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)parse_options({"/d", "--budget", bad}), usage_error);
  }
  CHECK_THROWS_AS((void)parse_options({"/d", "--device", "tpu"}), usage_error);
  CHECK_THROWS_AS((void)parse_options({"/d", "--arch", "vit"}), usage_error);
}

TEST_CASE("train_cnn options: the CUDA build names the CPU-only option it cannot run")
{
  CHECK(cpu_only_option(parse_options({"/d"})).empty());
  CHECK(cpu_only_option(parse_options({"/d", "--codec", "zvc"})).empty());
  CHECK(cpu_only_option(parse_options({"/d", "--codec", "auto"})) == "--codec auto");
  CHECK(cpu_only_option(parse_options({"/d", "--codec", "bitmask"})) == "--codec bitmask");
  CHECK(cpu_only_option(parse_options({"/d", "--arch", "resnet"})) == "--arch resnet");
  CHECK(cpu_only_option(parse_options({"/d", "--budget", "40%"})) == "--budget P%");
  CHECK(cpu_only_option(parse_options({"/d", "--json"})) == "--json");
  CHECK(cpu_only_option(parse_options({"/d", "--policy", "checkpoint"})) ==
        "--policy checkpoint (recompute callables)");
  CHECK(cpu_only_option(parse_options({"/d", "--policy", "search_swap"})).empty());
}

}  // namespace STASH_UNITY_ID
