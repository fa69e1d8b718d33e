// Planning at scale: CPU seconds of the process and wall seconds of search_swap, auto_swap,
// `search` (joint_search) and stash-plan's --frontier on deepened copies of a recorded trace
// (stash_tools/deep_trace.hpp) at growing storage counts, with a fingerprint of each schedule
// (schedule_fingerprint.hpp) so that runs before and after a change can be compared. Prints
// Markdown rows. Everything runs on one thread but `frontier` with --threads N (stash-plan
// --frontier --threads: the same points on N threads; CPU s is then the sum over the threads).
//
//   bench_planning_scale [--trace FILE] [--sizes 10000,25000,...] [--budget PCT]
//                        [--what search_swap,auto_swap,search,frontier,bounds,frontier_parts]
//                        [--frontier-policies search_swap,auto_swap] [--threads N]
//   bench_planning_scale --fingerprints DATA_DIR
//       prints the fingerprint table of tests/swap/planning_scale_test.cpp (see there)
//   bench_planning_scale --search-fingerprints DATA_DIR
//       prints the fingerprints of `search` on every recorded trace (and the transformer deepened
//       to 4 and 8 copies) at 70%, 50% and 35% of the peak, with CPU seconds per plan: the table
//       of tests/swap/search_scale_test.cpp is a cheap subset of it
// Defaults: data/traces/transformer_encoder_b8.trace, sizes 10000,25000,50000,100000, budget 50
// (% of the peak), threads 1, every measurement but `bounds` (the frontier's time lower bounds
// alone, a part of `frontier`, with a fingerprint of their values) and `frontier_parts` (the
// frontier's steps timed one by one).
#include <stash_tools/deep_trace.hpp>
#include <stash_tools/schedule_fingerprint.hpp>
#include <stash_tools/stash_plan/frontier.hpp>
#include <stash_tools/stash_plan/options.hpp>
#include <stash_tools/stash_plan/policies.hpp>

#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/auto_swap.hpp>
#include <stash/swap/joint_search.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/swap/vdnn.hpp>
#include <stash/trace/trace_reader.hpp>

#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct bench_options {
  std::string trace = STASH_DATA_DIR "/traces/transformer_encoder_b8.trace";
  std::vector<std::size_t> sizes{10000, 25000, 50000, 100000};
  double budget_pct = 50;
  std::vector<std::string> what{"search_swap", "auto_swap", "search", "frontier"};
  std::vector<std::string> frontier_policies{"search_swap", "auto_swap"};
  unsigned threads = 1;  // of `frontier`
};

std::vector<std::string> split(std::string const& text)
{
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) { out.push_back(item); }
  }
  return out;
}

bench_options parse(int argc, char** argv)
{
  bench_options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string const key = argv[i], value = argv[i + 1];
    if (key == "--trace") {
      o.trace = value;
    } else if (key == "--sizes") {
      o.sizes.clear();
      for (auto const& s : split(value)) { o.sizes.push_back(std::stoull(s)); }
    } else if (key == "--budget") {
      o.budget_pct = std::stod(value);
    } else if (key == "--what") {
      o.what = split(value);
    } else if (key == "--frontier-policies") {
      o.frontier_policies = split(value);
    } else if (key == "--threads") {
      o.threads = static_cast<unsigned>(std::stoul(value));
      if (o.threads == 0) { throw std::runtime_error("--threads: at least 1"); }
    } else {
      throw std::runtime_error("unknown option " + key);
    }
  }
  return o;
}

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

double wall_seconds()
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
void row(char const* what, std::size_t storages, std::size_t ops, F&& f)
{
  double const t0 = cpu_seconds(), w0 = wall_seconds();
  auto const note = f();
  std::printf("| %s | %zu | %zu | %.3f | %.3f | %s |\n", what, storages, ops, cpu_seconds() - t0,
              wall_seconds() - w0, note.c_str());
  std::fflush(stdout);
}

std::string describe(stash::trace_analysis const& a, stash::schedule const& s)
{
  auto const r = stash::simulate(a, s, stash::sim_options{false});
  char text[160];
  std::snprintf(text, sizeof(text), "%zu entries, %s, %.3f ms, fp %016llx", s.entries.size(),
                r.fits ? "fits" : "does not fit", r.iteration_s * 1e3,
                static_cast<unsigned long long>(stash_tools::schedule_fingerprint(s)));
  return text;
}

bool wants(bench_options const& o, std::string const& w)
{
  for (auto const& x : o.what) {
    if (x == w) { return true; }
  }
  return false;
}

// run_frontier's steps timed one by one (the sum is `frontier` less the note and the budgets):
// the analysis, the time bounds, each AutoSwap greedy sweep (all budgets at once; search_swap
// seeds from them), each policy's plans given those sweeps, and the simulations of the points.
void frontier_parts(bench_options const& o, stash::trace const& deep)
{
  stash_plan::options opt;
  opt.policies = o.frontier_policies;
  opt.threads  = 1;
  auto const n = deep.storages().size(), ops = deep.ops().size();
  double t0 = cpu_seconds(), w0 = wall_seconds();
  auto lap = [&](char const* what, std::string const& note) {
    double const t1 = cpu_seconds(), w1 = wall_seconds();
    std::printf("| %s | %zu | %zu | %.3f | %.3f | %s |\n", what, n, ops, t1 - t0, w1 - w0,
                note.c_str());
    std::fflush(stdout);
    t0 = t1;
    w0 = w1;
  };
  auto const model = stash_plan::make_cost_model(opt);
  stash::trace_analysis const a(deep, model);
  auto const budgets = stash_plan::frontier_budgets_of(a);
  lap("frontier: analysis, budgets", std::to_string(budgets.size()) + " budgets");
  auto const bounds = stash_plan::frontier_lower_bounds(a, budgets, opt);
  lap("frontier: time bounds", std::to_string(bounds.first.size()) + " x 2");
  stash::auto_swap_sweeps sweeps(a, budgets);
  struct named {
    stash::auto_swap_score score;
    char const* name;
  };
  for (auto const& [score, name] :
       {named{stash::auto_swap_score::swdoa, "swdoa"}, named{stash::auto_swap_score::doa, "doa"},
        named{stash::auto_swap_score::aoa, "aoa"}, named{stash::auto_swap_score::wdoa, "wdoa"}}) {
    auto const& plans = sweeps.of(score);
    lap((std::string("frontier: auto_swap sweep ") + name).c_str(),
        std::to_string(plans.size()) + " plans");
  }
  std::vector<stash::schedule> all;
  for (auto const& name : opt.policies) {
    auto plans = stash_plan::plan_policy_budgets(name, a, budgets, opt, &sweeps);
    lap(("frontier: " + name + " plans").c_str(), "given the sweeps");
    for (auto& s : plans) { all.push_back(std::move(s)); }
  }
  std::size_t fits = 0;
  for (auto const& s : all) { fits += stash::simulate(a, s, stash::sim_options{false}).fits; }
  lap("frontier: simulations",
      std::to_string(all.size()) + " points, " + std::to_string(fits) + " fit");
}

void run_size(bench_options const& o, stash::trace const& base, std::size_t target)
{
  auto const deep = stash_tools::deepen_trace(base, stash_tools::copies_for(base, target));
  stash::cost_model const model(stash::presets::pcie3_x16);
  stash::trace_analysis const a(deep, model);
  auto const n = deep.storages().size(), ops = deep.ops().size();
  auto const budget =
      static_cast<std::uint64_t>(static_cast<double>(a.peak_live_bytes()) * o.budget_pct / 100.0);
  if (wants(o, "search_swap")) {
    row("search_swap", n, ops, [&] {
      stash::search_swap_stats stats;
      auto const s = stash::search_swap{}.plan(a, budget, stats);
      return describe(a, s) + ", " + std::to_string(stats.simulations) + " sims, " + stats.winner;
    });
  }
  if (wants(o, "auto_swap")) {
    row("auto_swap", n, ops, [&] { return describe(a, stash::auto_swap{}.plan(a, budget)); });
  }
  if (wants(o, "search")) {
    row("search", n, ops, [&] { return describe(a, stash::joint_search{}.plan(a, budget)); });
  }
  if (wants(o, "bounds")) {
    row("bounds", n, ops, [&] {
      stash_plan::options const opt;
      auto const f = stash_plan::frontier_lower_bounds(a, stash_plan::frontier_budgets_of(a), opt);
      std::uint64_t fp = 14695981039346656037ULL;  // FNV-1a over every bound's bits
      for (auto const* v : {&f.first, &f.second}) {
        for (double const x : *v) {
          auto const bits = std::bit_cast<std::uint64_t>(x);
          for (int k = 0; k < 8; ++k) { fp = (fp ^ ((bits >> (8 * k)) & 0xff)) * 1099511628211ULL; }
        }
      }
      char text[64];
      std::snprintf(text, sizeof(text), "%zu budgets, bounds fp %016llx", f.first.size(),
                    static_cast<unsigned long long>(fp));
      return std::string(text);
    });
  }
  if (wants(o, "frontier_parts")) { frontier_parts(o, deep); }
  if (wants(o, "frontier")) {
    stash_plan::options opt;
    opt.policies = o.frontier_policies;
    opt.threads  = o.threads;
    row("frontier", n, ops, [&] {
      auto const f       = stash_plan::run_frontier(deep, opt);
      std::uint64_t fits = 0;
      std::uint64_t fp   = 14695981039346656037ULL;  // FNV-1a over every point's figures
      auto mix           = [&](std::uint64_t x) {
        for (int k = 0; k < 8; ++k) { fp = (fp ^ ((x >> (8 * k)) & 0xff)) * 1099511628211ULL; }
      };
      for (auto const& p : f.points) {
        fits += p.fits ? 1 : 0;
        mix(p.fits ? 1 : 0);
        mix(std::bit_cast<std::uint64_t>(p.iteration_ms));
        mix(p.offloaded_bytes);
      }
      char text[32];
      std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(fp));
      return std::to_string(f.budgets.size()) + " budgets x " + std::to_string(f.policies.size()) +
             " policies, " + std::to_string(fits) + " fit, points fp " + text;
    });
  }
}

// The fingerprints of search_swap and the four AutoSwap scores on the small recorded traces at
// a few budgets (the transformer deepened to 4 copies), as C++ initializers for
// tests/swap/planning_scale_test.cpp.
void print_fingerprints(std::string const& data_dir)
{
  for (auto const* name : {"alexnet_b128", "vgg16_b32", "resnet18_b32", "transformer_encoder_b8",
                           "squeezenet1_1_b64"}) {
    auto t = stash::read_trace(data_dir + "/traces/" + name + ".trace");
    if (std::string_view(name) == "transformer_encoder_b8") { t = stash_tools::deepen_trace(t, 4); }
    stash::cost_model const model(stash::presets::pcie3_x16);
    stash::trace_analysis const a(t, model);
    for (int const pct : {80, 60, 45}) {
      auto const budget = a.peak_live_bytes() / 100 * static_cast<std::uint64_t>(pct);
      std::printf("    {\"%s\", %d, 0x%016llxULL", name, pct,
                  static_cast<unsigned long long>(
                      stash_tools::schedule_fingerprint(stash::search_swap{}.plan(a, budget))));
      for (auto const score : {stash::auto_swap_score::swdoa, stash::auto_swap_score::doa,
                               stash::auto_swap_score::aoa, stash::auto_swap_score::wdoa}) {
        auto const s = stash::auto_swap{.score = score}.plan(a, budget);
        std::printf(", 0x%016llxULL",
                    static_cast<unsigned long long>(stash_tools::schedule_fingerprint(s)));
      }
      std::printf("},\n");
    }
  }
  std::printf("vdnn_conv, vdnn_all:\n");
  for (auto const* name : {"alexnet_b128", "vgg16_b32", "resnet18_b32", "transformer_encoder_b8"}) {
    auto t = stash::read_trace(data_dir + "/traces/" + name + ".trace");
    if (std::string_view(name) == "transformer_encoder_b8") { t = stash_tools::deepen_trace(t, 4); }
    stash::cost_model const model(stash::presets::pcie3_x16);
    stash::trace_analysis const a(t, model);
    auto const budget = a.peak_live_bytes() / 2;
    std::printf("    {\"%s\", 0x%016llxULL, 0x%016llxULL},\n", name,
                static_cast<unsigned long long>(
                    stash_tools::schedule_fingerprint(stash::vdnn_conv{}.plan(a, budget))),
                static_cast<unsigned long long>(
                    stash_tools::schedule_fingerprint(stash::vdnn_all{}.plan(a, budget))));
  }
}

// `search`'s fingerprints (see the usage above) as C++ initializers.
void print_search_fingerprints(std::string const& data_dir)
{
  struct input {
    char const* name;
    std::size_t copies;
  };
  for (auto const& [name, copies] :
       {input{"alexnet_b128", 1}, input{"vgg16_b32", 1}, input{"resnet18_b32", 1},
        input{"squeezenet1_1_b64", 1}, input{"mobilenet_v2_b32", 1},
        input{"shufflenet_v2_x1_0_b64", 1}, input{"efficientnet_b0_b32", 1},
        input{"regnet_y_400mf_b64", 1}, input{"transformer_encoder_b8", 1},
        input{"transformer_encoder_b8", 4}, input{"transformer_encoder_b8", 8}}) {
    auto t = stash::read_trace(data_dir + "/traces/" + name + ".trace");
    if (copies > 1) { t = stash_tools::deepen_trace(t, copies); }
    stash::cost_model const model(stash::presets::pcie3_x16);
    stash::trace_analysis const a(t, model);
    for (int const pct : {70, 50, 35}) {
      auto const budget = a.peak_live_bytes() / 100 * static_cast<std::uint64_t>(pct);
      double const t0   = cpu_seconds();
      auto const fp     = stash_tools::schedule_fingerprint(stash::joint_search{}.plan(a, budget));
      std::printf("    {\"%s\", %zu, %d, 0x%016llxULL},  // %.3f CPU s\n", name, copies, pct,
                  static_cast<unsigned long long>(fp), cpu_seconds() - t0);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv)
{
  try {
    if (argc == 3 && std::string(argv[1]) == "--fingerprints") {
      print_fingerprints(argv[2]);
      return 0;
    }
    if (argc == 3 && std::string(argv[1]) == "--search-fingerprints") {
      print_search_fingerprints(argv[2]);
      return 0;
    }
    auto const o    = parse(argc, argv);
    auto const base = stash::read_trace(o.trace);
    std::printf(
        "| what | storages | ops | CPU s | wall s | result |\n|---|---:|---:|---:|---:|---|\n");
    for (auto const size : o.sizes) { run_size(o, base, size); }
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_planning_scale: %s\n", e.what());
    return 1;
  }
}
