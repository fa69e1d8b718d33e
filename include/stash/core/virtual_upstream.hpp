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
#include <memory>
#include <optional>

namespace stash {

/// @brief Returns distinct, aligned addresses from a reserved virtual range that is never
/// touched; the memory must not be dereferenced. Counts bytes outstanding and their peak.
/// A cheap handle: copies share the range and the counters and compare equal (a lifetime_arena
/// hands one copy to its fallback pool, and the two must never give out the same address).
class virtual_upstream {
 public:
  /// @brief The addresses are not backed: nobody may touch them.
  static constexpr bool is_device_accessible = false;
  /// @brief The addresses are not backed: nobody may touch them.
  static constexpr bool is_host_accessible = false;

  /// @brief The next address, bumped by `bytes` rounded to `alignment`.
  /// @param bytes Size.
  /// @param alignment A power of two.
  /// @return An address nobody may touch.
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    STASH_EXPECTS(is_pow2(alignment), "virtual_upstream: alignment must be a power of two");
    state& s        = *state_;
    auto const next = checked_align_up(s.next, alignment);
    if (!next || bytes > (std::uint64_t{1} << 62) - *next) {
      throw out_of_memory("virtual_upstream", bytes, std::nullopt, s.in_use);
    }
    s.next          = *next;
    auto const addr = s.next;
    s.next += std::max<std::uint64_t>(bytes, 1);
    s.in_use += bytes;
    s.peak = std::max(s.peak, s.in_use);
    return reinterpret_cast<void*>(addr);
  }

  /// @brief Forgets the block (addresses are never reused).
  /// @param bytes Its size.
  void deallocate(void*, std::size_t bytes, std::size_t) noexcept
  {
    state_->in_use -= std::min(bytes, state_->in_use);
  }

  /// @brief CCCL >= 3.1's name of allocate (cuda::mr::synchronous_resource).
  /// @param bytes Size.
  /// @param alignment Alignment.
  /// @return An address nobody may touch.
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

  /// @brief Bytes outstanding (over every copy).
  /// @return The bytes allocated and not yet freed.
  [[nodiscard]] std::size_t in_use_bytes() const noexcept { return state_->in_use; }
  /// @brief Most bytes outstanding at once.
  /// @return The peak of in_use_bytes().
  [[nodiscard]] std::size_t peak_bytes() const noexcept { return state_->peak; }

  /// @brief Copies of one virtual_upstream compare equal.
  friend bool operator==(virtual_upstream const& a, virtual_upstream const& b) noexcept
  {
    return a.state_ == b.state_;
  }

 private:
  struct state {
    std::uint64_t next{std::uint64_t{1} << 44};  // far from anything real, never 0
    std::size_t in_use{0};
    std::size_t peak{0};
  };
  std::shared_ptr<state> state_ = std::make_shared<state>();
};

static_assert(upstream_resource<virtual_upstream>);

}  // namespace stash
