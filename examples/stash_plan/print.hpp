/**
 * @file print.hpp
 * @brief stash-plan's two printers over a file_report: a readable text summary and one compact
 * JSON object per input (JSON Lines).
 */
#pragma once

#include "json_writer.hpp"
#include "report.hpp"

#include <stash/core/units.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>

namespace stash_plan {

/// @brief 835805832 -> "835,805,832".
inline std::string with_commas(std::uint64_t value)
{
  auto const digits = std::to_string(value);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) { out += ','; }
    out += digits[i];
  }
  return out;
}

/// @brief "835,805,832 B (797.1 MiB)"; just "10 B" below 1 KiB.
inline std::string bytes_text(std::uint64_t bytes)
{
  if (bytes < 1024) { return with_commas(bytes) + " B"; }
  return with_commas(bytes) + " B (" + stash::format_bytes(bytes) + ")";
}

/// @brief The readable summary of one input; errors are not printed here (see main).
inline void print_text(std::ostream& out, file_report const& r)
{
  out << r.file << "  [" << to_string(*r.format) << "]\n";
  auto row = [&](char const* name, std::string const& text) {
    char label[24];
    std::snprintf(label, sizeof(label), "  %-17s", name);
    out << label << text << '\n';
  };
  if (!r.header.empty()) {
    std::string header;
    for (auto const& entry : r.header) { header += (header.empty() ? "" : " ") + entry.key + "=" + entry.value; }
    row("header", header);
  }
  if (*r.format == input_format::minimalloc_csv) {
    row("buffers", with_commas(r.tensors));
  } else {
    row("storages", with_commas(r.tensors));
    row("ops", with_commas(r.ops));
    row("events", with_commas(r.events));
  }
  row("lower bound", bytes_text(r.lower_bound_bytes) + "  (peak live bytes)");
  if (r.capacity_bytes) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.3f",
                  *r.capacity_bytes == 0 ? 0.0
                                         : static_cast<double>(r.lower_bound_bytes) /
                                             static_cast<double>(*r.capacity_bytes));
    row("capacity", bytes_text(*r.capacity_bytes) + "  (lower bound / capacity = " + ratio + ")");
  }
  if (r.peak) {
    std::string where = (*r.format == input_format::minimalloc_csv ? "time " : "event ") +
                        with_commas(r.peak->time);
    if (r.peak->phase) { where += ", phase " + std::string(stash::to_string(*r.peak->phase)); }
    if (r.peak->op) { where += ", op #" + std::to_string(*r.peak->op) + " " + r.peak->op_name.value_or(""); }
    row("peak at", where);
  }
  if (r.activation_bytes) { row("activations", bytes_text(*r.activation_bytes)); }
  if (!r.kinds.empty()) {
    char line[160];
    std::snprintf(line, sizeof(line), "  %-10s %8s %26s %26s\n", "kind", "count", "bytes", "live at peak");
    out << line;
    for (auto const& k : r.kinds) {
      std::snprintf(line, sizeof(line), "    %-8s %8s %26s %26s\n",
                    std::string(stash::to_string(k.kind)).c_str(), with_commas(k.count).c_str(),
                    bytes_text(k.bytes).c_str(), bytes_text(k.live_at_peak_bytes).c_str());
      out << line;
    }
  }
}

/// @brief One JSON object on one line. Keys: file, format, and either error, or tensors,
/// lower_bound_bytes, activation_bytes (null for CSV), peak, and the format's own fields.
inline void print_json(std::ostream& out, file_report const& r)
{
  json_writer json(out);
  json.begin_object();
  json.key("file").value(r.file);
  json.key("format");
  if (r.format) {
    json.value(to_string(*r.format));
  } else {
    json.null();
  }
  if (r.error) {
    json.key("error").value(*r.error);
    json.end_object();
    out << '\n';
    return;
  }
  if (!r.header.empty()) {
    json.key("header").begin_object();
    for (auto const& entry : r.header) { json.key(entry.key).value(entry.value); }
    json.end_object();
  }
  json.key("tensors").value(r.tensors);
  if (*r.format == input_format::stash_trace_v1) {
    json.key("ops").value(r.ops);
    json.key("events").value(r.events);
  }
  json.key("lower_bound_bytes").value(r.lower_bound_bytes);
  json.key("activation_bytes").value_or_null(r.activation_bytes);
  json.key("peak");
  if (r.peak) {
    json.begin_object();
    json.key("time").value(r.peak->time);
    if (r.peak->phase) { json.key("phase").value(stash::to_string(*r.peak->phase)); }
    if (r.peak->op) { json.key("op").value(*r.peak->op); }
    if (r.peak->op_name) { json.key("op_name").value(*r.peak->op_name); }
    json.end_object();
  } else {
    json.null();
  }
  if (!r.kinds.empty()) {
    json.key("bytes_by_kind").begin_object();
    for (auto const& k : r.kinds) {
      json.key(stash::to_string(k.kind)).begin_object();
      json.key("count").value(k.count);
      json.key("bytes").value(k.bytes);
      json.key("live_at_peak_bytes").value(k.live_at_peak_bytes);
      json.end_object();
    }
    json.end_object();
  }
  if (r.capacity_bytes) {
    json.key("capacity_bytes").value(*r.capacity_bytes);
    json.key("lower_bound_over_capacity")
      .value(*r.capacity_bytes == 0 ? 0.0
                                    : static_cast<double>(r.lower_bound_bytes) /
                                        static_cast<double>(*r.capacity_bytes));
  }
  json.end_object();
  out << '\n';
}

}  // namespace stash_plan
