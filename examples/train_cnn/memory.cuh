// Where train_cnn's tensors live on CUDA: one stash::allocator<lifetime_arena, any_swap_policy,
// codec set> behind a small virtual interface, the `Mem` of the shared network
// (stash_tools/train_cnn/cnn.hpp, as host_memory is on the CPU); policy and codec are chosen at
// run time, so the allocator is instantiated once (see make_memory in main.cu).
#pragma once

#include <stash_tools/train_cnn/budget_guard.hpp>
#include <stash_tools/train_cnn/memory_report.hpp>
#include <stash_tools/train_cnn/options.hpp>
#include <stash_tools/train_cnn/schedule_report.hpp>
#include <stash_tools/train_cnn/tensor_data.hpp>

#include <stash/allocator.hpp>
#include <stash/codec/pool_argmax.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_resource.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/swap/any_swap_policy.hpp>
#include <stash/trace/trace.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace train_cnn {

/// @brief The allocator as the network sees it (ids are stash::allocator tensor ids).
class activation_memory {
 public:
  using id = stash::tensor_handle;
  /// @brief What queues an op's work from its pointers (reads, then writes) on stream().
  using kernel                 = std::function<void(std::span<void* const>)>;
  virtual ~activation_memory() = default;

  /// @brief A tensor of `bytes` holding `data` (float32 unless said otherwise; a max pool's
  /// indices carry its geometry, pool_argmax's descriptor when the codec set has that member).
  virtual id allocate(std::size_t bytes, stash::storage_kind kind, std::string label,
                      tensor_data const& data) = 0;
  id allocate(std::size_t bytes, stash::storage_kind kind, std::string label)
  {
    return allocate(bytes, kind, std::move(label), tensor_data{});
  }
  /// @brief Pointers of `reads` then `writes`, usable by work queued on stream() next. `rerun`
  /// (may be empty) queues the op's work again: stash calls it to rematerialise an output that a
  /// recompute entry dropped.
  virtual std::vector<void*> op(std::string name, std::span<id const> reads,
                                std::span<id const> writes, kernel rerun) = 0;
  std::vector<void*> op(std::string name, std::span<id const> reads, std::span<id const> writes)
  {
    return op(std::move(name), reads, writes, kernel{});
  }
  virtual void* pointer(id t)                                   = 0;
  virtual void deallocate(id t)                                 = 0;
  virtual void begin_iteration()                                = 0;
  virtual void end_iteration()                                  = 0;
  virtual void phase(stash::phase p)                            = 0;
  virtual void synchronize()                                    = 0;
  [[nodiscard]] virtual cudaStream_t stream() const             = 0;
  [[nodiscard]] virtual memory_report report()                  = 0;
  virtual void reset_peak()                                     = 0;
  [[nodiscard]] virtual stash::schedule const& schedule() const = 0;
  /// @brief The recorded step (nullptr before the first step ended).
  [[nodiscard]] virtual stash::trace const* recorded_trace() const = 0;
  [[nodiscard]] virtual std::string description() const            = 0;
  /// @brief The schedule's device peak as the budget counts it (train_cnn::run_order_peak, as
  /// the CPU build reports it); nullopt before the first step ended.
  [[nodiscard]] std::optional<std::uint64_t> run_order_peak() const
  {
    if (recorded_trace() == nullptr) { return std::nullopt; }
    return train_cnn::run_order_peak(*recorded_trace(), schedule());
  }
};

/// @brief What a run's memory is configured with.
struct memory_config {
  std::optional<std::uint64_t> budget;
  std::string hardware = "pcie4_x16";
  /// The codec offloads run (a member of the Codec slot's transfer_set; raw: plain copies).
  stash::swap_encoding encoding = stash::swap_encoding::raw;
};

/// @brief stash::allocator<budget_guard<lifetime_arena<device_upstream>>, any_swap_policy, Codec,
/// cuda_backend>: the policy is chosen at run time, and with a transfer_set as Codec the codec
/// too (memory_config::encoding), so one instantiation serves every run.
template <class Codec>
class stash_memory final : public activation_memory {
 public:
  using pool_type = budget_guard<stash::lifetime_arena<stash::device_upstream>>;
  using alloc_type =
      stash::allocator<pool_type, stash::any_swap_policy, Codec, stash::cuda_backend>;

  stash_memory(memory_config const& config, stash::any_swap_policy policy, std::string description)
      : stream_(backend_.create_stream().get()),
        pool_(config.budget.value_or(std::numeric_limits<std::uint64_t>::max()),
              stash::device_upstream{}, stash::lifetime_arena_options{}),
        alloc_(backend_, pool_, allocator_options(config), std::move(policy)),
        description_(std::move(description))
  {
  }
  ~stash_memory() override
  {
    try {
      backend_.synchronize(stream_);
    } catch (...) {  // NOLINT(bugprone-empty-catch): destructors never throw
    }
  }

  using activation_memory::allocate;
  using activation_memory::op;
  id allocate(std::size_t bytes, stash::storage_kind kind, std::string label,
              tensor_data const& data) override
  {
    // What the tensor holds: a set without pool_argmax gets the indices' element type, so its
    // lossy members (fp16, bf16, fp8) refuse them and they travel lossless or raw.
    auto const desc = descriptor_of<typename alloc_type::descriptor_type>(data);
    // Whole floats (device codecs need them) and at least one.
    return alloc_.allocate_async(std::max<std::size_t>(16, (bytes + 15) / 16 * 16), kind,
                                 std::move(label), stream_, desc);
  }
  std::vector<void*> op(std::string name, std::span<id const> reads, std::span<id const> writes,
                        kernel rerun) override
  {
    typename alloc_type::recompute_fn fn;
    if (rerun) {
      // stash re-runs an op on the stream of the op that needs its output: always stream_ here,
      // the stream the network's layer calls are bound to, so the kernel needs no other. Checked:
      // a re-run queued on stream_ while stash ordered its transients on another would race them
      // (GPU review, fifth read, T4).
      fn = [k = std::move(rerun), bound = stream_](std::span<void* const> p,
                                                   stash::cuda_backend::stream s) {
        STASH_EXPECTS(s.get() == bound,
                      "train_cnn: stash asked for a re-run on another stream than the one the "
                      "layer calls are bound to; every allocation and op must use the memory's "
                      "stream");
        k(p);
      };
    }
    return alloc_.op(std::move(name), reads, writes, stream_, std::move(fn));
  }
  void* pointer(id t) override { return alloc_.acquire_async(t, stream_); }
  void deallocate(id t) override { alloc_.deallocate_async(t); }
  void begin_iteration() override { alloc_.begin_iteration(); }
  void end_iteration() override { alloc_.end_iteration(); }
  void phase(stash::phase p) override { alloc_.phase(p); }
  void synchronize() override
  {
    backend_.synchronize(stream_);
    alloc_.synchronize();
  }
  [[nodiscard]] cudaStream_t stream() const override { return stream_; }
  [[nodiscard]] memory_report report() override { return memory_report_of(alloc_, pool_); }
  void reset_peak() override { pool_.reset_peak(); }
  [[nodiscard]] stash::schedule const& schedule() const override
  {
    return alloc_.current_schedule();
  }
  [[nodiscard]] stash::trace const* recorded_trace() const override
  {
    return alloc_.recorded_trace();
  }
  [[nodiscard]] std::string description() const override { return description_; }

 private:
  static stash::allocator_options allocator_options(memory_config const& c)
  {
    stash::allocator_options o;
    if (c.budget) { o.device_budget = *c.budget; }
    o.hardware         = stash::hardware_preset(c.hardware);
    o.default_encoding = c.encoding;
    return o;
  }

  stash::cuda_backend backend_;
  cudaStream_t stream_;
  pool_type pool_;
  alloc_type alloc_;
  std::string description_;
};

}  // namespace train_cnn
