/**
 * @file limiting_upstream.hpp
 * @brief An adaptor that caps what an upstream may hand out, to emulate a smaller device.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/upstream_resource.hpp>

#include <algorithm>
#include <cstddef>
#include <utility>

namespace stash {

/// @brief Forwards to `Upstream` while the bytes outstanding stay within a budget; beyond it,
/// throws stash::out_of_memory with the budget and the bytes in use, and changes nothing.
///
/// Used to emulate a GPU with less memory than the one present, and in tests to make an upstream
/// fail on purpose. Not thread safe. Compares equal only to itself (its counters are its own).
/// @tparam Upstream The upstream whose allocations are limited.
template <upstream_resource Upstream>
class limiting_upstream {
 public:
  /// @brief Same accessibility as the wrapped upstream.
  static constexpr bool is_device_accessible = Upstream::is_device_accessible;
  /// @brief Same accessibility as the wrapped upstream.
  static constexpr bool is_host_accessible = Upstream::is_host_accessible;

  /// @brief Caps `upstream` at `budget_bytes` outstanding.
  explicit limiting_upstream(std::size_t budget_bytes, Upstream upstream = Upstream{})
      : upstream_(std::move(upstream)), budget_(budget_bytes)
  {
  }

  limiting_upstream(limiting_upstream const&)            = delete;
  limiting_upstream& operator=(limiting_upstream const&) = delete;
  /// @brief Moves the counters along with the upstream (a pool may own its upstream).
  limiting_upstream(limiting_upstream&&) noexcept = default;
  /// @brief Moves the counters along with the upstream.
  limiting_upstream& operator=(limiting_upstream&&) noexcept = default;

  /// @brief Allocates from the upstream if `bytes` fits in what is left of the budget.
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    if (bytes > budget_ - in_use_) {
      throw out_of_memory("limiting_upstream", bytes, budget_, in_use_, budget_ - in_use_);
    }
    void* p = upstream_.allocate(bytes, alignment);
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return p;
  }

  /// @brief Returns memory to the upstream and to the budget.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    upstream_.deallocate(p, bytes, alignment);
    in_use_ -= bytes;
  }

  /// @brief CCCL >= 3.1's name of allocate (cuda::mr::synchronous_resource).
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return allocate(bytes, alignment);
  }
  /// @brief CCCL >= 3.1's name of deallocate.
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate(p, bytes, alignment);
  }

  /// @brief The cap.
  [[nodiscard]] std::size_t budget_bytes() const noexcept { return budget_; }
  /// @brief Bytes outstanding now.
  [[nodiscard]] std::size_t in_use_bytes() const noexcept { return in_use_; }
  /// @brief Most bytes outstanding at any time.
  [[nodiscard]] std::size_t peak_bytes() const noexcept { return peak_; }
  /// @brief The wrapped upstream.
  [[nodiscard]] Upstream& upstream() noexcept { return upstream_; }

  /// @brief Identity: only this adaptor knows what it handed out.
  friend bool operator==(limiting_upstream const& a, limiting_upstream const& b) noexcept
  {
    return &a == &b;
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
  Upstream upstream_;
  std::size_t budget_;
  std::size_t in_use_{0};
  std::size_t peak_{0};
};

}  // namespace stash
