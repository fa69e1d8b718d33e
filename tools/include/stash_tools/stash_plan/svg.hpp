/**
 * @file svg.hpp
 * @brief stash-plan's picture of one iteration (--svg): device memory over simulated time,
 * stacked by storage kind, above the compute, D2H and H2D streams of the simulator's timeline.
 *
 * Both panels share one time axis: the simulated time of the schedule drawn (a swap policy's, or
 * no_swap's). Memory is the planned curve of that schedule (copies instantaneous, see
 * sim/schedule.hpp), which the simulator's timed curve follows closely; the no_swap curve is
 * drawn over it at the same program points, so the gap between them is what the policy moved
 * off the device. The picture is sampled per pixel column, keeping each column's highest point,
 * so peaks survive and the file stays small whatever the trace's length.
 */
#pragma once

#include <stash/core/units.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/op_index.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stash_plan {

/// @brief What one picture shows.
struct svg_request {
  std::string title;                    ///< first line, e.g. the input's name
  std::string subtitle;                 ///< second line: policy, hardware, budget, times
  std::optional<std::uint64_t> budget;  ///< drawn as a horizontal line when set
  bool compare_no_swap = false;         ///< overlay the no_swap curve (a policy is drawn)
};

namespace svg_detail {

inline std::string escape(std::string_view text)
{
  std::string out;
  for (char const c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

inline std::string num(double v)
{
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", v);
  return buffer;
}

// Fill colours of the storage kinds, stacked bottom-up in stash::all_storage_kinds order:
// persistent state (param, optstate, input) in muted tones at the bottom, the kinds that vary
// during the iteration (grad, act, temp) in stronger colours above.
inline constexpr std::array<char const*, stash::storage_kind_count> kind_colour = {
    "#9e9ac8", "#cbc9e2", "#fdd0a2", "#74c476", "#4292c6", "#fd8d3c"};

inline constexpr char const* forward_colour   = "#6baed6";
inline constexpr char const* backward_colour  = "#2171b5";
inline constexpr char const* optimizer_colour = "#41ab5d";
inline constexpr char const* other_colour     = "#969696";
inline constexpr char const* stall_colour     = "#e31a1c";
inline constexpr char const* offload_colour   = "#807dba";
inline constexpr char const* prefetch_colour  = "#f16913";
inline constexpr char const* budget_colour    = "#e31a1c";

// A step of 1, 2 or 5 times a power of ten (of `unit`) giving at most `max_ticks` ticks.
inline double nice_step(double range, double unit, int max_ticks)
{
  double const raw = range / unit / max_ticks;
  double const p   = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-12))));
  for (double const m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) { return m * p * unit; }
  }
  return 10 * p * unit;
}

// The outline of a step function with one value per pixel column starting at x0: a point only
// where the value changes, so flat stretches cost nothing. `backward` walks right to left (the
// lower edge of a stacked area).
inline std::string step_points(std::vector<double> const& y, double x0, bool backward)
{
  std::string out;
  auto const n = y.size();
  if (n == 0) { return out; }
  auto point = [&](double x, double v) { out += num(x) + "," + num(v) + " "; };
  if (!backward) {
    point(x0, y[0]);
    for (std::size_t c = 1; c < n; ++c) {
      if (num(y[c]) != num(y[c - 1])) {
        point(x0 + static_cast<double>(c), y[c - 1]);
        point(x0 + static_cast<double>(c), y[c]);
      }
    }
    point(x0 + static_cast<double>(n), y[n - 1]);
  } else {
    point(x0 + static_cast<double>(n), y[n - 1]);
    for (std::size_t c = n - 1; c > 0; --c) {
      if (num(y[c]) != num(y[c - 1])) {
        point(x0 + static_cast<double>(c), y[c]);
        point(x0 + static_cast<double>(c), y[c - 1]);
      }
    }
    point(x0, y[0]);
  }
  return out;
}

inline std::string bytes_label(double bytes)
{
  char buffer[32];
  if (bytes == 0) { return "0"; }
  if (bytes >= static_cast<double>(stash::GiB)) {
    std::snprintf(buffer, sizeof(buffer), "%g GiB", bytes / static_cast<double>(stash::GiB));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%g MiB", bytes / static_cast<double>(stash::MiB));
  }
  return buffer;
}

}  // namespace svg_detail

/// @brief Where --svg FILE puts the picture of `input`: FILE itself for a single input, else
/// FILE's stem + "_" + the input's stem + FILE's extension (out.svg, vgg16_b32.trace ->
/// out_vgg16_b32.svg), so several inputs do not overwrite one picture.
[[nodiscard]] inline std::string svg_path(std::string const& file, std::string const& input,
                                          bool several)
{
  if (!several) { return file; }
  std::filesystem::path const out(file);
  auto const extension = out.has_extension() ? out.extension().string() : std::string(".svg");
  auto const name =
      out.stem().string() + "_" + std::filesystem::path(input).stem().string() + extension;
  return (out.parent_path() / name).string();
}

/// @brief Renders `shown` (simulated on the analysis's cost model) as a standalone SVG document.
/// Throws stash::schedule_error if `shown` does not fit `t`.
[[nodiscard]] inline std::string render_svg(stash::trace_analysis const& analysis,
                                            stash::schedule const& shown,
                                            svg_request const& request)
{
  using namespace svg_detail;
  auto const& t = analysis.trace();
  auto sim      = stash::simulate(analysis, shown, stash::sim_options{true});
  if (!sim.fits) {  // draw what the schedule would do on a device with room for it
    sim = stash::simulate(analysis, shown,
                          stash::sim_options{true, stash::sim_memory::unconstrained});
  }
  auto const& ops         = analysis.ops();
  auto const events       = t.events();
  auto const n_ops        = t.ops().size();
  constexpr std::size_t K = stash::storage_kind_count;

  // Geometry (px).
  double const width = 1100, left = 84, right = 190, top = 58, mem_h = 300;
  double const plot_w = width - left - right;
  double const lane_h = 18, lane_gap = 8, lanes_top = top + mem_h + 26;
  double const lanes_bottom = lanes_top + 3 * lane_h + 2 * lane_gap;
  double const height       = lanes_bottom + 44;
  double const total_s      = sim.iteration_s > 0 ? sim.iteration_s : 1.0;
  auto x_of                 = [&](double seconds) { return left + plot_w * seconds / total_s; };
  auto const columns        = static_cast<std::size_t>(plot_w);

  // Per-event time, as the simulator places trace frees and allocations: a free right after an
  // op returns at that op's end; allocations (and frees among them) belong to the next op.
  std::vector<double> when(events.size(), 0.0);
  {
    std::optional<std::uint64_t> prev_op;
    bool alloc_since_op = false;
    for (std::size_t e = 0; e < events.size(); ++e) {
      auto const& ev = events[e];
      if (ev.kind == stash::event_kind::op) {
        prev_op        = ev.index;
        alloc_since_op = false;
        when[e]        = sim.op_start[ev.index];
        continue;
      }
      if (ev.kind == stash::event_kind::alloc) { alloc_since_op = true; }
      std::uint64_t const next_op = prev_op ? *prev_op + 1 : 0;
      bool const at_end           = prev_op && (!alloc_since_op || next_op >= n_ops);
      when[e]                     = at_end ? sim.op_end[*prev_op]
                                           : (next_op < n_ops ? sim.op_start[next_op] : sim.iteration_s);
    }
  }

  // Bytes each kind gives up while an entry holds it off the device: a swap entry's runs (early
  // departures and wrap heads included) and a recompute entry's gap, as planned_device_curve
  // counts them (a plan that recomputes a gigabyte drew it resident until 2026-11-28).
  std::vector<std::array<std::int64_t, K>> off_delta(events.size() + 1,
                                                     std::array<std::int64_t, K>{});
  auto off_run = [&](stash::storage_id id, std::uint64_t bytes, std::uint64_t from,
                     std::uint64_t through) {
    auto const k = static_cast<std::size_t>(t.storages()[id].kind);
    off_delta[from][k] -= static_cast<std::int64_t>(bytes);
    off_delta[through + 1][k] += static_cast<std::int64_t>(bytes);
  };
  for (auto const& entry : shown.entries) {
    stash::for_each_planned_off_run(analysis, entry, [&](std::uint64_t from, std::uint64_t to) {
      off_run(entry.id, entry.bytes, from, to);
    });
  }
  for (auto const& entry : shown.recomputes) {
    if (auto const run = stash::recompute_off_run(analysis, entry)) {
      off_run(entry.id, entry.bytes, run->first, run->second);
    }
  }

  // Walk the events, keeping per column the state with the highest device total and the
  // highest no_swap total.
  struct column_state {
    bool seen = false;
    std::array<std::uint64_t, K> kinds{};
    std::uint64_t total   = 0;
    std::uint64_t no_swap = 0;
  };
  std::vector<column_state> column(columns);
  std::array<std::int64_t, K> live{};  // no_swap bytes per kind
  std::array<std::int64_t, K> off{};   // bytes per kind off the device
  column_state last;
  std::size_t last_col = 0;
  auto fill_gap        = [&](std::size_t upto) {
    for (std::size_t c = last_col + 1; c < upto && c < columns; ++c) {
      if (!column[c].seen) { column[c] = last; }
    }
  };
  std::uint64_t y_max = 1;
  for (std::size_t e = 0; e < events.size(); ++e) {
    auto const& ev = events[e];
    for (std::size_t k = 0; k < K; ++k) { off[k] += off_delta[e][k]; }
    if (ev.kind == stash::event_kind::alloc || ev.kind == stash::event_kind::free) {
      auto const& s = t.storages()[ev.index];
      auto const b  = static_cast<std::int64_t>(s.bytes);
      live[static_cast<std::size_t>(s.kind)] += ev.kind == stash::event_kind::alloc ? b : -b;
    }
    column_state now;
    now.seen = true;
    for (std::size_t k = 0; k < K; ++k) {
      now.kinds[k] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, live[k] + off[k]));
      now.total += now.kinds[k];
      now.no_swap += static_cast<std::uint64_t>(live[k]);
    }
    y_max = std::max({y_max, now.total, now.no_swap});
    auto const c =
        std::min(columns - 1, static_cast<std::size_t>(std::max(0.0, x_of(when[e]) - left)));
    fill_gap(c);
    auto& col = column[c];
    if (!col.seen || now.total > col.total) {
      auto const keep = std::max(col.seen ? col.no_swap : 0, now.no_swap);
      col             = now;
      col.no_swap     = keep;
    } else {
      col.no_swap = std::max(col.no_swap, now.no_swap);
    }
    last     = now;
    last_col = std::max(last_col, c);
  }
  fill_gap(columns);
  if (request.budget) { y_max = std::max(y_max, *request.budget); }
  double const y_top = static_cast<double>(y_max) * 1.08;
  auto y_of          = [&](double bytes) { return top + mem_h - mem_h * bytes / y_top; };

  // Labels inside the plot get a white outline so they stay legible over the areas.
  std::string const halo = "stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\"";
  std::string svg;
  svg.reserve(1 << 16);
  auto add = [&](std::string const& s) { svg += s; };
  add("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" +
      num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
      "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n");
  add("<rect x=\"0\" y=\"0\" width=\"" + num(width) + "\" height=\"" + num(height) +
      "\" fill=\"white\"/>\n");
  add("<text x=\"" + num(left) + "\" y=\"22\" font-size=\"16\" font-weight=\"bold\">" +
      escape(request.title) + "</text>\n");
  add("<text x=\"" + num(left) + "\" y=\"42\" fill=\"#444\">" + escape(request.subtitle) +
      "</text>\n");

  // Memory axis: grid lines and labels.
  add("<g id=\"memory-axis\" stroke=\"#e0e0e0\">\n");
  // Steps in GiB (0.5, 1, 2 GiB...) from 2 GiB up, else in MiB, so labels stay short.
  double const y_step = y_top >= 2.0 * static_cast<double>(stash::GiB)
                            ? nice_step(y_top, static_cast<double>(stash::GiB), 6)
                            : nice_step(y_top, static_cast<double>(stash::MiB), 6);
  for (double v = 0; v <= y_top; v += y_step) {
    add("<line x1=\"" + num(left) + "\" y1=\"" + num(y_of(v)) + "\" x2=\"" + num(left + plot_w) +
        "\" y2=\"" + num(y_of(v)) + "\"/>\n");
    add("<text x=\"" + num(left - 6) + "\" y=\"" + num(y_of(v) + 4) +
        "\" text-anchor=\"end\" stroke=\"none\" fill=\"#444\">" + bytes_label(v) + "</text>\n");
  }
  add("</g>\n");
  add("<text transform=\"translate(16 " + num(top + mem_h / 2) +
      ") rotate(-90)\" text-anchor=\"middle\" fill=\"#444\">device memory</text>\n");

  // Stacked areas, one polygon per kind: upper edge left to right, lower edge back.
  add("<g id=\"memory\">\n");
  std::vector<std::uint64_t> below(columns, 0);
  for (std::size_t k = 0; k < K; ++k) {
    bool any = false;
    for (auto const& c : column) { any = any || c.kinds[k] > 0; }
    if (!any) { continue; }
    std::vector<double> upper(columns), lower(columns);
    for (std::size_t c = 0; c < columns; ++c) {
      lower[c] = y_of(static_cast<double>(below[c]));
      below[c] += column[c].kinds[k];
      upper[c] = y_of(static_cast<double>(below[c]));
    }
    auto const points = step_points(upper, left, false) + step_points(lower, left, true);
    auto const kind   = std::string(stash::to_string(stash::all_storage_kinds[k]));
    add("<polygon class=\"kind-" + kind + "\" fill=\"" + kind_colour[k] + "\" points=\"" + points +
        "\"><title>" + kind + "</title></polygon>\n");
  }
  add("</g>\n");
  if (request.compare_no_swap) {
    std::vector<double> no_swap(columns);
    for (std::size_t c = 0; c < columns; ++c) {
      no_swap[c] = y_of(static_cast<double>(column[c].no_swap));
    }
    add("<polyline id=\"no-swap\" fill=\"none\" stroke=\"black\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"5,3\" points=\"" +
        step_points(no_swap, left, false) + "\"/>\n");
  }
  if (request.budget) {
    double const y = y_of(static_cast<double>(*request.budget));
    add("<line id=\"budget\" x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" +
        num(left + plot_w) + "\" y2=\"" + num(y) + "\" stroke=\"" + budget_colour +
        "\" stroke-width=\"1.5\"/>\n");
    // Labelled at the left end: the peak (and its label) is usually later in the iteration.
    add("<text x=\"" + num(left + 4) + "\" y=\"" + num(y - 4) + "\" " + halo + " fill=\"" +
        budget_colour + "\">budget " + escape(stash::format_bytes(*request.budget)) + "</text>\n");
  }
  // The peak is often one pixel wide (a workspace between two ops): mark it so it is seen.
  {
    std::size_t peak_col = 0;
    for (std::size_t c = 1; c < columns; ++c) {
      if (column[c].total > column[peak_col].total) { peak_col = c; }
    }
    double const px = left + static_cast<double>(peak_col) + 0.5;
    double const py = y_of(static_cast<double>(column[peak_col].total));
    bool const flip = px + 120 > left + plot_w;
    add("<g id=\"peak\"><circle cx=\"" + num(px) + "\" cy=\"" + num(py) +
        "\" r=\"3.5\" fill=\"none\" stroke=\"black\" stroke-width=\"1.5\"/>\n");
    add("<text x=\"" + num(flip ? px - 7 : px + 7) + "\" y=\"" + num(py - 6) + "\"" +
        (flip ? " text-anchor=\"end\"" : "") + " " + halo + ">peak " +
        escape(stash::format_bytes(column[peak_col].total)) + "</text></g>\n");
  }
  add("<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(plot_w) +
      "\" height=\"" + num(mem_h) + "\" fill=\"none\" stroke=\"#888\"/>\n");

  // Stream lanes.
  std::array<char const*, 3> const lane_name = {"compute", "D2H", "H2D"};
  auto lane_y                                = [&](std::size_t lane) {
    return lanes_top + static_cast<double>(lane) * (lane_h + lane_gap);
  };
  add("<g id=\"streams\">\n");
  for (std::size_t lane = 0; lane < 3; ++lane) {
    add("<rect x=\"" + num(left) + "\" y=\"" + num(lane_y(lane)) + "\" width=\"" + num(plot_w) +
        "\" height=\"" + num(lane_h) + "\" fill=\"#f4f4f4\"/>\n");
    add("<text x=\"" + num(left - 6) + "\" y=\"" + num(lane_y(lane) + lane_h / 2 + 4) +
        "\" text-anchor=\"end\" fill=\"#444\">" + lane_name[lane] + "</text>\n");
  }
  // Adjacent spans of one colour closer than half a pixel merge into one rectangle.
  struct run {
    std::size_t lane;
    char const* colour;
    double x0, x1;
  };
  std::optional<run> open;
  auto flush = [&]() {
    if (!open) { return; }
    double const w = std::max(0.6, open->x1 - open->x0);
    add("<rect x=\"" + num(open->x0) + "\" y=\"" + num(lane_y(open->lane)) + "\" width=\"" +
        num(w) + "\" height=\"" + num(lane_h) + "\" fill=\"" + open->colour + "\"/>\n");
    open.reset();
  };
  auto span_colour = [&](stash::timeline_span const& s) -> char const* {
    switch (s.kind) {
      case stash::timeline_span::kind_t::stall:
        return stall_colour;
      case stash::timeline_span::kind_t::offload:
        return offload_colour;
      case stash::timeline_span::kind_t::prefetch:
        return prefetch_colour;
      case stash::timeline_span::kind_t::recompute:
        return "#9467bd";  // purple: a re-run for a recompute entry
      case stash::timeline_span::kind_t::op:
        break;
    }
    auto const p = ops.phase[s.index];
    if (!p) { return other_colour; }
    switch (*p) {
      case stash::phase::forward:
        return forward_colour;
      case stash::phase::backward:
        return backward_colour;
      case stash::phase::optimizer:
        return optimizer_colour;
    }
    return other_colour;
  };
  for (std::size_t lane = 0; lane < 3; ++lane) {
    std::vector<stash::timeline_span> spans;
    for (auto const& s : sim.timeline) {
      if (static_cast<std::size_t>(s.resource) == lane && s.end > s.start) { spans.push_back(s); }
    }
    std::sort(spans.begin(), spans.end(),
              [](auto const& a, auto const& b) { return a.start < b.start; });
    for (auto const& s : spans) {
      auto const colour = span_colour(s);
      double const x0 = x_of(s.start), x1 = x_of(s.end);
      if (open && open->lane == lane && open->colour == colour && x0 <= open->x1 + 0.5) {
        open->x1 = std::max(open->x1, x1);
        continue;
      }
      flush();
      open = run{lane, colour, x0, x1};
    }
    flush();
  }
  add("</g>\n");

  // Phase boundaries across both panels, labelled inside the memory plot.
  add("<g id=\"phases\">\n");
  std::optional<stash::phase> current;
  for (std::size_t i = 0; i < n_ops; ++i) {
    if (!ops.phase[i] || ops.phase[i] == current) { continue; }
    current        = ops.phase[i];
    double const x = x_of(sim.op_start[i]);
    if (i > 0) {
      add("<line x1=\"" + num(x) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x) + "\" y2=\"" +
          num(lanes_bottom) + "\" stroke=\"#555\" stroke-dasharray=\"2,3\"/>\n");
    }
    // Near the right edge the label goes left of its line (about 7 px per character).
    auto const label = std::string(stash::to_string(*current));
    bool const flip  = x + 8 + 7.0 * static_cast<double>(label.size()) > left + plot_w;
    add("<text x=\"" + num(flip ? x - 4 : x + 4) + "\" y=\"" + num(top + 14) + "\"" +
        (flip ? " text-anchor=\"end\"" : "") + " fill=\"#333\" " + halo + ">" + label +
        "</text>\n");
  }
  add("</g>\n");

  // Time axis.
  double const ms     = total_s * 1e3;
  double const t_step = nice_step(ms, 1.0, 10);
  add("<g id=\"time-axis\" fill=\"#444\">\n");
  for (double v = 0; v <= ms * 1.0001; v += t_step) {
    double const x = x_of(v / 1e3);
    add("<line x1=\"" + num(x) + "\" y1=\"" + num(lanes_bottom) + "\" x2=\"" + num(x) + "\" y2=\"" +
        num(lanes_bottom + 5) + "\" stroke=\"#444\"/>\n");
    char label[32];
    std::snprintf(label, sizeof(label), "%g", v);
    add("<text x=\"" + num(x) + "\" y=\"" + num(lanes_bottom + 18) + "\" text-anchor=\"middle\">" +
        label + "</text>\n");
  }
  add("<text x=\"" + num(left + plot_w / 2) + "\" y=\"" + num(lanes_bottom + 36) +
      "\" text-anchor=\"middle\">simulated time (ms)</text>\n");
  add("</g>\n");

  // Legend, right of the plots.
  add("<g id=\"legend\">\n");
  double ly       = top + 4;
  double const lx = left + plot_w + 16;
  auto swatch     = [&](char const* colour, std::string const& label) {
    add("<rect x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" width=\"14\" height=\"11\" fill=\"" +
            colour + "\"/>\n");
    add("<text x=\"" + num(lx + 20) + "\" y=\"" + num(ly + 10) + "\">" + escape(label) +
            "</text>\n");
    ly += 17;
  };
  add("<text x=\"" + num(lx) + "\" y=\"" + num(ly + 8) + "\" font-weight=\"bold\">memory</text>\n");
  ly += 16;
  for (std::size_t k = K; k-- > 0;) {  // top of the stack first, as drawn
    swatch(kind_colour[k], std::string(stash::to_string(stash::all_storage_kinds[k])));
  }
  if (request.compare_no_swap) {
    add("<line x1=\"" + num(lx) + "\" y1=\"" + num(ly + 6) + "\" x2=\"" + num(lx + 14) +
        "\" y2=\"" + num(ly + 6) +
        "\" stroke=\"black\" stroke-width=\"1.5\" stroke-dasharray=\"4,2\"/>\n");
    add("<text x=\"" + num(lx + 20) + "\" y=\"" + num(ly + 10) + "\">no_swap</text>\n");
    ly += 17;
  }
  if (request.budget) {
    add("<line x1=\"" + num(lx) + "\" y1=\"" + num(ly + 6) + "\" x2=\"" + num(lx + 14) +
        "\" y2=\"" + num(ly + 6) + "\" stroke=\"" + budget_colour + "\" stroke-width=\"1.5\"/>\n");
    add("<text x=\"" + num(lx + 20) + "\" y=\"" + num(ly + 10) + "\">budget</text>\n");
    ly += 17;
  }
  ly = std::max(ly + 10, lanes_top - 20);
  add("<text x=\"" + num(lx) + "\" y=\"" + num(ly + 8) +
      "\" font-weight=\"bold\">streams</text>\n");
  ly += 16;
  swatch(forward_colour, "forward op");
  swatch(backward_colour, "backward op");
  swatch(optimizer_colour, "optimizer op");
  swatch(stall_colour, "stall");
  swatch(offload_colour, "offload (D2H)");
  swatch(prefetch_colour, "prefetch (H2D)");
  add("</g>\n");
  add("</svg>\n");
  return svg;
}

}  // namespace stash_plan
