/**
 * @file report.hpp
 * @brief stash-plan's per-file report and the analysis steps that fill it.
 *
 * Each input becomes one `file_report`. Analysis steps fill sections of it; the text and JSON
 * printers only read it. A later step adds a section here, a function filling it (in its own
 * header: planners.hpp, policies.hpp, svg.hpp, projection_section.hpp), and a few lines in
 * each printer.
 */
#pragma once

#include <stash_tools/stash_plan/frontier.hpp>
#include <stash_tools/stash_plan/options.hpp>
#include <stash_tools/stash_plan/planners.hpp>
#include <stash_tools/stash_plan/policies.hpp>
#include <stash_tools/stash_plan/projection_section.hpp>
#include <stash_tools/stash_plan/svg.hpp>

#include <stash/trace/lifetime.hpp>
#include <stash/trace/minimalloc_reader.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_checks.hpp>
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
  std::uint64_t time{};                ///< event index (trace) or time step (CSV)
  std::optional<stash::phase> phase;   ///< trace only
  std::optional<std::uint64_t> op;     ///< trace only: op index the peak belongs to
  std::optional<std::string> op_name;  ///< trace only
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

  // Later sections; each is absent when not asked for.
  std::optional<planner_section> planners;         ///< offset planners vs the lower bound
  std::optional<policy_section> policies;          ///< swap policies (trace, --policy / --budget)
  std::optional<std::string> svg;                  ///< the --svg picture (trace)
  std::optional<std::string> svg_file;             ///< where main wrote it
  std::optional<projection_section> projection;    ///< multi-device projection (trace, --cluster)
  std::optional<std::string> projection_svg;       ///< its picture (--cluster with --svg)
  std::optional<std::string> projection_svg_file;  ///< where main wrote it
  std::optional<frontier_section> frontier;        ///< every policy over budgets (--frontier)
  std::optional<std::string> frontier_svg;         ///< its picture (--frontier with --svg)
  std::optional<std::string> frontier_svg_file;    ///< where main wrote it
  std::vector<std::string> notes;                  ///< sections asked for that do not apply
  std::vector<std::string> warnings;  ///< signs of a truncated or disordered trace (trace_checks)
};

/// @brief Guesses the format: a `.csv` extension or a first line `id,lower,upper,size` means a
/// MiniMalloc CSV; anything else is read as a trace (whose reader reports a bad header).
inline input_format detect_format(std::filesystem::path const& path)
{
  auto extension = path.extension().string();
  for (auto& c : extension) { c = static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
  if (extension == ".csv") { return input_format::minimalloc_csv; }
  std::ifstream in(path, std::ios::binary);
  std::string line, problem;
  // Bounded: the input may be /dev/zero or one endless line; the reader then says what is wrong.
  while (stash::detail::bounded_getline(in, line, problem) && problem.empty()) {
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
  report.warnings          = stash::trace_warnings(t);
  report.tensors           = t.storages().size();
  report.ops               = t.ops().size();
  report.events            = t.events().size();
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
    report.kinds.push_back(kind_summary{kind, life.count_by_kind[k], life.bytes_by_kind[k],
                                        life.live_at_peak_by_kind[k]});
  }
}

/// @brief Analysis step: buffer count, lower bound and capacity of a MiniMalloc instance.
inline void summarize_instance(file_report& report, stash::minimalloc_instance const& instance)
{
  report.tensors           = instance.buffers.size();
  auto const peak          = stash::peak_live(instance.buffers);
  report.lower_bound_bytes = peak.bytes;
  if (!instance.buffers.empty()) { report.peak = peak_location{peak.time, {}, {}, {}}; }
  report.capacity_bytes = instance.capacity;
}

/// @brief Offset alignment stash-plan plans traces with: what cudaMalloc guarantees, so a plan
/// can sit in a real arena.
inline constexpr std::uint64_t trace_plan_alignment = stash::cuda_allocation_alignment;

/// @brief The search planner's budget from the command line: --search-nodes nodes per input,
/// and --search-ms (if given) as its wall-clock safety cap.
inline stash::search_options search_options_of(options const& opt)
{
  stash::search_options search;
  search.node_budget = opt.search_nodes;
  search.time_cap    = opt.search_time_cap.value_or(std::chrono::milliseconds(0));
  return search;
}

/// @brief Analysis step: planners on a trace's storages (alignment 256), and the caching pool
/// replaying the same trace.
inline void plan_trace(file_report& report, stash::trace const& t, options const& opt)
{
  auto const search    = search_options_of(opt);
  auto const intervals = stash::lifetime_intervals(t);
  report.planners      = plan_intervals(intervals, trace_plan_alignment, search);
  report.planners->caching_pool_reserved_peak = caching_pool_peak(t);
}

/// @brief Analysis step: planners on a MiniMalloc instance, byte-exact (alignment 1), with the
/// capacity from the file name as the search's target.
inline void plan_instance(file_report& report, stash::minimalloc_instance const& instance,
                          options const& opt)
{
  auto search     = search_options_of(opt);
  search.capacity = instance.capacity;
  report.planners = plan_intervals(instance.buffers, 1, search);
}

/// @brief Analysis step: the swap-policy section and the picture, as the options ask.
inline void simulate_trace(file_report& report, stash::trace const& t, options const& opt)
{
  if (opt.swap_requested()) { report.policies = run_policies(t, opt); }
  if (opt.frontier) {
    report.frontier = run_frontier(t, opt);
    if (opt.svg) {
      report.frontier_svg = render_frontier_svg(
          *report.frontier, std::filesystem::path(report.file).filename().string() +
                                ": predicted iteration time against the device budget");
    }
  }
  if (!opt.svg) { return; }
  auto const model = make_cost_model(opt);
  stash::trace_analysis const analysis(t, model);
  svg_request request;
  request.title   = std::filesystem::path(report.file).filename().string();
  auto const peak = analysis.peak_live_bytes();
  std::string budget_origin;
  auto const budget = resolve_budget(opt, model, peak, &budget_origin);
  if (opt.swap_requested()) { request.budget = budget; }
  auto const drawn = report.policies ? policy_to_draw(*report.policies) : std::nullopt;
  auto const shown = stash::plan_by_name(drawn.value_or("no_swap"), analysis, budget);
  auto const baseline_ms =
      stash::simulate(analysis, stash::plan_by_name("no_swap", analysis, budget),
                      stash::sim_options{false, stash::sim_memory::unconstrained})
          .iteration_s *
      1e3;
  auto const shown_sim = stash::simulate(analysis, shown, {false});
  // A schedule that does not fit is timed with the budget lifted, as the picture draws it.
  auto const shown_ms =
      (shown_sim.fits
           ? shown_sim
           : stash::simulate(analysis, shown,
                             stash::sim_options{false, stash::sim_memory::unconstrained}))
          .iteration_s *
      1e3;
  request.compare_no_swap = drawn.has_value();
  char line[256];
  if (drawn) {
    std::snprintf(line, sizeof(line),
                  "%s on %s: peak %s (no_swap %s), %s budget; %.1f ms vs %.1f ms no_swap",
                  drawn->c_str(), opt.hardware.c_str(),
                  stash::format_bytes(shown.device_peak).c_str(), stash::format_bytes(peak).c_str(),
                  shown_sim.fits ? "fits the" : "does not fit the", shown_ms, baseline_ms);
  } else {
    std::snprintf(line, sizeof(line), "no_swap on %s: peak %s, %.1f ms per iteration%s",
                  opt.hardware.c_str(), stash::format_bytes(peak).c_str(), shown_ms,
                  opt.swap_requested()
                      ? (shown_sim.fits ? "; fits the budget" : "; does not fit the budget")
                      : "");
  }
  request.subtitle = line;
  report.svg       = render_svg(analysis, shown, request);
}

/// @brief Reads and analyses one input. Never throws for a bad input: the message lands in
/// `error` ("file:line: what" for malformed files).
inline file_report analyze_file(std::filesystem::path const& path, options const& opt = {})
{
  file_report report;
  report.file = path.string();
  try {
    report.format = detect_format(path);
    if (*report.format == input_format::minimalloc_csv) {
      auto const instance = stash::read_minimalloc_csv(path);
      summarize_instance(report, instance);
      if (opt.planners) { plan_instance(report, instance, opt); }
      if (opt.swap_requested()) {
        report.notes.push_back("swap policies need a trace (a CSV has no ops)");
      }
      if (opt.svg) { report.notes.push_back("--svg needs a trace; no picture for a CSV"); }
      if (opt.frontier) { report.notes.push_back("--frontier needs a trace (a CSV has no ops)"); }
      if (opt.projection) {
        report.notes.push_back("--cluster needs a trace (a CSV has no ops); no projection");
      }
    } else {
      auto const t = stash::read_trace(path);
      summarize_trace(report, t);
      if (opt.planners) { plan_trace(report, t, opt); }
      simulate_trace(report, t, opt);
      if (opt.projection) {
        report.projection = run_projection(t, opt);
        if (opt.svg) { report.projection_svg = render_projection_svg(*report.projection); }
      }
    }
  } catch (stash::trace_error const& e) {
    report.error = e.what();  // already "file:line: what"
  } catch (std::exception const& e) {
    report.error = report.file + ": " + e.what();
  }
  return report;
}

}  // namespace stash_plan
