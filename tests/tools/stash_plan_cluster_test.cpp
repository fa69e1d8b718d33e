// stash-plan's multi-device projection (--cluster, stash_tools/stash_plan/projection_section.hpp):
// parsing of the cluster, efficiency-model and projection options, and the JSON "configs" rows,
// text table and picture on a real trace.
#include <stash_tools/stash_plan/options.hpp>
#include <stash_tools/stash_plan/print.hpp>
#include <stash_tools/stash_plan/projection_section.hpp>
#include <stash_tools/stash_plan/report.hpp>

#include "support/approx.hpp"
#include "support/data.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using args = std::vector<std::string>;

constexpr char const* spec16 = "nodes=16,gpus=8,intra=nvlink,inter_gbps=100,latency_us=5";

// One configuration row as read back from the JSON "configs" array.
struct json_row {
  double dp{}, mp{}, devices{}, device_peak_bytes{}, step_ms{};
  std::optional<double> time_to_train_s;
  bool fits{}, best{};
  std::string policy;  // "null" when nothing fits
};

// The text after "key": inside [from, to) of `json`; empty when absent.
std::string json_field(std::string const& json, std::string const& key, std::size_t from,
                       std::size_t to)
{
  auto const at = json.find("\"" + key + "\":", from);
  if (at == std::string::npos || at >= to) { return ""; }
  auto const start = at + key.size() + 3;
  auto const stop  = json.find_first_of(",}", start);
  return json.substr(start, stop - start);
}

// Splits the "configs" array into its rows. The rows are flat objects (no nested braces).
std::vector<json_row> configs_rows(std::string const& json)
{
  std::vector<json_row> rows;
  auto const begin = json.find("\"configs\":[");
  if (begin == std::string::npos) { return rows; }
  auto const end = json.find(']', begin);
  for (auto at = json.find('{', begin); at != std::string::npos && at < end;
       at      = json.find('{', at + 1)) {
    auto const close = json.find('}', at);
    auto num         = [&](char const* key) { return std::stod(json_field(json, key, at, close)); };
    json_row row;
    row.dp                = num("dp");
    row.mp                = num("mp");
    row.devices           = num("devices");
    row.device_peak_bytes = num("device_peak_bytes");
    row.step_ms           = num("step_ms");
    auto const time       = json_field(json, "time_to_train_s", at, close);
    if (time != "null") { row.time_to_train_s = std::stod(time); }
    row.fits   = json_field(json, "fits", at, close) == "true";
    row.best   = json_field(json, "best", at, close) == "true";
    row.policy = json_field(json, "policy", at, close);
    rows.push_back(row);
  }
  return rows;
}

// Checks that every element opened in `xml` is closed in order; returns the first problem.
std::string xml_balance_problem(std::string const& xml)
{
  std::vector<std::string> open;
  std::size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string::npos) {
    auto const end = xml.find('>', pos);
    if (end == std::string::npos) { return "unterminated tag"; }
    std::string const tag = xml.substr(pos + 1, end - pos - 1);
    pos                   = end + 1;
    auto name             = [](std::string const& t, std::size_t start) {
      auto const stop = t.find_first_of(" \t\n/", start);
      return t.substr(start, stop == std::string::npos ? std::string::npos : stop - start);
    };
    if (tag.empty()) { return "empty tag"; }
    if (tag[0] == '/') {
      if (open.empty() || open.back() != name(tag, 1)) {
        return "mismatched </" + tag.substr(1) + ">";
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(name(tag, 0));
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

}  // namespace

TEST_CASE("stash-plan --cluster parses the SPEC, the efficiency model and the projection options")
{
  using stash_plan::parse_args;
  auto const opt =
      parse_args({"--cluster", spec16, "--gns", "13648.8,8192", "--dataset", "50000",
                  "--replica-batch", "64", "--micro-batches", "8", "--max-mp", "4", "x.trace"});
  REQUIRE(opt.projection.has_value());
  auto const& p = *opt.projection;
  CHECK(p.spec == spec16);
  CHECK(p.cluster.nodes == 16);
  CHECK(p.cluster.gpus_per_node == 8);
  CHECK(p.cluster.devices() == 128);
  CHECK(p.cluster.intra.name == "nvlink");
  CHECK(p.cluster.inter.bytes_per_s == doctest::Approx(100e9 / 8));
  CHECK(p.cluster.inter.latency_s == stash::test::approx_s(5e-6));
  CHECK(p.params.dataset_samples == 50000);
  CHECK(p.params.replica_batch == 64);
  CHECK(p.params.micro_batches == 8);
  CHECK(p.params.max_mp == 4);
  CHECK(p.params.device_budget_bytes == 0);  // resolved per trace
  CHECK_FALSE(p.params.cost.use_codec);
  // The gradient-noise form: epochs(B) = S_min (1 + B_noise / B) B / D.
  CHECK(p.efficiency.epochs(256, 1281167).value() ==
        doctest::Approx(13648.8 * (256 + 8192) / 1281167.0));
  CHECK(opt.files == args{"x.trace"});
  CHECK_FALSE(opt.swap_requested());  // the projection alone runs no policy section

  // Defaults of projection_params when only the cluster and a model are given.
  auto const table = parse_args({"--cluster", "gpus=4", "--epochs-table", "4096:131,256:90"});
  REQUIRE(table.projection.has_value());
  CHECK(table.projection->cluster.devices() == 4);
  CHECK(table.projection->params.dataset_samples == stash::projection_params{}.dataset_samples);
  CHECK(table.projection->params.micro_batches == stash::projection_params{}.micro_batches);
  CHECK(table.projection->efficiency.epochs(256, 1).value() == doctest::Approx(90));
  CHECK(table.projection->efficiency.epochs(4096, 1).value() == doctest::Approx(131));
  CHECK_FALSE(table.projection->efficiency.epochs(8192, 1).has_value());  // outside the table
  // A codec given with --cluster applies to the projection's offloads.
  auto const codec = parse_args({"--cluster", "gpus=2", "--gns", "1,2", "--ratio", "2"});
  REQUIRE(codec.projection.has_value());
  CHECK(codec.projection->params.cost.use_codec);
  CHECK(codec.projection->params.cost.codec_ratio == 2.0);
  CHECK_FALSE(parse_args({"x.trace"}).projection.has_value());
}

TEST_CASE("stash-plan --cluster refuses bad SPECs, a missing efficiency model and stray options")
{
  using stash_plan::parse_args;
  using stash_plan::usage_error;
  // A bad SPEC: the library's message, as main prints it after "stash-plan: " (exit 2).
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", "nodes=16,gpus=8,bogus=1", "--gns", "1,2"}),
                       doctest::Contains("cluster spec: unknown key 'bogus'"), usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", "nodes=2,gpus=8", "--gns", "1,2"}),
                       doctest::Contains("inter_gbps is required when nodes > 1"), usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", "gpus=0", "--gns", "1,2"}),
                       doctest::Contains("'gpus=0' must be a positive integer"), usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", "intra=token_ring", "--gns", "1,2"}),
                       doctest::Contains("unknown intra-node link 'token_ring'"), usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster"}),
                       doctest::Contains("--cluster: missing value"), usage_error);
  // The efficiency model is required, and only one.
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", spec16, "x.trace"}),
                       doctest::Contains("--cluster needs an efficiency model: --gns"),
                       usage_error);
  CHECK_THROWS_WITH_AS(
      (void)parse_args({"--cluster", spec16, "--gns", "1,2", "--epochs-table", "256:90"}),
      doctest::Contains("give one of --gns and --epochs-table"), usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", spec16, "--gns", "13648.8"}),
                       doctest::Contains("--gns: '13648.8' is not S_MIN,B_NOISE"), usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", spec16, "--gns", "0,8192"}),
                       doctest::Contains("S_min must be positive"), usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", spec16, "--epochs-table", "256:90,1024"}),
                       doctest::Contains("'1024' in '256:90,1024' is not BATCH:EPOCHS"),
                       usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", spec16, "--epochs-table", "256:90,256:95"}),
                       doctest::Contains("appears twice"), usage_error);
  // Projection options without --cluster, and malformed counts.
  CHECK_THROWS_WITH_AS(
      (void)parse_args({"--gns", "1,2", "x.trace"}),
      doctest::Contains("--gns only applies to the projection: add --cluster SPEC"), usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--max-mp", "2"}), doctest::Contains("add --cluster SPEC"),
                       usage_error);
  CHECK_THROWS_WITH_AS(
      (void)parse_args({"--cluster", spec16, "--gns", "1,2", "--micro-batches", "0"}),
      doctest::Contains("--micro-batches: '0' is not a positive whole number"), usage_error);
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", spec16, "--gns", "1,2", "--dataset", "1e6"}),
                       doctest::Contains("--dataset: '1e6' is not a positive whole number"),
                       usage_error);
  // --hw is the simulated device; the cluster's comes from its SPEC.
  CHECK_THROWS_WITH_AS((void)parse_args({"--cluster", spec16, "--gns", "1,2", "--hw", "pcie4_x16"}),
                       doctest::Contains("give hw=PRESET in the --cluster SPEC"), usage_error);
}

TEST_CASE(
    "stash-plan --cluster JSON configs on resnet18: one best, dp x mp = devices, best is fastest")
{
  auto opt     = stash_plan::parse_args({"--json", "--cluster", spec16, "--gns", "13648.8,8192"});
  opt.planners = false;
  auto const report =
      stash_plan::analyze_file(stash::test::data_path("traces/resnet18_b32.trace"), opt);
  REQUIRE_FALSE(report.error.has_value());
  REQUIRE(report.projection.has_value());
  CHECK(report.projection->devices == 128);
  CHECK(report.projection->budget_bytes == stash::hardware_preset("h100_sxm").device_memory_bytes);
  std::ostringstream out;
  stash_plan::print_json(out, report);
  auto const json = out.str();
  CHECK(json.find('\n') == json.size() - 1);
  CHECK(json.find("\"projection\":{\"cluster\":\"nodes=16,gpus=8,intra=nvlink,") !=
        std::string::npos);

  auto const rows = configs_rows(json);
  REQUIRE(rows.size() == report.projection->result.configs.size());
  // Device counts 1, 2, ..., 128, each with every power-of-two mp up to 8 dividing it.
  CHECK(rows.size() == 26);
  std::size_t bests = 0;
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto const& row = rows[i];
    CAPTURE(i);
    CHECK(row.dp * row.mp == row.devices);
    CHECK(row.devices <= 128);
    CHECK(row.step_ms > 0);
    CHECK(row.device_peak_bytes > 0);
    CHECK(row.fits == (row.policy != "null"));
    CHECK(row.fits ==
          row.time_to_train_s.has_value());  // the gradient-noise form knows every batch
    if (row.best) {
      ++bests;
      best = i;
    }
  }
  CHECK(bests == 1);
  REQUIRE(best.has_value());
  CHECK(rows[*best].fits);
  for (auto const& row : rows) {
    if (row.fits) { CHECK(*rows[*best].time_to_train_s <= *row.time_to_train_s); }
  }
  CHECK(json.find("\"best\":" + std::to_string(*best) + "}") !=
        std::string::npos);  // in "projection"
  // resnet18 at batch 32 fits 80 GiB as is: every row is no_swap.
  for (auto const& row : rows) { CHECK(row.policy == "\"no_swap\""); }

  std::ostringstream text;
  stash_plan::print_text(text, report);
  CHECK(text.str().find("  projection       128 devices, nodes=16,gpus=8,intra=nvlink,") !=
        std::string::npos);
  CHECK(text.str().find("    # statistical_efficiency: steps(B) = S_min (1 + B_noise / B)") !=
        std::string::npos);
  CHECK(text.str().find("  best config      ") != std::string::npos);
}

TEST_CASE("stash-plan --cluster with a tight budget needs offload; CSVs get a note; the picture")
{
  // vgg16 at 4x the recorded batch under 8 GiB: a DP-only configuration fits only by offloading
  // (search, with wrap entries: momentum and classifier weights off the device across the step),
  // so every row without mp names search; with mp, stages fit without offloading.
  auto opt =
      stash_plan::parse_args({"--cluster", spec16, "--gns", "13648.8,8192", "--replica-batch",
                              "128", "--budget", "8GiB", "--policy", "no_swap", "--svg", "x.svg"});
  opt.planners = false;
  auto const report =
      stash_plan::analyze_file(stash::test::data_path("traces/vgg16_b32.trace"), opt);
  REQUIRE_FALSE(report.error.has_value());
  REQUIRE(report.projection.has_value());
  auto const& r = report.projection->result;
  CHECK(report.projection->budget_bytes == 8ULL << 30);
  CHECK(report.projection->budget_origin == "given");
  REQUIRE(r.best.has_value());
  bool any_offload = false, any_resident = false;
  for (auto const& cfg : r.configs) {
    CAPTURE(cfg.devices);
    CAPTURE(cfg.mp);
    if (cfg.mp == 1) { CHECK((cfg.fits && cfg.offload && cfg.policy == "search")); }
    any_resident = any_resident || (cfg.fits && !cfg.offload);
    if (cfg.fits) { CHECK(cfg.device_peak_bytes <= 8ULL << 30); }
    any_offload = any_offload || cfg.offload;
  }
  CHECK(any_offload);
  CHECK(any_resident);
  std::ostringstream out;
  stash_plan::print_json(out, report);
  auto const rows = configs_rows(out.str());
  REQUIRE(rows.size() == r.configs.size());
  for (auto const& row : rows) {
    if (row.mp == 1) { CHECK(row.policy == "\"search\""); }
  }

  // A percentage budget is of the trace's no_swap peak.
  auto percent = stash_plan::parse_args(
      {"--cluster", "gpus=2", "--gns", "1000,100", "--budget", "50%", "--policy", "no_swap"});
  percent.planners = false;
  auto const halved =
      stash_plan::analyze_file(stash::test::data_path("traces/resnet18_b32.trace"), percent);
  REQUIRE(halved.projection.has_value());
  CHECK(halved.projection->budget_bytes == halved.lower_bound_bytes / 2);
  CHECK(halved.projection->budget_origin == "50% of the no_swap peak");

  // Both pictures are made; the projection's is well-formed and goes to a "-projection" path.
  REQUIRE(report.svg.has_value());
  REQUIRE(report.projection_svg.has_value());
  CHECK(report.projection_svg->rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(xml_balance_problem(*report.projection_svg) == "");
  CHECK(report.projection_svg->find(">MP 2<") != std::string::npos);
  CHECK(stash_plan::projection_svg_path("out.svg") == "out-projection.svg");
  CHECK(stash_plan::projection_svg_path("pics/out_vgg16_b32.svg") ==
        "pics/out_vgg16_b32-projection.svg");
  CHECK(stash_plan::projection_svg_path("pics/out") == "pics/out-projection.svg");

  // A CSV has no ops to project: a note, not an error.
  auto const csv =
      stash_plan::analyze_file(stash::test::data_path("minimalloc/F.1048576.csv"), opt);
  CHECK_FALSE(csv.error.has_value());
  CHECK_FALSE(csv.projection.has_value());
  bool noted = false;
  for (auto const& note : csv.notes) {
    noted = noted || note.find("--cluster needs a trace") != std::string::npos;
  }
  CHECK(noted);
}

}  // namespace STASH_UNITY_ID
