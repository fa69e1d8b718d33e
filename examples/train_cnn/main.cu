// train_cnn: a VGG-style CNN trained on Fashion-MNIST with every activation in stash (see
// README.md in this folder). Exit codes: 0 done (or no CUDA device, after validating arguments and
// the dataset), 1 error or --check mismatch, 2 bad arguments or missing/malformed dataset,
// 3 out of (emulated) device memory.
#include "idx_reader.hpp"
#include "memory.cuh"
#include "network.cuh"
#include "options.hpp"

#include <stash/codec/device_zvc.cuh>
#include <stash/core/device.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/swap/auto_swap.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/vdnn.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace train_cnn {
namespace {

using zvc_transfer = stash::device_codec_transfer<stash::device_zvc<float>>;

// One allocator type per (policy, codec): ten instantiations, the network is compiled once.
template <class Codec>
std::unique_ptr<activation_memory> make_for_codec(policy_kind p, memory_config const& c, std::string d)
{
  switch (p) {
    case policy_kind::no_swap: return std::make_unique<stash_memory<stash::no_swap, Codec>>(c, std::move(d));
    case policy_kind::vdnn_all: return std::make_unique<stash_memory<stash::vdnn_all, Codec>>(c, std::move(d));
    case policy_kind::vdnn_conv: return std::make_unique<stash_memory<stash::vdnn_conv, Codec>>(c, std::move(d));
    case policy_kind::vdnn_dyn: return std::make_unique<stash_memory<stash::vdnn_dyn, Codec>>(c, std::move(d));
    case policy_kind::auto_swap: return std::make_unique<stash_memory<stash::auto_swap, Codec>>(c, std::move(d));
  }
  throw std::logic_error("train_cnn: unhandled policy");
}

std::unique_ptr<activation_memory> make_memory(policy_kind p, codec_kind k, std::optional<std::uint64_t> budget)
{
  memory_config c;
  c.budget = budget;
  std::string d = "policy " + std::string(to_string(p)) + ", codec " + std::string(to_string(k)) + ", budget " +
                  (budget ? stash::format_bytes(*budget) : std::string("none (whole GPU)"));
  switch (k) {
    case codec_kind::none: return make_for_codec<void>(p, c, std::move(d));
    case codec_kind::zvc: return make_for_codec<zvc_transfer>(p, c, std::move(d));
  }
  throw std::logic_error("train_cnn: unhandled codec");
}

// The sample order of an epoch: a permutation seeded by (seed, epoch), the same in every run.
std::vector<std::size_t> epoch_order(std::size_t count, std::uint64_t seed, int epoch)
{
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 rng(seed * 1000003u + std::uint64_t(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

class progress_bar {
 public:
  progress_bar(bool on, long total, std::string label) : on_(on), total_(total), label_(std::move(label)) {}
  void update(long done)
  {
    if (!on_ || total_ <= 0) { return; }
    long const every = std::max(1L, total_ / 100);
    if (done != total_ && done % every != 0) { return; }
    int const width = 30;
    int const fill  = int(double(done) / double(total_) * width);
    std::fprintf(stderr, "\r  %s [%s%s] %ld/%ld", label_.c_str(), std::string(std::size_t(fill), '#').c_str(),
                 std::string(std::size_t(width - fill), '.').c_str(), done, total_);
    if (done == total_) { std::fprintf(stderr, "\r%*s\r", width + int(label_.size()) + 30, ""); }
    std::fflush(stderr);
  }

 private:
  bool on_;
  long total_;
  std::string label_;
};

std::string ratio_text(memory_report const& before, memory_report const& after, codec_kind codec)
{
  std::uint64_t const raw = after.bytes_offloaded - before.bytes_offloaded;
  if (raw == 0) { return "-"; }
  if (codec == codec_kind::none) { return "1.00 (raw copies)"; }
  if (after.bytes_stored && before.bytes_stored) {
    std::uint64_t const stored = *after.bytes_stored - *before.bytes_stored;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", stored == 0 ? 0.0 : double(raw) / double(stored));
    return buf;
  }
  return "n/a (not reported by stash yet)";
}

double evaluate(network& net, labelled_images const& test, int batch)
{
  net.reset_counters();
  std::vector<std::size_t> index(test.count);
  std::iota(index.begin(), index.end(), std::size_t{0});
  for (std::size_t at = 0; at < test.count; at += std::size_t(batch)) {
    std::size_t const n = std::min<std::size_t>(std::size_t(batch), test.count - at);
    net.evaluate_batch(test, std::span<std::size_t const>(index).subspan(at, n));
  }
  auto const [loss, correct] = net.counters();
  (void)loss;
  return double(correct) / double(test.count);
}

void print_schedule(activation_memory& mem)
{
  auto const& s = mem.schedule();
  std::printf("  schedule (%s): %zu tensors leave the device; planned peak %s, no-offload peak %s, %s\n",
              s.policy.c_str(), s.entries.size(), stash::format_bytes(s.device_peak).c_str(),
              stash::format_bytes(s.baseline_peak).c_str(),
              s.budget == std::numeric_limits<std::uint64_t>::max()
                ? "no budget"
                : (s.fits() ? "fits the budget" : "DOES NOT FIT the budget"));
}

int train(options const& o, dataset const& data)
{
  network_config nc;
  nc.width    = o.width;
  nc.rows     = int(data.train.rows);
  nc.cols     = int(data.train.cols);
  nc.classes  = int(dataset::classes);
  nc.lr       = float(o.lr);
  nc.momentum = float(o.momentum);
  nc.seed     = o.seed;
  long steps  = long(data.train.count / std::size_t(o.batch));
  if (o.max_steps > 0) { steps = std::min(steps, o.max_steps); }
  auto mem = make_memory(o.policy, o.codec, o.budget);
  network net(*mem, nc, o.batch);
  std::printf("train_cnn: %s\n  network width %d: %zu parameters; batch %d, %ld steps per epoch (last partial "
              "batch dropped), SGD lr %g momentum %g, seed %llu\n",
              mem->description().c_str(), o.width, net.parameter_count(), o.batch, steps, o.lr, o.momentum,
              static_cast<unsigned long long>(o.seed));
  if (o.codec != codec_kind::none) {
    std::printf("  note: stash::offload_stats does not report compressed bytes yet, so the compression ratio "
                "achieved is printed only once it does\n");
  }
  bool const bar = o.progress == 1 || (o.progress == -1 && isatty(2) != 0);
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    auto const order = epoch_order(data.train.count, o.seed, epoch);
    net.reset_counters();
    mem->reset_peak();
    memory_report const before = mem->report();
    progress_bar progress(bar, steps, "epoch " + std::to_string(epoch + 1));
    auto const t0 = std::chrono::steady_clock::now();
    for (long step = 0; step < steps; ++step) {
      net.train_step(data.train, std::span<std::size_t const>(order).subspan(std::size_t(step) * o.batch,
                                                                            std::size_t(o.batch)));
      if (epoch == 0 && step == 0) {
        mem->synchronize();
        print_schedule(*mem);
      }
      progress.update(step + 1);
    }
    mem->synchronize();
    double const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto const [loss_sum, train_correct] = net.counters();
    memory_report const after = mem->report();
    double const accuracy     = evaluate(net, data.test, o.batch);
    double const samples      = double(steps) * o.batch;
    std::printf("epoch %d/%d: loss %.4f, train acc %.2f%%, test acc %.2f%%, step %.2f ms%s, device peak in use %s "
                "(reserved %s), offloaded %s in %llu offloads (%llu prefetches, %llu on demand), compression %s\n",
                epoch + 1, o.epochs, loss_sum / samples, 100.0 * double(train_correct) / samples, 100.0 * accuracy,
                1e3 * seconds / double(steps), epoch == 0 ? " (incl. the recorded first step)" : "",
                stash::format_bytes(after.peak_in_use).c_str(), stash::format_bytes(after.peak_reserved).c_str(),
                stash::format_bytes(after.bytes_offloaded - before.bytes_offloaded).c_str(),
                static_cast<unsigned long long>(after.offloads - before.offloads),
                static_cast<unsigned long long>(after.prefetches - before.prefetches),
                static_cast<unsigned long long>(after.demand_prefetches - before.demand_prefetches),
                ratio_text(before, after, o.codec).c_str());
    std::fflush(stdout);
    if (after.deviations != 0) {
      std::printf("  note: %llu iterations deviated from the recording and were re-recorded\n",
                  static_cast<unsigned long long>(after.deviations));
    }
  }
  return 0;
}

// Trains `steps` steps from the same seed and data order; returns the weights and what moved.
std::pair<std::vector<float>, memory_report> check_run(options const& o, dataset const& data, policy_kind p,
                                                       codec_kind k, std::optional<std::uint64_t> budget, long steps)
{
  network_config nc;
  nc.width    = o.width;
  nc.rows     = int(data.train.rows);
  nc.cols     = int(data.train.cols);
  nc.lr       = float(o.lr);
  nc.momentum = float(o.momentum);
  nc.seed     = o.seed;
  auto mem = make_memory(p, k, budget);
  network net(*mem, nc, o.batch);
  long const per_epoch = long(data.train.count / std::size_t(o.batch));
  progress_bar progress(o.progress == 1 || (o.progress == -1 && isatty(2) != 0), steps, std::string(to_string(p)));
  std::vector<std::size_t> order;
  for (long step = 0; step < steps; ++step) {
    if (step % per_epoch == 0) { order = epoch_order(data.train.count, o.seed, int(step / per_epoch)); }
    net.train_step(data.train, std::span<std::size_t const>(order).subspan(std::size_t(step % per_epoch) * o.batch,
                                                                          std::size_t(o.batch)));
    progress.update(step + 1);
  }
  mem->synchronize();
  std::printf("  %s: %llu offloads, %s offloaded, device peak in use %s\n", mem->description().c_str(),
              static_cast<unsigned long long>(mem->report().offloads),
              stash::format_bytes(mem->report().bytes_offloaded).c_str(),
              stash::format_bytes(mem->report().peak_in_use).c_str());
  return {net.weights(), mem->report()};
}

int check(options const& o, dataset const& data)
{
  std::printf("train_cnn --check: %ld steps of batch %d, width %d, deterministic cuDNN algorithms; weights "
              "compared bitwise\n",
              o.check_steps, o.batch, o.width);
  auto const [reference, r0] = check_run(o, data, policy_kind::no_swap, codec_kind::none, std::nullopt, o.check_steps);
  auto const [subject, r1]   = check_run(o, data, o.policy, o.codec, o.budget, o.check_steps);
  (void)r0;
  std::size_t differ = 0;
  float max_diff     = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    if (std::memcmp(&reference[i], &subject[i], sizeof(float)) != 0) {
      ++differ;
      max_diff = std::max(max_diff, std::abs(reference[i] - subject[i]));
    }
  }
  if (differ != 0) {
    std::printf("check FAILED: %zu of %zu weights differ from the run without offload (max |diff| %g)\n", differ,
                reference.size(), double(max_diff));
    return 1;
  }
  std::printf("check passed: all %zu weights bitwise identical to the run without offload\n", reference.size());
  if (r1.offloads == 0) {
    std::printf("  warning: the checked run offloaded nothing, so this proves nothing about offload; pick a "
                "policy (and --budget) that offloads\n");
  }
  return 0;
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
  dataset data;
  try {
    data = load_fashion_mnist(o.data_dir);
  } catch (idx_error const& e) {
    std::fprintf(stderr, "train_cnn: %s\n", e.what());
    return 2;
  }
  std::printf("train_cnn: Fashion-MNIST from %s: %zu training and %zu test images of %zux%zu\n", o.data_dir.c_str(),
              data.train.count, data.test.count, data.train.rows, data.train.cols);
  if (std::size_t(o.batch) > data.train.count) {
    std::fprintf(stderr, "train_cnn: --batch %d is larger than the training set (%zu images)\n", o.batch,
                 data.train.count);
    return 2;
  }
  if (std::string const why = stash::no_gpu_reason(); !why.empty()) {
    std::printf("no CUDA device: %s\ntrain_cnn: arguments and dataset validated (%s); nothing was trained\n",
                why.c_str(), o.check ? "--check requested" : "training requested");
    return 0;
  }
  try {
    return o.check ? check(o, data) : train(o, data);
  } catch (stash::out_of_memory const& e) {
    std::fprintf(stderr,
                 "train_cnn: out of device memory: %s\n  (with --budget, the policy's schedule must fit the model "
                 "into it: try vdnn_all or auto_swap, a smaller --batch or --width, or a larger --budget)\n",
                 e.what());
    return 3;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "train_cnn: error: %s\n", e.what());
    return 1;
  }
}
