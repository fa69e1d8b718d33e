// train_cnn's emulated device: a pool that refuses to hand out more than a budget. Shared by the
// CUDA build (over device memory) and the CPU build (over host memory standing for the device).
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/stream_ref.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_resource.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace train_cnn {

/// @brief Emulates a device of `budget` bytes over another pool: from the first replayed
/// iteration on, an allocation that would take the bytes handed out past the budget throws
/// stash::out_of_memory. The recorded first iteration is not held to it, because stash records it
/// without offloading (its peak is reported instead). Counts bytes handed out (in use), not bytes
/// reserved from the upstream: how the pool below serves them (a lifetime_arena learns the first
/// replayed step when the plan moves tensors, see relearn()) does not change what is counted.
/// @tparam Pool The pool that really allocates.
template <stash::pool Pool>
class budget_guard : public stash::pool_resource<budget_guard<Pool>> {
 public:
  static constexpr bool is_host_accessible   = Pool::is_host_accessible;
  static constexpr bool is_device_accessible = Pool::is_device_accessible;
  STASH_POOL_PROPERTIES(budget_guard, Pool::is_device_accessible, Pool::is_host_accessible)

  /// @brief A guard of `budget` bytes over a Pool built from `args`.
  template <class... Args>
  explicit budget_guard(std::uint64_t budget, Args&&... args)
      : budget_(budget), pool_(std::forward<Args>(args)...)
  {
  }

  /// @brief Allocates, or throws stash::out_of_memory past the budget (once enforced).
  void* do_allocate(std::size_t bytes, std::size_t alignment, stash::stream_ref stream)
  {
    if (enforce_ && in_use_ + bytes > budget_) {
      ++refusals_;
      throw stash::out_of_memory(
          "train_cnn --budget (emulated device of " + std::to_string(budget_) + " B)", bytes,
          budget_, in_use_);
    }
    void* p = pool_.allocate_async(bytes, alignment, stream);
    in_use_ += bytes;
    peak_          = std::max(peak_, in_use_);
    enforced_peak_ = enforce_ ? std::max(enforced_peak_, in_use_) : enforced_peak_;
    return p;
  }
  /// @brief Returns `p` to the pool and its bytes to the budget.
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment,
                     stash::stream_ref stream) noexcept
  {
    pool_.deallocate_async(p, bytes, alignment, stream);
    in_use_ -= std::min<std::uint64_t>(bytes, in_use_);
  }
  /// @brief The wrapped pool's counters.
  [[nodiscard]] stash::pool_stats stats() const { return pool_.stats(); }
  /// @brief Forwarded to the pool.
  void begin_iteration() { pool_.begin_iteration(); }
  /// @brief Forwarded to the pool; the budget holds from the next iteration on.
  void end_iteration()
  {
    pool_.end_iteration();
    if (budget_ != std::numeric_limits<std::uint64_t>::max()) { enforce_ = true; }
  }

  /// @brief Forwarded to a pool that can forget its recorded sequence (lifetime_arena): the
  /// allocator asks for it when its plan moves tensors, so the arena learns the replayed one.
  void relearn() noexcept requires requires(Pool& p) { p.relearn(); }
  {
    pool_.relearn();
  }

  /// @brief Most bytes handed out at once since reset_peak().
  [[nodiscard]] std::uint64_t peak() const noexcept { return peak_; }
  /// @brief Most bytes handed out at once while the budget held (0 before).
  [[nodiscard]] std::uint64_t enforced_peak() const noexcept { return enforced_peak_; }
  /// @brief Allocations refused for the budget.
  [[nodiscard]] std::uint64_t refusals() const noexcept { return refusals_; }
  /// @brief The budget (max: none).
  [[nodiscard]] std::uint64_t budget() const noexcept { return budget_; }
  /// @brief Bytes handed out now.
  [[nodiscard]] std::uint64_t in_use() const noexcept { return in_use_; }
  /// @brief Restarts peak() from the bytes in use now.
  void reset_peak() noexcept { peak_ = in_use_; }
  /// @brief The wrapped pool.
  [[nodiscard]] Pool& inner() noexcept { return pool_; }
  /// @brief The wrapped pool.
  [[nodiscard]] Pool const& inner() const noexcept { return pool_; }

 private:
  std::uint64_t budget_;
  Pool pool_;
  bool enforce_{false};
  std::uint64_t in_use_{0};
  std::uint64_t peak_{0};
  std::uint64_t enforced_peak_{0};
  std::uint64_t refusals_{0};
};

}  // namespace train_cnn
