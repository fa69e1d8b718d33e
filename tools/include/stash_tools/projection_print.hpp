/**
 * @file projection_print.hpp
 * @brief Printers of a stash::projection_result for the tools (stash-plan --cluster, the
 * projection benchmark): a text table, JSON configurations and an SVG picture. Printers live with
 * the tools, not in the library.
 */
#pragma once

#include <stash/projection/projection.hpp>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

namespace stash_tools {

using namespace stash;  // NOLINT(google-build-using-namespace): tool code over stash's types

/// @brief `v` in printf's %g.
[[nodiscard]] inline std::string format_number(double v)
{
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// @brief Prints the assumptions ("# name: value") and one table row per configuration.
inline void print_projection_table(std::ostream& out, projection_result const& r)
{
  for (auto const& [name, value] : r.assumptions) { out << "# " << name << ": " << value << '\n'; }
  char line[320];
  std::snprintf(line, sizeof line,
                "%6s %4s %4s %7s %-10s %10s %10s %9s %9s %9s %9s %8s %8s %12s %s\n", "dev", "dp",
                "mp", "gbatch", "policy", "peak_GiB", "step_ms", "bound_ms", "ar_ms", "ar_exp_ms",
                "stall_ms", "steps/ep", "epochs", "train_h", "best");
  out << line;
  for (auto const& cfg : r.configs) {
    char hours[32];
    if (cfg.time_to_train_s && cfg.fits) {
      std::snprintf(hours, sizeof hours, "%.3f", *cfg.time_to_train_s / 3600.0);
    } else {
      std::snprintf(hours, sizeof hours, "%s", cfg.fits ? "-" : "no fit");
    }
    std::snprintf(
        line, sizeof line,
        "%6llu %4llu %4llu %7llu %-10s %10.3f %10.3f %9.3f %9.3f %9.3f %9.3f %8llu %8.4g %12s %s\n",
        static_cast<unsigned long long>(cfg.devices), static_cast<unsigned long long>(cfg.dp),
        static_cast<unsigned long long>(cfg.mp), static_cast<unsigned long long>(cfg.global_batch),
        cfg.policy.empty() ? "-" : cfg.policy.c_str(),
        static_cast<double>(cfg.device_peak_bytes) / double(1ull << 30), cfg.step_s * 1e3,
        cfg.boundary_s * 1e3, cfg.allreduce_s * 1e3, cfg.allreduce_exposed_s * 1e3,
        cfg.offload_stall_s * 1e3, static_cast<unsigned long long>(cfg.steps_per_epoch),
        cfg.epochs_to_target.value_or(std::nan("")), hours, cfg.best ? "*" : "");
    out << line;
  }
}

/// @brief Writes the JSON array of configurations: [{"dp", "mp", "devices", "global_batch",
/// "policy" (null when nothing fits), "fits", "device_peak_bytes", "step_ms", "epochs_to_target",
/// "time_to_train_s" (null when unknown or not fitting), "best"}, ...].
inline void write_projection_configs_json(std::ostream& out, projection_result const& r)
{
  auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  out << '[';
  for (std::size_t i = 0; i < r.configs.size(); ++i) {
    auto const& cfg = r.configs[i];
    out << (i ? "," : "") << "{\"dp\":" << cfg.dp << ",\"mp\":" << cfg.mp
        << ",\"devices\":" << cfg.devices << ",\"global_batch\":" << cfg.global_batch
        << ",\"policy\":" << (cfg.policy.empty() ? "null" : "\"" + cfg.policy + "\"")
        << ",\"fits\":" << (cfg.fits ? "true" : "false")
        << ",\"device_peak_bytes\":" << cfg.device_peak_bytes
        << ",\"step_ms\":" << num(cfg.step_s * 1e3) << ",\"epochs_to_target\":"
        << (cfg.epochs_to_target ? num(*cfg.epochs_to_target) : std::string("null"))
        << ",\"time_to_train_s\":"
        << (cfg.time_to_train_s && cfg.fits ? num(*cfg.time_to_train_s) : std::string("null"))
        << ",\"best\":" << (cfg.best ? "true" : "false") << '}';
  }
  out << ']';
}

/// @brief Writes an SVG chart: projected time to train (hours, log scale) against device count
/// (log2 scale), one polyline per MP degree over its fitting configurations; the best is ringed.
inline void write_projection_svg(std::ostream& out, projection_result const& r)
{
  double const w = 720, h = 440, left = 70, right = 130, top = 30, bottom = 50;
  double max_dev = 1, min_t = 0, max_t = 0;
  for (auto const& cfg : r.configs) {
    if (!cfg.fits || !cfg.time_to_train_s) { continue; }
    max_dev            = std::max(max_dev, static_cast<double>(cfg.devices));
    double const hours = *cfg.time_to_train_s / 3600.0;
    min_t              = min_t == 0 ? hours : std::min(min_t, hours);
    max_t              = std::max(max_t, hours);
  }
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  if (max_t <= 0) {
    out << "<text x=\"20\" y=\"40\">no configuration fits</text>\n</svg>\n";
    return;
  }
  double const lo    = std::floor(std::log10(min_t)),
               hi    = std::max(lo + 1, std::ceil(std::log10(max_t)));
  double const xspan = std::max(1.0, std::log2(max_dev));
  auto x = [&](double devices) { return left + (w - left - right) * std::log2(devices) / xspan; };
  auto y = [&](double hours) {
    return h - bottom - (h - top - bottom) * (std::log10(hours) - lo) / (hi - lo);
  };
  out << "<line x1=\"" << left << "\" y1=\"" << h - bottom << "\" x2=\"" << w - right << "\" y2=\""
      << h - bottom << "\" stroke=\"black\"/>\n<line x1=\"" << left << "\" y1=\"" << top
      << "\" x2=\"" << left << "\" y2=\"" << h - bottom << "\" stroke=\"black\"/>\n";
  for (double d = 1; d <= max_dev; d *= 2) {
    out << "<text x=\"" << x(d) << "\" y=\"" << h - bottom + 16 << "\" text-anchor=\"middle\">" << d
        << "</text>\n";
  }
  for (double e = lo; e <= hi; e += 1) {
    out << "<text x=\"" << left - 6 << "\" y=\"" << y(std::pow(10, e)) + 4
        << "\" text-anchor=\"end\">" << format_number(std::pow(10, e)) << " h</text>\n";
  }
  out << "<text x=\"" << (left + w - right) / 2 << "\" y=\"" << h - 10
      << "\" text-anchor=\"middle\">devices</text>\n<text x=\"14\" y=\"" << top - 10
      << "\">projected time to train (hours)</text>\n";
  char const* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                           "#ff7f0e", "#8c564b", "#e377c2"};
  std::map<std::uint64_t, std::vector<projection_config const*>> lines;
  for (auto const& cfg : r.configs) {
    if (cfg.fits && cfg.time_to_train_s) { lines[cfg.mp].push_back(&cfg); }
  }
  std::size_t colour = 0;
  for (auto const& [mp, points] : lines) {
    auto const* col = colours[colour++ % 7];
    out << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"2\" points=\"";
    for (auto const* p : points) {
      out << x(static_cast<double>(p->devices)) << ',' << y(*p->time_to_train_s / 3600.0) << ' ';
    }
    out << "\"/>\n";
    for (auto const* p : points) {
      out << "<circle cx=\"" << x(static_cast<double>(p->devices)) << "\" cy=\""
          << y(*p->time_to_train_s / 3600.0) << "\" r=\"" << (p->best ? 7 : 3) << "\" fill=\""
          << (p->best ? "none" : col) << "\" stroke=\"" << col << "\"/>\n";
    }
    out << "<text x=\"" << w - right + 10 << "\" y=\"" << top + 16.0 * static_cast<double>(colour)
        << "\" fill=\"" << col << "\">MP " << mp << "</text>\n";
  }
  out << "</svg>\n";
}

}  // namespace stash_tools
