/**
 * @file print.hpp
 * @brief stash-plan's two printers over a file_report: a readable text summary and one compact
 * JSON object per input (JSON Lines).
 */
#pragma once

#include <stash_tools/stash_plan/json_writer.hpp>
#include <stash_tools/stash_plan/report.hpp>

#include <stash/core/units.hpp>

#include <cmath>
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

/// @brief printf into a std::string (the tables are fixed-width).
template <class... Args>
std::string format(char const* pattern, Args... args)
{
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), pattern, args...);
  return buffer;
}

/// @brief One line per encoding a policy's schedule uses (--codec auto).
inline void print_encodings_text(std::ostream& out, policy_result const& p)
{
  for (auto const& u : p.encodings) {
    out << format("      encoding %-12s %4zu entries  %12s on the device, %12s over the link\n",
                  u.encoding.c_str(), u.entries, stash::format_bytes(u.bytes).c_str(),
                  stash::format_bytes(u.wire_bytes).c_str());
  }
}

/// @brief The frontier as text: one row per budget, one column per policy (ms, "-" = no fit).
inline void print_frontier_text(std::ostream& out, frontier_section const& f)
{
  out << format(
      "  %-17s%s; peak %s, swap bound %s (any storage), %s (activations), memory bound %s "
      "(with recompute and wraps); predicted ms, '-' = does not fit\n",
      "frontier", f.hardware.c_str(), bytes_text(f.peak_bytes).c_str(),
      bytes_text(f.swap_bound_bytes).c_str(), bytes_text(f.swap_bound_activations_bytes).c_str(),
      bytes_text(f.memory_bound_bytes).c_str());
  if (f.note) { out << format("  %-17s%s\n", "", f.note->c_str()); }
  out << format("    %8s %10s %9s %9s", "budget", "GiB", "swap lb", "any lb");
  for (auto const& p : f.policies) { out << format(" %14s", p.c_str()); }
  out << '\n';
  for (std::size_t b = 0; b < f.budgets.size(); ++b) {
    double const gib = static_cast<double>(f.budgets[b]) / static_cast<double>(stash::GiB);
    double const pct = f.peak_bytes == 0 ? 100.0
                                         : 100.0 * static_cast<double>(f.budgets[b]) /
                                               static_cast<double>(f.peak_bytes);
    out << format("    %7.1f%% %10.3f %9.2f %9.2f", pct, gib, f.swap_lower_bound_ms[b],
                  f.lower_bound_ms[b]);
    for (std::size_t p = 0; p < f.policies.size(); ++p) {
      auto const& pt = f.points[b * f.policies.size() + p];
      out << (pt.fits ? format(" %14.2f", pt.iteration_ms) : format(" %14s", "-"));
    }
    out << '\n';
  }
}

/// @brief The frontier's JSON members: "frontier" (one object per policy and budget) and
/// "frontier_bounds".
inline void write_frontier_json(json_writer& json, frontier_section const& f)
{
  json.key("frontier").begin_array();
  for (auto const& pt : f.points) {
    json.begin_object();
    json.key("policy").value(pt.policy);
    json.key("budget_bytes").value(pt.budget_bytes);
    json.key("fits").value(pt.fits);
    json.key("iteration_ms").value(pt.iteration_ms);
    json.key("offloaded_bytes").value(pt.offloaded_bytes);
    json.end_object();
  }
  json.end_array();
  json.key("frontier_bounds").begin_object();
  json.key("hardware").value(f.hardware);
  json.key("peak_bytes").value(f.peak_bytes);
  json.key("swap_bound_bytes").value(f.swap_bound_bytes);
  json.key("swap_bound_any_kind_bytes").value(f.swap_bound_bytes);  // the same, kept for readers
  json.key("swap_bound_activations_bytes").value(f.swap_bound_activations_bytes);
  json.key("memory_bound_bytes").value(f.memory_bound_bytes);
  json.key("compute_ms").value(f.compute_ms);
  json.key("note").value_or_null(f.note);
  json.key("time_lower_bound_ms").begin_array();
  for (std::size_t b = 0; b < f.budgets.size(); ++b) {
    json.begin_object();
    json.key("budget_bytes").value(f.budgets[b]);
    json.key("ms").value(f.lower_bound_ms[b]);
    json.key("swap_ms").value(f.swap_lower_bound_ms[b]);
    json.end_object();
  }
  json.end_array();
  json.end_object();
}

/// @brief The planner lines of the text summary; `times` false leaves out the measured wall
/// times (so the output is the same on every run).
inline void print_planners_text(std::ostream& out, planner_section const& p, bool times = true)
{
  out << format("  %-17s%s  (peak live bytes, sizes padded to %llu B)\n", "plan lower bound",
                bytes_text(p.lower_bound).c_str(), static_cast<unsigned long long>(p.alignment));
  out << format("    %-15s %30s %9s", "planner", "footprint", "alpha")
      << (times ? format(" %11s", "time") : "") << format(" %13s\n", "search nodes");
  for (auto const& planner : p.planners) {
    out << format("    %-15s %30s %9.4f", planner.name.c_str(),
                  bytes_text(planner.footprint_bytes).c_str(), planner.alpha)
        << (times ? format(" %8.1f ms", planner.plan_ms) : "")
        << format(" %13s\n",
                  planner.search_nodes ? with_commas(*planner.search_nodes).c_str() : "-");
  }
  for (auto const& planner : p.planners) {
    if (!planner.node_budget) { continue; }
    std::string line = with_commas(planner.search_nodes.value_or(0)) + " of " +
                       with_commas(*planner.node_budget) + " nodes";
    if (planner.time_capped) {
      line += "; cut short by the --search-ms time cap (this plan may differ from run to run)";
    }
    out << format("  %-17s%s\n", "search budget", line.c_str());
  }
  auto const& best = p.best_result();
  std::string line = best.name + ", alpha " + format("%.4f", best.alpha);
  if (auto const within = p.best_within_capacity()) {
    line += *within ? "; within the capacity"
                    : "; exceeds the capacity by " + bytes_text(best.footprint_bytes - *p.capacity);
  }
  out << format("  %-17s%s\n", "best plan", line.c_str());
  if (p.caching_pool_reserved_peak) {
    std::string pool = bytes_text(*p.caching_pool_reserved_peak) + " reserved at peak";
    if (auto const saving = p.saving_vs_caching_pool_percent()) {
      pool += format("; the best plan is %.1f%% %s", std::abs(*saving),
                     *saving >= 0 ? "smaller" : "larger");
    }
    out << format("  %-17s%s\n", "caching pool", pool.c_str());
  }
}

/// @brief The swap-policy lines of the text summary.
inline void print_policies_text(std::ostream& out, policy_section const& s)
{
  std::string head =
      "budget " + bytes_text(s.budget_bytes) + " (" + s.budget_origin + ") on " + s.hardware;
  if (s.codec) {
    head += format("; codec %s, ratio %.3f (%s)", s.codec->name.c_str(), s.codec->ratio,
                   s.codec->source.c_str());
  }
  out << format("  %-17s%s\n", "swap policies", head.c_str());
  auto const ms = [](double v) {
    return std::isfinite(v) ? format("%.2f ms", v) : std::string("(nothing fits)");
  };
  out << format(
      "  %-17sswap bound %s (any storage), %s (activations only); any schedule with "
      "recompute and wraps needs %s\n",
      "", bytes_text(s.swap_bound_bytes).c_str(),
      bytes_text(s.swap_bound_activations_bytes).c_str(), bytes_text(s.memory_bound_bytes).c_str());
  out << format(
      "  %-17sno swap schedule without wraps at this budget beats %s, no keep/swap/recompute "
      "schedule %s\n",
      "", ms(s.swap_time_lower_bound_ms).c_str(), ms(s.time_lower_bound_ms).c_str());
  out << format("    %-15s %-4s %13s %14s %12s %12s %10s %10s\n", "policy", "fits", "planned peak",
                "simulated peak", "offloaded", "iteration", "vs no_swap", "stall");
  for (auto const& p : s.policies) {
    if (p.error) {
      out << format("    %-15s error: %s\n", p.name.c_str(), p.error->c_str());
      continue;
    }
    if (!p.fits) {
      out << format("    %-15s %-4s %13s %14s %12s %12s %10s %10s\n", p.name.c_str(), "no",
                    stash::format_bytes(p.device_peak_bytes).c_str(), "-",
                    stash::format_bytes(p.offloaded_bytes).c_str(), "-", "-", "-");
      if (p.stuck) { out << "      does not fit: " << *p.stuck << '\n'; }
      if (!p.note.empty()) { out << "      note: " << p.note << '\n'; }
      continue;
    }
    double const slowdown = s.baseline_ms > 0 ? (p.iteration_ms / s.baseline_ms - 1) * 100 : 0.0;
    out << format("    %-15s %-4s %13s %14s %12s %9.2f ms %+9.1f%% %7.2f ms\n", p.name.c_str(),
                  "yes", stash::format_bytes(p.device_peak_bytes).c_str(),
                  stash::format_bytes(p.simulated_peak_bytes).c_str(),
                  stash::format_bytes(p.offloaded_bytes).c_str(), p.iteration_ms, slowdown,
                  p.stall_ms);
    if (p.recompute_entries > 0) {
      out << "      " << p.recompute_entries << " recomputes ("
          << stash::format_bytes(p.recomputed_bytes) << "), "
          << format("%.2f ms of re-runs (predicted)\n", p.recompute_ms);
    }
    if (!p.top_stalls.empty()) {
      out << "      " << p.stall_count << " stall" << (p.stall_count == 1 ? "" : "s")
          << ", longest:\n";
      for (auto const& st : p.top_stalls) {
        auto const what =
            st.storage.empty() ? std::string("device memory") : "'" + st.storage + "'";
        out << format("        %8.2f ms before op #%llu %s, waiting for %s (%s)\n", st.ms,
                      static_cast<unsigned long long>(st.op), st.op_name.c_str(), what.c_str(),
                      st.cause.c_str());
      }
    }
    if (!p.note.empty()) { out << "      note: " << p.note << '\n'; }
    print_encodings_text(out, p);
  }
}

/// @brief The readable summary of one input; errors are not printed here (see main). `times`
/// false leaves out the measured wall times, so the same input and options print the same bytes.
inline void print_text(std::ostream& out, file_report const& r, bool times = true)
{
  out << r.file << "  [" << to_string(*r.format) << "]\n";
  auto row = [&](char const* name, std::string const& text) {
    char label[24];
    std::snprintf(label, sizeof(label), "  %-17s", name);
    out << label << text << '\n';
  };
  if (!r.header.empty()) {
    std::string header;
    for (auto const& entry : r.header) {
      header += (header.empty() ? "" : " ") + entry.key + "=" + entry.value;
    }
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
    if (r.peak->op) {
      where += ", op #" + std::to_string(*r.peak->op) + " " + r.peak->op_name.value_or("");
    }
    row("peak at", where);
  }
  if (r.activation_bytes) { row("activations", bytes_text(*r.activation_bytes)); }
  if (!r.kinds.empty()) {
    char line[160];
    std::snprintf(line, sizeof(line), "  %-10s %8s %26s %26s\n", "kind", "count", "bytes",
                  "live at peak");
    out << line;
    for (auto const& k : r.kinds) {
      std::snprintf(line, sizeof(line), "    %-8s %8s %26s %26s\n",
                    std::string(stash::to_string(k.kind)).c_str(), with_commas(k.count).c_str(),
                    bytes_text(k.bytes).c_str(), bytes_text(k.live_at_peak_bytes).c_str());
      out << line;
    }
  }
  if (r.planners) { print_planners_text(out, *r.planners, times); }
  if (r.policies) { print_policies_text(out, *r.policies); }
  if (r.projection) { print_projection_text(out, *r.projection); }
  if (r.frontier) { print_frontier_text(out, *r.frontier); }
  if (r.svg_file) { row("picture", *r.svg_file); }
  if (r.frontier_svg_file) { row("frontier svg", *r.frontier_svg_file); }
  if (r.projection_svg_file) { row("projection svg", *r.projection_svg_file); }
  for (auto const& note : r.notes) { row("note", note); }
  for (auto const& warning : r.warnings) { row("warning", warning); }
}

/// @brief One JSON object on one line. Keys: file, format, and either error, or tensors,
/// lower_bound_bytes, activation_bytes (null for CSV), peak, and the format's own fields; with
/// --cluster "projection" and "configs" (projection_section.hpp). `times` false leaves out the
/// measured wall times ("plan_ms").
inline void print_json(std::ostream& out, file_report const& r, bool times = true)
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
  if (r.planners) {
    auto const& p = *r.planners;
    json.key("plan_alignment").value(p.alignment);
    json.key("plan_lower_bound_bytes").value(p.lower_bound);
    json.key("planners").begin_array();
    for (auto const& planner : p.planners) {
      json.begin_object();
      json.key("name").value(planner.name);
      json.key("footprint_bytes").value(planner.footprint_bytes);
      json.key("alpha").value(planner.alpha);
      if (times) { json.key("plan_ms").value(planner.plan_ms); }
      if (planner.node_budget) {
        json.key("search_nodes").value(planner.search_nodes.value_or(0));
        json.key("node_budget").value(*planner.node_budget);
        json.key("time_capped").value(planner.time_capped);
      }
      json.end_object();
    }
    json.end_array();
    auto const& best = p.best_result();
    json.key("best").begin_object();
    json.key("name").value(best.name);
    json.key("footprint_bytes").value(best.footprint_bytes);
    json.key("alpha").value(best.alpha);
    if (auto const within = p.best_within_capacity()) {
      json.key("within_capacity").value(*within);
    }
    json.end_object();
    if (p.caching_pool_reserved_peak) {
      json.key("caching_pool").begin_object();
      json.key("reserved_peak_bytes").value(*p.caching_pool_reserved_peak);
      json.key("best_plan_saving_percent").value_or_null(p.saving_vs_caching_pool_percent());
      json.end_object();
    }
  }
  if (r.policies) {
    auto const& s = *r.policies;
    json.key("swap").begin_object();
    json.key("hardware").value(s.hardware);
    json.key("budget_bytes").value(s.budget_bytes);
    json.key("baseline_peak_bytes").value(s.baseline_peak_bytes);
    json.key("baseline_ms").value(s.baseline_ms);
    json.key("swap_bound_bytes").value(s.swap_bound_bytes);
    json.key("swap_bound_any_kind_bytes").value(s.swap_bound_bytes);  // the same, kept for readers
    json.key("swap_bound_activations_bytes").value(s.swap_bound_activations_bytes);
    json.key("memory_bound_bytes").value(s.memory_bound_bytes);
    json.key("time_lower_bound_ms").value(s.time_lower_bound_ms);
    json.key("swap_time_lower_bound_ms").value(s.swap_time_lower_bound_ms);
    json.key("codec");
    if (s.codec) {
      json.begin_object();
      json.key("name").value(s.codec->name);
      json.key("ratio").value(s.codec->ratio);
      json.key("source").value(s.codec->source);
      json.end_object();
    } else {
      json.null();
    }
    json.end_object();
    json.key("policies").begin_array();
    for (auto const& p : s.policies) {
      json.begin_object();
      json.key("name").value(p.name);
      if (p.error) {
        json.key("error").value(*p.error);
        json.end_object();
        continue;
      }
      json.key("fits").value(p.fits);
      json.key("device_peak_bytes").value(p.device_peak_bytes);
      json.key("simulated_peak_bytes").value(p.simulated_peak_bytes);
      json.key("offloaded_bytes").value(p.offloaded_bytes);
      json.key("entries").value(std::uint64_t{p.entries});
      json.key("iteration_ms").value(p.iteration_ms);
      json.key("baseline_ms").value(s.baseline_ms);
      json.key("stall_ms").value(p.stall_ms);
      json.key("recompute_entries").value(std::uint64_t{p.recompute_entries});
      json.key("recomputed_bytes").value(p.recomputed_bytes);
      json.key("recompute_ms").value(p.recompute_ms);
      json.key("stalls").value(std::uint64_t{p.stall_count});
      json.key("top_stalls").begin_array();
      for (auto const& st : p.top_stalls) {
        json.begin_object();
        json.key("op").value(st.op);
        json.key("op_name").value(st.op_name);
        json.key("ms").value(st.ms);
        json.key("storage").value(st.storage);
        json.key("cause").value(st.cause);
        json.end_object();
      }
      json.end_array();
      if (p.stuck) { json.key("stuck").value(*p.stuck); }
      if (!p.encodings.empty()) {
        json.key("encodings").begin_array();
        for (auto const& u : p.encodings) {
          json.begin_object();
          json.key("encoding").value(u.encoding);
          json.key("entries").value(std::uint64_t{u.entries});
          json.key("bytes").value(u.bytes);
          json.key("wire_bytes").value(u.wire_bytes);
          json.end_object();
        }
        json.end_array();
      }
      if (!p.note.empty()) { json.key("note").value(p.note); }
      json.end_object();
    }
    json.end_array();
  }
  if (r.projection) { write_projection_json(json, *r.projection); }
  if (r.frontier) { write_frontier_json(json, *r.frontier); }
  if (r.svg_file) { json.key("svg").value(*r.svg_file); }
  if (r.frontier_svg_file) { json.key("frontier_svg").value(*r.frontier_svg_file); }
  if (r.projection_svg_file) { json.key("projection_svg").value(*r.projection_svg_file); }
  if (!r.notes.empty()) {
    json.key("notes").begin_array();
    for (auto const& note : r.notes) { json.value(note); }
    json.end_array();
  }
  if (!r.warnings.empty()) {
    json.key("warnings").begin_array();
    for (auto const& warning : r.warnings) { json.value(warning); }
    json.end_array();
  }
  json.end_object();
  out << '\n';
}

}  // namespace stash_plan
