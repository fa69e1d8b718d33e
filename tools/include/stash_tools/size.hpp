/**
 * @file size.hpp
 * @brief The one grammar of sizes and budgets that stash's tools accept (stash-plan --budget,
 * train_cnn --budget, STASH_BUDGET of the PyTorch allocator):
 *
 *     size    := number [" "] [unit]
 *     number  := digits ["." digits] | "." digits      (decimal; no sign, no exponent)
 *     unit    := "B"                                   (bytes)
 *              | K | M | G | T  ["i"] ["B"]            (powers of 1024: K, Ki, KiB, ...)
 *              | kB | KB | MB | GB | TB                (powers of 1000)
 *     budget  := size | number "%"                     (a share of a peak the tool knows)
 *
 * Units are case-insensitive ("512mib" is 512 MiB) except that an SI unit needs its "B": "K",
 * "Ki" and "KiB" are 1024 bytes, "kB" and "KB" are 1000. The value must be a whole number of
 * bytes below 2^64 ("1.5KiB" is 1536; "0.5" and "1.3B" are refused rather than rounded). What a
 * zero means is the tool's to decide (stash-plan and train_cnn refuse it; STASH_BUDGET reads it
 * as "no budget").
 *
 * The parsers throw stash_tools::size_error, whose what() is the reason only (e.g. "is not a
 * size: unknown unit 'XB'"), so each tool can name the input its own way ("--budget: '7XB' ...",
 * "STASH_BUDGET='7XB': ...") and throw its own error type.
 */
#pragma once

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace stash_tools {

/// @brief A text that is not a size or budget; what() says why, without the text itself.
class size_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// @brief Examples of the grammar, for error messages and usage texts.
inline constexpr std::string_view size_examples = "e.g. 1048576, 512MiB, 1.5GiB, 8GB";

namespace detail {

// The decimal number at the front of a size: its integer digits, its fraction digits (trailing
// zeros dropped, so that "1.50" and "1.5" are one value) and where the unit starts.
struct decimal_prefix {
  std::string_view whole;
  std::string_view fraction;
  std::size_t end{0};
};

inline decimal_prefix split_decimal(std::string_view text)
{
  decimal_prefix d;
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') { ++i; }
  d.whole = text.substr(0, i);
  if (i < text.size() && text[i] == '.') {
    std::size_t const start = ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') { ++i; }
    d.fraction = text.substr(start, i - start);
    if (d.whole.empty() && d.fraction.empty()) { throw size_error("is not a size"); }
    if (i < text.size() && text[i] == '.') { throw size_error("is not a size: malformed number"); }
  }
  while (!d.fraction.empty() && d.fraction.back() == '0') { d.fraction.remove_suffix(1); }
  d.end = i;
  return d;
}

inline char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Bytes per unit, or nullopt for an unknown unit. `unit` is what follows the number (and its
// optional space).
inline std::optional<std::uint64_t> unit_scale(std::string_view unit)
{
  if (unit.empty()) { return 1; }
  std::string u;
  for (char const c : unit) { u.push_back(lower(c)); }
  if (u == "b") { return 1; }
  std::string_view const prefixes = "kmgt";
  auto const p                    = prefixes.find(u.front());
  if (p == std::string_view::npos) { return std::nullopt; }
  std::uint64_t binary = 1;
  std::uint64_t si     = 1;
  for (std::size_t k = 0; k <= p; ++k) {
    binary *= 1024;
    si *= 1000;
  }
  std::string_view const rest = std::string_view(u).substr(1);
  if (rest.empty() || rest == "i" || rest == "ib") { return binary; }
  if (rest == "b") { return si; }
  return std::nullopt;
}

// a * b + c, or nullopt when it does not fit in 64 bits.
inline std::optional<std::uint64_t> checked_mul_add(std::uint64_t a, std::uint64_t b,
                                                    std::uint64_t c)
{
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  if (b != 0 && a > (max - c) / b) { return std::nullopt; }
  return a * b + c;
}

}  // namespace detail

/// @brief Parses a size (see the file's grammar) into bytes. Exact: no floating point, so every
/// value up to 2^64 - 1 is read as written.
/// @param text The size, e.g. "1048576", "512MiB", "1.5 GiB", "8GB".
/// @throws size_error when `text` is not a size, is not a whole number of bytes or does not fit
/// in 64 bits.
[[nodiscard]] inline std::uint64_t parse_size(std::string_view text)
{
  if (text.empty()) { throw size_error("is empty"); }
  if (text.front() == '-') { throw size_error("is negative"); }
  auto const d = detail::split_decimal(text);
  if (d.whole.empty() && d.fraction.empty() && d.end == 0) {
    throw size_error("is not a size: it does not start with a number");
  }
  std::string_view unit = text.substr(d.end);
  if (!unit.empty() && unit.front() == ' ') { unit.remove_prefix(1); }
  auto const scale = detail::unit_scale(unit);
  if (!scale) { throw size_error("is not a size: unknown unit '" + std::string(unit) + "'"); }

  std::uint64_t whole = 0;
  for (char const c : d.whole) {
    auto const next = detail::checked_mul_add(whole, 10, static_cast<std::uint64_t>(c - '0'));
    if (!next) { throw size_error("is too large"); }
    whole = *next;
  }
  // The fraction f / 10^n adds f * scale / 10^n bytes, which must be whole: with g the common
  // factor of scale and 10^n, that is (f / (10^n / g)) * (scale / g), exact in 64 bits.
  std::uint64_t fraction_bytes = 0;
  if (!d.fraction.empty()) {
    if (d.fraction.size() > 18) { throw size_error("is not a whole number of bytes"); }
    std::uint64_t f = 0;
    std::uint64_t p = 1;
    for (char const c : d.fraction) {
      f = f * 10 + static_cast<std::uint64_t>(c - '0');
      p *= 10;
    }
    std::uint64_t const g = std::gcd(*scale, p);
    if (f % (p / g) != 0) { throw size_error("is not a whole number of bytes"); }
    fraction_bytes = f / (p / g) * (*scale / g);
  }
  auto const bytes = detail::checked_mul_add(whole, *scale, fraction_bytes);
  if (!bytes) { throw size_error("is too large"); }
  return *bytes;
}

/// @brief A budget: absolute bytes, or a share of a peak the tool knows (e.g. the no_swap peak).
struct budget_spec {
  std::optional<std::uint64_t> bytes;  ///< set for an absolute budget
  double percent{0};                   ///< used when `bytes` is unset: 70 means 70 %

  /// @brief The budget for an input whose reference peak is `peak`: the bytes, or the share
  /// rounded down to whole bytes.
  /// @param peak The peak a percentage is of.
  [[nodiscard]] std::uint64_t resolve(std::uint64_t peak) const
  {
    if (bytes) { return *bytes; }
    return static_cast<std::uint64_t>(static_cast<double>(peak) * percent / 100.0);
  }
};

/// @brief The largest percentage parse_budget takes (100x the peak): beyond it, bytes overflow.
inline constexpr double max_budget_percent = 10000.0;

/// @brief Parses a budget: a size (parse_size) or a positive percentage such as "70%" or
/// "12.5%". A zero size is returned as 0 bytes; the caller decides whether that is allowed.
/// @param text The budget.
/// @throws size_error for a malformed size or percentage, or a percentage of 0.
[[nodiscard]] inline budget_spec parse_budget(std::string_view text)
{
  budget_spec spec;
  if (text.empty() || text.back() != '%') {
    spec.bytes = parse_size(text);
    return spec;
  }
  std::string_view const number = text.substr(0, text.size() - 1);
  bool const decimal            = [&] {
    try {
      auto const d = detail::split_decimal(number);
      return d.end == number.size() && d.end > 0 && number != ".";
    } catch (size_error const&) {
      return false;
    }
  }();
  if (!decimal) { throw size_error("is not a percentage (expected e.g. 70%)"); }
  // strtod, not std::stod: hundreds of digits overflow to HUGE_VAL instead of throwing
  // std::out_of_range past the caller's size_error handler.
  spec.percent = std::strtod(std::string(number).c_str(), nullptr);
  if (spec.percent <= 0) { throw size_error("must be more than 0%"); }
  if (!(spec.percent <= max_budget_percent)) {
    throw size_error("is more than " + std::to_string(static_cast<int>(max_budget_percent)) +
                     "% (a budget that large is a typo)");
  }
  return spec;
}

}  // namespace stash_tools
