/**
 * @file trace_reader.hpp
 * @brief Reads "stash-trace v1" text into a stash::trace, rejecting anything malformed with a
 * stash::trace_error that names file, line and what is wrong.
 *
 * Format (data/README.md): a first line `# stash-trace v1 key=value ...`, then one event per line:
 * `t <id> <bytes> <kind> <label>`, `o <op> <reads> <writes>`, `f <id>`, `p <phase>`. Fields are
 * separated by spaces or tabs; a `t` label is the rest of the line (trimmed, may be empty).
 * Blank lines and further `#` comment lines are accepted anywhere and dropped. Lines may end in
 * "\r\n". Header keys `recompute.<op>` and `recompute@<index>` declare which ops may be re-run
 * (recompute_semantics.hpp); a malformed one is a trace_error on the header line.
 */
#pragma once

#include <stash/trace/detail/parse.hpp>
#include <stash/trace/recompute_semantics.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace stash {
namespace detail {

/// The next space/tab-separated field of `rest`, removing it (and the blanks before it).
[[nodiscard]] inline std::string_view next_field(std::string_view& rest) noexcept
{
  std::size_t begin = 0;
  while (begin < rest.size() && (rest[begin] == ' ' || rest[begin] == '\t')) { ++begin; }
  std::size_t end = begin;
  while (end < rest.size() && rest[end] != ' ' && rest[end] != '\t') { ++end; }
  auto const field = rest.substr(begin, end - begin);
  rest.remove_prefix(end);
  return field;
}

/// Parses one "stash-trace v1" text; see read_trace/parse_trace for the contract.
class trace_text_parser {
 public:
  trace_text_parser(std::string_view text, std::string const& source) : text_(text), source_(source)
  {
  }

  stash::trace run()
  {
    reserve_from_line_starts();
    std::size_t pos = 0;
    while (pos < text_.size()) {
      auto const newline = text_.find('\n', pos);
      auto const stop    = newline == std::string_view::npos ? text_.size() : newline;
      auto line          = text_.substr(pos, stop - pos);
      pos                = stop + 1;
      ++line_no_;
      if (auto const problem = detail::text_line_problem(line); !problem.empty()) { fail(problem); }
      if (!line.empty() && line.back() == '\r') { line.remove_suffix(1); }
      if (line.find('\r') != std::string_view::npos) {
        fail("carriage return inside a line (only a final \"\\r\\n\" line ending is accepted)");
      }
      parse_line(line);
    }
    if (!header_seen_) {
      throw trace_error(source_, 0, "empty trace: missing the header line '# stash-trace v1 ...'");
    }
    for (auto const& entry : trace_.header()) {  // op indices are known only now
      auto const problem = check_recompute_declaration(entry, trace_.ops().size());
      if (!problem.empty()) { throw trace_error(source_, header_line_, problem); }
    }
    return std::move(trace_);
  }

 private:
  // Messages quote at most a prefix of what they name (quoted), and are cut as a whole too: a
  // message from the trace's own checks may hold a whole label or header value.
  [[noreturn]] void fail(std::string what) const
  {
    constexpr std::size_t max_message = 4 * detail::max_quote_bytes + 256;
    if (what.size() > max_message) { what = what.substr(0, max_message) + "... (message cut)"; }
    throw trace_error(source_, line_no_, what);
  }

  static std::string quoted(std::string_view s) { return detail::quote_prefix(s); }

  // A pre-pass over line starts sizes the vectors once: reading stays linear and cheap.
  void reserve_from_line_starts()
  {
    std::size_t lines = 0, allocs = 0, ops = 0;
    std::size_t pos = 0;
    while (pos < text_.size()) {
      char const c = text_[pos];
      allocs += c == 't';
      ops += c == 'o';
      ++lines;
      auto const* nl =
          static_cast<char const*>(std::memchr(text_.data() + pos, '\n', text_.size() - pos));
      if (nl == nullptr) { break; }
      pos = static_cast<std::size_t>(nl - text_.data()) + 1;
    }
    trace_.reserve(allocs, ops, lines);
    free_line_.reserve(allocs);
  }

  void parse_line(std::string_view line)
  {
    auto const body = detail::trim(line);
    if (body.empty()) { return; }
    if (body.front() == '#') {
      if (!header_seen_) { parse_header(body.substr(1)); }
      return;  // later comment lines are dropped
    }
    if (!header_seen_) {
      fail("missing header: the first line must be '# stash-trace v1 ...', found " + quoted(body));
    }
    auto rest         = body;
    auto const letter = next_field(rest);
    if (letter == "t") {
      parse_alloc(rest);
    } else if (letter == "o") {
      parse_op(rest);
    } else if (letter == "f") {
      parse_free(rest);
    } else if (letter == "p") {
      parse_phase(rest);
    } else {
      fail("unknown event " + quoted(letter) + " (expected t, o, f or p)");
    }
  }

  void parse_header(std::string_view rest)
  {
    auto const magic = next_field(rest);
    if (magic != "stash-trace") {
      fail("bad header: expected '# stash-trace v1 ...', found " +
           quoted("#" + std::string(magic)));
    }
    auto const version = next_field(rest);
    if (version.empty()) {
      fail("bad header: missing format version after 'stash-trace' (expected v1)");
    }
    if (version != "v1") {
      fail("unsupported trace format version " + quoted(version) + " (expected v1)");
    }
    while (true) {
      auto const entry = next_field(rest);
      if (entry.empty()) { break; }
      auto const eq = entry.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        fail("bad header entry " + quoted(entry) + ": expected key=value");
      }
      auto const key = entry.substr(0, eq);
      if (trace_.header_value(key)) { fail("duplicate header key " + quoted(key)); }
      guarded([&] { trace_.add_header(std::string(key), std::string(entry.substr(eq + 1))); });
      auto const problem = check_recompute_declaration(trace_.header().back(), std::nullopt);
      if (!problem.empty()) { fail(problem); }
    }
    header_seen_ = true;
    header_line_ = line_no_;
  }

  std::uint64_t number(std::string_view field, char const* what)
  {
    auto const value = detail::parse_u64(field);
    if (!value) {
      fail(std::string("bad ") + what + " " + quoted(field) +
           ": expected an unsigned decimal integer below 2^64");
    }
    return *value;
  }

  void expect_end(std::string_view rest, char letter)
  {
    auto const extra = next_field(rest);
    if (!extra.empty()) {
      fail(std::string("unexpected extra field ") + quoted(extra) + " in '" + letter + "' line");
    }
  }

  // Checks that `id` names a live storage for use by op `op_name`.
  void check_live(std::uint64_t id, std::string_view op_name)
  {
    auto const count = trace_.storages().size();
    if (id >= count) {
      fail("op " + quoted(op_name) + " names unknown storage id " + std::to_string(id) + " (" +
           std::to_string(count) + " allocated so far)");
    }
    if (free_line_[id] != 0) {
      fail("use after free: op " + quoted(op_name) + " uses storage id " + std::to_string(id) +
           ", freed at line " + std::to_string(free_line_[id]));
    }
  }

  void parse_alloc(std::string_view rest)
  {
    auto const id_field    = next_field(rest);
    auto const bytes_field = next_field(rest);
    auto const kind_field  = next_field(rest);
    if (kind_field.empty()) {
      fail("truncated 't' line: expected 't <id> <bytes> <kind> <label>'");
    }
    auto const id       = number(id_field, "storage id");
    auto const expected = trace_.storages().size();
    if (id != expected) {
      fail("storage id out of order: expected " + std::to_string(expected) + ", found " +
           std::to_string(id) + " (ids are 0, 1, 2, ... in order of 't' lines)");
    }
    auto const bytes = number(bytes_field, "byte count");
    auto const kind  = storage_kind_from_string(kind_field);
    if (!kind) {
      fail("unknown storage kind " + quoted(kind_field) +
           " (expected param, optstate, input, grad, act or temp)");
    }
    auto const label = detail::trim(rest);
    guarded([&] { trace_.add_alloc(bytes, *kind, std::string(label)); });
    free_line_.push_back(0);
  }

  std::vector<storage_id> id_list(std::string_view field, std::string_view op_name,
                                  char const* what)
  {
    std::vector<storage_id> ids;
    if (field == "-") { return ids; }
    ids.reserve(static_cast<std::size_t>(std::count(field.begin(), field.end(), ',')) + 1);
    while (true) {
      auto const comma = field.find(',');
      auto const item  = field.substr(0, comma);
      auto const id    = number(item, what);
      check_live(id, op_name);
      ids.push_back(id);
      if (comma == std::string_view::npos) { break; }
      field.remove_prefix(comma + 1);
    }
    return ids;
  }

  void parse_op(std::string_view rest)
  {
    auto const name   = next_field(rest);
    auto const reads  = next_field(rest);
    auto const writes = next_field(rest);
    if (writes.empty()) {
      fail("truncated 'o' line: expected 'o <op> <reads> <writes>' (use '-' for an empty list)");
    }
    expect_end(rest, 'o');
    auto read_ids  = id_list(reads, name, "storage id in the read list");
    auto write_ids = id_list(writes, name, "storage id in the write list");
    guarded([&] { trace_.add_op(std::string(name), std::move(read_ids), std::move(write_ids)); });
  }

  void parse_free(std::string_view rest)
  {
    auto const id_field = next_field(rest);
    if (id_field.empty()) { fail("truncated 'f' line: expected 'f <id>'"); }
    expect_end(rest, 'f');
    auto const id    = number(id_field, "storage id");
    auto const count = trace_.storages().size();
    if (id >= count) {
      fail("free of unknown storage id " + std::to_string(id) + " (" + std::to_string(count) +
           " allocated so far)");
    }
    if (free_line_[id] != 0) {
      fail("double free of storage id " + std::to_string(id) + " (first freed at line " +
           std::to_string(free_line_[id]) + ")");
    }
    guarded([&] { trace_.add_free(id); });
    free_line_[id] = line_no_;
  }

  void parse_phase(std::string_view rest)
  {
    auto const name = next_field(rest);
    if (name.empty()) { fail("truncated 'p' line: expected 'p <phase>'"); }
    expect_end(rest, 'p');
    auto const p = phase_from_string(name);
    if (!p) {
      fail("unknown phase " + quoted(name) + " (expected forward, backward or optimizer)");
    }
    guarded([&] { trace_.add_phase(*p); });
  }

  // The checks above mirror stash::trace's own; should they ever drift apart, the trace's
  // logic_error still surfaces as a located trace_error instead of escaping the reader.
  template <class F>
  void guarded(F&& append)
  {
    try {
      append();
    } catch (stash::logic_error const& e) {
      fail(e.what());
    }
  }

  std::string_view text_;
  std::string const& source_;
  std::size_t line_no_     = 0;
  bool header_seen_        = false;
  std::size_t header_line_ = 0;
  stash::trace trace_;
  std::vector<std::size_t> free_line_;  // per storage: line of its 'f', 0 while live
};

}  // namespace detail

/// @brief Parses trace text held in memory; `source_name` names it in errors.
/// @throws stash::trace_error ("source:line: what") on any malformed input.
/// @param text The trace text.
/// @param source_name Its name, for errors.
/// @return The trace.
[[nodiscard]] inline trace parse_trace(std::string_view text, std::string const& source_name)
{
  return detail::trace_text_parser(text, source_name).run();
}

/// @brief Parses a whole stream as trace text; `source_name` names it in errors.
/// @throws stash::trace_error ("source:line: what") on any malformed input or a read error.
/// @param in The stream.
/// @param source_name Its name, for errors.
/// @return The trace.
[[nodiscard]] inline trace parse_trace(std::istream& in, std::string const& source_name)
{
  // Checked while reading: a stream may never end (/dev/zero), so a NUL byte or an overlong line
  // stops it with an error before it fills memory.
  std::string text;
  std::string line, problem;
  std::size_t line_no = 0;
  while (detail::bounded_getline(in, line, problem)) {
    ++line_no;
    if (!problem.empty()) { throw trace_error(source_name, line_no, problem); }
    text.append(line);
    if (!in.eof()) { text.push_back('\n'); }
  }
  if (in.bad()) { throw trace_error(source_name, 0, "read error"); }
  return parse_trace(std::string_view(text), source_name);
}

/// @brief Reads a "stash-trace v1" file.
/// @throws stash::trace_error naming the file (and line) if it cannot be read or is malformed.
/// @param path The file.
/// @return The trace.
[[nodiscard]] inline trace read_trace(std::filesystem::path const& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in) { throw trace_error(path.string(), 0, "cannot open file"); }
  std::string text;
  std::error_code ec;
  auto const size = std::filesystem::file_size(path, ec);
  if (!ec) {
    text.resize(static_cast<std::size_t>(size));
    in.read(text.data(), static_cast<std::streamsize>(size));
    text.resize(static_cast<std::size_t>(in.gcount()));
    if (in.bad()) { throw trace_error(path.string(), 0, "read error"); }
    return parse_trace(std::string_view(text), path.string());
  }
  return parse_trace(in, path.string());
}

}  // namespace stash
