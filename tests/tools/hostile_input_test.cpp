// The tools against careless or hostile input (issue 24): overflowing numbers in options, endless
// or binary inputs, overlong lines, invalid UTF-8 in labels, a frontier with nothing to draw,
// non-file inputs to stash-codec, truncated or disordered traces. Each case failed before its fix.
#include <stash_tools/json_string.hpp>
#include <stash_tools/stash_codec/input.hpp>
#include <stash_tools/stash_plan/frontier.hpp>
#include <stash_tools/stash_plan/json_writer.hpp>
#include <stash_tools/stash_plan/options.hpp>
#include <stash_tools/stash_plan/report.hpp>

#include <stash/trace/minimalloc_reader.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_checks.hpp>
#include <stash/trace/trace_error.hpp>
#include <stash/trace/trace_reader.hpp>

#include "support/data.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <istream>
#include <sstream>
#include <streambuf>
#include <string>

namespace STASH_UNITY_ID {

namespace {

// An input that never ends: `fill` forever, like /dev/zero (fill '\0') or a line without end.
class endless_buf : public std::streambuf {
 public:
  explicit endless_buf(char fill) { chunk_.assign(4096, fill); }

 protected:
  int_type underflow() override
  {
    served_ += chunk_.size();
    if (served_ > (std::size_t{64} << 20)) { return traits_type::eof(); }  // test guard: 64 MiB
    setg(chunk_.data(), chunk_.data(), chunk_.data() + chunk_.size());
    return traits_type::to_int_type(chunk_[0]);
  }

 private:
  std::string chunk_;
  std::size_t served_ = 0;
};

std::string reader_error(std::string const& text)
{
  try {
    (void)stash::parse_trace(std::string_view(text), "t.trace");
  } catch (stash::trace_error const& e) {
    return e.what();
  }
  return {};
}

bool valid_utf8(std::string_view s)
{
  for (std::size_t i = 0; i < s.size();) {
    auto const n = stash_tools::utf8_sequence_length(s, i);
    if (n == 0) { return false; }
    i += n;
  }
  return true;
}

}  // namespace

TEST_CASE("options refuse numbers that overflow or run to hundreds of digits")
{
  using stash_plan::usage_error;
  std::string const huge = "1" + std::string(400, '0');
  CHECK_THROWS_WITH_AS((void)stash_plan::parse_epochs_table("256:" + huge + ",512:3"),
                       doctest::Contains("is not BATCH:EPOCHS"), usage_error);
  CHECK_THROWS_WITH_AS((void)stash_plan::parse_ratio(huge), doctest::Contains("--ratio"),
                       usage_error);
  CHECK_THROWS_AS((void)stash_plan::parse_ratio("0." + std::string(400, '0') + "1"), usage_error);
  CHECK_THROWS_AS((void)stash_plan::parse_gns(huge + ",8192"), usage_error);
  // A percentage budget of 400 digits threw std::out_of_range past the option parser (a crash).
  CHECK_THROWS_WITH_AS((void)stash_plan::parse_budget(huge + "%"),
                       doctest::Contains("is more than 10000%"), usage_error);
  CHECK(stash_plan::parse_budget("150%").percent == doctest::Approx(150.0));
  // Ordinary numbers still pass.
  CHECK(stash_plan::parse_ratio("2.5") == doctest::Approx(2.5));
  CHECK(stash_plan::detail::parse_decimal("12345678901234567890123456789012").has_value());
  CHECK_FALSE(stash_plan::detail::parse_decimal("123456789012345678901234567890123").has_value());
}

TEST_CASE("the trace reader quotes a bounded prefix and stops on binary or endless input")
{
  std::string const header = "# stash-trace v1\n";
  // A long unknown event: the message quotes 64 bytes of it and says how long it was.
  auto const message = reader_error(header + std::string(200000, 'x') + "\n");
  CHECK(message.find("t.trace:2: unknown event") != std::string::npos);
  CHECK(message.find("(200000 bytes)") != std::string::npos);
  CHECK(message.size() < 400);
  // A long storage kind and a long label in a bad 't' line: bounded too.
  auto const kind_message = reader_error(header + "t 0 8 " + std::string(100000, 'k') + " l\n");
  CHECK(kind_message.size() < 400);
  // A line over the limit is refused by length; a NUL byte as binary.
  auto const long_line =
      reader_error(header + "# " + std::string(stash::detail::max_line_bytes, 'c'));
  CHECK(long_line.find("t.trace:2: line of") != std::string::npos);
  CHECK(long_line.size() < 400);
  CHECK(reader_error(header + std::string("t 0 8 act a\0b\n", 14)).find("t.trace:2: NUL byte") !=
        std::string::npos);
  // Endless streams: zeros (/dev/zero) and one line that never ends.
  for (char const fill : {'\0', 'a'}) {
    endless_buf buf(fill);
    std::istream in(&buf);
    CHECK_THROWS_WITH_AS((void)stash::parse_trace(in, "endless"), doctest::Contains("endless:1:"),
                         stash::trace_error);
  }
  endless_buf zeros('\0');
  std::istream csv(&zeros);
  CHECK_THROWS_WITH_AS((void)stash::parse_minimalloc_csv(csv, "zeros.csv"),
                       doctest::Contains("zeros.csv:1: NUL byte"), stash::trace_error);
  if (std::filesystem::exists("/dev/zero")) {
    CHECK_THROWS_WITH_AS((void)stash::read_trace("/dev/zero"),
                         doctest::Contains("/dev/zero:1: NUL byte"), stash::trace_error);
    auto const report = stash_plan::analyze_file("/dev/zero");
    REQUIRE(report.error.has_value());
    CHECK(report.error->find("NUL byte") != std::string::npos);
  }
}

TEST_CASE("JSON strings are valid UTF-8 and escape every control character")
{
  CHECK(stash_tools::json_string("a\"b\\c\x01\x1f\x7f") == "\"a\\\"b\\\\c\\u0001\\u001f\x7f\"");
  CHECK(stash_tools::json_string("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") ==
        "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");  // é € 😀 pass through
  // A stray continuation byte, a truncated sequence, an overlong '/', a surrogate, > U+10FFFF.
  CHECK(stash_tools::json_string("\x80") == "\"\\ufffd\"");
  CHECK(stash_tools::json_string("a\xc3") == "\"a\\ufffd\"");
  CHECK(stash_tools::json_string("\xc0\xaf") == "\"\\ufffd\\ufffd\"");
  CHECK(stash_tools::json_string("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");
  CHECK(stash_tools::json_string("\xf4\x90\x80\x80") == "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
  // Through stash-plan's writer, on a label read from a trace.
  auto const t = stash::parse_trace(
      std::string_view("# stash-trace v1\nt 0 8 act bad\xff\xfelabel\no aten::relu - 0\nf 0\n"),
      "u.trace");
  std::ostringstream out;
  stash_plan::json_writer json(out);
  json.begin_object().key("label").value(t.storages()[0].label).end_object();
  CHECK(valid_utf8(out.str()));
  CHECK(out.str() == "{\"label\":\"bad\\ufffd\\ufffdlabel\"}");
}

TEST_CASE("--frontier on a trace without activations or ops draws no NaN and says why")
{
  stash_plan::options opt;
  opt.frontier              = true;
  opt.policies              = {"no_swap", "search_swap"};
  char const* const texts[] = {
      // parameters and temporaries only
      "# stash-trace v1\nt 0 4096 param w\nt 1 1024 temp t\no aten::mul 0 1\nf 1\n",
      // no ops at all
      "# stash-trace v1\nt 0 4096 param w\n",
      // nothing at all
      "# stash-trace v1\n"};
  for (auto const* text : texts) {
    CAPTURE(text);
    auto const t = stash::parse_trace(std::string_view(text), "x.trace");
    auto const f = stash_plan::run_frontier(t, opt);
    REQUIRE(f.note.has_value());
    auto const svg = stash_plan::render_frontier_svg(f, "x");
    CHECK(svg.find("nan") == std::string::npos);
    CHECK(svg.find("inf") == std::string::npos);
    CHECK(svg.find(*f.note) != std::string::npos);
  }
}

TEST_CASE("stash-codec's input: regular files of float32 only, with a clear error otherwise")
{
  using stash_tools::input_error;
  stash::test::temp_dir dir;
  CHECK_THROWS_WITH_AS((void)stash_tools::read_f32_file(dir.path.string()),
                       doctest::Contains("is a directory"), input_error);
  if (std::filesystem::exists("/dev/zero")) {
    CHECK_THROWS_WITH_AS((void)stash_tools::read_f32_file("/dev/zero"),
                         doctest::Contains("not a regular file"), input_error);
  }
  auto const empty = (dir.path / "empty.f32").string();
  std::ofstream(empty).close();
  CHECK_THROWS_WITH_AS((void)stash_tools::read_f32_file(empty), doctest::Contains("empty file"),
                       input_error);
  auto const odd = (dir.path / "odd.f32").string();
  std::ofstream(odd, std::ios::binary) << "abcde";
  CHECK_THROWS_WITH_AS((void)stash_tools::read_f32_file(odd),
                       doctest::Contains("5 bytes is not a whole number of float32"), input_error);
  auto const good      = (dir.path / "good.f32").string();
  float const values[] = {1.0f, 0.0f, -2.5f};
  std::ofstream(good, std::ios::binary)
      .write(reinterpret_cast<char const*>(values), sizeof(values));
  auto const read = stash_tools::read_f32_file(good);
  REQUIRE(read.size() == 3);
  CHECK(read[2] == -2.5f);
  CHECK_THROWS_WITH_AS((void)stash_tools::read_f32_file((dir.path / "none").string()),
                       doctest::Contains("cannot open"), input_error);
}

TEST_CASE("truncated traces and phases out of order are warned about, whole ones are not")
{
  auto const truncated = stash::parse_trace(
      std::string_view("# stash-trace v1\np forward\nt 0 64 param w\nt 1 128 act y\n"
                       "o aten::relu 0 1\nt 2 32 temp s\no aten::sum 1 2\n"),
      "cut.trace");
  auto const w = stash::trace_warnings(truncated);
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("never freed: 1 act (128 B), 1 temp (32 B)") != std::string::npos);
  auto const disordered = stash::parse_trace(
      std::string_view("# stash-trace v1\np backward\nt 0 8 act a\no aten::relu - 0\np forward\n"
                       "f 0\n"),
      "order.trace");
  auto const v = stash::trace_warnings(disordered);
  REQUIRE(v.size() == 1);
  CHECK(v[0].find("phase 'forward' after 'backward'") != std::string::npos);
  // Every recorded trace in data/ is whole and in order.
  for (auto const* name : {"resnet18_b32", "transformer_encoder_b8"}) {
    auto const t =
        stash::read_trace(stash::test::data_path(std::string("traces/") + name + ".trace"));
    CHECK(stash::trace_warnings(t).empty());
  }
  // stash-plan reports them.
  stash::test::temp_dir dir;
  auto const path = dir.path / "cut.trace";
  std::ofstream(path) << "# stash-trace v1\nt 0 128 act y\no aten::relu - 0\n";
  auto const report = stash_plan::analyze_file(path);
  REQUIRE_FALSE(report.error.has_value());
  REQUIRE(report.warnings.size() == 1);
  CHECK(report.warnings[0].find("may be truncated") != std::string::npos);
}

}  // namespace STASH_UNITY_ID
