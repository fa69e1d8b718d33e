/**
 * @file parse.hpp
 * @brief Small, allocation-free text helpers shared by the trace and CSV readers.
 */
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stash::detail {

/// Strips spaces and tabs at both ends.
[[nodiscard]] inline std::string_view trim(std::string_view s) noexcept
{
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) { s.remove_prefix(1); }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

/// Splits on `sep`, keeping empty fields (so "a,,b" has three).
[[nodiscard]] inline std::vector<std::string_view> split(std::string_view s, char sep)
{
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    auto const pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

/// Parses a whole decimal unsigned 64-bit number: no sign, no spaces, no trailing characters,
/// no overflow. Returns nullopt otherwise.
[[nodiscard]] inline std::optional<std::uint64_t> parse_u64(std::string_view s) noexcept
{
  if (s.empty()) { return std::nullopt; }
  std::uint64_t value   = 0;
  auto const* const end = s.data() + s.size();
  auto const [ptr, ec]  = std::from_chars(s.data(), end, value, 10);
  if (ec != std::errc{} || ptr != end) { return std::nullopt; }
  return value;
}

/// Longest line a trace or CSV reader accepts: a real line is a few hundred bytes (an op over
/// thousands of storages some tens of KiB); past this the input is not a trace (e.g. /dev/zero).
inline constexpr std::size_t max_line_bytes = std::size_t{16} << 20;

/// Longest part of an offending field or line an error message quotes.
inline constexpr std::size_t max_quote_bytes = 64;

/// `text` in single quotes, cut to max_quote_bytes with its length said when longer.
[[nodiscard]] inline std::string quote_prefix(std::string_view text)
{
  if (text.size() <= max_quote_bytes) { return "'" + std::string(text) + "'"; }
  return "'" + std::string(text.substr(0, max_quote_bytes)) + "...' (" +
         std::to_string(text.size()) + " bytes)";
}

/// What is wrong with one line of a text input (a NUL byte, too long), or empty when nothing.
[[nodiscard]] inline std::string text_line_problem(std::string_view line)
{
  if (line.size() > max_line_bytes) {
    return "line of " + std::to_string(line.size()) + " bytes, longer than the " +
           std::to_string(max_line_bytes >> 20) + " MiB a line may have (not a text trace?)";
  }
  if (line.find('\0') != std::string_view::npos) {
    return "NUL byte in the line (a trace is text; is this a binary file?)";
  }
  return {};
}

/// std::getline for untrusted input: false at the end of input; true with the line (without
/// its '\n') otherwise, or with `problem` set (and reading stopped) when the line holds a NUL
/// byte or grows past max_line_bytes, so an endless input without newlines ends in an error
/// instead of exhausting memory.
inline bool bounded_getline(std::istream& in, std::string& line, std::string& problem)
{
  line.clear();
  problem.clear();
  std::streambuf* const buf = in.rdbuf();
  bool any                  = false;
  for (;;) {
    auto const c = buf ? buf->sbumpc() : std::char_traits<char>::eof();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any;
    }
    any = true;
    if (c == '\n') { return true; }
    line.push_back(static_cast<char>(c));
    if (c == 0 || line.size() > max_line_bytes) {
      problem = text_line_problem(line);
      return true;
    }
  }
}

}  // namespace stash::detail
