/**
 * @file limiting_upstream.hpp
 * @brief An adaptor that caps what an upstream may hand out, to emulate a smaller device.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/upstream_resource.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>

namespace stash {

/// @brief Forwards to `Upstream` while the bytes outstanding stay within a budget; beyond it,
/// throws stash::out_of_memory with the budget and the bytes in use, and changes nothing.
///
/// Used to emulate a GPU with less memory than the one present, and in tests to make an upstream
/// fail on purpose. A cheap handle: copies share the budget, the counters and the wrapped
/// upstream, and compare equal (memory from one may be freed through another), so it goes where
/// CCCL 3.5 and RMM take a resource by value (`rmm::host_resource_ref`,
/// `cuda::mr::any_synchronous_resource`) without a copy counting apart. Not thread safe.
/// @tparam Upstream The upstream whose allocations are limited.
template <upstream_resource Upstream>
class limiting_upstream {
 public:
  /// @brief Same accessibility as the wrapped upstream.
  static constexpr bool is_device_accessible = Upstream::is_device_accessible;
  /// @brief Same accessibility as the wrapped upstream.
  static constexpr bool is_host_accessible = Upstream::is_host_accessible;

  /// @brief Caps `upstream` at `budget_bytes` outstanding.
  /// @param budget_bytes The cap.
  /// @param upstream The upstream limited (moved into the shared state).
  explicit limiting_upstream(std::size_t budget_bytes, Upstream upstream = Upstream{})
      : state_(std::make_shared<state>(std::move(upstream), budget_bytes))
  {
  }

  /// @brief Allocates from the upstream if `bytes` fits in what is left of the budget.
  /// @param bytes Size.
  /// @param alignment A power of two the upstream supports.
  /// @return The memory.
  /// @throws stash::out_of_memory beyond the budget (or from the upstream).
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    state& s = *state_;
    if (bytes > s.budget - s.in_use) {
      throw out_of_memory("limiting_upstream", bytes, s.budget, s.in_use, s.budget - s.in_use);
    }
    void* p = s.upstream.allocate(bytes, alignment);
    s.in_use += bytes;
    s.peak = std::max(s.peak, s.in_use);
    return p;
  }

  /// @brief Returns memory to the upstream and to the budget.
  /// @param p What allocate returned.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    state& s = *state_;
    s.upstream.deallocate(p, bytes, alignment);
    s.in_use -= std::min(bytes, s.in_use);
  }

  /// @brief CCCL >= 3.1's name of allocate (cuda::mr::synchronous_resource).
  /// @param bytes Size.
  /// @param alignment Alignment.
  /// @return The memory.
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return allocate(bytes, alignment);
  }
  /// @brief CCCL >= 3.1's name of deallocate.
  /// @param p What allocate returned.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate(p, bytes, alignment);
  }

  /// @brief The cap.
  /// @return The budget given at construction.
  [[nodiscard]] std::size_t budget_bytes() const noexcept { return state_->budget; }
  /// @brief Bytes outstanding now (over every copy).
  /// @return The bytes allocated and not yet freed.
  [[nodiscard]] std::size_t in_use_bytes() const noexcept { return state_->in_use; }
  /// @brief Most bytes outstanding at any time.
  /// @return The peak of in_use_bytes().
  [[nodiscard]] std::size_t peak_bytes() const noexcept { return state_->peak; }
  /// @brief The wrapped upstream (shared by every copy).
  /// @return The wrapped upstream.
  [[nodiscard]] Upstream& upstream() const noexcept { return state_->upstream; }

  /// @brief Copies of one limiting_upstream (they share the counters) compare equal.
  friend bool operator==(limiting_upstream const& a, limiting_upstream const& b) noexcept
  {
    return a.state_ == b.state_;
  }

#if defined(STASH_HAS_CUDA_MR)
  /// @brief cuda::mr property: as the wrapped upstream.
  friend void get_property(limiting_upstream const&,
                           cuda::mr::host_accessible) noexcept requires Upstream::is_host_accessible
  {
  }
  /// @brief cuda::mr property: as the wrapped upstream.
  friend void get_property(limiting_upstream const&, cuda::mr::device_accessible) noexcept requires
      Upstream::is_device_accessible
  {
  }
#endif

 private:
  struct state {
    state(Upstream u, std::size_t b) : upstream(std::move(u)), budget(b) {}
    Upstream upstream;
    std::size_t budget;
    std::size_t in_use{0};
    std::size_t peak{0};
  };
  std::shared_ptr<state> state_;
};

}  // namespace stash
