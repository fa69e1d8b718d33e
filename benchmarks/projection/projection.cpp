// Projected time to train of the recorded traces on clusters of 8 to 1024 devices, every
// DP x MP configuration, with stash's offload where a configuration exceeds the budget.
// Every time is predicted by the cost model (include/stash/sim), not measured.
//
// Usage: bench_projection [DATA_DIR]   (default: the repository's data/)
#include <stash/projection/cluster.hpp>
#include <stash/projection/projection.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash_tools/projection_print.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct run_spec {
  char const* trace;
  char const* cluster;
  std::uint64_t replica_batch;  // 0 = recorded
  std::uint64_t budget;         // 0 = device memory
};

// Illustrative statistical efficiency (an assumption, not a measurement): the gradient-noise
// form with B_noise = 8192 samples and S_min chosen so that a global batch of 256 needs 90
// epochs of a 1,281,167-sample data set (the classic ImageNet ResNet schedule).
constexpr double b_noise       = 8192;
constexpr double dataset       = 1'281'167;
constexpr double epochs_at_256 = 90;

}  // namespace

int main(int argc, char** argv)
{
  std::string const data           = argc > 1 ? argv[1] : STASH_DATA_DIR;
  double const s_min               = epochs_at_256 * dataset / (256 + b_noise);
  auto const efficiency            = stash::statistical_efficiency::gradient_noise(s_min, b_noise);
  std::vector<run_spec> const runs = {
      {"resnet18_b32", "nodes=1,gpus=8,intra=nvlink", 0, 0},
      {"resnet18_b32", "nodes=16,gpus=8,intra=nvlink,inter_gbps=100,latency_us=5", 0, 0},
      {"resnet18_b32", "nodes=128,gpus=8,intra=nvlink,inter_gbps=100,latency_us=5", 0, 0},
      {"vgg16_b32", "nodes=128,gpus=8,intra=nvlink,inter_gbps=100,latency_us=5", 0, 0},
      {"vgg16_b32", "nodes=32,gpus=4,intra=pcie4,inter_gbps=25,latency_us=10,hw=pcie4_x16", 0, 0},
      {"transformer_encoder_b8", "nodes=128,gpus=8,intra=nvlink,inter_gbps=100,latency_us=5", 0, 0},
      {"mobilenet_v2_b32", "nodes=16,gpus=8,intra=nvlink,inter_gbps=100,latency_us=5", 0, 0},
      // Memory-tight: 4x the recorded batch per replica on an 8 GiB budget; offload decides.
      {"vgg16_b32", "nodes=16,gpus=8,intra=nvlink,inter_gbps=100,latency_us=5", 128, 8ull << 30},
  };
  std::printf(
      "# statistical efficiency for every run: S_min = %.1f steps, B_noise = %.0f, "
      "dataset = %.0f samples (90 epochs at global batch 256)\n\n",
      s_min, b_noise, dataset);
  for (auto const& run : runs) {
    auto const t = stash::read_trace(data + "/traces/" + run.trace + ".trace");
    auto const c = stash::parse_cluster_spec(run.cluster);
    stash::projection_params p;
    p.dataset_samples     = static_cast<std::uint64_t>(dataset);
    p.replica_batch       = run.replica_batch;
    p.device_budget_bytes = run.budget;
    auto const start      = std::chrono::steady_clock::now();
    auto const r          = stash::project(t, c, efficiency, p);
    double const secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("## %s on %s (%zu configurations, projected in %.2f s)\n", run.trace, run.cluster,
                r.configs.size(), secs);
    stash_tools::print_projection_table(std::cout, r);
    // Pal et al.'s comparison: the best configuration against the best DP-only one (mp = 1),
    // both over every device count up to the cluster.
    std::optional<std::size_t> best_dp;
    for (std::size_t i = 0; i < r.configs.size(); ++i) {
      auto const& cfg = r.configs[i];
      if (cfg.mp != 1 || !cfg.fits || !cfg.time_to_train_s) { continue; }
      if (!best_dp || *cfg.time_to_train_s < *r.configs[*best_dp].time_to_train_s) { best_dp = i; }
    }
    if (r.best && best_dp) {
      auto const& b = r.configs[*r.best];
      auto const& d = r.configs[*best_dp];
      std::printf(
          "summary: best %llu x %llu (dp x mp, %s) %.2f h; best DP-only %llu devices %.2f h; "
          "speedup %.3f\n\n",
          static_cast<unsigned long long>(b.dp), static_cast<unsigned long long>(b.mp),
          b.policy.c_str(), *b.time_to_train_s / 3600, static_cast<unsigned long long>(d.devices),
          *d.time_to_train_s / 3600, *d.time_to_train_s / *b.time_to_train_s);
    } else {
      std::printf("summary: %s\n\n", r.best ? "no DP-only configuration fits" : "nothing fits");
    }
  }
  return 0;
}
