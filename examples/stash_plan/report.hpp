/**
 * @file report.hpp
 * @brief stash-plan's per-file report and the analysis steps that fill it.
 *
 * Each input becomes one `file_report`. Analysis steps fill sections of it; the text and JSON
 * printers only read it. A later step (planners, pool replays, swap policies) adds a section
 * here, a function filling it, and a few lines in each printer.
 */
#pragma once

#include <stash/trace/lifetime.hpp>
#include <stash/trace/minimalloc_reader.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_error.hpp>
#include <stash/trace/trace_reader.hpp>

#include <cctype>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stash_plan {

/// @brief What kind of input a file is.
enum class input_format { stash_trace_v1, minimalloc_csv };

/// @brief The spelling used in reports.
inline char const* to_string(input_format format)
{
  return format == input_format::stash_trace_v1 ? "stash-trace v1" : "minimalloc-csv";
}

/// @brief One storage kind's line in the report.
struct kind_summary {
  stash::storage_kind kind{};
  std::uint64_t count{};
  std::uint64_t bytes{};
  std::uint64_t live_at_peak_bytes{};
};

/// @brief Where the peak of live bytes happens.
struct peak_location {
  std::uint64_t time{};                 ///< event index (trace) or time step (CSV)
  std::optional<stash::phase> phase;    ///< trace only
  std::optional<std::uint64_t> op;      ///< trace only: op index the peak belongs to
  std::optional<std::string> op_name;   ///< trace only
};

/// @brief Everything stash-plan reports about one input.
struct file_report {
  std::string file;
  std::optional<input_format> format;
  std::optional<std::string> error;  ///< set when the file could not be read or analysed

  // Summary (both formats; trace-only fields stay empty for CSV).
  std::vector<stash::header_entry> header;
  std::uint64_t tensors{};
  std::uint64_t ops{};
  std::uint64_t events{};
  std::uint64_t lower_bound_bytes{};
  std::optional<peak_location> peak;
  std::optional<std::uint64_t> activation_bytes;
  std::vector<kind_summary> kinds;
  std::optional<std::uint64_t> capacity_bytes;  ///< MiniMalloc: from the file name
};

/// @brief Guesses the format: a `.csv` extension or a first line `id,lower,upper,size` means a
/// MiniMalloc CSV; anything else is read as a trace (whose reader reports a bad header).
inline input_format detect_format(std::filesystem::path const& path)
{
  auto extension = path.extension().string();
  for (auto& c : extension) { c = static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
  if (extension == ".csv") { return input_format::minimalloc_csv; }
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto const first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) { continue; }
    auto const body = line.substr(first, line.find_last_not_of(" \t\r") + 1 - first);
    return body == "id,lower,upper,size" ? input_format::minimalloc_csv
                                         : input_format::stash_trace_v1;
  }
  return input_format::stash_trace_v1;
}

/// @brief Analysis step: counts, lower bound, peak location and per-kind bytes of a trace.
inline void summarize_trace(file_report& report, stash::trace const& t)
{
  report.header.assign(t.header().begin(), t.header().end());
  report.tensors = t.storages().size();
  report.ops     = t.ops().size();
  report.events  = t.events().size();
  auto const life          = stash::analyze_lifetimes(t);
  report.lower_bound_bytes = life.peak_live_bytes;
  report.activation_bytes  = life.activation_bytes;
  if (life.peak_event) {
    peak_location peak;
    peak.time  = *life.peak_event;
    peak.phase = life.peak_phase;
    peak.op    = life.peak_op;
    if (life.peak_op) { peak.op_name = t.ops()[*life.peak_op].name; }
    report.peak = std::move(peak);
  }
  for (auto const kind : stash::all_storage_kinds) {
    auto const k = static_cast<std::size_t>(kind);
    report.kinds.push_back(
      kind_summary{kind, life.count_by_kind[k], life.bytes_by_kind[k], life.live_at_peak_by_kind[k]});
  }
}

/// @brief Analysis step: buffer count, lower bound and capacity of a MiniMalloc instance.
inline void summarize_instance(file_report& report, stash::minimalloc_instance const& instance)
{
  report.tensors        = instance.buffers.size();
  auto const peak       = stash::peak_live(instance.buffers);
  report.lower_bound_bytes = peak.bytes;
  if (!instance.buffers.empty()) { report.peak = peak_location{peak.time, {}, {}, {}}; }
  report.capacity_bytes = instance.capacity;
}

/// @brief Reads and analyses one input. Never throws for a bad input: the message lands in
/// `error` ("file:line: what" for malformed files).
inline file_report analyze_file(std::filesystem::path const& path)
{
  file_report report;
  report.file = path.string();
  try {
    report.format = detect_format(path);
    if (*report.format == input_format::minimalloc_csv) {
      summarize_instance(report, stash::read_minimalloc_csv(path));
    } else {
      summarize_trace(report, stash::read_trace(path));
    }
  } catch (stash::trace_error const& e) {
    report.error = e.what();  // already "file:line: what"
  } catch (std::exception const& e) {
    report.error = report.file + ": " + e.what();
  }
  return report;
}

}  // namespace stash_plan
