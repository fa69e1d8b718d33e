/**
 * @file json_string.hpp
 * @brief One JSON string encoder for every tool (RFC 8259 section 7): quotes, backslashes and
 * control characters escaped, valid UTF-8 passed through, and every byte that is not part of a
 * valid UTF-8 sequence (labels come from files) replaced by U+FFFD, so the output is always
 * valid UTF-8 and valid JSON.
 */
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace stash_tools {

/// @brief Length of the valid UTF-8 sequence starting at text[i] (1 to 4), or 0 when the bytes
/// there are not one (a stray continuation byte, a truncated sequence, an overlong form, a
/// surrogate or a code point above U+10FFFF).
[[nodiscard]] inline std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept
{
  auto const byte        = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char const b0 = byte(i);
  if (b0 < 0x80) { return 1; }
  std::size_t len  = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) { lo = 0xA0; }  // no overlong forms
    if (b0 == 0xED) { hi = 0x9F; }  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) { lo = 0x90; }  // no overlong forms
    if (b0 == 0xF4) { hi = 0x8F; }  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > text.size()) { return 0; }
  if (byte(i + 1) < lo || byte(i + 1) > hi) { return 0; }
  for (std::size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) { return 0; }
  }
  return len;
}

/// @brief Appends `text` to `out` as a JSON string, quotes included (see the file comment).
inline void append_json_string(std::string& out, std::string_view text)
{
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    char const c = text[i];
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      case '\b':
        out += "\\b";
        ++i;
        continue;
      case '\f':
        out += "\\f";
        ++i;
        continue;
      default:
        break;
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(c));
      out += buffer;
      ++i;
      continue;
    }
    auto const len = utf8_sequence_length(text, i);
    if (len == 0) {
      out += "\\ufffd";  // not UTF-8: the replacement character, one per byte
      ++i;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  out += '"';
}

/// @brief `text` as a JSON string, quotes included.
[[nodiscard]] inline std::string json_string(std::string_view text)
{
  std::string out;
  out.reserve(text.size() + 2);
  append_json_string(out, text);
  return out;
}

}  // namespace stash_tools
