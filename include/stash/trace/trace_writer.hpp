/**
 * @file trace_writer.hpp
 * @brief Writes a stash::trace as "stash-trace v1" text that read_trace reads back to an equal
 * trace (and, for a file in canonical form, to the same bytes).
 *
 * Canonical form: the header line `# stash-trace v1` followed by ` key=value` per entry, then one
 * event per line with single spaces, '-' for an empty id list, no label (and no trailing space)
 * for an empty label, and "\n" after every line. Comment and blank lines of a file that was read
 * are not part of the trace and are not written.
 */
#pragma once

#include <stash/trace/trace.hpp>
#include <stash/trace/trace_error.hpp>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <span>
#include <string>

namespace stash {
namespace detail {

inline void append_u64(std::string& out, std::uint64_t value)
{
  char digits[24];
  auto const result = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, result.ptr);
}

inline void append_id_list(std::string& out, std::span<storage_id const> ids)
{
  if (ids.empty()) {
    out += '-';
    return;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) { out += ','; }
    append_u64(out, ids[i]);
  }
}

}  // namespace detail

/// @brief The canonical v1 text of `t`.
/// @param t The trace.
/// @return The text.
[[nodiscard]] inline std::string to_trace_text(trace const& t)
{
  std::string out;
  // Roughly 24 bytes per event plus the labels: one allocation for typical traces.
  out.reserve(64 + 24 * t.events().size());
  out += "# stash-trace v1";
  for (auto const& entry : t.header()) {
    out += ' ';
    out += entry.key;
    out += '=';
    out += entry.value;
  }
  out += '\n';
  auto const storages = t.storages();
  auto const ops      = t.ops();
  for (auto const& event : t.events()) {
    switch (event.kind) {
      case event_kind::alloc: {
        auto const& s = storages[event.index];
        out += "t ";
        detail::append_u64(out, event.index);
        out += ' ';
        detail::append_u64(out, s.bytes);
        out += ' ';
        out += to_string(s.kind);
        if (!s.label.empty()) {
          out += ' ';
          out += s.label;
        }
        break;
      }
      case event_kind::free:
        out += "f ";
        detail::append_u64(out, event.index);
        break;
      case event_kind::op: {
        auto const& o = ops[event.index];
        out += "o ";
        out += o.name;
        out += ' ';
        detail::append_id_list(out, o.reads);
        out += ' ';
        detail::append_id_list(out, o.writes);
        break;
      }
      case event_kind::phase:
        out += "p ";
        out += to_string(event.phase_value());
        break;
    }
    out += '\n';
  }
  return out;
}

/// @brief Writes the canonical v1 text of `t` to `out`. Does not throw on stream failure; check
/// the stream.
/// @param out The stream.
/// @param t The trace.
inline void write_trace(std::ostream& out, trace const& t)
{
  auto const text = to_trace_text(t);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

/// @brief Writes the canonical v1 text of `t` to the file `path`, replacing it.
/// @throws stash::trace_error naming the file if it cannot be opened or written.
/// @param path The file.
/// @param t The trace.
inline void write_trace(std::filesystem::path const& path, trace const& t)
{
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) { throw trace_error(path.string(), 0, "cannot open file for writing"); }
  write_trace(out, t);
  out.flush();
  if (!out) { throw trace_error(path.string(), 0, "write error"); }
}

}  // namespace stash
