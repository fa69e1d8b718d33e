// train_cnn's CPU network without stash: every tensor a plain aligned heap allocation, op() its
// pointers. The benchmark's baseline (what the run costs without stash), with host_memory's
// interface so the same cnn<Mem, Ops> runs over either.
#pragma once

#include <stash_tools/train_cnn/memory_report.hpp>
#include <stash_tools/train_cnn/tensor_data.hpp>

#include <stash/sim/schedule.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <span>
#include <string>
#include <vector>

namespace train_cnn {

/// @brief Tensors as std::aligned_alloc'd buffers; no recording, no plan, nothing moves.
class plain_memory {
 public:
  using id = std::uint64_t;

  plain_memory()                               = default;
  plain_memory(plain_memory const&)            = delete;
  plain_memory& operator=(plain_memory const&) = delete;
  ~plain_memory()
  {
    for (void* p : buffers_) { std::free(p); }
  }

  /// @brief A buffer of `bytes` (rounded up to 64), 64-byte aligned.
  id allocate(std::size_t bytes, stash::storage_kind /*kind*/, std::string const& /*label*/,
              tensor_data const& /*data*/ = {})
  {
    std::size_t const size = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
    void* p                = std::aligned_alloc(64, size);
    if (p == nullptr) { throw std::bad_alloc(); }
    buffers_.push_back(p);
    in_use_ += size;
    sizes_.push_back(size);
    peak_ = std::max(peak_, in_use_);
    return buffers_.size() - 1;
  }
  /// @brief The buffers of `reads` then `writes`; nothing is ever re-run, so a kernel given
  /// for that is ignored.
  template <class... Kernel>
  std::vector<void*> op(std::string const& /*name*/, std::span<id const> reads,
                        std::span<id const> writes, Kernel const&... /*rerun*/) const
  {
    static_assert(sizeof...(Kernel) <= 1, "plain_memory::op: at most one kernel");
    std::vector<void*> p;
    p.reserve(reads.size() + writes.size());
    for (id t : reads) { p.push_back(buffers_[t]); }
    for (id t : writes) { p.push_back(buffers_[t]); }
    return p;
  }
  /// @brief Frees the buffer.
  void deallocate(id t)
  {
    std::free(buffers_[t]);
    buffers_[t] = nullptr;
    in_use_ -= sizes_[t];
  }
  void begin_iteration() {}
  void end_iteration() {}
  void phase(stash::phase /*p*/) {}
  void synchronize() {}
  /// @brief Only the peak is known.
  [[nodiscard]] memory_report report() const
  {
    memory_report r;
    r.peak_in_use = peak_;
    return r;
  }
  void reset_peak() { peak_ = in_use_; }
  /// @brief No plan.
  [[nodiscard]] stash::schedule const& schedule() const { return schedule_; }
  /// @brief Nothing recorded.
  [[nodiscard]] stash::trace const* recorded_trace() const { return nullptr; }

 private:
  std::vector<void*> buffers_;
  std::vector<std::size_t> sizes_;
  std::uint64_t in_use_{0};
  std::uint64_t peak_{0};
  stash::schedule schedule_{};
};

}  // namespace train_cnn
