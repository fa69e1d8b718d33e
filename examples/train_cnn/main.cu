// train_cnn: a CNN (--arch vgg | resnet) trained on Fashion-MNIST with every activation in stash
// (see README.md in this folder), on one GPU or data-parallel over several (one process per GPU,
// NCCL). The network and its training step are the CPU build's (stash_tools/train_cnn/cnn.hpp);
// only the layer calls differ (cudnn_ops.cuh here, dnnl_ops.hpp there).
// Without a CUDA device (or with --device cpu) it runs the CPU build, train_cnn_cpu from the same
// folder, with the same arguments (after checking the rank environment: the CPU build runs one
// rank). Exit codes: 0 done, 1 error or --check mismatch, 2 bad arguments, bad rank environment or
// missing/malformed dataset, 3 out of (emulated) device memory.
#include "collective.cuh"
#include "cudnn_ops.cuh"
#include "memory.cuh"
#ifdef STASH_HAVE_NCCL
#include "nccl_comm.cuh"
#endif

#include <stash_tools/train_cnn/cnn.hpp>
#include <stash_tools/train_cnn/data_parallel.hpp>
#include <stash_tools/train_cnn/idx_reader.hpp>
#include <stash_tools/train_cnn/options.hpp>

#include <stash/codec/device_precision.cuh>
#include <stash/codec/device_zvc.cuh>
#include <stash/codec/precision.hpp>
#include <stash/core/device.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/swap/policy_registry.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace train_cnn {
namespace {

// The codecs --codec offers: one transfer_set, one allocator instantiation; the run picks its
// member (memory_config::encoding). fp16+zvc would need a device chain, which stash does not have.
using codec_set = stash::transfer_set<stash::zvc<float>, stash::precision<float, stash::fp16>,
                                      stash::precision<float, stash::bf16>,
                                      stash::precision<float, stash::fp8_e4m3>>;

// --check picks its comparison from is_lossy: it must agree with what the codecs really do.
static_assert(!is_lossy(codec_kind::zvc) && stash::zvc<float>::lossless);
static_assert(is_lossy(codec_kind::fp16) && !stash::precision<float, stash::fp16>::lossless);
static_assert(is_lossy(codec_kind::bf16) && !stash::precision<float, stash::bf16>::lossless);
static_assert(is_lossy(codec_kind::fp8_e4m3) &&
              !stash::precision<float, stash::fp8_e4m3>::lossless);
static_assert(!is_lossy(codec_kind::none));

// Only rank 0 reports on stdout; every rank reports its errors on stderr.
bool quiet = false;

[[gnu::format(printf, 1, 2)]] void say(char const* format, ...)
{
  if (quiet) { return; }
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
}

// The swap encoding --codec names.
constexpr stash::swap_encoding encoding_of(codec_kind k)
{
  switch (k) {
    case codec_kind::zvc:
      return stash::swap_encoding::zvc;
    case codec_kind::fp16:
      return stash::swap_encoding::fp16;
    case codec_kind::bf16:
      return stash::swap_encoding::bf16;
    case codec_kind::fp8_e4m3:
      return stash::swap_encoding::fp8_e4m3;
    case codec_kind::none:
    default:
      return stash::swap_encoding::raw;
  }
}

std::unique_ptr<activation_memory> make_memory(policy_kind p, codec_kind k,
                                               std::optional<std::uint64_t> budget)
{
  memory_config c;
  c.budget      = budget;
  std::string d = "policy " + std::string(to_string(p)) + ", codec " + std::string(to_string(k)) +
                  ", budget " +
                  (budget ? stash::format_bytes(*budget) : std::string("none (whole GPU)"));
  c.encoding = encoding_of(k);
  return std::make_unique<stash_memory<codec_set>>(c, stash::make_swap_policy(to_string(p)),
                                                   std::move(d));
}

// The shared network over stash's CUDA memory and cuDNN's layer calls, with what they need: the
// layer calls are bound to the memory's stream, and a data-parallel run averages each gradient
// over the ranks as soon as backward has written it.
class trainer {
 public:
  trainer(activation_memory& mem, cnn_config const& config, int max_batch, collective* dp)
      : mem_(mem), ops_(mem.stream()), dp_(dp), net_(mem, ops_, config, max_batch, hook(mem, dp))
  {
  }
  cnn<activation_memory, cudnn_ops>& net() { return net_; }
  /// @brief The loss sum and correct count; with `all_ranks`, summed over the ranks (every rank
  /// must call it then).
  std::pair<double, unsigned long long> counters(bool all_ranks)
  {
    if (!all_ranks || dp_ == nullptr) { return net_.counters(); }
    cudaStream_t const s = mem_.stream();
    return net_.counters(
        [this, s](double* loss, unsigned long long* correct) { dp_->sum(loss, correct, s); });
  }

 private:
  static gradient_hook hook(activation_memory& mem, collective* dp)
  {
    if (dp == nullptr) { return {}; }
    // Each rank's gradient is the mean over its own slice (the loss gradient is divided by the
    // slice size), so the mean over ranks is the gradient of the global batch's mean loss. The
    // all-reduces run on the collective's stream, ordered after the backward op and before the
    // momentum update by events: no host synchronisation.
    return [dp, s = mem.stream()](std::span<void* const> g, std::span<std::size_t const> counts) {
      for (std::size_t i = 0; i < g.size(); ++i) {
        dp->average(static_cast<float*>(g[i]), counts[i], s);
      }
    };
  }

  activation_memory& mem_;
  cudnn_ops ops_;  // before net_: the network's constructor already calls it
  collective* dp_;
  cnn<activation_memory, cudnn_ops> net_;
};

class progress_bar {
 public:
  progress_bar(bool on, long total, std::string label)
      : on_(on), total_(total), label_(std::move(label))
  {
  }
  void update(long done)
  {
    if (!on_ || total_ <= 0) { return; }
    long const every = std::max(1L, total_ / 100);
    if (done != total_ && done % every != 0) { return; }
    int const width = 30;
    int const fill  = int(double(done) / double(total_) * width);
    std::fprintf(stderr, "\r  %s [%s%s] %ld/%ld", label_.c_str(),
                 std::string(std::size_t(fill), '#').c_str(),
                 std::string(std::size_t(width - fill), '.').c_str(), done, total_);
    if (done == total_) { std::fprintf(stderr, "\r%*s\r", width + int(label_.size()) + 30, ""); }
    std::fflush(stderr);
  }

 private:
  bool on_;
  long total_;
  std::string label_;
};

// Uncompressed over host bytes of the offloads that completed in between: stash learns a codec's
// output size only once its copy is done, so both counts cover exactly the same offloads.
std::string ratio_text(memory_report const& before, memory_report const& after, codec_kind codec)
{
  std::uint64_t const source  = after.bytes_encoded_source - before.bytes_encoded_source;
  std::uint64_t const encoded = after.bytes_encoded - before.bytes_encoded;
  if (source == 0) { return "-"; }
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2fx (%s stored on the host%s)",
                encoded == 0 ? 0.0 : double(source) / double(encoded),
                stash::format_bytes(encoded).c_str(),
                codec == codec_kind::none ? ", raw copies" : "");
  return buf;
}

// Test accuracy: each rank evaluates its part of the test set, the correct counts are summed.
double evaluate(trainer& t, labelled_images const& test, int batch, rank_info const& ranks)
{
  auto& net = t.net();
  net.reset_counters();
  index_range const part = even_partition(test.count, ranks.rank, ranks.world_size);
  std::vector<std::size_t> index(part.count);
  std::iota(index.begin(), index.end(), part.begin);
  for (std::size_t at = 0; at < part.count; at += std::size_t(batch)) {
    std::size_t const n = std::min<std::size_t>(std::size_t(batch), part.count - at);
    net.evaluate_batch(test, std::span<std::size_t const>(index).subspan(at, n));
  }
  auto const [loss, correct] = t.counters(true);
  (void)loss;
  return double(correct) / double(test.count);
}

// With several ranks: every replica must hold bitwise the same weights (they start from the same
// seed and apply the same averaged gradients); a difference means the ranks diverged.
void check_replicas(trainer& t, collective* dp, std::string const& when)
{
  if (dp == nullptr) { return; }
  auto const w                 = t.net().weights();
  std::uint64_t const mine     = fingerprint(w);
  auto const [lowest, highest] = dp->min_max(mine);
  if (lowest != highest) {
    throw std::runtime_error("the " + std::to_string(dp->world_size()) +
                             " replicas' weights differ " + when +
                             " (weight fingerprints range from " + std::to_string(lowest) + " to " +
                             std::to_string(highest) + ")");
  }
  say("  replicas in sync %s: weight fingerprint %016llx on all %d ranks\n", when.c_str(),
      static_cast<unsigned long long>(mine), dp->world_size());
}

void print_schedule(activation_memory& mem)
{
  say("%s", schedule_line(mem.schedule(), mem.run_order_peak().value_or(0)).c_str());
}

int train(options const& o, dataset const& data, rank_info const& ranks, collective* dp)
{
  long steps = long(steps_per_epoch(data.train.count, std::size_t(o.batch), ranks.world_size));
  if (o.max_steps > 0) { steps = std::min(steps, o.max_steps); }
  auto mem = make_memory(o.policy, o.codec, o.budget);
  trainer t(*mem, config_of(o, data), o.batch, dp);
  auto& net = t.net();
  say("train_cnn: %s\n  %s network width %d: %zu parameters; batch %d, %ld steps per epoch (last "
      "partial "
      "batch dropped), SGD lr %g momentum %g, seed %llu\n",
      mem->description().c_str(), o.arch == cnn_arch::vgg ? "vgg" : "resnet", o.width,
      net.parameter_count(), o.batch, steps, o.lr, o.momentum,
      static_cast<unsigned long long>(o.seed));
  if (ranks.distributed()) {
    say("  data parallel: %d ranks (%s); global batch %d = %d ranks x %d; gradients averaged with "
        "one "
        "ncclAllReduce(ncclAvg) per gradient tensor, as backward writes it; loss and accuracy over "
        "all ranks, memory figures rank "
        "0's\n",
        ranks.world_size, ranks.source.c_str(), ranks.world_size * o.batch, ranks.world_size,
        o.batch);
  }
  bool const bar = ranks.is_root() && (o.progress == 1 || (o.progress == -1 && isatty(2) != 0));
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    auto const order = epoch_order(data.train.count, o.seed, epoch);
    net.reset_counters();
    mem->reset_peak();
    memory_report const before = mem->report();
    progress_bar progress(bar, steps, "epoch " + std::to_string(epoch + 1));
    auto const t0 = std::chrono::steady_clock::now();
    for (long step = 0; step < steps; ++step) {
      net.train_step(data.train, rank_batch(order, std::size_t(step), std::size_t(o.batch), ranks));
      if (epoch == 0 && step == 0) {
        mem->synchronize();
        print_schedule(*mem);
      }
      progress.update(step + 1);
    }
    mem->synchronize();
    double const seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto const [loss_sum, train_correct] = t.counters(true);
    memory_report const after            = mem->report();
    double const accuracy                = evaluate(t, data.test, o.batch, ranks);
    double const samples                 = double(steps) * o.batch * ranks.world_size;
    say("epoch %d/%d: loss %.4f, train acc %.2f%%, test acc %.2f%%, step %.2f ms%s, device peak in "
        "use %s "
        "(reserved %s now, %s at most), offloaded %s in %llu offloads (%llu prefetches, %llu on "
        "demand), compression %s\n",
        epoch + 1, o.epochs, loss_sum / samples, 100.0 * double(train_correct) / samples,
        100.0 * accuracy, 1e3 * seconds / double(steps),
        epoch == 0 ? " (incl. the recorded first step)" : "",
        stash::format_bytes(after.peak_in_use).c_str(), stash::format_bytes(after.reserved).c_str(),
        stash::format_bytes(after.peak_reserved).c_str(),
        stash::format_bytes(after.bytes_offloaded - before.bytes_offloaded).c_str(),
        static_cast<unsigned long long>(after.offloads - before.offloads),
        static_cast<unsigned long long>(after.prefetches - before.prefetches),
        static_cast<unsigned long long>(after.demand_prefetches - before.demand_prefetches),
        ratio_text(before, after, o.codec).c_str());
    std::fflush(stdout);
    if (after.deviations != 0) {
      say("  note: %llu iterations deviated from the recording and were re-recorded\n",
          static_cast<unsigned long long>(after.deviations));
    }
    if (after.arena_replans != before.arena_replans) {
      say("  lifetime arena re-planned %llu time(s) this epoch (swapped tensors' memory reused "
          "while they are "
          "away): arena now %s, %llu allocations served outside it so far\n",
          static_cast<unsigned long long>(after.arena_replans - before.arena_replans),
          stash::format_bytes(after.arena_bytes).c_str(),
          static_cast<unsigned long long>(after.pool_fallbacks));
    }
    check_replicas(t, dp, "after epoch " + std::to_string(epoch + 1));
  }
  return 0;
}

/// @brief What one --check run ends with.
struct check_result {
  std::vector<float> weights;
  memory_report memory;
  double test_accuracy{0};  ///< fraction of the test set, over all ranks
};

// Trains `steps` steps from the same seed and data order; returns the weights, what moved and the
// test accuracy.
check_result check_run(options const& o, dataset const& data, rank_info const& ranks,
                       collective* dp, policy_kind p, codec_kind k,
                       std::optional<std::uint64_t> budget, long steps)
{
  auto mem = make_memory(p, k, budget);
  trainer t(*mem, config_of(o, data), o.batch, dp);
  auto& net = t.net();
  long const per_epoch =
      long(steps_per_epoch(data.train.count, std::size_t(o.batch), ranks.world_size));
  progress_bar progress(
      ranks.is_root() && (o.progress == 1 || (o.progress == -1 && isatty(2) != 0)), steps,
      std::string(to_string(p)));
  std::vector<std::size_t> order;
  for (long step = 0; step < steps; ++step) {
    if (step % per_epoch == 0) {
      order = epoch_order(data.train.count, o.seed, int(step / per_epoch));
    }
    net.train_step(data.train,
                   rank_batch(order, std::size_t(step % per_epoch), std::size_t(o.batch), ranks));
    progress.update(step + 1);
  }
  mem->synchronize();
  say("  %s: %llu offloads, %s offloaded, device peak in use %s\n", mem->description().c_str(),
      static_cast<unsigned long long>(mem->report().offloads),
      stash::format_bytes(mem->report().bytes_offloaded).c_str(),
      stash::format_bytes(mem->report().peak_in_use).c_str());
  check_replicas(t, dp, "after the " + std::string(to_string(p)) + " run");
  check_result r{net.weights(), mem->report(), 0.0};
  r.test_accuracy = evaluate(t, data.test, o.batch, ranks);
  say("  %s: test accuracy %.2f%%\n", std::string(to_string(p)).c_str(), 100.0 * r.test_accuracy);
  return r;
}

// A lossy codec rounds the activations it brings back, so the two trainings drift apart and only
// their outcome can be compared: test accuracy within --accuracy-margin points. Every rank sees
// the same accuracies (the correct counts are summed over all ranks), so all decide alike.
int check_accuracy(options const& o, check_result const& reference, check_result const& subject,
                   std::size_t differ, float max_diff)
{
  double const diff_pp = 100.0 * std::abs(subject.test_accuracy - reference.test_accuracy);
  bool const pass      = diff_pp <= o.accuracy_margin;
  say("check %s: test accuracy %.2f%% with offload (%s) vs %.2f%% without, |difference| %.2f "
      "points %s the "
      "margin of %.2f\n",
      pass ? "passed" : "FAILED", 100.0 * subject.test_accuracy,
      std::string(to_string(o.codec)).c_str(), 100.0 * reference.test_accuracy, diff_pp,
      pass ? "<=" : ">", o.accuracy_margin);
  say("  for information: %zu of %zu weights differ from the run without offload, max |diff| %g (a "
      "lossy codec "
      "is not expected to keep them bitwise)\n",
      differ, reference.weights.size(), double(max_diff));
  if (pass && subject.memory.offloads == 0) {
    say("  warning: the checked run offloaded nothing, so this proves nothing about the codec; "
        "pick a policy "
        "(and --budget) that offloads\n");
  }
  return pass ? 0 : 1;
}

int check(options const& o, dataset const& data, rank_info const& ranks, collective* dp)
{
  long const per_epoch =
      long(steps_per_epoch(data.train.count, std::size_t(o.batch), ranks.world_size));
  long const steps     = check_steps_for(o, per_epoch);
  check_kind const how = check_kind_for(o.codec);
  if (how == check_kind::bitwise) {
    say("train_cnn --check: %ld steps of batch %d, width %d, deterministic cuDNN algorithms; "
        "weights "
        "compared bitwise\n",
        steps, o.batch, o.width);
  } else {
    say("train_cnn --check: %ld steps of batch %d, width %d, deterministic cuDNN algorithms; lossy "
        "codec %s: "
        "test accuracies compared, margin %.2f points\n",
        steps, o.batch, o.width, std::string(to_string(o.codec)).c_str(), o.accuracy_margin);
  }
  if (ranks.distributed()) {
    say("  data parallel over %d ranks: both runs all-reduce their gradients; every rank compares "
        "its own "
        "replica (this also assumes NCCL reduces in the same order in both runs)\n",
        ranks.world_size);
  }
  check_result const reference =
      check_run(o, data, ranks, dp, policy_kind::no_swap, codec_kind::none, std::nullopt, steps);
  check_result const subject = check_run(o, data, ranks, dp, o.policy, o.codec, o.budget, steps);
  std::size_t differ         = 0;
  float max_diff             = 0;
  for (std::size_t i = 0; i < reference.weights.size(); ++i) {
    if (std::memcmp(&reference.weights[i], &subject.weights[i], sizeof(float)) != 0) {
      ++differ;
      max_diff = std::max(max_diff, std::abs(reference.weights[i] - subject.weights[i]));
    }
  }
  if (how == check_kind::accuracy) {
    return check_accuracy(o, reference, subject, differ, max_diff);
  }
  // Every rank learns the worst rank's count, so that all of them exit alike.
  std::uint64_t const worst = dp != nullptr ? dp->min_max(differ).second : differ;
  if (worst != 0) {
    if (differ != 0) {
      std::printf(
          "check FAILED%s: %zu of %zu weights differ from the run without offload (max |diff| "
          "%g)\n",
          ranks.distributed() ? (" on rank " + std::to_string(ranks.rank)).c_str() : "", differ,
          reference.weights.size(), double(max_diff));
    }
    return 1;
  }
  say("check passed: all %zu weights bitwise identical to the run without offload%s\n",
      reference.weights.size(),
      ranks.distributed() ? (" on all " + std::to_string(ranks.world_size) + " ranks").c_str()
                          : "");
  if (subject.memory.offloads == 0) {
    say("  warning: the checked run offloaded nothing, so this proves nothing about offload; pick "
        "a "
        "policy (and --budget) that offloads\n");
  }
  return 0;
}

#ifdef STASH_HAVE_NCCL
// Rank 0 creates NCCL's unique id and publishes it in the id file, the others wait for it; all
// join the communicator, after which every rank has read the file and rank 0 removes it.
std::unique_ptr<nccl_collective> join(options const& o, rank_info const& ranks,
                                      run_token const& token)
{
  id_exchange x;
  x.file       = o.nccl_id_file;
  x.token      = token.value;
  x.world_size = ranks.world_size;
  x.timeout    = std::chrono::milliseconds(static_cast<long long>(o.nccl_id_timeout * 1000.0));
  unique_id_bytes id{};
  if (!ranks.distributed()) {
    id = new_unique_id();  // --nccl-always with one rank: nobody to hand the id to
  } else if (ranks.is_root()) {
    id = new_unique_id();
    publish_unique_id(x, id);
  } else {
    id = wait_for_unique_id(x, ranks.rank);
  }
  auto comm = std::make_unique<nccl_collective>(ranks, id);
  if (ranks.distributed() && ranks.is_root()) { (void)remove_unique_id(x); }
  if (ranks.distributed()) {
    say("  NCCL %d.%d.%d communicator of %d ranks joined (id through %s, run token from %s)\n",
        NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, ranks.world_size, o.nccl_id_file.c_str(),
        token.source.c_str());
  } else {
    say("  NCCL %d.%d.%d communicator of 1 rank (--nccl-always): the all-reduce runs every step "
        "and must change "
        "nothing\n",
        NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  }
  return comm;
}
#endif

// The rank environment, checked before the dataset and the GPU so that a bad launch fails at once.
void check_rank_setup(options const& o, rank_info const& ranks, std::optional<run_token>& token)
{
#ifndef STASH_HAVE_NCCL
  if (o.nccl_always) {
    throw environment_error(
        "--nccl-always: this train_cnn was built without NCCL (CMake did not find it)");
  }
#endif
  if (!ranks.distributed()) { return; }
  std::string const n = std::to_string(ranks.world_size) + " ranks (" + ranks.source + ")";
#ifndef STASH_HAVE_NCCL
  if (ranks.distributed()) {
    throw environment_error(
        "the environment asks for " + n +
        ", but this train_cnn was built without NCCL (CMake did not find it) and runs a "
        "single rank only");
  }
#endif
  if (o.nccl_id_file.empty()) {
    throw environment_error(
        "--nccl-id-file PATH is needed for " + n +
        ": rank 0 leaves NCCL's unique id there for the others (launch_dp.sh passes one)");
  }
  token = run_token_from_environment(process_environment(), ranks);
  if (!token) {
    throw environment_error(
        "no run token for " + n +
        ": set STASH_RUN_ID to one fresh value on every rank (launch_dp.sh does; with mpirun: "
        "-x STASH_RUN_ID=$(date +%s%N)), so that an id file left by an earlier run is never "
        "taken for this one's");
  }
}

// The CPU build (train_cnn_cpu, next to this program) with the same arguments: where no GPU is
// found, or with --device cpu. Returns only when it cannot be started (exit 2 then).
int run_cpu_build(char** argv)
{
  std::string self = argv[0];
  std::string const dir =
      self.find('/') == std::string::npos ? std::string(".") : self.substr(0, self.rfind('/'));
  std::string const cpu = dir + "/train_cnn_cpu";
  if (access(cpu.c_str(), X_OK) == 0) {
    std::fflush(stdout);
    execv(cpu.c_str(), argv);
  }
  std::fprintf(stderr,
               "train_cnn: %s; the CPU build (%s) is not there (it needs oneDNN: apt-get install "
               "libdnnl-dev, then rebuild)\n",
               stash::no_gpu_reason().empty() ? "--device cpu" : "no CUDA device", cpu.c_str());
  return 2;
}

}  // namespace
}  // namespace train_cnn

int main(int argc, char** argv)
{
  using namespace train_cnn;
  options o;
  try {
    o = parse_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (usage_error const& e) {
    std::fprintf(stderr, "train_cnn: %s\n\n%s", e.what(), usage().c_str());
    return 2;
  }
  if (o.help) {
    std::printf("%s", usage().c_str());
    return 0;
  }
  rank_info ranks;
  std::optional<run_token> token;
  try {
    ranks = rank_from_environment(process_environment());
    check_rank_setup(o, ranks, token);
  } catch (environment_error const& e) {
    std::fprintf(stderr, "train_cnn: bad rank environment: %s\n", e.what());
    return 2;
  }
  if (o.device == device_kind::cpu ||
      (o.device == device_kind::automatic && !stash::no_gpu_reason().empty())) {
    if (ranks.distributed()) {
      std::fprintf(stderr, "train_cnn: the CPU build runs a single rank (%d asked for)\n",
                   ranks.world_size);
      return 2;
    }
    return run_cpu_build(argv);  // returns only when train_cnn_cpu cannot be started
  }
  if (std::string const what = cpu_only_option(o); !what.empty()) {
    std::fprintf(stderr, "train_cnn: %s: only the CPU build has it (train_cnn_cpu, --device cpu)\n",
                 what.c_str());
    return 2;
  }
  quiet                 = !ranks.is_root();
  std::string const who = ranks.distributed() ? " [rank " + std::to_string(ranks.rank) + "]" : "";
  if (!ranks.distributed() && !o.nccl_id_file.empty()) {
    say("train_cnn: a single rank (%s): --nccl-id-file is not used\n", ranks.source.c_str());
  }
  dataset data;
  try {
    data = load_fashion_mnist(o.data_dir);
  } catch (idx_error const& e) {
    std::fprintf(stderr, "train_cnn%s: %s\n", who.c_str(), e.what());
    return 2;
  }
  say("train_cnn: Fashion-MNIST from %s: %zu training and %zu test images of %zux%zu\n",
      o.data_dir.c_str(), data.train.count, data.test.count, data.train.rows, data.train.cols);
  if (std::size_t(o.batch) * std::size_t(ranks.world_size) > data.train.count) {
    std::fprintf(
        stderr, "train_cnn%s: --batch %d x %d ranks is larger than the training set (%zu images)\n",
        who.c_str(), o.batch, ranks.world_size, data.train.count);
    return 2;
  }
  if (std::string const why = stash::no_gpu_reason(); !why.empty()) {
    say("no CUDA device: %s\ntrain_cnn: arguments, rank environment (%s) and dataset validated "
        "(%s); nothing was "
        "trained\n",
        why.c_str(), ranks.source.c_str(), o.check ? "--check requested" : "training requested");
    return 0;
  }
  int device = 0;
  try {
    int count = 0;
    STASH_CUDA_TRY(cudaGetDeviceCount(&count));
    device = device_for(ranks, count, process_environment());
  } catch (std::exception const& e) {
    std::fprintf(stderr, "train_cnn%s: %s\n", who.c_str(), e.what());
    return 2;
  }
  try {
    // Before any stream, event or allocation: they all belong to the current device.
    STASH_CUDA_TRY(cudaSetDevice(device));
    collective* dp = nullptr;
#ifdef STASH_HAVE_NCCL
    std::unique_ptr<nccl_collective> comm;
    if (ranks.distributed() || o.nccl_always) {
      comm = join(o, ranks, token.value_or(run_token{}));
      dp   = comm.get();
    }
#endif
    int const rc = o.check ? check(o, data, ranks, dp) : train(o, data, ranks, dp);
#ifdef STASH_HAVE_NCCL
    if (comm) { comm->finalize(); }
#endif
    return rc;
  } catch (stash::out_of_memory const& e) {
    std::fprintf(
        stderr,
        "train_cnn%s: out of device memory: %s\n  (with --budget, the policy's schedule must fit "
        "the model "
        "into it: try vdnn_all or auto_swap, a smaller --batch or --width, or a larger --budget)\n",
        who.c_str(), e.what());
    return 3;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "train_cnn%s: error: %s\n", who.c_str(), e.what());
    return 1;
  }
}
