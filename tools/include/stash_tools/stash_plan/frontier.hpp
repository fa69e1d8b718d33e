/**
 * @file frontier.hpp
 * @brief stash-plan --frontier: every swap policy at budgets from the peak down to a third of it
 * (and the swap bounds),
 * simulated with the budget enforced (fits, predicted iteration time, offloaded bytes), and its
 * SVG of time against budget with the bounds marked (the text and JSON forms are in print.hpp).
 */
#pragma once

#include <stash_tools/parallel_tasks.hpp>
#include <stash_tools/stash_plan/options.hpp>
#include <stash_tools/stash_plan/policies.hpp>
#include <stash_tools/stash_plan/svg.hpp>

#include <stash/core/units.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/auto_swap.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stash_plan {

/// @brief One policy at one budget.
struct frontier_point {
  std::string policy;
  std::uint64_t budget_bytes{};
  bool fits{};
  double iteration_ms{};  ///< infinite when it does not fit
  std::uint64_t offloaded_bytes{};
};

/// @brief The sweep of one trace.
struct frontier_section {
  std::string hardware;
  std::uint64_t peak_bytes{};
  std::uint64_t swap_bound_bytes{};              ///< any storage may move (every swap policy)
  std::uint64_t swap_bound_activations_bytes{};  ///< activations only
  std::uint64_t memory_bound_bytes{};            ///< any keep/swap/recompute schedule
  double compute_ms{};                           ///< the iteration with room for everything
  std::optional<std::string> note;     ///< why the picture says little (no activations, no ops)
  std::vector<std::uint64_t> budgets;  ///< largest first
  std::vector<double> lower_bound_ms;  ///< per budget: no keep/swap/recompute schedule is faster
  std::vector<double> swap_lower_bound_ms;  ///< per budget: no swap schedule (no wraps) is faster
  std::vector<std::string> policies;
  std::vector<frontier_point> points;  ///< budget-major, policies in order
};

/// @brief Budgets from the peak down in 5% steps of it while above the lowest bound, 33% of the
/// peak when above it (issue 22's target budgets are 50% and 33%), plus every bound and 1.05x
/// each; largest first, no repeats.
[[nodiscard]] inline std::vector<std::uint64_t> frontier_budgets(
    std::uint64_t peak, std::initializer_list<std::uint64_t> bounds)
{
  std::vector<std::uint64_t> b;
  auto const lowest = std::min(bounds);
  for (int pct = 100; pct > 0; pct -= 5) {
    auto const v = static_cast<std::uint64_t>(static_cast<double>(peak) * pct / 100.0);
    if (v < lowest) { break; }
    b.push_back(v);
  }
  if (peak / 100 * 33 >= lowest) { b.push_back(peak / 100 * 33); }
  for (auto const bound : bounds) {
    b.push_back(bound);
    if (bound + bound / 20 <= peak) { b.push_back(bound + bound / 20); }
  }
  std::sort(b.begin(), b.end(), std::greater<>());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

/// @brief Why a frontier of `analysis` says little, if it does: no ops (no time to draw), no
/// activations (activation-only policies move nothing).
[[nodiscard]] inline std::optional<std::string> frontier_note(stash::trace_analysis const& analysis)
{
  if (analysis.op_count() == 0) { return "the trace has no ops: nothing to time"; }
  if (analysis.lifetimes().activation_bytes == 0) {
    return "the trace has no activations: activation-only policies have nothing to move";
  }
  return std::nullopt;
}

/// @brief The frontier's budgets for `analysis` (frontier_budgets over its peak and bounds).
[[nodiscard]] inline std::vector<std::uint64_t> frontier_budgets_of(
    stash::trace_analysis const& analysis)
{
  return frontier_budgets(analysis.peak_live_bytes(),
                          {stash::swap_bound_bytes(analysis),
                           stash::swap_bound_bytes(analysis, stash::swap_scope::any_kind),
                           stash::memory_lower_bound_bytes(analysis, true)});
}

/// @brief The options of the frontier's two time bounds: any keep / swap / recompute schedule's,
/// and the swap-only policies' (no recompute, no wrap entries: only search plans them).
/// @param analysis The trace's analysis (its cost model).
/// @param opt stash-plan's options.
/// @return {any schedule's, swap-only}.
[[nodiscard]] inline std::pair<stash::time_bound_options, stash::time_bound_options>
frontier_bound_options(stash::trace_analysis const& analysis, options const& opt)
{
  auto bound             = time_bound_options_of(opt, analysis.model());
  auto no_recompute      = bound;
  no_recompute.recompute = false;
  no_recompute.wrap      = false;
  return {bound, no_recompute};
}

/// @brief The time lower bounds of every budget: with every move `opt` allows (first), and for
/// the swap-only policies (second: no recompute, no wrap entries), in seconds.
[[nodiscard]] inline std::pair<std::vector<double>, std::vector<double>> frontier_lower_bounds(
    stash::trace_analysis const& analysis, std::vector<std::uint64_t> const& budgets,
    options const& opt)
{
  auto const [bound, no_recompute] = frontier_bound_options(analysis, opt);
  return {stash::iteration_time_lower_bounds(analysis, budgets, bound),
          stash::iteration_time_lower_bounds(analysis, budgets, no_recompute)};
}

namespace frontier_detail {

/// The frontier's point of `name` at `budget` with plan `s`, simulated with the budget enforced.
[[nodiscard]] inline frontier_point point_of(stash::trace_analysis const& analysis,
                                             std::string const& name, std::uint64_t budget,
                                             stash::schedule const& s)
{
  auto const r = stash::simulate(analysis, s, stash::sim_options{false});
  return frontier_point{name, budget, r.fits, r.iteration_s * 1e3, s.offloaded_bytes()};
}

/// The section's bounds in ms from the bounds `lb` (any schedule) and `sb` (swap-only) in s.
inline void set_lower_bounds(frontier_section& f, std::vector<double> const& lb,
                             std::vector<double> const& sb)
{
  for (std::size_t b = 0; b < f.budgets.size(); ++b) {
    f.lower_bound_ms.push_back(lb[b] * 1e3);
    f.swap_lower_bound_ms.push_back(sb[b] * 1e3);
  }
}

/// run_frontier's plans, simulations and time bounds on opt.threads threads
/// (stash_tools::run_tasks), the same values as the sequential code's: every task reads the
/// analysis and writes its own point or bound. First AutoSwap's sweeps (one task per score, the
/// longest first) with the policies that do not read them (a task per policy and budget); then
/// the bounds (two tasks), search_swap (a task per budget, seeded from the sweeps, each thread
/// with its own search_swap_sweep) and the AutoSwap policies' points.
inline void plan_parallel(stash::trace_analysis const& analysis, options const& opt,
                          frontier_section& f)
{
  std::optional<stash::encoding_options> enc;
  if (opt.auto_encodings) { enc = encoding_options_of(opt); }
  auto const& budgets = f.budgets;
  auto const policies = f.policies.size();
  auto const wanted   = [&](std::string_view name) {
    return std::find(f.policies.begin(), f.policies.end(), name) != f.policies.end();
  };
  auto const auto_score = [](std::string const& name) -> std::optional<stash::auto_swap_score> {
    for (auto const score : {stash::auto_swap_score::swdoa, stash::auto_swap_score::doa,
                             stash::auto_swap_score::aoa, stash::auto_swap_score::wdoa}) {
      if (name == stash::auto_swap{.score = score}.name()) { return score; }
    }
    return std::nullopt;
  };
  bool const search = wanted(stash::search_swap::name());
  stash::auto_swap_sweeps sweeps(analysis, budgets);
  std::vector<stash::auto_swap_score> scores;  // SWDOA's sweep takes longest, DOA's least
  for (auto const score : {stash::auto_swap_score::swdoa, stash::auto_swap_score::wdoa,
                           stash::auto_swap_score::aoa, stash::auto_swap_score::doa}) {
    if (search || wanted(stash::auto_swap{.score = score}.name())) { scores.push_back(score); }
  }
  std::vector<std::size_t> others;  // policies planned budget by budget (plan_policy)
  for (std::size_t p = 0; p < policies; ++p) {
    if (f.policies[p] != stash::search_swap::name() && !auto_score(f.policies[p])) {
      others.push_back(p);
    }
  }
  auto const threads = static_cast<std::size_t>(opt.threads);
  auto const nb      = budgets.size();
  stash_tools::run_tasks(
      threads, scores.size() + others.size() * nb, [&](std::size_t i, std::size_t) {
        if (i < scores.size()) {
          (void)sweeps.of(scores[i]);  // each task its own score's slot
          return;
        }
        i -= scores.size();
        auto const p = others[i / nb], b = i % nb;
        auto const& name = f.policies[p];
        f.points[b * policies + p] =
            point_of(analysis, name, budgets[b], plan_policy(name, analysis, budgets[b], opt));
      });
  auto const bounds =
      frontier_bound_options(analysis, opt);  // a pair: the lambda below captures it
  std::vector<double> lb, sb;
  std::vector<std::optional<stash::search_swap_sweep>> by_worker(threads);
  std::vector<std::size_t> searched;  // search_swap's place among the policies, if asked
  std::vector<std::size_t> autos;     // the AutoSwap policies' places
  for (std::size_t p = 0; p < policies; ++p) {
    if (f.policies[p] == stash::search_swap::name()) { searched.push_back(p); }
    if (auto_score(f.policies[p])) { autos.push_back(p); }
  }
  auto const& done = sweeps;  // read only from here on, by every thread
  stash_tools::run_tasks(
      threads, 2 + (searched.size() + autos.size()) * nb, [&](std::size_t i, std::size_t worker) {
        if (i < 2) {
          (i == 0 ? lb : sb) = stash::iteration_time_lower_bounds(
              analysis, budgets, i == 0 ? bounds.first : bounds.second);
          return;
        }
        i -= 2;
        if (i < searched.size() * nb) {  // the lowest budgets first: the highest, quickest last
          auto const p = searched[i / nb], b = nb - 1 - i % nb;
          auto& sweep = by_worker[worker];
          if (!sweep) {
            sweep.emplace(stash::search_swap{.encodings = enc}, analysis, budgets, &done);
          }
          f.points[b * policies + p] =
              point_of(analysis, f.policies[p], budgets[b], sweep->plan(b));
          return;
        }
        i -= searched.size() * nb;
        auto const p = autos[i / nb], b = i % nb;
        auto s = done.planned(*auto_score(f.policies[p]))[b];
        if (enc) { s = stash::with_encodings(analysis, std::move(s), *enc); }
        f.points[b * policies + p] = point_of(analysis, f.policies[p], budgets[b], s);
      });
  set_lower_bounds(f, lb, sb);
}

}  // namespace frontier_detail

/// @brief Plans and simulates every requested policy at every frontier budget of `t`, on
/// opt.threads threads (1: one after the other, on the calling thread); the same section for any
/// thread count.
[[nodiscard]] inline frontier_section run_frontier(stash::trace const& t, options const& opt)
{
  auto const model = make_cost_model(opt);
  stash::trace_analysis const analysis(t, model);  // once for the whole sweep
  frontier_section f;
  f.hardware                     = opt.hardware;
  f.peak_bytes                   = analysis.peak_live_bytes();
  f.swap_bound_bytes             = stash::swap_bound_bytes(analysis, stash::swap_scope::any_kind);
  f.swap_bound_activations_bytes = stash::swap_bound_bytes(analysis);
  f.memory_bound_bytes           = stash::memory_lower_bound_bytes(analysis, true);  // search wraps
  f.compute_ms                   = analysis.compute_seconds() * 1e3;
  f.note                         = frontier_note(analysis);
  f.budgets                      = frontier_budgets(
                           f.peak_bytes, {f.swap_bound_activations_bytes, f.swap_bound_bytes, f.memory_bound_bytes});
  f.policies = requested_policies(opt);
  f.points.resize(f.budgets.size() * f.policies.size());
  if (opt.threads > 1) {
    frontier_detail::plan_parallel(analysis, opt, f);
    return f;
  }
  auto const [lb, sb] = frontier_lower_bounds(analysis, f.budgets, opt);
  frontier_detail::set_lower_bounds(f, lb, sb);
  stash::auto_swap_sweeps sweeps(analysis, f.budgets);   // each AutoSwap greedy once for all
  for (std::size_t p = 0; p < f.policies.size(); ++p) {  // a policy's sweep at once (AutoSwap)
    auto const& name = f.policies[p];
    auto const plans = plan_policy_budgets(name, analysis, f.budgets, opt, &sweeps);
    for (std::size_t b = 0; b < f.budgets.size(); ++b) {
      f.points[b * f.policies.size() + p] =
          frontier_detail::point_of(analysis, name, f.budgets[b], plans[b]);
    }
  }
  return f;
}

/// @brief Where the frontier picture of an --svg path goes (out.svg -> out-frontier.svg).
[[nodiscard]] inline std::string frontier_svg_path(std::string const& iteration_svg_path)
{
  std::filesystem::path const out(iteration_svg_path);
  auto const extension = out.has_extension() ? out.extension().string() : std::string(".svg");
  return (out.parent_path() / (out.stem().string() + "-frontier" + extension)).string();
}

namespace frontier_detail {

/// printf of one number into a std::string.
[[nodiscard]] inline std::string fixed(char const* pattern, double v)
{
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), pattern, v);
  return buffer;
}

inline constexpr char const* line_colour[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a",
                                              "#66a61e", "#e6ab02", "#a6761d", "#666666",
                                              "#e41a1c", "#377eb8"};

/// Axes and scales of the picture.
struct frontier_axes {
  double left = 80, top = 50, width = 640, height = 360;
  double x_min{}, x_max{}, y_min{}, y_max{};
  [[nodiscard]] double x(std::uint64_t budget) const
  {
    return left + width * (static_cast<double>(budget) - x_min) / (x_max - x_min);
  }
  [[nodiscard]] double y(double ms) const
  {
    return top + height * (1.0 - (ms - y_min) / (y_max - y_min));
  }
};

[[nodiscard]] inline frontier_axes axes_of(frontier_section const& f)
{
  frontier_axes a;
  a.x_min = static_cast<double>(f.budgets.back()) * 0.98;
  a.x_max = static_cast<double>(f.peak_bytes) * 1.02;
  a.y_min = 0;
  a.y_max = f.compute_ms;
  for (auto const& pt : f.points) {
    if (pt.fits && std::isfinite(pt.iteration_ms)) { a.y_max = std::max(a.y_max, pt.iteration_ms); }
  }
  a.y_max *= 1.08;
  // Empty ranges (a trace of no bytes, no ops) would divide by zero: give them a unit span.
  if (!(a.x_max > a.x_min)) { a.x_max = a.x_min + 1; }
  if (!(a.y_max > a.y_min)) { a.y_max = a.y_min + 1; }
  return a;
}

inline void draw_frame(std::ostream& out, frontier_section const& f, frontier_axes const& a,
                       std::string const& title)
{
  using svg_detail::num;
  out << "<text x=\"" << num(a.left) << "\" y=\"24\" font-size=\"15\">" << svg_detail::escape(title)
      << "</text>\n";
  out << "<text x=\"" << num(a.left) << "\" y=\"40\" font-size=\"11\" fill=\"#555\">predicted by "
      << "stash's cost model on " << svg_detail::escape(f.hardware)
      << " with the budget enforced; a missing point does not fit</text>\n";
  out << "<rect x=\"" << num(a.left) << "\" y=\"" << num(a.top) << "\" width=\"" << num(a.width)
      << "\" height=\"" << num(a.height) << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    double const ms = a.y_min + (a.y_max - a.y_min) * k / 4.0;
    out << "<text x=\"" << num(a.left - 6) << "\" y=\"" << num(a.y(ms) + 4)
        << "\" font-size=\"10\" text-anchor=\"end\">" << fixed("%.0f", ms) << "</text>\n";
    auto const budget = static_cast<std::uint64_t>(a.x_min + (a.x_max - a.x_min) * k / 4.0);
    out << "<text x=\"" << num(a.x(budget)) << "\" y=\"" << num(a.top + a.height + 16)
        << "\" font-size=\"10\" text-anchor=\"middle\">"
        << fixed("%.2f", static_cast<double>(budget) / static_cast<double>(stash::GiB))
        << "</text>\n";
  }
  out << "<text x=\"" << num(a.left + a.width / 2) << "\" y=\"" << num(a.top + a.height + 34)
      << "\" font-size=\"11\" text-anchor=\"middle\">device budget (GiB)</text>\n";
  out << "<text x=\"16\" y=\"" << num(a.top + a.height / 2) << "\" font-size=\"11\" "
      << "transform=\"rotate(-90 16 " << num(a.top + a.height / 2)
      << ")\" text-anchor=\"middle\">iteration (ms)</text>\n";
}

inline void draw_bounds(std::ostream& out, frontier_section const& f, frontier_axes const& a)
{
  using svg_detail::num;
  auto vertical = [&](std::uint64_t budget, char const* label, double dy) {
    out << "<line x1=\"" << num(a.x(budget)) << "\" y1=\"" << num(a.top) << "\" x2=\""
        << num(a.x(budget)) << "\" y2=\"" << num(a.top + a.height)
        << "\" stroke=\"#444\" stroke-dasharray=\"4 3\"/>\n<text x=\"" << num(a.x(budget) + 3)
        << "\" y=\"" << num(a.top + 12 + dy) << "\" font-size=\"10\">" << label << "</text>\n";
  };
  // Labels stacked downwards from the highest bound: the bounds may be close.
  // The memory bound is the any-kind swap bound with wrap gaps (swap_bounds.hpp: a re-run, as a
  // prefetch, restores an op's operands before its step; search may plan wrap entries): where no
  // storage can wrap usefully they coincide, and one line says both.
  bool const same = f.memory_bound_bytes == f.swap_bound_bytes;
  vertical(f.swap_bound_activations_bytes, "swap bound (act)", 0);
  if (f.swap_bound_bytes != f.swap_bound_activations_bytes) {
    vertical(f.swap_bound_bytes, same ? "memory bound = swap bound (any)" : "swap bound (any)", 14);
  }
  if (!same) { vertical(f.memory_bound_bytes, "memory bound (with wraps)", 28); }
  auto curve = [&](std::vector<double> const& ms, char const* dash) {
    std::string path;
    for (std::size_t b = 0; b < f.budgets.size(); ++b) {
      if (!std::isfinite(ms[b])) { continue; }
      path += (path.empty() ? "M" : " L") + num(a.x(f.budgets[b])) + " " + num(a.y(ms[b]));
    }
    if (path.empty()) { return; }
    out << "<path d=\"" << path << "\" fill=\"none\" stroke=\"#000\" stroke-width=\"1\" "
        << "stroke-dasharray=\"" << dash << "\"/>\n";
  };
  curve(f.swap_lower_bound_ms, "2 2");
  curve(f.lower_bound_ms, "6 3");
  if (f.note) {
    out << "<text x=\"" << num(a.left + 8) << "\" y=\"" << num(a.top + a.height - 8)
        << "\" font-size=\"11\" fill=\"#a00\">" << svg_detail::escape(*f.note) << "</text>\n";
  }
}

inline void draw_policies(std::ostream& out, frontier_section const& f, frontier_axes const& a)
{
  using svg_detail::num;
  for (std::size_t p = 0; p < f.policies.size(); ++p) {
    auto const* colour = line_colour[p % std::size(line_colour)];
    std::string path;
    for (std::size_t b = 0; b < f.budgets.size(); ++b) {
      auto const& pt = f.points[b * f.policies.size() + p];
      if (!pt.fits) {
        path += " ";  // a gap in the line: this budget does not fit
        continue;
      }
      bool const start = path.empty() || path.back() == ' ';
      path += (start ? "M" : " L") + num(a.x(pt.budget_bytes)) + " " + num(a.y(pt.iteration_ms));
    }
    double const width = f.policies[p] == "search_swap" ? 2.5 : 1.3;
    out << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << colour << "\" stroke-width=\""
        << num(width) << "\"/>\n";
    for (std::size_t b = 0; b < f.budgets.size(); ++b) {  // a dot per fitting point
      auto const& pt = f.points[b * f.policies.size() + p];
      if (!pt.fits) { continue; }
      out << "<circle cx=\"" << num(a.x(pt.budget_bytes)) << "\" cy=\"" << num(a.y(pt.iteration_ms))
          << "\" r=\"" << num(width) << "\" fill=\"" << colour << "\"/>\n";
    }
    double const ly = a.top + 14.0 * static_cast<double>(p) + 8;
    out << "<line x1=\"" << num(a.left + a.width + 14) << "\" y1=\"" << num(ly) << "\" x2=\""
        << num(a.left + a.width + 34) << "\" y2=\"" << num(ly) << "\" stroke=\"" << colour
        << "\" stroke-width=\"" << num(width) << "\"/>\n<text x=\"" << num(a.left + a.width + 38)
        << "\" y=\"" << num(ly + 4) << "\" font-size=\"11\">" << svg_detail::escape(f.policies[p])
        << "</text>\n";
  }
  double const ly = a.top + 14.0 * static_cast<double>(f.policies.size()) + 8;
  out << "<line x1=\"" << num(a.left + a.width + 14) << "\" y1=\"" << num(ly) << "\" x2=\""
      << num(a.left + a.width + 34) << "\" y2=\"" << num(ly)
      << "\" stroke=\"#000\" stroke-dasharray=\"2 2\"/>\n<text x=\"" << num(a.left + a.width + 38)
      << "\" y=\"" << num(ly + 4) << "\" font-size=\"11\">time bound (swap)</text>\n";
  out << "<line x1=\"" << num(a.left + a.width + 14) << "\" y1=\"" << num(ly + 14) << "\" x2=\""
      << num(a.left + a.width + 34) << "\" y2=\"" << num(ly + 14)
      << "\" stroke=\"#000\" stroke-dasharray=\"6 3\"/>\n<text x=\"" << num(a.left + a.width + 38)
      << "\" y=\"" << num(ly + 18) << "\" font-size=\"11\">time bound (any)</text>\n";
}

}  // namespace frontier_detail

/// @brief The frontier as an SVG document: predicted time against budget, one line per policy.
[[nodiscard]] inline std::string render_frontier_svg(frontier_section const& f,
                                                     std::string const& title)
{
  std::ostringstream out;
  auto const a = frontier_detail::axes_of(f);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"460\" "
      << "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  frontier_detail::draw_frame(out, f, a, title);
  frontier_detail::draw_bounds(out, f, a);
  frontier_detail::draw_policies(out, f, a);
  out << "</svg>\n";
  return out.str();
}

}  // namespace stash_plan
