// bench_planners: offset planners on MiniMalloc's 11 "challenging" instances, a 100k-block
// instance, the recorded training traces (every data/traces/*.trace) and 100k-storage real
// traces (iterations of a recorded trace back to back, stash_tools::repeat_iterations). Prints a
// Markdown table (or JSON with --json).
//
//   bench_planners [--data DIR] [--nodes N] [--trace-nodes N] [--time-cap-ms N] [--json]
//
// The search's budgets are search nodes (default stash::default_search_nodes for both), so its
// plans and node counts are the same on every run; only the seconds vary with the machine and
// its load. --time-cap-ms sets the planner's wall-clock safety cap (off by default); a search it
// cut short is marked "capped". DIR defaults to the repository's data/ folder (STASH_DATA_DIR at
// build time).
#include <stash/pool/best_of_planner.hpp>
#include <stash/pool/greedy_planner.hpp>
#include <stash/pool/plan_checker.hpp>
#include <stash/pool/search_planner.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/minimalloc_reader.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash_tools/planner_workloads.hpp>

#include <algorithm>
#include <filesystem>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#ifndef STASH_DATA_DIR
#define STASH_DATA_DIR "data"
#endif

namespace {

struct row {
  std::string name;
  std::size_t blocks{0};
  std::uint64_t lower{0};
  std::uint64_t capacity{0};  // 0: none
  std::uint64_t greedy{0};
  double greedy_s{0};
  std::uint64_t search{0};
  double search_s{0};
  double search_cpu_s{0};  // CPU time of the search (one thread): less sensitive to the load
  std::uint64_t nodes{0};
  bool capped{false};  // the time cap cut the search short
  std::size_t sections{0};
  std::uint64_t work{0};
  double one_iteration_alpha{0};  // repeated traces: the search's alpha on one iteration
};

double seconds_since(std::chrono::steady_clock::time_point t0)
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

row run(std::string const& name, std::vector<stash::lifetime_interval> const& in,
        std::uint64_t alignment, std::optional<std::uint64_t> capacity, std::uint64_t nodes,
        std::chrono::milliseconds time_cap)
{
  row r;
  r.name       = name;
  r.blocks     = in.size();
  r.lower      = stash::plan_lower_bound(in, alignment);
  r.capacity   = capacity.value_or(0);
  auto const g = stash::greedy_planner{}.plan(in, alignment);
  stash::check_plan(in, g);
  r.greedy   = g.footprint;
  r.greedy_s = g.plan_seconds();
  stash::search_options o;
  o.capacity    = capacity;
  o.node_budget = nodes;
  o.time_cap    = time_cap;
  stash::search_stats stats;
  auto const c0  = std::clock();
  auto const s   = stash::search_planner(o).plan(in, alignment, stats);
  r.search_cpu_s = double(std::clock() - c0) / CLOCKS_PER_SEC;
  stash::check_plan(in, s);
  r.search   = s.footprint;
  r.search_s = s.plan_seconds();
  r.nodes    = stats.nodes;
  r.capped   = stats.time_capped;
  r.sections = stats.sections;
  r.work     = stats.work;
  return r;
}

}  // namespace

int main(int argc, char** argv)
{
  std::string data    = STASH_DATA_DIR;
  std::uint64_t nodes = stash::default_search_nodes, trace_nodes = stash::default_search_nodes;
  long time_cap_ms = 0;
  bool json        = false;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--data" && i + 1 < argc) {
      data = argv[++i];
    } else if (a == "--nodes" && i + 1 < argc) {
      nodes = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--trace-nodes" && i + 1 < argc) {
      trace_nodes = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--time-cap-ms" && i + 1 < argc) {
      time_cap_ms = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--data DIR] [--nodes N] [--trace-nodes N] [--time-cap-ms N] "
                   "[--json]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    std::vector<row> mm, traces;
    for (char c = 'A'; c <= 'K'; ++c) {
      auto const inst = stash::read_minimalloc_csv(data + "/minimalloc/" + c + ".1048576.csv");
      mm.push_back(run(std::string(1, c), inst.buffers, 1, inst.capacity, nodes,
                       std::chrono::milliseconds(time_cap_ms)));
      std::fprintf(stderr, "%c done\n", c);
    }

    // 100k blocks: instance A repeated back to back in time.
    auto const a       = stash::read_minimalloc_csv(data + "/minimalloc/A.1048576.csv");
    std::uint64_t span = 0;
    for (auto const& b : a.buffers) { span = std::max(span, b.end); }
    std::vector<stash::lifetime_interval> big;
    for (std::uint64_t shift = 0; big.size() < 100000; shift += span) {
      for (auto b : a.buffers) {
        b.id = big.size();
        b.begin += shift;
        b.end += shift;
        big.push_back(b);
      }
    }
    auto t0          = std::chrono::steady_clock::now();
    auto const gbig  = stash::greedy_planner{}.plan(big, 1);
    double const g_s = seconds_since(t0);
    t0               = std::chrono::steady_clock::now();
    stash::check_plan(big, gbig);
    double const check_s = seconds_since(t0);
    t0                   = std::chrono::steady_clock::now();
    auto const lbig      = stash::plan_lower_bound(big, 1);
    double const lb_s    = seconds_since(t0);

    std::vector<std::string> names;
    for (auto const& e : std::filesystem::directory_iterator(data + "/traces")) {
      if (e.path().extension() == ".trace") { names.push_back(e.path().stem().string()); }
    }
    std::sort(names.begin(), names.end());
    for (auto const& t : names) {
      auto const tr = stash::read_trace(data + "/traces/" + t + ".trace");
      auto const in = stash::lifetime_intervals(tr);
      traces.push_back(run(t, in, stash::cuda_allocation_alignment, std::nullopt, trace_nodes,
                           std::chrono::milliseconds(time_cap_ms)));
      std::fprintf(stderr, "%s done\n", t.c_str());
    }

    // The same traces with every size scaled by a random factor in [0.5, 1.5] (4 seeds each):
    // packing problems the planner was not tuned on.
    std::vector<row> perturbed;
    for (auto const& t : names) {
      auto const in =
          stash::lifetime_intervals(stash::read_trace(data + "/traces/" + t + ".trace"));
      for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        perturbed.push_back(run(t + " #" + std::to_string(seed),
                                stash_tools::perturb_sizes(in, seed),
                                stash::cuda_allocation_alignment, std::nullopt, trace_nodes,
                                std::chrono::milliseconds(time_cap_ms)));
      }
      std::fprintf(stderr, "%s perturbed done\n", t.c_str());
    }

    // 100k-storage real traces: iterations back to back (parameters and optimizer state once).
    std::vector<row> repeated;
    for (char const* t : {"resnet18_b32", "regnet_y_400mf_b64"}) {
      auto const tr          = stash::read_trace(data + "/traces/" + t + ".trace");
      auto const one         = stash::lifetime_intervals(tr);
      std::size_t persistent = 0;
      for (auto const& b : one) { persistent += b.end == tr.events().size() ? 1 : 0; }
      std::size_t const per  = one.size() - persistent;
      std::size_t const reps = (100000 - persistent + per - 1) / per;
      auto const in          = stash_tools::repeat_iterations(tr, reps);
      auto r =
          run(std::string(t) + " x" + std::to_string(reps), in, stash::cuda_allocation_alignment,
              std::nullopt, trace_nodes, std::chrono::milliseconds(time_cap_ms));
      auto const single =
          std::find_if(traces.begin(), traces.end(), [&](row const& x) { return x.name == t; });
      r.one_iteration_alpha =
          single == traces.end() ? 0.0 : double(single->search) / double(single->lower);
      repeated.push_back(r);
      std::fprintf(stderr, "%s x%zu done\n", t, reps);
    }

    if (json) {
      std::printf("{\n  \"minimalloc\": [\n");
      for (std::size_t i = 0; i < mm.size(); ++i) {
        auto const& r = mm[i];
        std::printf(
            "    {\"name\": \"%s\", \"blocks\": %zu, \"lower_bound\": %llu, \"capacity\": %llu, "
            "\"greedy\": %llu, \"greedy_s\": %.6f, \"search\": %llu, \"search_s\": %.3f, "
            "\"nodes\": %llu, \"time_capped\": %s, \"within_capacity\": %s}%s\n",
            r.name.c_str(), r.blocks, (unsigned long long)r.lower, (unsigned long long)r.capacity,
            (unsigned long long)r.greedy, r.greedy_s, (unsigned long long)r.search, r.search_s,
            (unsigned long long)r.nodes, r.capped ? "true" : "false",
            r.search <= r.capacity ? "true" : "false", i + 1 < mm.size() ? "," : "");
      }
      std::printf(
          "  ],\n  \"big\": {\"blocks\": %zu, \"greedy\": %llu, \"lower_bound\": %llu, "
          "\"greedy_s\": %.4f, \"check_s\": %.4f, \"lower_bound_s\": %.4f},\n  \"traces\": [\n",
          big.size(), (unsigned long long)gbig.footprint, (unsigned long long)lbig, g_s, check_s,
          lb_s);
      for (std::size_t i = 0; i < traces.size(); ++i) {
        auto const& r = traces[i];
        std::printf(
            "    {\"name\": \"%s\", \"blocks\": %zu, \"lower_bound\": %llu, \"greedy\": %llu, "
            "\"greedy_alpha\": %.5f, \"greedy_s\": %.4f, \"search\": %llu, \"search_alpha\": "
            "%.5f, \"search_s\": %.3f, \"nodes\": %llu, \"sections\": %zu, \"time_capped\": "
            "%s}%s\n",
            r.name.c_str(), r.blocks, (unsigned long long)r.lower, (unsigned long long)r.greedy,
            double(r.greedy) / double(r.lower), r.greedy_s, (unsigned long long)r.search,
            double(r.search) / double(r.lower), r.search_s, (unsigned long long)r.nodes, r.sections,
            r.capped ? "true" : "false", i + 1 < traces.size() ? "," : "");
      }
      std::printf("  ],\n  \"repeated\": [\n");
      for (std::size_t i = 0; i < repeated.size(); ++i) {
        auto const& r = repeated[i];
        std::printf(
            "    {\"name\": \"%s\", \"blocks\": %zu, \"lower_bound\": %llu, \"greedy_alpha\": "
            "%.5f, \"greedy_s\": %.4f, \"search_alpha\": %.5f, \"one_iteration_alpha\": %.5f, "
            "\"search_s\": %.3f, \"nodes\": %llu, \"sections\": %zu}%s\n",
            r.name.c_str(), r.blocks, (unsigned long long)r.lower,
            double(r.greedy) / double(r.lower), r.greedy_s, double(r.search) / double(r.lower),
            r.one_iteration_alpha, r.search_s, (unsigned long long)r.nodes, r.sections,
            i + 1 < repeated.size() ? "," : "");
      }
      std::printf("  ]\n}\n");
      return 0;
    }

    int within = 0;
    std::printf("## MiniMalloc challenging instances (alignment 1, capacity 1048576)\n\n");
    std::printf(
        "| inst | blocks | L | L/cap | greedy | greedy/L | greedy s | search | search/L | within "
        "cap | search s | search cpu s | nodes |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n");
    for (auto const& r : mm) {
      bool const ok = r.search <= r.capacity;
      within += ok ? 1 : 0;
      std::printf(
          "| %s | %zu | %llu | %.3f | %llu | %.3f | %.4f | %llu | %.3f | %s | %.2f | %.2f | "
          "%llu%s |\n",
          r.name.c_str(), r.blocks, (unsigned long long)r.lower,
          double(r.lower) / double(r.capacity), (unsigned long long)r.greedy,
          double(r.greedy) / double(r.lower), r.greedy_s, (unsigned long long)r.search,
          double(r.search) / double(r.lower), ok ? "yes" : "NO", r.search_s, r.search_cpu_s,
          (unsigned long long)r.nodes, r.capped ? " (capped)" : "");
    }
    std::printf("\nwithin capacity: %d of %zu (search budget %llu nodes each", within, mm.size(),
                (unsigned long long)nodes);
    if (time_cap_ms > 0) { std::printf(", time cap %ld ms", time_cap_ms); }
    std::printf(")\n\n");
    std::printf("## 100k blocks (instance A repeated %zu times in time)\n\n",
                big.size() / a.buffers.size());
    std::printf(
        "| blocks | L | greedy | greedy s | check_plan s | plan_lower_bound s "
        "|\n|---:|---:|---:|---:|---:|---:|\n");
    std::printf("| %zu | %llu | %llu | %.4f | %.4f | %.4f |\n\n", big.size(),
                (unsigned long long)lbig, (unsigned long long)gbig.footprint, g_s, check_s, lb_s);
    std::printf(
        "## Training traces (alignment 256, no capacity: minimise toward L; %llu nodes each)\n\n",
        (unsigned long long)trace_nodes);
    std::printf(
        "| trace | blocks | L | greedy alpha | greedy s | search alpha | search s | search cpu s "
        "| nodes | greedy + search s |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (auto const& r : traces) {
      std::printf(
          "| %s | %zu | %llu | %.5f | %.3f | %.5f | %.3f | %.3f | %llu%s | %.3f |\n",
          r.name.c_str(), r.blocks, (unsigned long long)r.lower, double(r.greedy) / double(r.lower),
          r.greedy_s, double(r.search) / double(r.lower), r.search_s, r.search_cpu_s,
          (unsigned long long)r.nodes, r.capped ? " (capped)" : "", r.greedy_s + r.search_s);
    }
    std::printf(
        "\n## Perturbed traces (every size x a random factor in [0.5, 1.5], seeds 1-4)\n\n"
        "| trace #seed | greedy alpha | search alpha | search s | search cpu s | nodes | work |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n");
    for (auto const& r : perturbed) {
      std::printf("| %s | %.5f | %.5f | %.3f | %.3f | %llu | %llu%s |\n", r.name.c_str(),
                  double(r.greedy) / double(r.lower), double(r.search) / double(r.lower),
                  r.search_s, r.search_cpu_s, (unsigned long long)r.nodes,
                  (unsigned long long)r.work, r.capped ? " (capped)" : "");
    }
    std::printf(
        "\n## 100k-storage real traces (iterations back to back; parameters and optimizer state "
        "allocated once)\n\n"
        "| trace | blocks | sections | greedy alpha | greedy s | search alpha | alpha, one "
        "iteration | search s | search cpu s | nodes |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (auto const& r : repeated) {
      std::printf("| %s | %zu | %zu | %.5f | %.3f | %.5f | %.5f | %.3f | %.3f | %llu%s |\n",
                  r.name.c_str(), r.blocks, r.sections, double(r.greedy) / double(r.lower),
                  r.greedy_s, double(r.search) / double(r.lower), r.one_iteration_alpha, r.search_s,
                  r.search_cpu_s, (unsigned long long)r.nodes, r.capped ? " (capped)" : "");
    }
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_planners: %s\n", e.what());
    return 1;
  }
  return 0;
}
