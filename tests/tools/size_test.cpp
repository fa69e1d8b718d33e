// The tools' one size and budget grammar (stash_tools/size.hpp), which stash-plan, train_cnn and
// the PyTorch allocator all read.
#include <stash_tools/size.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

namespace STASH_UNITY_ID {

namespace {

std::string reason_of(char const* text)
{
  try {
    (void)stash_tools::parse_size(text);
  } catch (stash_tools::size_error const& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("sizes: numbers, units in powers of 1024 and of 1000, case, one space")
{
  using stash_tools::parse_size;
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("1048576") == 1048576);
  CHECK(parse_size("7B") == 7);
  CHECK(parse_size("4K") == 4096);
  CHECK(parse_size("4Ki") == 4096);
  CHECK(parse_size("4KiB") == 4096);
  CHECK(parse_size("3KB") == 3000);
  CHECK(parse_size("3kB") == 3000);
  CHECK(parse_size("64M") == 64ULL << 20);
  CHECK(parse_size("512mib") == 512ULL << 20);
  CHECK(parse_size("6GiB") == 6ULL << 30);
  CHECK(parse_size("8GB") == 8'000'000'000ULL);
  CHECK(parse_size("2T") == 2ULL << 40);
  CHECK(parse_size("2TB") == 2'000'000'000'000ULL);
  CHECK(parse_size("1.5GiB") == 3ULL << 29);
  CHECK(parse_size("1.5 KiB") == 1536);
  CHECK(parse_size("1.50KiB") == 1536);
  CHECK(parse_size(".5KiB") == 512);
  CHECK(parse_size("2.KiB") == 2048);
  CHECK(parse_size("0.001KB") == 1);
  // Exact to the last byte: no floating point on the way.
  CHECK(parse_size("18446744073709551615") == UINT64_MAX);
  CHECK(parse_size("9007199254740993") == 9007199254740993ULL);
}

TEST_CASE("sizes: what is refused, and why")
{
  for (char const* bad : {"", "-5", "GiB", "abc", "7XB", "1e9", "inf", "1..5GiB", "1.2.3", "5 GiB ",
                          "5  GiB", "0.5", "1.3B", "1.0000000000000000001", "18446744073709551616",
                          "99999999999TiB", "16777216TiB", "%", "."}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)stash_tools::parse_size(bad), stash_tools::size_error);
  }
  CHECK(reason_of("") == "is empty");
  CHECK(reason_of("-5MiB") == "is negative");
  CHECK(reason_of("lots") == "is not a size: it does not start with a number");
  CHECK(reason_of("7XB") == "is not a size: unknown unit 'XB'");
  CHECK(reason_of("1.2.3") == "is not a size: malformed number");
  CHECK(reason_of("0.5") == "is not a whole number of bytes");
  CHECK(reason_of("18446744073709551616") == "is too large");
  CHECK(reason_of("16777216TiB") == "is too large");
}

TEST_CASE("budgets: a size or a positive percentage")
{
  using stash_tools::parse_budget;
  auto const absolute = parse_budget("2GiB");
  REQUIRE(absolute.bytes.has_value());
  CHECK(absolute.resolve(1) == 2ULL << 30);
  auto const percent = parse_budget("70%");
  CHECK_FALSE(percent.bytes.has_value());
  CHECK(percent.resolve(1000) == 700);
  CHECK(parse_budget("12.5%").resolve(800) == 100);
  CHECK(parse_budget("0").bytes == std::uint64_t{0});  // the tool decides what zero means
  for (char const* bad : {"0%", "abc%", "-5%", "%", ".%", "1.2.3%", "7XB"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)parse_budget(bad), stash_tools::size_error);
  }
}

}  // namespace STASH_UNITY_ID
