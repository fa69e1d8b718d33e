// What analysing a trace once buys: planning and simulating every swap policy at every budget of
// a frontier sweep (100% of the peak down to 50% in 5% steps) with one stash::trace_analysis per
// trace, against building a fresh analysis for every plan and every simulation (what each call
// paid before the analysis was shared: lifetimes, op index and op times derived again each time).
// Measured wall time on this machine, best of 3; prints Markdown.
//
//   bench_analysis_once [DATA_DIR]
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/trace/trace_reader.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace {

template <class F>
double best_of_3(F&& f)
{
  double best = 1e300;
  for (int k = 0; k < 3; ++k) {
    auto const t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Every policy at every budget; `analysis_of(t)` gives the analysis each call uses.
template <class AnalysisOf>
void sweep(stash::trace const& t, AnalysisOf&& analysis_of)
{
  auto const peak = analysis_of(t).peak_live_bytes();
  for (int pct = 100; pct >= 50; pct -= 5) {
    auto const budget = peak / 100 * static_cast<std::uint64_t>(pct);
    for (auto const name : stash::swap_policy_names()) {
      if (name == "search_swap" || name == "vdnn_dyn") { continue; }  // they simulate inside
      auto const s = stash::plan_by_name(name, analysis_of(t), budget);
      (void)stash::simulate(analysis_of(t), s, stash::sim_options{false});
    }
  }
}

}  // namespace

int main(int argc, char** argv)
try {
  std::string const data = argc > 1 ? argv[1] : STASH_DATA_DIR;
  stash::cost_model const model(stash::hardware_preset("pcie4_x16"));
  std::printf("| trace | analysis once | analysis per call | speedup |\n|---|---:|---:|---:|\n");
  for (auto const* name : {"alexnet_b128", "vgg16_b32", "resnet18_b32", "mobilenet_v2_b32",
                           "transformer_encoder_b8", "squeezenet1_1_b64", "shufflenet_v2_x1_0_b64",
                           "efficientnet_b0_b32", "regnet_y_400mf_b64"}) {
    auto const t = stash::read_trace(data + "/traces/" + name + ".trace");
    stash::trace_analysis const once(t, model);
    double const shared = best_of_3([&] {
      sweep(t, [&](stash::trace const&) -> stash::trace_analysis const& { return once; });
    });
    double const fresh  = best_of_3([&] {
      sweep(t, [&](stash::trace const& tr) { return stash::trace_analysis(tr, model); });
    });
    std::printf("| %s | %.1f ms | %.1f ms | %.2fx |\n", name, shared * 1e3, fresh * 1e3,
                fresh / shared);
  }
  return 0;
} catch (std::exception const& e) {
  std::fprintf(stderr, "bench_analysis_once: %s\n", e.what());
  return 1;
}
