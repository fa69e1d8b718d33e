/**
 * @file projection_section.hpp
 * @brief stash-plan's multi-device projection section (--cluster): every data-parallel x
 * model-parallel configuration of a trace on the cluster, with and without offload
 * (stash::project, include/stash/projection/projection.hpp), its text and JSON forms, and where its
 * picture goes.
 */
#pragma once

#include <stash_tools/stash_plan/json_writer.hpp>
#include <stash_tools/stash_plan/options.hpp>

#include <stash/projection/projection.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace.hpp>
#include <stash_tools/projection_print.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <string>

namespace stash_plan {

/// @brief What the projection found for one trace.
struct projection_section {
  std::string cluster;           ///< the cluster with every value spelled out (stash::to_spec)
  std::uint64_t devices{};       ///< devices in the cluster
  std::uint64_t budget_bytes{};  ///< per-device budget the configurations had to fit
  std::string budget_origin;     ///< "given", "70% of the no_swap peak", "device memory of ..."
  stash::projection_result result;
};

/// @brief Analysis step: projects `t` on the requested cluster. The per-device budget is an
/// absolute --budget, a percentage --budget of the trace's no_swap peak (the recorded batch's
/// peak live bytes, as the swap-policy section reads it), or the cluster device's memory.
/// Throws stash::logic_error for parameters the trace cannot meet (e.g. micro-batches that do
/// not divide the replica batch).
[[nodiscard]] inline projection_section run_projection(stash::trace const& t, options const& opt)
{
  auto const& request = *opt.projection;
  projection_section section;
  section.cluster = stash::to_spec(request.cluster);
  section.devices = request.cluster.devices();
  auto params     = request.params;
  if (opt.budget) {
    auto const peak            = stash::analyze_lifetimes(t).peak_live_bytes;
    params.device_budget_bytes = std::max<std::uint64_t>(1, opt.budget->resolve(peak));
    if (opt.budget->bytes) {
      section.budget_origin = "given";
    } else {
      char text[64];
      std::snprintf(text, sizeof(text), "%g%% of the no_swap peak", opt.budget->percent);
      section.budget_origin = text;
    }
    section.budget_bytes = params.device_budget_bytes;
  } else {
    params.device_budget_bytes = 0;  // stash::project: the device preset's memory
    section.budget_bytes       = request.cluster.hw.device_memory_bytes;
    section.budget_origin      = "device memory of " + std::string(request.cluster.hw.name);
  }
  section.result = stash::project(t, request.cluster, request.efficiency, params);
  return section;
}

/// @brief The picture of the projection as an SVG document (stash_tools::write_projection_svg).
[[nodiscard]] inline std::string render_projection_svg(projection_section const& section)
{
  std::ostringstream out;
  stash_tools::write_projection_svg(out, section.result);
  return out.str();
}

/// @brief Where the projection picture goes: the iteration picture's path (after svg_path's
/// per-input naming) with "-projection" before the extension: out.svg -> out-projection.svg,
/// out_vgg16_b32.svg -> out_vgg16_b32-projection.svg; no extension gives .svg.
[[nodiscard]] inline std::string projection_svg_path(std::string const& iteration_svg_path)
{
  std::filesystem::path const out(iteration_svg_path);
  auto const extension = out.has_extension() ? out.extension().string() : std::string(".svg");
  return (out.parent_path() / (out.stem().string() + "-projection" + extension)).string();
}

/// @brief The projection lines of the text summary: the cluster and budget, then
/// stash_tools::print_projection_table (assumptions and one row per configuration) indented, then
/// the best configuration.
inline void print_projection_text(std::ostream& out, projection_section const& s)
{
  auto const bytes = [](std::uint64_t b) {
    char text[48];
    std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(b) / double(1ull << 30));
    return std::string(text);
  };
  out << "  projection       " << s.devices << " device" << (s.devices == 1 ? "" : "s") << ", "
      << s.cluster << "; budget " << bytes(s.budget_bytes) << " per device (" << s.budget_origin
      << ")\n";
  std::ostringstream table;
  stash_tools::print_projection_table(table, s.result);
  std::istringstream lines(table.str());
  for (std::string line; std::getline(lines, line);) { out << "    " << line << '\n'; }
  out << "  best config      ";
  if (!s.result.best) {
    out << "none fits the budget with a known time to train\n";
    return;
  }
  auto const& b = s.result.configs[*s.result.best];
  char text[200];
  std::snprintf(text, sizeof(text),
                "%llu x %llu (dp x mp), %s: %.1f ms per step, %.3f h to train\n",
                static_cast<unsigned long long>(b.dp), static_cast<unsigned long long>(b.mp),
                b.policy.c_str(), b.step_s * 1e3, b.time_to_train_s.value_or(0.0) / 3600.0);
  out << text;
}

/// @brief The projection members of a file's JSON object: "projection" (cluster, devices,
/// budget, assumptions, index of the best row or null) and "configs", one row per
/// configuration: dp, mp, devices, global_batch, micro_batches, policy (null when nothing
/// fits), fits, offload, device_peak_bytes, step_ms, pipeline_ms, boundary_ms, allreduce_ms,
/// allreduce_exposed_ms, offload_stall_ms, steps_per_epoch, epochs_to_target (null outside an
/// epochs table), time_to_train_s (null when unknown or not fitting), best.
inline void write_projection_json(json_writer& json, projection_section const& s)
{
  json.key("projection").begin_object();
  json.key("cluster").value(s.cluster);
  json.key("devices").value(s.devices);
  json.key("budget_bytes").value(s.budget_bytes);
  json.key("budget_origin").value(s.budget_origin);
  json.key("assumptions").begin_object();
  for (auto const& [name, value] : s.result.assumptions) { json.key(name).value(value); }
  json.end_object();
  json.key("best");
  if (s.result.best) {
    json.value(static_cast<std::uint64_t>(*s.result.best));
  } else {
    json.null();
  }
  json.end_object();
  json.key("configs").begin_array();
  for (auto const& cfg : s.result.configs) {
    json.begin_object();
    json.key("dp").value(cfg.dp);
    json.key("mp").value(cfg.mp);
    json.key("devices").value(cfg.devices);
    json.key("global_batch").value(cfg.global_batch);
    json.key("micro_batches").value(std::uint64_t{cfg.micro_batches});
    json.key("policy");
    if (cfg.policy.empty()) {
      json.null();
    } else {
      json.value(cfg.policy);
    }
    json.key("fits").value(cfg.fits);
    json.key("offload").value(cfg.offload);
    json.key("device_peak_bytes").value(cfg.device_peak_bytes);
    json.key("step_ms").value(cfg.step_s * 1e3);
    json.key("pipeline_ms").value(cfg.pipeline_s * 1e3);
    json.key("boundary_ms").value(cfg.boundary_s * 1e3);
    json.key("allreduce_ms").value(cfg.allreduce_s * 1e3);
    json.key("allreduce_exposed_ms").value(cfg.allreduce_exposed_s * 1e3);
    json.key("offload_stall_ms").value(cfg.offload_stall_s * 1e3);
    json.key("steps_per_epoch").value(cfg.steps_per_epoch);
    json.key("epochs_to_target").value_or_null(cfg.epochs_to_target);
    json.key("time_to_train_s");
    if (cfg.fits && cfg.time_to_train_s) {
      json.value(*cfg.time_to_train_s);
    } else {
      json.null();
    }
    json.key("best").value(cfg.best);
    json.end_object();
  }
  json.end_array();
}

}  // namespace stash_plan
