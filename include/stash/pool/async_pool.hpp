/**
 * @file async_pool.hpp
 * @brief A pool over the CUDA driver's stream-ordered allocator (cudaMallocFromPoolAsync): the
 * third baseline stash's arena is compared against on a GPU.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/misuse.hpp>
#include <stash/core/units.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_resource.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <unordered_map>

namespace stash {

/// @brief Allocates from a private cudaMemPool_t of the current device, with a budget on the bytes
/// in use.
///
/// The private pool keeps freed memory (release threshold: unlimited) so it caches like the other
/// pools; the default driver pool would return it at every synchronisation (threshold 0). Reserved
/// figures come from the driver (cudaMemPoolAttrReservedMem*). Not thread safe.
class async_pool : public pool_resource<async_pool> {
 public:
  /// @brief Device memory: the host may not touch it.
  static constexpr bool is_host_accessible = false;
  /// @brief Device memory.
  static constexpr bool is_device_accessible = true;
#if defined(STASH_HAS_CUDA_MR)
  /// @brief Device code may touch the memory.
  friend void get_property(async_pool const&, cuda::mr::device_accessible) noexcept {}
#endif

  /// @brief A private pool on the current device; allocations beyond `budget` bytes in use throw.
  /// @param budget Cap on the bytes in use.
  /// @throws stash::cuda_error When the driver pool cannot be created.
  explicit async_pool(std::size_t budget = std::numeric_limits<std::size_t>::max())
      : budget_(budget)
  {
    STASH_CUDA_TRY(cudaGetDevice(&device_));
    cudaMemPoolProps props{};
    props.allocType     = cudaMemAllocationTypePinned;
    props.handleTypes   = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id   = device_;
    STASH_CUDA_TRY(cudaMemPoolCreate(&pool_, &props));
    std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
    cudaError_t const status =
        cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold);
    if (status != cudaSuccess) {
      STASH_CUDA_CHECK_NOTHROW(cudaMemPoolDestroy(pool_));
      STASH_CUDA_TRY(status);
    }
  }

  async_pool(async_pool const&)            = delete;
  async_pool& operator=(async_pool const&) = delete;

  /// @brief Waits for the pool's device, then destroys the driver pool (outstanding allocations
  /// are freed with it). The caller's current device is left as it was. Never throws.
  ~async_pool()
  {
    // The frees queued on the pool's streams run on the pool's device, which need not be the
    // current one when the pool dies (a multi-GPU caller switched devices since).
    int current = device_;
    STASH_CUDA_CHECK_NOTHROW(cudaGetDevice(&current));
    if (current != device_) { STASH_CUDA_CHECK_NOTHROW(cudaSetDevice(device_)); }
    STASH_CUDA_CHECK_NOTHROW(cudaDeviceSynchronize());
    STASH_CUDA_CHECK_NOTHROW(cudaMemPoolDestroy(pool_));
    if (current != device_) { STASH_CUDA_CHECK_NOTHROW(cudaSetDevice(current)); }
  }

  /// @brief The device the pool allocates on (current when the pool was built).
  /// @return The device ordinal.
  [[nodiscard]] int device() const noexcept { return device_; }

  /// @brief cudaMallocFromPoolAsync on `stream` (nullptr for 0 bytes); an alignment above the
  /// driver's 256 B is served from a block padded by the difference.
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096.
  /// @param stream The stream the memory is used on first.
  /// @return The memory, or nullptr for 0 bytes.
  /// @throws stash::out_of_memory Beyond the budget or when the driver has no memory.
  /// @throws stash::cuda_error For any other driver failure.
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    if (bytes == 0) { return nullptr; }
    std::size_t const pad =
        alignment > cuda_allocation_alignment ? alignment - cuda_allocation_alignment : 0;
    if (bytes > budget_ - in_use_ || pad > budget_ - in_use_ - bytes) { throw_oom(bytes); }
    sizes_.reserve(sizes_.size() + 1);  // nothing can fail once the driver has given memory
    void* raw                = nullptr;
    cudaError_t const status = cudaMallocFromPoolAsync(&raw, bytes + pad, pool_, stream.get());
    if (status == cudaErrorMemoryAllocation) {
      detail::clear_last_error_if(status);
      throw_oom(bytes);
    }
    STASH_CUDA_TRY(status);
    void* p = reinterpret_cast<void*>(align_up(reinterpret_cast<std::uintptr_t>(raw), alignment));
    sizes_.emplace(p, allocation{raw, bytes, alignment});
    in_use_ += bytes + pad;
    peak_in_use_ = std::max(peak_in_use_, in_use_);
    ++allocations_;
    return p;
  }

  /// @brief cudaFreeAsync on `stream`. Never throws: a pointer not from this pool, another size
  /// or alignment goes to the misuse handler (core/misuse.hpp) and changes nothing; a failing
  /// cudaFreeAsync is reported on stderr.
  /// @param p Memory from this pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  /// @param stream The stream of its last use.
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, stream_ref stream) noexcept
  {
    if (p == nullptr && bytes == 0) { return; }
    auto it = sizes_.find(p);
    if (!detail::free_matches("async_pool", p, bytes, alignment,
                              it == sizes_.end() ? nullptr : &it->second, &allocation::bytes)) {
      return;
    }
    cudaStream_t cuda_stream = nullptr;
    try {
      cuda_stream = stream.get();
    } catch (std::exception const&) {  // a host stream: the free is ordered on the default one
    }
    STASH_CUDA_CHECK_NOTHROW(cudaFreeAsync(it->second.raw, cuda_stream));
    std::size_t const pad =
        alignment > cuda_allocation_alignment ? alignment - cuda_allocation_alignment : 0;
    sizes_.erase(it);
    in_use_ -= bytes + pad;
  }

  /// @brief Current figures; reserved ones as the driver reports them.
  /// @return The figures.
  [[nodiscard]] pool_stats stats() const
  {
    pool_stats s;
    s.in_use_bytes        = in_use_;
    s.peak_in_use_bytes   = peak_in_use_;
    s.reserved_bytes      = attribute(cudaMemPoolAttrReservedMemCurrent);
    s.peak_reserved_bytes = attribute(cudaMemPoolAttrReservedMemHigh);
    s.largest_free_bytes  = largest_free();
    s.budget_bytes        = budget_;
    s.allocations         = allocations_;
    return s;
  }

  /// @brief The driver pool.
  /// @return The cudaMemPool_t.
  [[nodiscard]] cudaMemPool_t handle() const noexcept { return pool_; }

 private:
  [[nodiscard]] std::size_t attribute(cudaMemPoolAttr attr) const
  {
    std::uint64_t value = 0;
    STASH_CUDA_TRY(cudaMemPoolGetAttribute(pool_, attr, &value));
    return static_cast<std::size_t>(value);
  }

  // The driver does not say how its reserve is fragmented: report an upper bound.
  [[nodiscard]] std::size_t largest_free() const
  {
    std::size_t const reserved = attribute(cudaMemPoolAttrReservedMemCurrent);
    std::size_t const used     = attribute(cudaMemPoolAttrUsedMemCurrent);
    return std::min(reserved > used ? reserved - used : 0, budget_ - in_use_);
  }

  [[noreturn]] void throw_oom(std::size_t bytes) const
  {
    bool const has_budget = budget_ != std::numeric_limits<std::size_t>::max();
    throw out_of_memory("async_pool", bytes,
                        has_budget ? std::optional<std::size_t>(budget_) : std::nullopt, in_use_,
                        largest_free());
  }

  int device_{0};
  cudaMemPool_t pool_{};
  std::size_t budget_;
  std::size_t in_use_{0};
  std::size_t peak_in_use_{0};
  std::uint64_t allocations_{0};
  struct allocation {
    void* raw;  // as the driver gave it
    std::size_t bytes;
    std::size_t alignment;
  };
  std::unordered_map<void*, allocation> sizes_;
};

static_assert(pool<async_pool>);

}  // namespace stash
