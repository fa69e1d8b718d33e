// The v1 reader: what it accepts, and every way it rejects malformed input (error type, file
// name, line number and reason), on small hand-written strings and on mutated copies of a real
// trace.
#include <stash/trace/trace_reader.hpp>
#include <stash/trace/trace_writer.hpp>

#include "support/data.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

constexpr char const* header = "# stash-trace v1 model=tiny\n";

// Parses `text` expecting a trace_error at `line` whose reason contains `reason_part`.
void check_rejects(std::string const& text, std::size_t line, std::string const& reason_part,
                   std::string const& source = "bad.trace")
{
  CAPTURE(text);
  try {
    (void)stash::parse_trace(std::string_view(text), source);
    FAIL("parse_trace accepted malformed input");
  } catch (stash::trace_error const& e) {
    CHECK(e.file() == source);
    CHECK(e.line() == line);
    CHECK_MESSAGE(e.reason().find(reason_part) != std::string::npos, std::string(e.what()));
    std::string const location =
        source + ":" + (line > 0 ? std::to_string(line) + ":" : std::string()) + " ";
    CHECK(std::string(e.what()).rfind(location, 0) == 0);
  }
}

std::string slurp(std::string const& path)
{
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(std::string const& text)
{
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) { lines.push_back(line); }
  return lines;
}

std::string join(std::vector<std::string> const& lines)
{
  std::string out;
  for (auto const& line : lines) { out += line + "\n"; }
  return out;
}

// 0-based index of the first line starting with `prefix` at or after `from`.
std::size_t find_line(std::vector<std::string> const& lines, std::string const& prefix,
                      std::size_t from = 0)
{
  for (std::size_t i = from; i < lines.size(); ++i) {
    if (lines[i].rfind(prefix, 0) == 0) { return i; }
  }
  FAIL("no line starts with " << prefix);
  return 0;
}

}  // namespace

TEST_CASE("parse_trace reads every event kind, comments, blank lines and CRLF")
{
  std::string const text = std::string(header) +
                           "\n"
                           "t 0 64 param w\n"
                           "# a comment in the body\n"
                           "p forward\r\n"
                           "t 1 128 act  conv 1 / out \n"
                           "t 2 8 temp\n"
                           "o aten::mul\t0,1  2\n"
                           "o aten::empty - -\n"
                           "f 2\n"
                           "p backward\n"
                           "p optimizer\n";
  auto const t = stash::parse_trace(std::string_view(text), "good.trace");
  REQUIRE(t.storages().size() == 3);
  CHECK(t.storages()[1].bytes == 128);
  CHECK(t.storages()[1].kind == stash::storage_kind::act);
  CHECK(t.storages()[1].label == "conv 1 / out");  // rest of line, trimmed, inner blanks kept
  CHECK(t.storages()[2].label.empty());
  REQUIRE(t.ops().size() == 2);
  CHECK(t.ops()[0].name == "aten::mul");
  CHECK(t.ops()[0].reads == std::vector<stash::storage_id>{0, 1});
  CHECK(t.ops()[0].writes == std::vector<stash::storage_id>{2});
  CHECK(t.ops()[1].reads.empty());
  CHECK(t.ops()[1].writes.empty());
  CHECK(t.events().size() == 9);
  CHECK(t.events()[1] == stash::trace_event{stash::event_kind::phase, 0});
  CHECK(t.free_event(2) == 6);
  CHECK_FALSE(t.free_event(0).has_value());
  CHECK(t.header_value("model") == "tiny");
  CHECK_FALSE(t.header_value("batch").has_value());

  // The canonical text drops comments and blank lines and normalises separators; reading it
  // back gives the same trace.
  auto const canonical = stash::to_trace_text(t);
  CHECK(canonical.find('#', 1) == std::string::npos);
  CHECK(stash::parse_trace(std::string_view(canonical), "canonical") == t);
}

TEST_CASE("parse_trace from a stream equals parse_trace from text")
{
  std::string const text = std::string(header) + "t 0 4 input x\no aten::relu_ 0 0\n";
  std::istringstream in(text);
  CHECK(stash::parse_trace(in, "s") == stash::parse_trace(std::string_view(text), "s"));
}

TEST_CASE("parse_trace rejects a missing or bad header")
{
  check_rejects("", 0, "missing the header");
  check_rejects("\n\n", 0, "missing the header");
  check_rejects("t 0 4 param w\n", 1, "missing header");
  check_rejects("\nt 0 4 param w\n", 2, "missing header");
  check_rejects("# a comment first\n", 1, "bad header");
  check_rejects("# stash-trace\nt 0 4 param w\n", 1, "missing format version");
  check_rejects("# stash-trace v2 model=x\n", 1, "unsupported trace format version 'v2'");
  check_rejects("# stash-trace v1 model\n", 1, "bad header entry 'model'");
  check_rejects("# stash-trace v1 =x\n", 1, "bad header entry '=x'");
  check_rejects("# stash-trace v1 a=1 a=2\n", 1, "duplicate header key 'a'");
}

TEST_CASE("parse_trace rejects unknown events and wrong field counts")
{
  std::string const h = header;
  check_rejects(h + "x 0 4 param w\n", 2, "unknown event 'x'");
  check_rejects(h + "tt 0 4 param w\n", 2, "unknown event 'tt'");
  check_rejects(h + "t 0 4\n", 2, "truncated 't' line");
  check_rejects(h + "t 0\n", 2, "truncated 't' line");
  check_rejects(h + "t 0 4 param w\no aten::x 0\n", 3, "truncated 'o' line");
  check_rejects(h + "t 0 4 param w\no aten::x 0 0 0\n", 3, "unexpected extra field '0'");
  check_rejects(h + "f\n", 2, "truncated 'f' line");
  check_rejects(h + "t 0 4 param w\nf 0 0\n", 3, "unexpected extra field");
  check_rejects(h + "p\n", 2, "truncated 'p' line");
  check_rejects(h + "p forward backward\n", 2, "unexpected extra field 'backward'");
  check_rejects(h + "t 0 4 param w\rx\n", 2, "carriage return");
}

TEST_CASE("parse_trace rejects bad numbers")
{
  std::string const h = header;
  check_rejects(h + "t 0 -4 param w\n", 2, "bad byte count '-4'");
  check_rejects(h + "t 0 +4 param w\n", 2, "bad byte count '+4'");
  check_rejects(h + "t 0 18446744073709551616 param w\n", 2, "bad byte count");  // 2^64
  check_rejects(h + "t 0 12abc param w\n", 2, "bad byte count '12abc'");
  check_rejects(h + "t 0 1e3 param w\n", 2, "bad byte count '1e3'");
  check_rejects(h + "t x 4 param w\n", 2, "bad storage id 'x'");
  check_rejects(h + "f -1\n", 2, "bad storage id '-1'");
  check_rejects(h + "t 0 4 param w\no aten::x 0,,0 -\n", 3, "bad storage id in the read list ''");
  check_rejects(h + "t 0 4 param w\no aten::x 0, -\n", 3, "bad storage id in the read list ''");
  check_rejects(h + "t 0 4 param w\no aten::x - 0,a\n", 3, "bad storage id in the write list 'a'");
  // The largest value still parses: a limit, not an accident.
  auto const t = stash::parse_trace(h + "t 0 18446744073709551615 param w\n", "max");
  CHECK(t.storages()[0].bytes == 18446744073709551615ULL);
}

TEST_CASE("parse_trace rejects ids out of order, unknown kinds and phases")
{
  std::string const h = header;
  check_rejects(h + "t 1 4 param w\n", 2, "storage id out of order: expected 0");
  check_rejects(h + "t 0 4 param w\nt 0 4 param v\n", 3, "expected 1");
  check_rejects(h + "t 0 4 param w\nt 2 4 param v\n", 3, "found 2");
  check_rejects(h + "t 0 4 weights w\n", 2, "unknown storage kind 'weights'");
  check_rejects(h + "t 0 4 Param w\n", 2, "unknown storage kind 'Param'");
  check_rejects(h + "p warmup\n", 2, "unknown phase 'warmup'");
}

TEST_CASE("parse_trace rejects unknown ids, use after free and double free")
{
  std::string const h = header;
  check_rejects(h + "t 0 4 param w\no aten::x 0 1\n", 3, "unknown storage id 1");
  check_rejects(h + "o aten::x 0 -\n", 2, "unknown storage id 0");
  check_rejects(h + "t 0 4 temp w\nf 0\no aten::x 0 -\n", 4,
                "use after free: op 'aten::x' uses storage id 0, freed at line 3");
  check_rejects(h + "t 0 4 temp w\nf 0\no aten::x - 0\n", 4, "use after free");
  check_rejects(h + "f 0\n", 2, "free of unknown storage id 0");
  check_rejects(h + "t 0 4 temp w\nf 7\n", 3, "free of unknown storage id 7");
  check_rejects(h + "t 0 4 temp w\nf 0\n\nf 0\n", 5,
                "double free of storage id 0 (first freed at line 3)");
}

TEST_CASE("read_trace names the file; mutated copies of a real trace fail at the mutated line")
{
  auto const original_path = stash::test::data_path("traces/resnet18_b32.trace");
  auto const text          = slurp(original_path);
  auto const lines         = lines_of(text);
  REQUIRE(lines.size() > 1000);
  CHECK_NOTHROW((void)stash::parse_trace(std::string_view(text), "resnet18"));

  auto const dir = std::filesystem::temp_directory_path() / "stash_trace_reader_test";
  std::filesystem::create_directories(dir);
  auto const mutated_path = (dir / "resnet18_mutated.trace").string();

  auto check_mutation = [&](std::vector<std::string> const& mutated, std::size_t line,
                            std::string const& reason_part) {
    {
      std::ofstream out(mutated_path, std::ios::binary | std::ios::trunc);
      out << join(mutated);
    }
    try {
      (void)stash::read_trace(mutated_path);
      FAIL("read_trace accepted a mutated trace");
    } catch (stash::trace_error const& e) {
      CHECK(e.file() == mutated_path);
      CHECK(e.line() == line);
      CHECK_MESSAGE(e.reason().find(reason_part) != std::string::npos, std::string(e.what()));
    }
  };

  SUBCASE("header version")
  {
    auto m = lines;
    m[0].replace(m[0].find("v1"), 2, "v0");
    check_mutation(m, 1, "unsupported trace format version 'v0'");
  }
  SUBCASE("a deleted t line puts the next id out of order")
  {
    auto m       = lines;
    auto const i = find_line(m, "t 100 ");
    m.erase(m.begin() + static_cast<std::ptrdiff_t>(i));
    check_mutation(m, i + 1, "storage id out of order: expected 100, found 101");
  }
  SUBCASE("a repeated f line is a double free")
  {
    auto m       = lines;
    auto const i = find_line(m, "f ");
    m.insert(m.begin() + static_cast<std::ptrdiff_t>(i) + 1, m[i]);
    check_mutation(m, i + 2, "double free");
  }
  SUBCASE("freeing the conv1 output before the batch norm that reads it is a use after free")
  {
    // "o aten::native_batch_norm 188,..." reads storage 188 (conv1's output).
    auto m       = lines;
    auto const i = find_line(m, "o aten::native_batch_norm 188,");
    m.insert(m.begin() + static_cast<std::ptrdiff_t>(i), "f 188");
    check_mutation(m, i + 2, "use after free: op 'aten::native_batch_norm' uses storage id 188");
  }
  SUBCASE("an unknown kind")
  {
    auto m       = lines;
    auto const i = find_line(m, "t 5 ");
    m[i].replace(m[i].find(" param "), 7, " weight ");
    check_mutation(m, i + 1, "unknown storage kind 'weight'");
  }
  SUBCASE("a negative byte count")
  {
    auto m       = lines;
    auto const i = find_line(m, "t 7 ");
    m[i]         = "t 7 -256 param bn2.weight";
    check_mutation(m, i + 1, "bad byte count '-256'");
  }
  SUBCASE("an op naming an id not yet allocated")
  {
    auto m       = lines;
    auto const i = find_line(m, "o aten::convolution");
    m[i]         = "o aten::convolution 184,0 99999";
    check_mutation(m, i + 1, "unknown storage id 99999");
  }
  SUBCASE("a misspelt phase")
  {
    auto m       = lines;
    auto const i = find_line(m, "p backward");
    m[i]         = "p backwards";
    check_mutation(m, i + 1, "unknown phase 'backwards'");
  }
  SUBCASE("a file cut in the middle of a t line")
  {
    auto m       = lines;
    auto const i = find_line(m, "t 600 ");
    m.resize(i + 1);
    m[i] = m[i].substr(0, m[i].find(' ', 6));  // "t 600 <bytes>"
    check_mutation(m, i + 1, "truncated 't' line");
  }
  SUBCASE("a file cut in the middle of an o line")
  {
    auto m       = lines;
    auto const i = find_line(m, "o aten::convolution");
    m.resize(i + 1);
    m[i] = "o aten::convolution 184,0";
    check_mutation(m, i + 1, "truncated 'o' line");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("read_trace reports a missing file as a trace_error on line 0")
{
  try {
    (void)stash::read_trace("/nonexistent/stash/none.trace");
    FAIL("read_trace opened a missing file");
  } catch (stash::trace_error const& e) {
    CHECK(e.file() == "/nonexistent/stash/none.trace");
    CHECK(e.line() == 0);
    CHECK(e.reason() == "cannot open file");
  }
}

}  // namespace STASH_UNITY_ID
