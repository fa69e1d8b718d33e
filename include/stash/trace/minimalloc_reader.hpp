/**
 * @file minimalloc_reader.hpp
 * @brief Reads MiniMalloc's CSV instances (`id,lower,upper,size`) into lifetime intervals.
 *
 * MiniMalloc (Moffitt, ASPLOS 2023) publishes offset-assignment instances as CSV with the header
 * `id,lower,upper,size`: buffer `id` is live over [lower, upper) and needs `size` bytes. Its
 * "challenging" files are named `<name>.<capacity>.csv`; the capacity is taken from the name.
 */
#pragma once

#include <stash/trace/detail/parse.hpp>
#include <stash/trace/lifetime_interval.hpp>
#include <stash/trace/trace_error.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace stash {

/// @brief An offset-assignment instance: blocks with lifetimes, and the capacity if one is known.
struct minimalloc_instance {
  std::string name;                        ///< file name (or source name)
  std::vector<lifetime_interval> buffers;  ///< one per CSV row, in file order
  std::optional<std::uint64_t> capacity;   ///< from `<name>.<capacity>.csv`, if present
};

/// @brief Parses CSV text; `source` names it in errors. Throws stash::trace_error (file:line) on
/// a missing header, a wrong column count, a bad number, lower >= upper, size 0 or a repeated id.
/// @param in The CSV text.
/// @param source Its name, for errors.
/// @return The instance.
/// @throws stash::trace_error At the file and line at fault.
[[nodiscard]] inline minimalloc_instance parse_minimalloc_csv(std::istream& in,
                                                              std::string const& source)
{
  minimalloc_instance instance;
  instance.name = source;
  std::string line, problem;
  std::size_t line_no = 0;
  bool header_seen    = false;
  std::unordered_set<std::uint64_t> ids;
  while (detail::bounded_getline(in, line, problem)) {
    ++line_no;
    if (!problem.empty()) { throw trace_error(source, line_no, problem); }
    if (!line.empty() && line.back() == '\r') { line.pop_back(); }
    if (detail::trim(line).empty()) { continue; }
    auto const fields = detail::split(line, ',');
    if (!header_seen) {
      if (fields.size() != 4 || detail::trim(fields[0]) != "id" ||
          detail::trim(fields[1]) != "lower" || detail::trim(fields[2]) != "upper" ||
          detail::trim(fields[3]) != "size") {
        throw trace_error(source, line_no, "expected the header 'id,lower,upper,size'");
      }
      header_seen = true;
      continue;
    }
    if (fields.size() != 4) {
      throw trace_error(
          source, line_no,
          "expected 4 comma-separated fields, found " + std::to_string(fields.size()));
    }
    static constexpr const char* names[] = {"id", "lower", "upper", "size"};
    std::uint64_t values[4];
    for (int i = 0; i < 4; ++i) {
      auto const v = detail::parse_u64(detail::trim(fields[static_cast<std::size_t>(i)]));
      if (!v) {
        throw trace_error(source, line_no,
                          std::string("bad number for ") + names[i] + ": '" +
                              std::string(detail::trim(fields[static_cast<std::size_t>(i)])) + "'");
      }
      values[i] = *v;
    }
    if (values[1] >= values[2]) {
      throw trace_error(source, line_no,
                        "empty lifetime: lower (" + std::to_string(values[1]) +
                            ") must be below upper (" + std::to_string(values[2]) + ")");
    }
    if (values[3] == 0) { throw trace_error(source, line_no, "size must be positive"); }
    if (!ids.insert(values[0]).second) {
      throw trace_error(source, line_no, "duplicate id " + std::to_string(values[0]));
    }
    instance.buffers.push_back(lifetime_interval{values[0], values[1], values[2], values[3]});
  }
  if (in.bad()) { throw trace_error(source, line_no, "read error"); }
  if (!header_seen) {
    throw trace_error(source, 0, "empty file: expected the header 'id,lower,upper,size'");
  }
  return instance;
}

/// @brief Reads a MiniMalloc CSV file; the capacity comes from a `<name>.<capacity>.csv` name.
/// @param path The file.
/// @return The instance.
/// @throws stash::trace_error When the file cannot be read or is malformed.
[[nodiscard]] inline minimalloc_instance read_minimalloc_csv(std::filesystem::path const& path)
{
  std::ifstream in(path);
  if (!in) { throw trace_error(path.string(), 0, "cannot open file"); }
  minimalloc_instance instance = parse_minimalloc_csv(in, path.string());
  auto const stem              = path.stem().string();  // "A.1048576"
  auto const dot               = stem.rfind('.');
  if (dot != std::string::npos) { instance.capacity = detail::parse_u64(stem.substr(dot + 1)); }
  return instance;
}

}  // namespace stash
