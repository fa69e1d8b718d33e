// train_cnn on the CPU, one (reduced) epoch per configuration, side by side with the same network
// without stash (plain_memory): what stash costs at 100% of the peak, and what a smaller budget
// costs, in CPU time per step (process: the loop and stash's copy threads; and the loop's thread),
// which a loaded machine disturbs much less than wall time (also printed, with the load). Writes a
// markdown table on stdout and the per-step loss/accuracy as CSV (for plot_curves.py's SVG).
//   bench_train_cnn_cpu DATA_DIR STEPS CURVES.csv
#include <stash_tools/train_cnn/cpu_report.hpp>
#include <stash_tools/train_cnn/cpu_run.hpp>

#include <stash/core/units.hpp>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace train_cnn;

struct config {
  std::string name;
  cnn_arch arch;
  bool plain;  // without stash
  policy_kind policy;
  codec_kind codec;
  double percent;
};

// The 1-, 5- and 15-minute load averages (the machine is shared: wall time measures the share of
// the CPU this process got, CPU time what it used).
std::string load_average()
{
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return in ? a + " " + b + " " + c : std::string("unknown");
}

}  // namespace

int main(int argc, char** argv)
{
  if (argc != 4) {
    std::fprintf(stderr, "usage: bench_train_cnn_cpu DATA_DIR STEPS CURVES.csv\n");
    return 2;
  }
  dataset const data = load_fashion_mnist(argv[1]);
  long const steps   = std::stol(argv[2]);
  std::ofstream curves(argv[3]);
  curves << "config,step,loss,accuracy\n";
  int const threads                 = fix_threads();
  std::vector<config> const configs = {
      {"vgg, no stash", cnn_arch::vgg, true, policy_kind::no_swap, codec_kind::none, 100},
      {"vgg, stash no_swap", cnn_arch::vgg, false, policy_kind::no_swap, codec_kind::none, 0},
      {"vgg, search_swap auto 100%", cnn_arch::vgg, false, policy_kind::search_swap,
       codec_kind::auto_, 100},
      {"vgg, vdnn_all raw", cnn_arch::vgg, false, policy_kind::vdnn_all, codec_kind::none, 0},
      {"vgg, vdnn_all auto", cnn_arch::vgg, false, policy_kind::vdnn_all, codec_kind::auto_, 0},
      {"vgg, search_swap auto 65%", cnn_arch::vgg, false, policy_kind::search_swap,
       codec_kind::auto_, 65},
      {"resnet, no stash", cnn_arch::resnet, true, policy_kind::no_swap, codec_kind::none, 100},
      {"resnet, search_swap auto 100%", cnn_arch::resnet, false, policy_kind::search_swap,
       codec_kind::auto_, 100},
      {"resnet, search_swap auto 60%", cnn_arch::resnet, false, policy_kind::search_swap,
       codec_kind::auto_, 60},
      {"resnet, search_swap auto 40%", cnn_arch::resnet, false, policy_kind::search_swap,
       codec_kind::auto_, 40},
  };
  std::printf(
      "oneDNN on %d OpenMP thread(s); batch 32; %ld steps per configuration (a reduced epoch: "
      "%ld of %zu training images); test accuracy on all %zu test images; load %s\n\n",
      threads, steps, steps * 32, data.train.count, data.test.count, load_average().c_str());
  std::printf(
      "| configuration | budget | wall s | wall ms/step | CPU ms/step | loop CPU ms/step | CPU vs "
      "no stash | final loss | test acc | offloaded | peak device bytes |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  // oneDNN keeps the primitives it created (JIT kernels) in a process-wide cache: without a warm-up
  // the first configuration of each network would pay their creation and the others not.
  for (cnn_arch const arch : {cnn_arch::vgg, cnn_arch::resnet}) {
    options w;
    w.arch  = arch;
    w.batch = 32;
    (void)run_cpu_plain(w, data, 2, false);
  }
  double plain_cpu_ms = 0;
  for (auto const& c : configs) {
    options o;
    o.arch  = c.arch;
    o.batch = 32;
    o.lr    = c.arch == cnn_arch::vgg ? 0.02 : 0.005;
    std::optional<std::uint64_t> budget;
    if (!c.plain && c.percent > 0) { budget = percent_of(recorded_peak(o, data), c.percent); }
    cpu_run_hooks hooks;
    hooks.every = 10;
    cpu_run_result const r =
        c.plain ? run_cpu_plain(o, data, steps, true, hooks)
                : run_cpu(o, data, cpu_run_spec{c.policy, c.codec, budget}, steps, true, hooks);
    for (auto const& s : r.log) {
      curves << '"' << c.name << "\"," << s.step << ',' << s.loss << ',' << s.accuracy << '\n';
    }
    double const cpu_ms = 1e3 * r.cpu_seconds / double(steps);
    if (c.plain) { plain_cpu_ms = cpu_ms; }
    std::printf(
        "| %s | %s | %.1f | %.1f | %.1f | %.1f | %+.1f%% | %.4f | %.2f%%%s | %s | %s%s |\n",
        c.name.c_str(), budget ? stash::format_bytes(*budget).c_str() : "-", r.seconds,
        1e3 * r.seconds / double(steps), cpu_ms, 1e3 * r.loop_cpu_seconds / double(steps),
        100.0 * (cpu_ms / plain_cpu_ms - 1.0), r.log.empty() ? 0.0 : r.log.back().loss,
        100.0 * r.test_accuracy,
        r.eval_batch < o.batch ? (" (eval batch " + std::to_string(r.eval_batch) + ")").c_str()
                               : "",
        stash::format_bytes(r.memory.bytes_offloaded).c_str(),
        stash::format_bytes(c.plain ? r.memory.peak_in_use : r.memory.enforced_peak).c_str(),
        c.plain || budget_held(r, budget) ? "" : " (EXCEEDED)");
    std::fflush(stdout);
  }
  std::printf("\nload at the end: %s\n", load_average().c_str());
  return 0;
}
