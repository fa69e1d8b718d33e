// stash-plan's building blocks (examples/stash_plan): the JSON writer's escaping and nesting,
// number formatting, format detection and the per-file report on real and malformed inputs.
#include <stash_tools/stash_plan/print.hpp>
#include <stash_tools/stash_plan/report.hpp>

#include "support/data.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

namespace STASH_UNITY_ID {

TEST_CASE("json_writer escapes strings and separates members and elements")
{
  std::ostringstream out;
  stash_plan::json_writer json(out);
  json.begin_object();
  json.key("s").value("quote\" backslash\\ nl\n tab\t ctl\x01 utf8 \xc3\xa9");
  json.key("n").value(std::uint64_t{18446744073709551615ULL});
  json.key("a").begin_array().value(true).value(false).null().value(0.5).end_array();
  json.key("empty").begin_object().end_object();
  json.key("missing").value_or_null(std::optional<std::uint64_t>{});
  json.key("nan").value(0.0 / 0.0);
  json.end_object();
  CHECK(out.str() ==
        "{\"s\":\"quote\\\" backslash\\\\ nl\\n tab\\t ctl\\u0001 utf8 \xc3\xa9\","
        "\"n\":18446744073709551615,\"a\":[true,false,null,0.5],\"empty\":{},"
        "\"missing\":null,\"nan\":null}");
}

TEST_CASE("stash-plan number formatting")
{
  CHECK(stash_plan::with_commas(0) == "0");
  CHECK(stash_plan::with_commas(999) == "999");
  CHECK(stash_plan::with_commas(1000) == "1,000");
  CHECK(stash_plan::with_commas(835805832) == "835,805,832");
  CHECK(stash_plan::bytes_text(10) == "10 B");
  CHECK(stash_plan::bytes_text(835805832) == "835,805,832 B (797.1 MiB)");
}

TEST_CASE("stash-plan reports a real trace, a MiniMalloc CSV and a malformed file")
{
  // The summary only: the planner section has its own tests (tests/tools).
  stash_plan::options summary_only;
  summary_only.planners = false;
  auto const trace_report =
      stash_plan::analyze_file(stash::test::data_path("traces/alexnet_b128.trace"), summary_only);
  REQUIRE_FALSE(trace_report.error.has_value());
  CHECK(trace_report.format == stash_plan::input_format::stash_trace_v1);
  CHECK(trace_report.tensors == 185);
  CHECK(trace_report.lower_bound_bytes == 1'246'636'392);
  CHECK(trace_report.activation_bytes == 402'825'224);
  REQUIRE(trace_report.peak.has_value());
  CHECK(trace_report.peak->phase.has_value());
  CHECK(trace_report.peak->op_name.has_value());
  std::ostringstream json;
  stash_plan::print_json(json, trace_report);
  CHECK(json.str().find("\"lower_bound_bytes\":1246636392,\"activation_bytes\":402825224") !=
        std::string::npos);
  CHECK(json.str().back() == '\n');
  CHECK(json.str().find('\n') == json.str().size() - 1);  // one line per input
  std::ostringstream text;
  stash_plan::print_text(text, trace_report);
  CHECK(text.str().find("1,246,636,392 B") != std::string::npos);

  auto const csv_report =
      stash_plan::analyze_file(stash::test::data_path("minimalloc/J.1048576.csv"), summary_only);
  REQUIRE_FALSE(csv_report.error.has_value());
  CHECK(csv_report.format == stash_plan::input_format::minimalloc_csv);
  CHECK(csv_report.tensors == 409);
  CHECK(csv_report.lower_bound_bytes == 989'184);
  CHECK(csv_report.capacity_bytes == std::uint64_t{1'048'576});
  CHECK_FALSE(csv_report.activation_bytes.has_value());

  auto const bad_path = std::string(STASH_DATA_DIR) + "/../tests/trace/malformed/double_free.trace";
  auto const bad_report = stash_plan::analyze_file(bad_path, summary_only);
  REQUIRE(bad_report.error.has_value());
  CHECK(bad_report.error->find("double_free.trace:5: double free of storage id 1") !=
        std::string::npos);
  std::ostringstream bad_json;
  stash_plan::print_json(bad_json, bad_report);
  CHECK(bad_json.str().find("\"error\":") != std::string::npos);
}

}  // namespace STASH_UNITY_ID
