// train_cnn's CPU memory: the one place the CPU build calls stash::allocator (host_backend, host
// memory standing for device memory, a device budget the pool enforces). The network sees ids and
// pointers only, so a change of the facade's API is absorbed here.
#pragma once

#include <stash_tools/train_cnn/budget_guard.hpp>
#include <stash_tools/train_cnn/memory_report.hpp>
#include <stash_tools/train_cnn/schedule_report.hpp>
#include <stash_tools/train_cnn/tensor_data.hpp>

#include <stash/allocator.hpp>
#include <stash/codec/bitmask.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/pool_argmax_transfer.hpp>
#include <stash/offload/tensor_handle.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/any_swap_policy.hpp>
#include <stash/swap/encoding_choice.hpp>
#include <stash/swap/joint_search.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace train_cnn {

/// @brief How offloaded tensors travel on the CPU build.
enum class host_codec : std::uint8_t {
  raw,      ///< plain copies
  zvc,      ///< every tensor zero-value compressed (lossless, bit-exact)
  bitmask,  ///< Gist's 1-bit mask where the planner found a sign-only reader, raw elsewhere
  auto_,    ///< the planner's per-tensor choice: pool_argmax, bitmask, zvc or raw (all lossless)
  fp16,  ///< auto's lossless choices, and IEEE half for the other activations (lossy, Gist's DPR)
  bf16,  ///< the same with bfloat16
  fp8_e4m3,  ///< the same with 8-bit floats (4 exponent, 3 mantissa bits)
};

/// @brief The lossy encoding `c` gives activations no lossless rule covers (none: lossless).
[[nodiscard]] constexpr std::optional<stash::swap_encoding> lossy_encoding(host_codec c) noexcept
{
  switch (c) {
    case host_codec::fp16:
      return stash::swap_encoding::fp16;
    case host_codec::bf16:
      return stash::swap_encoding::bf16;
    case host_codec::fp8_e4m3:
      return stash::swap_encoding::fp8_e4m3;
    default:
      return std::nullopt;
  }
}

/// @brief The encodings the planner may choose for `c`: encoding_choice.hpp's rules (the lossless
/// ones, then `c`'s lossy format for other activations, never for indices, inputs or state).
[[nodiscard]] inline stash::encoding_options encoding_options_for(host_codec c)
{
  stash::encoding_options e;
  e.lossy_activations = lossy_encoding(c);
  return e;
}

/// @brief A policy as stash::allocator runs it: the base schedule (persistent storages too:
/// parameters, gradients and optimizer state leave between two of their uses inside a step, and
/// with search_swap also across the step's boundary (wrap entries); the network keeps no raw
/// pointer across ops), its encodings chosen per tensor
/// (encoding_choice.hpp) for --codec auto, or only Gist's bitmask choices kept for --codec
/// bitmask.
struct host_policy {
  stash::any_swap_policy base;
  host_codec codec = host_codec::raw;
  std::string label;
  /// @brief The base policy's name.
  [[nodiscard]] std::string_view name() const noexcept { return label; }
  /// @brief The base schedule as the allocator runs it (see the type's docs).
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    stash::schedule out = base.plan(a, budget);
    if (codec == host_codec::auto_ || codec == host_codec::bitmask || lossy_encoding(codec)) {
      out = stash::with_encodings(a, std::move(out), encoding_options_for(codec));
    }
    if (codec == host_codec::bitmask) {
      for (auto& e : out.entries) {
        if (e.encoding != stash::swap_encoding::bitmask) {
          e.encoding = stash::swap_encoding::configured;
        }
      }
    }
    return out;
  }
};

/// @brief The policy `name` set up for `codec` (see host_policy).
[[nodiscard]] inline stash::any_swap_policy make_host_policy(std::string_view name, host_codec c)
{
  if (name == "search_swap") {
    stash::search_swap s;
    s.wrap = true;  // the allocator runs wrap entries: momentum and parameters across the step
    if (c == host_codec::auto_ || lossy_encoding(c)) { s.encodings = encoding_options_for(c); }
    return host_policy{s, c, "search_swap"};
  }
  if (name == "search") {
    stash::joint_search s;
    if (c == host_codec::auto_ || lossy_encoding(c)) { s.encodings = encoding_options_for(c); }
    return host_policy{s, c, "search"};
  }
  return host_policy{stash::make_swap_policy(name), c, std::string(name)};
}

/// @brief Settings of a host_memory.
struct host_memory_config {
  std::optional<std::uint64_t> budget;  ///< emulated device bytes; none: unlimited
  std::string policy   = "no_swap";
  host_codec codec     = host_codec::raw;
  std::string hardware = "pcie4_x16";
};

/// @brief stash::allocator<budget_guard<lifetime_arena<host_upstream>>, any_swap_policy,
/// transfer_set<zvc, bitmask, pool_argmax, fp16, bf16, fp8_e4m3>, host_backend> behind ids and
/// pointers. op() returns
/// pointers that are resident and whose queued transfers are complete, so the caller may compute
/// on them at once on its own thread. An op given its kernel may be re-run by the allocator to
/// rematerialise a dropped output: on the calling thread, once the stream's queued work (the
/// rematerialised storage's allocation, its reads' prefetches) is complete, so the kernel runs
/// with the same OpenMP settings as its first run.
class host_memory {
 public:
  using id = stash::tensor_handle;
  using arena =
      stash::lifetime_arena<stash::host_upstream, stash::greedy_planner, stash::host_stream_order>;
  using pool_type = budget_guard<arena>;
  using codecs    = stash::transfer_set<
      stash::zvc<float>, stash::bitmask, stash::pool_argmax, stash::precision<float, stash::fp16>,
      stash::precision<float, stash::bf16>, stash::precision<float, stash::fp8_e4m3>>;
  using alloc_type =
      stash::allocator<pool_type, stash::any_swap_policy, codecs, stash::host_backend>;

  /// @brief Memory configured by `c`.
  explicit host_memory(host_memory_config const& c)
      : config_(c),
        stream_(backend_.create_stream()),
        pool_(c.budget.value_or(std::numeric_limits<std::uint64_t>::max()), stash::host_upstream{},
              stash::lifetime_arena_options{}),
        alloc_(backend_, pool_, options_for(c), make_host_policy(c.policy, c.codec))
  {
  }
  host_memory(host_memory const&)            = delete;
  host_memory& operator=(host_memory const&) = delete;
  ~host_memory()
  {
    try {
      backend_.synchronize(stream_);
    } catch (...) {  // NOLINT(bugprone-empty-catch): destructors never throw
    }
  }

  /// @brief A tensor of `bytes` (rounded up to 16) holding `data` (float32 unless said
  /// otherwise; a max pool's indices carry its geometry, pool_argmax's descriptor).
  id allocate(std::size_t bytes, stash::storage_kind kind, std::string label,
              tensor_data const& data = {})
  {
    try {
      return alloc_.allocate_async(std::max<std::size_t>(16, (bytes + 15) / 16 * 16), kind, label,
                                   stream_, descriptor_of<alloc_type::descriptor_type>(data));
    } catch (stash::out_of_memory const& e) {
      throw where(e, "allocating '" + label + "' (" + std::string(stash::to_string(kind)) + ")");
    }
  }
  /// @brief What computes an op from its pointers (reads, then writes).
  using kernel = std::function<void(std::span<void* const>)>;

  /// @brief Pointers of `reads` then `writes`, resident, usable on the calling thread now.
  /// `rerun` (optional) computes the op from such pointers: the allocator calls it to
  /// rematerialise an output a recompute entry dropped.
  std::vector<void*> op(std::string name, std::span<id const> reads, std::span<id const> writes,
                        kernel rerun = {})
  {
    alloc_type::recompute_fn fn;
    if (rerun) {
      fn = [this, k = std::move(rerun)](std::span<void* const> p, stash::host_backend::stream s) {
        backend_.synchronize(s);
        k(p);
      };
    }
    try {
      auto p = alloc_.op(name, reads, writes, stream_, std::move(fn));
      backend_.synchronize(stream_);
      return p;
    } catch (stash::out_of_memory const& e) {
      throw where(e, "bringing back the tensors of op '" + name + "'");
    }
  }
  /// @brief The tensor is dead.
  void deallocate(id t) { alloc_.deallocate_async(t); }
  void begin_iteration() { alloc_.begin_iteration(); }
  void end_iteration() { alloc_.end_iteration(); }
  void phase(stash::phase p) { alloc_.phase(p); }
  /// @brief Waits for every transfer.
  void synchronize()
  {
    backend_.synchronize(stream_);
    alloc_.synchronize();
  }
  /// @brief Counters since the start.
  [[nodiscard]] memory_report report() const { return memory_report_of(alloc_, pool_); }
  /// @brief Restarts the in-use peak.
  void reset_peak() { pool_.reset_peak(); }
  /// @brief The schedule in force.
  [[nodiscard]] stash::schedule const& schedule() const { return alloc_.current_schedule(); }
  /// @brief The schedule's device peak as this run's budget counts it (train_cnn::run_order_peak);
  /// nullopt before the first step ended.
  [[nodiscard]] std::optional<std::uint64_t> run_order_peak() const
  {
    if (recorded_trace() == nullptr) { return std::nullopt; }
    return train_cnn::run_order_peak(*recorded_trace(), schedule());
  }
  /// @brief The recorded step (nullptr before the first step ended).
  [[nodiscard]] stash::trace const* recorded_trace() const { return alloc_.recorded_trace(); }
  /// @brief The settings.
  [[nodiscard]] host_memory_config const& config() const noexcept { return config_; }

 private:
  // `e` with what was being done and in which step: an out_of_memory that says where.
  stash::out_of_memory where(stash::out_of_memory const& e, std::string const& what) const
  {
    return stash::out_of_memory(
        "train_cnn: " + what + " in step " + std::to_string(alloc_.stats().iterations + 1) + " [" +
            e.what() + "]",
        e.requested_bytes(), e.budget_bytes(), e.in_use_bytes(), e.largest_free_bytes());
  }

  static stash::allocator_options options_for(host_memory_config const& c)
  {
    stash::allocator_options o;
    if (c.budget) { o.device_budget = *c.budget; }
    o.hardware = stash::hardware_preset(c.hardware);
    o.default_encoding =
        c.codec == host_codec::zvc ? stash::swap_encoding::zvc : stash::swap_encoding::raw;
    return o;
  }

  host_memory_config config_;
  stash::host_backend backend_;
  stash::host_backend::stream stream_;
  pool_type pool_;
  alloc_type alloc_;
};

}  // namespace train_cnn
