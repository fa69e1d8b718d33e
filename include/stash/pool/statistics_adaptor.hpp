/**
 * @file statistics_adaptor.hpp
 * @brief `stash::statistics_adaptor<Resource>`: adds stash's pool statistics to any stream-ordered
 * resource (a `cuda::mr` resource of either CCCL spelling, RMM's included), as RMM's
 * statistics_resource_adaptor does, so it can go where stash wants `pool_stats` (the conformance
 * kit, trace replay, benchmark reports).
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/misuse.hpp>
#include <stash/core/stream_ref.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_resource.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

namespace stash {

/// @brief Forwards every allocation to `Resource` and counts what it handed out.
///
/// What a resource does not say, the adaptor reports from what it saw: `reserved_bytes` is the
/// bytes in use (the adaptor cannot see the upstream), `largest_free_bytes` 0, `budget_bytes`
/// SIZE_MAX unless one is given, in which case allocations beyond it throw stash::out_of_memory
/// before reaching the resource. Freeing a pointer the adaptor did not hand out, or with another
/// size or alignment, never throws: it goes to the misuse handler and changes nothing. Not thread
/// safe.
/// @tparam Resource A stash::pool; kept by reference, it outlives the adaptor.
template <pool Resource>
class statistics_adaptor : public pool_resource<statistics_adaptor<Resource>> {
 public:
  /// @brief As the resource.
  static constexpr bool is_host_accessible = pool_is_host_accessible<Resource>();
  /// @brief As the resource.
  static constexpr bool is_device_accessible = pool_is_device_accessible<Resource>();
  STASH_POOL_PROPERTIES(statistics_adaptor, pool_is_device_accessible<Resource>(),
                        pool_is_host_accessible<Resource>())

  /// @brief Counts what `resource` hands out; refuses to go beyond `budget` bytes in use.
  /// @param resource The resource counted (outlives the adaptor).
  /// @param budget The most bytes in use at once.
  explicit statistics_adaptor(Resource& resource,
                              std::size_t budget = std::numeric_limits<std::size_t>::max())
      : resource_(&resource), budget_(budget)
  {
  }

  /// @brief Not copyable: a copy would count apart from the original (and could not free its
  /// blocks). Hand CCCL and RMM a stash::pool_ref to it.
  statistics_adaptor(statistics_adaptor const&)            = delete;
  statistics_adaptor& operator=(statistics_adaptor const&) = delete;

  /// @brief Allocates from the resource at `alignment` (nullptr for 0 bytes) and counts it.
  /// @param bytes Size.
  /// @param alignment Alignment.
  /// @param stream The stream.
  /// @return The memory, or nullptr for 0 bytes.
  /// @throws stash::out_of_memory As the resource's allocation.
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    if (bytes == 0) { return nullptr; }
    if (bytes > budget_ - in_use_) {
      throw out_of_memory("statistics_adaptor", bytes, budget_, in_use_, budget_ - in_use_);
    }
    live_.reserve(live_.size() + 1);  // the map cannot fail once the resource has given memory
    void* p = pool_allocate(*resource_, stream, bytes, alignment);
    live_.emplace(p, allocation{bytes, alignment});
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    ++allocations_;
    return p;
  }
  /// @brief Gives the memory back to the resource. Never throws: a pointer the adaptor did not
  /// hand out, another size or alignment goes to the misuse handler (core/misuse.hpp), the
  /// resource untouched.
  /// @param p Memory from this adaptor.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  /// @param stream The stream of its last use.
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, stream_ref stream) noexcept
  {
    if (p == nullptr && bytes == 0) { return; }
    auto it = live_.find(p);
    if (!detail::free_matches("statistics_adaptor", p, bytes, alignment,
                              it == live_.end() ? nullptr : &it->second, &allocation::bytes)) {
      return;
    }
    pool_deallocate(*resource_, stream, p, bytes, alignment);
    live_.erase(it);
    in_use_ -= bytes;
  }

  /// @brief The figures seen so far (see the class docs for what is inferred).
  /// @return The figures.
  [[nodiscard]] pool_stats stats() const
  {
    pool_stats s;
    s.in_use_bytes        = in_use_;
    s.peak_in_use_bytes   = peak_;
    s.reserved_bytes      = in_use_;
    s.peak_reserved_bytes = peak_;
    s.budget_bytes        = budget_;
    s.allocations         = allocations_;
    return s;
  }

  /// @brief The adapted resource.
  /// @return The resource.
  [[nodiscard]] Resource& upstream() const noexcept { return *resource_; }

 private:
  Resource* resource_;
  std::size_t budget_;
  struct allocation {
    std::size_t bytes;
    std::size_t alignment;
  };
  std::unordered_map<void*, allocation> live_;
  std::size_t in_use_{0};
  std::size_t peak_{0};
  std::uint64_t allocations_{0};
};

}  // namespace stash
