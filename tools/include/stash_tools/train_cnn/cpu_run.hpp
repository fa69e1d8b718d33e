// train_cnn on the CPU: the runs (training, --check, the budget calibration) of cnn<host_memory,
// dnnl_ops>, their progress lines, summary and JSON. The example's main only parses and calls.
//
// Deterministic: the program runs oneDNN on one OpenMP thread (fix_threads()), primitives are
// created once per shape, and the data order and initial weights come from --seed; two runs with
// the same settings compute bitwise the same weights, whatever stash moves (lossless codecs).
#pragma once

#include <stash_tools/train_cnn/cnn.hpp>
#include <stash_tools/train_cnn/data_parallel.hpp>
#include <stash_tools/train_cnn/dnnl_ops.hpp>
#include <stash_tools/train_cnn/host_memory.hpp>
#include <stash_tools/train_cnn/idx_reader.hpp>
#include <stash_tools/train_cnn/options.hpp>
#include <stash_tools/train_cnn/plain_memory.hpp>

#include <stash/core/units.hpp>
#include <stash/trace/trace_writer.hpp>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace train_cnn {

/// @brief One OpenMP thread for oneDNN: the same reduction order in every run. Returns the count.
inline int fix_threads()
{
#if defined(_OPENMP)
  omp_set_num_threads(1);
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// @brief CPU seconds of `clock` (CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID): what a run
/// costs on a machine other work also loads, where wall time measures the share it got.
[[nodiscard]] inline double cpu_time(clockid_t clock)
{
  timespec t{};
  clock_gettime(clock, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// @brief The host codec --codec names (the CPU build runs every one).
/// @throws usage_error for a value that names no codec.
[[nodiscard]] inline host_codec host_codec_for(codec_kind k)
{
  switch (k) {
    case codec_kind::fp16:
      return host_codec::fp16;
    case codec_kind::bf16:
      return host_codec::bf16;
    case codec_kind::fp8_e4m3:
      return host_codec::fp8_e4m3;
    case codec_kind::none:
      return host_codec::raw;
    case codec_kind::zvc:
      return host_codec::zvc;
    case codec_kind::bitmask:
      return host_codec::bitmask;
    case codec_kind::auto_:
      return host_codec::auto_;
  }
  throw usage_error("--codec: unknown codec " + std::to_string(static_cast<int>(k)));
}

/// @brief What one CPU run is: policy, codec and budget (bytes; none: unlimited).
struct cpu_run_spec {
  policy_kind policy = policy_kind::no_swap;
  codec_kind codec   = codec_kind::none;
  std::optional<std::uint64_t> budget;
};

/// @brief One progress line's figures.
struct step_record {
  long step{0};
  double loss{0};      ///< mean over the steps since the previous line
  double accuracy{0};  ///< running, since the epoch started
  double ms_per_step{0};
  memory_report memory;  ///< cumulative
};

/// @brief Plan against what ran: the recorded step's schedule per step, and what executed.
struct plan_check {
  std::uint64_t planned_entries{0};  ///< schedule entries (persistent storages' included)
  /// Of those, wrap entries: the recorded step's end offloads each once more (the first replayed
  /// step starts with them on the host), so executed offloads are entries x replayed + wraps.
  std::uint64_t planned_wraps{0};
  std::map<std::string, std::uint64_t> planned_encodings;  ///< of those, per encoding
  std::uint64_t replayed_steps{0};                         ///< steps after the recorded one
  std::uint64_t executed_offloads{0};                      ///< scheduled offloads issued
  std::uint64_t executed_prefetches{0};                    ///< scheduled prefetches issued
  std::uint64_t demand_prefetches{0};                      ///< prefetches the schedule missed
  std::uint64_t encoding_fallbacks{0};                     ///< planned encodings that ran raw
  std::uint64_t deviations{0};
  std::uint64_t planned_recomputes{0};   ///< recompute entries per step
  std::uint64_t executed_recomputes{0};  ///< storages rematerialised
  std::uint64_t recompute_fallbacks{0};  ///< planned recomputes kept resident instead
  /// Of planned_entries, redrop entries (swap_entry::redrop): they leave with no copy.
  std::uint64_t planned_redrops{0};
  /// Entries (swap, redrop or recompute) over a sub-gap that starts at a re-run's read of their
  /// storage (sim/schedule.hpp, re-run uses): second departures, redrops included.
  std::uint64_t planned_after_rerun{0};
  std::uint64_t executed_redrops{0};  ///< redrops run (no device -> host copy)
  std::uint64_t redrop_fallbacks{0};  ///< redrops that copied instead (no kept host copy)
  /// @brief Executed counts equal planned entries x replayed steps (offloads, the redrops apart,
  /// prefetches, recomputes, redrops; offloads plus the wraps closing the recorded step), nothing
  /// fell back or deviated.
  [[nodiscard]] bool matches() const
  {
    return executed_offloads ==
               (planned_entries - planned_redrops) * replayed_steps + planned_wraps &&
           executed_redrops == planned_redrops * replayed_steps && redrop_fallbacks == 0 &&
           executed_prefetches == planned_entries * replayed_steps &&
           executed_recomputes == planned_recomputes * replayed_steps && encoding_fallbacks == 0 &&
           recompute_fallbacks == 0 && deviations == 0 && demand_prefetches == 0;
  }
};

/// @brief What a CPU run ends with.
struct cpu_run_result {
  std::vector<float> weights;
  memory_report memory;
  std::vector<step_record> log;
  std::uint64_t recorded_peak{0};  ///< device bytes in use at once in the recorded step
  std::uint64_t planned_peak{0};   ///< the planner's curve (stash::schedule::device_peak)
  std::uint64_t baseline_peak{0};
  /// The schedule's peak in the order the emulated device counts bytes (run_order_peak): what
  /// the run's enforced peak is (tests/train_cnn_cpu checks they are equal).
  std::uint64_t run_order_peak{0};
  /// run_order_peak within the budget: the run holds it; otherwise it stops at the first
  /// replayed step's allocation past it. What "fits" means for train_cnn.
  bool fits{true};
  /// planned_peak within the budget (stash::schedule::fits()): the planner's model, which
  /// counts a prefetch before the frees that end the op before it; reported, not required.
  bool planner_fits{true};
  std::string policy_name;
  plan_check plan;
  double test_accuracy{-1};  ///< fraction; -1 when not evaluated
  int eval_batch{0};         ///< the test set's batch (evaluation_batch: below --batch to fit)
  double seconds{0};         ///< training wall time
  double cpu_seconds{0};  ///< training CPU time of the process (the loop and stash's copy threads)
  double loop_cpu_seconds{0};  ///< training CPU time of the loop's thread alone
  int batch{0};                ///< the training batch
  long steps{0};
};

/// @brief Where a run's progress goes (nothing by default).
struct cpu_run_hooks {
  long every = 0;  ///< a step_record every N steps (0: none)
  std::function<void(step_record const&)> on_progress;
  std::function<void(host_memory const&)> on_recorded;  ///< after the first step
};

namespace detail {

template <class Mem>
plan_check plan_of(Mem const& mem, long steps)
{
  plan_check p;
  auto const* t          = mem.recorded_trace();
  auto const after_rerun = [&](stash::storage_id id, std::uint64_t op) {
    if (t == nullptr || op >= t->ops().size()) { return false; }
    auto const& o = t->ops()[op];
    return std::find(o.reads.begin(), o.reads.end(), id) == o.reads.end() &&
           std::find(o.writes.begin(), o.writes.end(), id) == o.writes.end();
  };
  for (auto const& e : mem.schedule().entries) {
    ++p.planned_entries;
    p.planned_wraps += e.wrap ? 1 : 0;
    p.planned_redrops += e.redrop ? 1 : 0;
    p.planned_after_rerun += !e.wrap && after_rerun(e.id, e.last_use) ? 1 : 0;
    ++p.planned_encodings[std::string(stash::to_string(e.encoding))];
  }
  for (auto const& e : mem.schedule().recomputes) {
    p.planned_after_rerun += after_rerun(e.id, e.last_use) ? 1 : 0;
  }
  memory_report const r = mem.report();
  p.replayed_steps      = std::uint64_t(std::max(0L, steps - 1));
  p.executed_offloads   = r.scheduled_offloads;
  p.executed_prefetches = r.scheduled_prefetches;
  p.demand_prefetches   = r.demand_prefetches;
  p.encoding_fallbacks  = r.encoding_fallbacks;
  p.deviations          = r.deviations;
  p.planned_recomputes  = mem.schedule().recomputes.size();
  p.executed_recomputes = r.recomputes;
  p.recompute_fallbacks = r.recompute_fallbacks;
  p.executed_redrops    = r.scheduled_redrops;
  p.redrop_fallbacks    = r.redrop_fallbacks;
  return p;
}

// The test set's accuracy, in batches of `batch`. Evaluation is a forward pass outside stash's
// iterations (no plan: nothing is offloaded), so its activations must fit the budget as they are:
// evaluation_batch() chose `batch` for that, and a refusal here says so.
template <class Net>
double evaluate(Net& net, labelled_images const& test, int batch)
{
  try {
    net.reset_counters();
    std::vector<std::size_t> index(test.count);
    std::iota(index.begin(), index.end(), std::size_t{0});
    for (std::size_t at = 0; at < test.count; at += std::size_t(batch)) {
      std::size_t const n = std::min<std::size_t>(std::size_t(batch), test.count - at);
      net.evaluate_batch(test, std::span<std::size_t const>(index).subspan(at, n));
    }
    return double(net.counters().second) / double(test.count);
  } catch (stash::out_of_memory const& e) {
    throw stash::out_of_memory(
        "train_cnn's test-set evaluation in batches of " + std::to_string(batch) +
            " (a forward pass outside stash's iterations: nothing is offloaded there) [" +
            e.what() + "]",
        e.requested_bytes(), e.budget_bytes(), e.in_use_bytes(), e.largest_free_bytes());
  }
}

// The first n test images.
inline std::vector<std::size_t> first_images(labelled_images const& test, int n)
{
  std::vector<std::size_t> index(std::min<std::size_t>(std::size_t(n), test.count));
  std::iota(index.begin(), index.end(), std::size_t{0});
  return index;
}

}  // namespace detail

/// @brief Device bytes at the peak of a forward-only test batch of `n` images, the network's
/// persistent tensors (parameters, momentum, staging for batches of o.batch) included: measured
/// over plain_memory, whose buffers round up to 64 B, so at least what host_memory holds then.
[[nodiscard]] inline std::uint64_t evaluation_peak(options const& o, dataset const& data, int n)
{
  plain_memory mem;
  dnnl_ops ops;
  cnn<plain_memory, dnnl_ops> net(mem, ops, config_of(o, data), o.batch);
  net.evaluate_batch(data.test, detail::first_images(data.test, n));
  return mem.report().peak_in_use;
}

/// @brief The test-set evaluation's batch under `budget`: o.batch, halved (rounding up) until a
/// forward-only batch fits (evaluation_peak). Evaluation runs outside stash's iterations, where
/// no plan offloads anything, so a budget that training holds by offloading may be too small
/// for the evaluation's activations at the training batch. Deterministic: shapes and budget only.
/// @throws stash::out_of_memory when even a batch of one image does not fit, naming the figures.
[[nodiscard]] inline int evaluation_batch(options const& o, dataset const& data,
                                          std::optional<std::uint64_t> budget)
{
  int n = o.batch;
  if (!budget) { return n; }
  std::uint64_t peak = evaluation_peak(o, data, n);
  while (peak > *budget && n > 1) {
    n    = (n + 1) / 2;
    peak = evaluation_peak(o, data, n);
  }
  if (peak > *budget) {
    throw stash::out_of_memory(
        "train_cnn's test-set evaluation (a forward pass outside stash's iterations, nothing "
        "offloaded): one image's forward pass and the persistent tensors need " +
            std::to_string(peak) + " B at once, more than the --budget",
        std::size_t(peak), std::size_t(*budget), std::nullopt);
  }
  return n;
}

/// @brief Trains `steps` steps (over as many epochs as they take) over `mem`; evaluates on the
/// test set when `evaluate_test`, in batches of `eval_batch` (0: o.batch).
template <class Mem>
cpu_run_result run_cpu_over(Mem& mem, options const& o, dataset const& data, long steps,
                            bool evaluate_test, cpu_run_hooks const& hooks, int eval_batch = 0)
{
  dnnl_ops ops;
  cnn<Mem, dnnl_ops> net(mem, ops, config_of(o, data), o.batch);
  cpu_run_result r;
  long const per_epoch = long(data.train.count / std::size_t(o.batch));
  std::vector<std::size_t> order;
  double window_loss = 0;
  long window        = 0;
  double loss_before = 0;  // the loss counter after the previous step
  auto const t0      = std::chrono::steady_clock::now();
  double const cpu0  = cpu_time(CLOCK_PROCESS_CPUTIME_ID);
  double const loop0 = cpu_time(CLOCK_THREAD_CPUTIME_ID);
  auto last          = t0;
  for (long step = 0; step < steps; ++step) {
    if (step % per_epoch == 0) {
      order = epoch_order(data.train.count, o.seed, int(step / per_epoch));
      net.reset_counters();
      loss_before = 0;
    }
    auto const at = std::size_t(step % per_epoch) * std::size_t(o.batch);
    net.train_step(data.train,
                   std::span<std::size_t const>(order).subspan(at, std::size_t(o.batch)));
    auto const [loss_now, correct_now] = net.counters();
    window_loss += (loss_now - loss_before) / double(o.batch);
    loss_before = loss_now;
    ++window;
    if (step == 0) {
      r.recorded_peak = mem.report().peak_in_use;
      r.planned_peak  = mem.schedule().device_peak;
      r.baseline_peak = mem.schedule().baseline_peak;
      r.planner_fits  = mem.schedule().fits();
      r.fits          = r.planner_fits;
      if constexpr (std::is_same_v<Mem, host_memory>) {
        r.run_order_peak = mem.run_order_peak().value_or(0);
        r.fits           = r.run_order_peak <= mem.schedule().budget;
      }
      r.policy_name = mem.schedule().policy;
      if constexpr (std::is_same_v<Mem, host_memory>) {
        if (hooks.on_recorded) { hooks.on_recorded(mem); }
      }
    }
    if (hooks.every > 0 && ((step + 1) % hooks.every == 0 || step + 1 == steps)) {
      mem.synchronize();
      auto const now = std::chrono::steady_clock::now();
      step_record s;
      s.step              = step + 1;
      s.loss              = window_loss / double(window);
      long const in_epoch = step % per_epoch + 1;
      s.accuracy          = double(correct_now) / double(in_epoch * o.batch);
      s.ms_per_step =
          std::chrono::duration<double, std::milli>(now - last).count() / double(window);
      s.memory = mem.report();
      r.log.push_back(s);
      if (hooks.on_progress) { hooks.on_progress(s); }
      last        = now;
      window_loss = 0;
      window      = 0;
    }
  }
  mem.synchronize();
  r.seconds          = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds      = cpu_time(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  r.loop_cpu_seconds = cpu_time(CLOCK_THREAD_CPUTIME_ID) - loop0;
  r.batch            = o.batch;
  r.steps            = steps;
  r.plan             = detail::plan_of(mem, steps);
  r.weights          = net.weights();
  r.eval_batch       = eval_batch > 0 ? eval_batch : o.batch;
  if (evaluate_test) { r.test_accuracy = detail::evaluate(net, data.test, r.eval_batch); }
  r.memory = mem.report();
  return r;
}

/// @brief Trains `steps` steps with `spec` (stash's host backend); evaluates on the test set when
/// `evaluate_test`.
inline cpu_run_result run_cpu(options const& o, dataset const& data, cpu_run_spec const& spec,
                              long steps, bool evaluate_test, cpu_run_hooks const& hooks = {})
{
  host_memory_config mc;
  mc.budget            = spec.budget;
  mc.policy            = std::string(to_string(spec.policy));
  mc.codec             = host_codec_for(spec.codec);
  int const eval_batch = evaluate_test ? evaluation_batch(o, data, spec.budget) : o.batch;
  host_memory mem(mc);
  return run_cpu_over(mem, o, data, steps, evaluate_test, hooks, eval_batch);
}

/// @brief The same training without stash (plain_memory): the benchmark's baseline.
inline cpu_run_result run_cpu_plain(options const& o, dataset const& data, long steps,
                                    bool evaluate_test, cpu_run_hooks const& hooks = {})
{
  plain_memory mem;
  return run_cpu_over(mem, o, data, steps, evaluate_test, hooks);
}

/// @brief The recorded step's peak device bytes (no offload): what --budget P% is a percentage of.
[[nodiscard]] inline std::uint64_t recorded_peak(options const& o, dataset const& data)
{
  return run_cpu(o, data, cpu_run_spec{}, 1, false).recorded_peak;
}

/// @brief Bytes for --budget P% of `peak`.
[[nodiscard]] inline std::uint64_t percent_of(std::uint64_t peak, double percent)
{
  return std::uint64_t(std::floor(double(peak) * percent / 100.0));
}

/// @brief How many of `a` and `b` differ bitwise, and the largest difference.
[[nodiscard]] inline std::pair<std::size_t, float> compare_weights(std::vector<float> const& a,
                                                                   std::vector<float> const& b)
{
  std::size_t differ = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
  float max_diff     = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      ++differ;
      max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
    }
  }
  return {differ, max_diff};
}

/// @brief --check with a lossy codec: the two runs' test accuracies, in percentage points.
struct accuracy_check {
  double reference{0};   ///< without offload
  double subject{0};     ///< with the policy, codec and budget
  double difference{0};  ///< |subject - reference|
  bool within{false};    ///< difference <= the margin
};

/// @brief Compares the test accuracies of `reference` and `subject` against `margin` points. A
/// run that was not evaluated never passes.
[[nodiscard]] inline accuracy_check compare_accuracy(cpu_run_result const& reference,
                                                     cpu_run_result const& subject, double margin)
{
  accuracy_check c;
  c.reference  = 100.0 * reference.test_accuracy;
  c.subject    = 100.0 * subject.test_accuracy;
  c.difference = std::abs(c.subject - c.reference);
  c.within = reference.test_accuracy >= 0 && subject.test_accuracy >= 0 && c.difference <= margin;
  return c;
}

/// @brief The budget held: nothing refused, the peak while enforced within it.
[[nodiscard]] inline bool budget_held(cpu_run_result const& r, std::optional<std::uint64_t> budget)
{
  return !budget || (r.memory.budget_refusals == 0 && r.memory.enforced_peak <= *budget);
}

}  // namespace train_cnn
