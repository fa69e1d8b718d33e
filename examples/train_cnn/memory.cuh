// Where train_cnn's tensors live: one stash::allocator<lifetime_arena, any_swap_policy, codec set>
// behind a small virtual interface; policy and codec are chosen at run time, so the allocator is
// instantiated once (see make_memory in main.cu).
#pragma once

#include <stash_tools/train_cnn/options.hpp>

#include <stash/allocator.hpp>
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
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace train_cnn {

/// @brief Figures of one run's memory, cumulative since it started.
struct memory_report {
  std::uint64_t offloads{0};
  std::uint64_t prefetches{0};
  std::uint64_t demand_prefetches{0};
  std::uint64_t bytes_offloaded{0};       ///< uncompressed
  std::uint64_t bytes_encoded{0};         ///< host bytes of the completed offloads (compressed)
  std::uint64_t bytes_encoded_source{0};  ///< uncompressed bytes of those same offloads
  std::uint64_t peak_in_use{0};           ///< device bytes handed out at once, since reset_peak()
  std::uint64_t peak_reserved{0};         ///< device bytes the pool took from cudaMalloc (ever)
  std::uint64_t reserved{0};              ///< device bytes the pool holds from cudaMalloc now
  std::uint64_t arena_bytes{0};
  std::uint64_t pool_fallbacks{0};
  std::uint64_t replans{0};        ///< schedules the allocator re-planned
  std::uint64_t arena_replans{0};  ///< plans the lifetime_arena re-made (split lifetimes)
  std::uint64_t deviations{0};
};

/// @brief The allocator as the network sees it (ids are stash::allocator tensor ids).
class activation_memory {
 public:
  using id                     = stash::tensor_handle;
  virtual ~activation_memory() = default;

  virtual id allocate(std::size_t bytes, stash::storage_kind kind, std::string label) = 0;
  virtual std::vector<void*> op(std::string name, std::span<id const> reads,
                                std::span<id const> writes)                           = 0;
  virtual void* pointer(id t)                                                         = 0;
  virtual void deallocate(id t)                                                       = 0;
  virtual void begin_iteration()                                                      = 0;
  virtual void end_iteration()                                                        = 0;
  virtual void phase(stash::phase p)                                                  = 0;
  virtual void synchronize()                                                          = 0;
  [[nodiscard]] virtual cudaStream_t stream() const                                   = 0;
  [[nodiscard]] virtual memory_report report()                                        = 0;
  virtual void reset_peak()                                                           = 0;
  [[nodiscard]] virtual stash::schedule const& schedule() const                       = 0;
  [[nodiscard]] virtual std::string description() const                               = 0;
};

/// @brief Emulates a device of `budget` bytes over another pool: from the first replayed
/// iteration on, an allocation that would take the bytes handed out past the budget throws
/// stash::out_of_memory. The recorded first iteration is not held to it, because stash records it
/// without offloading (its peak is reported instead). Counts bytes handed out (in use), not bytes
/// reserved from cudaMalloc: the lifetime_arena plans the swapped tensors' split lifetimes only
/// once the replayed sequence has settled (its re-plan, after about three steps), and until then
/// it serves them from fallback memory beside the arena planned for the step without offload.
template <stash::pool Pool>
class budget_guard : public stash::pool_resource<budget_guard<Pool>> {
 public:
  static constexpr bool is_host_accessible   = Pool::is_host_accessible;
  static constexpr bool is_device_accessible = Pool::is_device_accessible;
  STASH_POOL_PROPERTIES(budget_guard, Pool::is_device_accessible, Pool::is_host_accessible)

  template <class... Args>
  explicit budget_guard(std::uint64_t budget, Args&&... args)
      : budget_(budget), pool_(std::forward<Args>(args)...)
  {
  }

  void* do_allocate(std::size_t bytes, std::size_t alignment, stash::stream_ref stream)
  {
    if (enforce_ && in_use_ + bytes > budget_) {
      throw stash::out_of_memory(
          "train_cnn --budget (emulated device of " + std::to_string(budget_) + " B)", bytes,
          budget_, in_use_);
    }
    void* p = pool_.allocate_async(bytes, alignment, stream);
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment,
                     stash::stream_ref stream) noexcept
  {
    pool_.deallocate_async(p, bytes, alignment, stream);
    in_use_ -= std::min<std::uint64_t>(bytes, in_use_);
  }
  [[nodiscard]] stash::pool_stats stats() const { return pool_.stats(); }
  void begin_iteration() { pool_.begin_iteration(); }
  void end_iteration()
  {
    pool_.end_iteration();
    if (budget_ != std::numeric_limits<std::uint64_t>::max()) { enforce_ = true; }
  }

  [[nodiscard]] std::uint64_t peak() const noexcept { return peak_; }
  void reset_peak() noexcept { peak_ = in_use_; }
  [[nodiscard]] Pool& inner() noexcept { return pool_; }
  [[nodiscard]] Pool const& inner() const noexcept { return pool_; }

 private:
  std::uint64_t budget_;
  Pool pool_;
  bool enforce_{false};
  std::uint64_t in_use_{0};
  std::uint64_t peak_{0};
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

  id allocate(std::size_t bytes, stash::storage_kind kind, std::string label) override
  {
    // Whole floats (device codecs need them) and at least one.
    return alloc_.allocate(std::max<std::size_t>(16, (bytes + 15) / 16 * 16), kind,
                           std::move(label), stream_);
  }
  std::vector<void*> op(std::string name, std::span<id const> reads,
                        std::span<id const> writes) override
  {
    return alloc_.op(std::move(name), reads, writes, stream_);
  }
  void* pointer(id t) override { return alloc_.pointer(t, stream_); }
  void deallocate(id t) override { alloc_.deallocate(t); }
  void begin_iteration() override { alloc_.begin_iteration(); }
  void end_iteration() override { alloc_.end_iteration(); }
  void phase(stash::phase p) override { alloc_.phase(p); }
  void synchronize() override
  {
    backend_.synchronize(stream_);
    alloc_.synchronize();
  }
  [[nodiscard]] cudaStream_t stream() const override { return stream_; }
  [[nodiscard]] memory_report report() override
  {
    memory_report r;
    auto const& o          = alloc_.offload_statistics();
    r.offloads             = o.offloads;
    r.prefetches           = o.prefetches;
    r.demand_prefetches    = o.demand_prefetches;
    r.bytes_offloaded      = o.bytes_offloaded;
    r.bytes_encoded        = o.bytes_encoded;
    r.bytes_encoded_source = o.bytes_encoded_source;
    auto const s           = pool_.stats();
    r.peak_in_use          = pool_.peak();
    r.peak_reserved        = s.peak_reserved_bytes;
    r.reserved             = s.reserved_bytes;
    r.arena_bytes          = pool_.inner().arena_bytes();
    r.pool_fallbacks       = s.fallbacks;
    r.replans              = alloc_.stats().replanned;
    r.arena_replans        = pool_.inner().replans();
    r.deviations           = alloc_.stats().deviations;
    return r;
  }
  void reset_peak() override { pool_.reset_peak(); }
  [[nodiscard]] stash::schedule const& schedule() const override
  {
    return alloc_.current_schedule();
  }
  [[nodiscard]] std::string description() const override { return description_; }

 private:
  static stash::allocator_options allocator_options(memory_config const& c)
  {
    stash::allocator_options o;
    if (c.budget) { o.device_budget = *c.budget; }
    o.hardware         = c.hardware;
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
