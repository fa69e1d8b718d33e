// train_cnn on the CPU: the same network, flags and output as the CUDA build, with oneDNN for the
// layers and stash's host backend for the memory (see README.md). The logic is in
// stash_tools/train_cnn/ (cpu_run.hpp, cpu_report.hpp), where tests/train_cnn checks it.
// Exit codes: 0 done, 1 error or --check mismatch (or the budget exceeded), 2 bad arguments or
// missing dataset, 3 out of (emulated) device memory.
#include <stash_tools/train_cnn/cpu_report.hpp>
#include <stash_tools/train_cnn/cpu_run.hpp>
#include <stash_tools/train_cnn/idx_reader.hpp>
#include <stash_tools/train_cnn/options.hpp>

#include <stash/core/error.hpp>
#include <stash/trace/trace_writer.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace train_cnn;

// --check with a lossy codec: the activations come back rounded, so the two trainings drift
// apart and only their outcome is compared: test accuracy after the steps (one epoch by default)
// within --accuracy-margin points, and the budget held.
int check_lossy(options const& o, dataset const& data, cpu_run_spec const& spec, long steps,
                cpu_run_hooks const& hooks)
{
  if (!o.json) {
    std::printf(
        "train_cnn --check: %ld steps without offload, then with %s/%s (lossy: activations "
        "rounded while away); test accuracies compared, margin %g points\n",
        steps, std::string(to_string(o.policy)).c_str(), std::string(to_string(o.codec)).c_str(),
        o.accuracy_margin);
  }
  cpu_run_result const reference = run_cpu(o, data, cpu_run_spec{}, steps, true);
  cpu_run_result const subject   = run_cpu(o, data, spec, steps, true, hooks);
  accuracy_check const c         = compare_accuracy(reference, subject, o.accuracy_margin);
  bool const held                = budget_held(subject, spec.budget);
  bool const pass                = c.within && held && subject.memory.decode_failures == 0;
  if (o.json) {
    std::printf("%s\n", run_json(subject, spec.budget, pass).c_str());
    return pass ? 0 : 1;
  }
  std::printf("%s", summary_text(subject, spec.budget).c_str());
  std::printf(
      "check %s: test accuracy %.2f%% with %s, %.2f%% without offload: %.2f points apart "
      "(margin %g)%s\n",
      pass ? "passed" : "FAILED", c.subject, std::string(to_string(o.codec)).c_str(), c.reference,
      c.difference, o.accuracy_margin, held ? "" : ", and the budget was exceeded");
  auto const [differ, max_diff] = compare_weights(reference.weights, subject.weights);
  std::printf("  for information: %zu of %zu weights differ (max |diff| %g)\n", differ,
              reference.weights.size(), double(max_diff));
  if (subject.memory.offloads == 0) {
    std::printf(
        "  warning: the checked run offloaded nothing; pick a policy and --budget that do\n");
  }
  return pass ? 0 : 1;
}

int run(options const& o, dataset const& data)
{
  long const per_epoch = long(data.train.count / std::size_t(o.batch));
  long steps           = o.max_steps > 0 ? std::min(o.max_steps, per_epoch) : per_epoch;
  steps *= o.check ? 1 : o.epochs;
  if (o.check) { steps = check_steps_for(o, per_epoch); }
  std::optional<std::uint64_t> budget = o.budget;
  int const threads                   = fix_threads();
  if (o.budget_percent) {
    std::uint64_t const peak = recorded_peak(o, data);
    budget                   = percent_of(peak, *o.budget_percent);
    if (!o.json) {
      std::printf("  --budget %g%%: %s of the recorded step's peak of %s\n", *o.budget_percent,
                  stash::format_bytes(*budget).c_str(), stash::format_bytes(peak).c_str());
    }
  }
  cpu_run_spec const spec{o.policy, o.codec, budget};
  if (!o.json) {
    std::printf(
        "train_cnn (cpu, oneDNN %d.%d.%d, %d thread): %s, policy %s, codec %s, budget %s; "
        "batch %d, %ld steps, seed %llu\n",
        DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, DNNL_VERSION_PATCH, threads,
        o.arch == cnn_arch::vgg ? "vgg" : "resnet", std::string(to_string(o.policy)).c_str(),
        std::string(to_string(o.codec)).c_str(),
        budget ? stash::format_bytes(*budget).c_str() : "none", o.batch, steps,
        static_cast<unsigned long long>(o.seed));
  }
  cpu_run_hooks hooks;
  hooks.every = o.json ? 0 : o.every;
  std::string encodings;
  hooks.on_recorded = [&](host_memory const& mem) {
    encodings = encodings_text(detail::plan_of(mem, 1));
    if (!o.trace_out.empty()) { stash::write_trace(o.trace_out, *mem.recorded_trace()); }
    if (!o.json) {
      std::printf("%s", schedule_line(mem.schedule(), mem.run_order_peak().value_or(0)).c_str());
    }
  };
  hooks.on_progress = [&](step_record const& s) {
    std::printf("%s\n", progress_line(s, steps, encodings).c_str());
    std::fflush(stdout);
  };
  if (!o.check) {
    cpu_run_result const r = run_cpu(o, data, spec, steps, true, hooks);
    std::printf("%s\n", o.json ? run_json(r, budget).c_str() : summary_text(r, budget).c_str());
    return budget_held(r, budget) && r.plan.matches() ? 0 : 1;
  }
  if (is_lossy(o.codec)) { return check_lossy(o, data, spec, steps, hooks); }
  if (!o.json) {
    std::printf(
        "train_cnn --check: %ld steps without offload, then with %s/%s; weights compared "
        "bitwise (offloads, encodings and recomputes alike)\n",
        steps, std::string(to_string(o.policy)).c_str(), std::string(to_string(o.codec)).c_str());
  }
  cpu_run_result const reference = run_cpu(o, data, cpu_run_spec{}, steps, false);
  cpu_run_result const subject   = run_cpu(o, data, spec, steps, false, hooks);
  auto const [differ, max_diff]  = compare_weights(reference.weights, subject.weights);
  bool const held                = budget_held(subject, budget);
  bool const pass                = differ == 0 && held && subject.memory.decode_failures == 0;
  if (o.json) {
    std::printf("%s\n", run_json(subject, budget, pass).c_str());
  } else {
    std::printf("%s", summary_text(subject, budget).c_str());
    if (differ == 0) {
      std::printf("check %s: all %zu weights bitwise identical to the run without offload%s\n",
                  pass ? "passed" : "FAILED", reference.weights.size(),
                  held ? "" : ", but the budget was exceeded");
    } else {
      std::printf(
          "check FAILED: %zu of %zu weights differ from the run without offload (max "
          "|diff| %g)\n",
          differ, reference.weights.size(), double(max_diff));
    }
    if (subject.memory.offloads == 0 && subject.memory.recomputes == 0) {
      std::printf(
          "  warning: the checked run offloaded and recomputed nothing; pick a policy and "
          "--budget that do\n");
    }
  }
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv)
{
  options o;
  try {
    o = parse_options(std::vector<std::string>(argv + 1, argv + argc));
    if (!o.help) { (void)host_codec_for(o.codec); }
    if (o.device == device_kind::cuda) {
      throw usage_error("--device cuda: this is the CPU build (train_cnn_cpu); run train_cnn");
    }
  } catch (usage_error const& e) {
    std::fprintf(stderr, "train_cnn: %s\n\n%s", e.what(), usage().c_str());
    return 2;
  }
  if (o.help) {
    std::printf("%s", usage().c_str());
    return 0;
  }
  dataset data;
  try {
    data = load_fashion_mnist(o.data_dir);
  } catch (idx_error const& e) {
    std::fprintf(stderr, "train_cnn: %s\n", e.what());
    return 2;
  }
  if (!o.json) {
    std::printf("train_cnn: Fashion-MNIST from %s: %zu training and %zu test images of %zux%zu\n",
                o.data_dir.c_str(), data.train.count, data.test.count, data.train.rows,
                data.train.cols);
  }
  if (std::size_t(o.batch) > data.train.count) {
    std::fprintf(stderr, "train_cnn: --batch %d is larger than the training set (%zu images)\n",
                 o.batch, data.train.count);
    return 2;
  }
  try {
    return run(o, data);
  } catch (stash::out_of_memory const& e) {
    std::fprintf(stderr, "train_cnn: out of (emulated) device memory: %s\n", e.what());
    return 3;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "train_cnn: error: %s\n", e.what());
    return 1;
  }
}
