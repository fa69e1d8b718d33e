/**
 * @file virtual_upstream.hpp
 * @brief An upstream that hands out addresses but no memory, to measure a pool's bookkeeping
 * (footprint, fragmentation) on traces far larger than the machine running the measurement.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace stash {

/// @brief Returns distinct, aligned addresses from a reserved virtual range that is never
/// touched; the memory must not be dereferenced. Counts bytes outstanding and their peak.
/// Copies share nothing; each compares equal only to itself.
class virtual_upstream {
 public:
  /// @brief The addresses are not backed: nobody may touch them.
  static constexpr bool is_device_accessible = false;
  /// @brief The addresses are not backed: nobody may touch them.
  static constexpr bool is_host_accessible = false;

  /// @brief The next address, bumped by `bytes` rounded to `alignment`.
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    STASH_EXPECTS(is_pow2(alignment), "virtual_upstream: alignment must be a power of two");
    next_           = align_up(next_, alignment);
    auto const addr = next_;
    next_ += std::max<std::uint64_t>(bytes, 1);
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return reinterpret_cast<void*>(addr);
  }

  /// @brief Forgets the block (addresses are never reused).
  void deallocate(void*, std::size_t bytes, std::size_t) noexcept { in_use_ -= bytes; }

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

  /// @brief Bytes outstanding.
  [[nodiscard]] std::size_t in_use_bytes() const noexcept { return in_use_; }
  /// @brief Most bytes outstanding at once.
  [[nodiscard]] std::size_t peak_bytes() const noexcept { return peak_; }

  /// @brief Identity.
  friend bool operator==(virtual_upstream const& a, virtual_upstream const& b) noexcept
  {
    return &a == &b;
  }

 private:
  std::uint64_t next_{std::uint64_t{1} << 44};  // far from anything real, never 0
  std::size_t in_use_{0};
  std::size_t peak_{0};
};

static_assert(upstream_resource<virtual_upstream>);

}  // namespace stash
