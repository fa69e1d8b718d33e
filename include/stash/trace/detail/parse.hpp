/**
 * @file parse.hpp
 * @brief Small, allocation-free text helpers shared by the trace and CSV readers.
 */
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
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

}  // namespace stash::detail
