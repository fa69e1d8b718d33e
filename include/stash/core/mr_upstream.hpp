/**
 * @file mr_upstream.hpp
 * @brief `stash::mr_upstream<Resource>`: any synchronous `cuda::mr` resource, in either CCCL
 * spelling (RMM's included), as a stash upstream.
 *
 * Pools ask an upstream where its memory lives through static members (is_host_accessible,
 * is_device_accessible); `cuda::mr` resources say it with properties. The adaptor reads the
 * properties at compile time, calls whichever spelling the resource has, forwards its properties
 * (so it is itself a `cuda::mr` resource with the same ones) and turns a foreign resource's failure
 * into stash's typed errors, which pools rely on (caching_pool trims and retries on
 * stash::out_of_memory only).
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <utility>

namespace stash {
namespace detail {

// CCCL >= 3.1 / RMM 26: allocate_sync(bytes, alignment).
template <class R>
concept sync_named_resource = requires(R& r, void* p, std::size_t n, std::size_t a)
{
  {
    r.allocate_sync(n, a)
    } -> std::same_as<void*>;
  r.deallocate_sync(p, n, a);
};

// The CUDA 13.0 toolkit's CCCL 3.0: allocate(bytes, alignment).
template <class R>
concept plain_named_resource = requires(R& r, void* p, std::size_t n, std::size_t a)
{
  {
    r.allocate(n, a)
    } -> std::same_as<void*>;
  r.deallocate(p, n, a);
};

// Why this exists: a foreign resource reports failure in its own types (RMM: rmm::bad_alloc for
// any failed allocation, even a missing driver). Called inside a catch block; rethrows stash's own
// errors unchanged. A device-accessible resource that failed while the CUDA runtime has no usable
// device failed for that reason: a stash::cuda_error with the runtime's code, not an exhaustion.
// Any other std::bad_alloc is an exhaustion (stash::out_of_memory, the resource's message kept);
// other exceptions are already typed by their library and pass through.
[[noreturn]] inline void rethrow_as_stash_error(std::size_t bytes, bool needs_device)
{
  try {
    throw;
  } catch (stash::out_of_memory const&) {
    throw;
  } catch (stash::cuda_error const&) {
    throw;
  } catch (stash::logic_error const&) {
    throw;
  } catch (std::exception const& e) {
    if (needs_device) {
      int count          = 0;
      cudaError_t status = cudaGetDeviceCount(&count);
      if (status == cudaSuccess && count == 0) { status = cudaErrorNoDevice; }
      if (status != cudaSuccess) {
        std::string const expression =
            std::string("cudaGetDeviceCount (after the adapted resource failed: ") + e.what() + ")";
        throw_cuda_error(status, __FILE__, __LINE__, expression.c_str());
      }
    }
    if (dynamic_cast<std::bad_alloc const*>(&e) == nullptr) { throw; }
    throw out_of_memory(std::string("mr_upstream (") + e.what() + ")", bytes, std::nullopt,
                        std::nullopt);
  }
}

}  // namespace detail

/// @brief A synchronous `cuda::mr` resource in either spelling: `allocate_sync` /
/// `deallocate_sync` (CCCL >= 3.1, RMM 26) or `allocate` / `deallocate` (CCCL 3.0), and equality.
/// @tparam R The type checked.
template <class R>
concept synchronous_mr_resource = std::equality_comparable<R> &&
    (detail::sync_named_resource<R> || detail::plain_named_resource<R>);

/// @brief Any synchronous `cuda::mr` resource as a stash upstream.
///
/// Accessibility comes from the resource's `cuda::mr::host_accessible` / `device_accessible`
/// properties (neither: the memory is touched by nobody stash knows of). Failures become stash's
/// errors: std::bad_alloc becomes stash::out_of_memory, and any failure of a device-accessible
/// resource while no CUDA device is usable becomes stash::cuda_error with the runtime's code.
/// `Resource` is held by value (RMM's resources and adaptors are cheap copies that share their
/// state) or, as `mr_upstream<R&>`, by reference: the way to adapt a resource that cannot be
/// copied (CCCL 3.5's type-erased resource references require copyable resources), which must
/// then outlive the adaptor.
/// `deallocate` is noexcept: a resource whose deallocation throws terminates the program.
/// @tparam Resource The adapted resource type, or a reference to it.
template <synchronous_mr_resource Resource>
class mr_upstream
#if defined(STASH_HAS_CUDA_MR)
    : public cuda::forward_property<mr_upstream<Resource>, Resource>
#endif
{
 public:
  /// @brief The adapted resource type.
  using resource_type = Resource;
  /// @brief Whether the resource declares `cuda::mr::host_accessible`.
  static constexpr bool is_host_accessible = declares_host_accessible<Resource>();
  /// @brief Whether the resource declares `cuda::mr::device_accessible`.
  static constexpr bool is_device_accessible = declares_device_accessible<Resource>();

  /// @brief A default-constructed resource.
  mr_upstream() requires std::default_initializable<Resource>
  = default;
  /// @brief Adapts `resource`.
  /// @param resource The resource, moved in (or referred to, for `mr_upstream<R&>`).
  explicit mr_upstream(Resource resource) : resource_(std::forward<Resource>(resource)) {}

  /// @brief `bytes` aligned to `alignment` from the resource; throws stash's errors (class docs).
  /// @param bytes Size.
  /// @param alignment A power of two the resource supports.
  /// @return The memory.
  void* allocate(std::size_t bytes, std::size_t alignment = cuda_allocation_alignment)
  {
    try {
      if constexpr (detail::sync_named_resource<Resource>) {
        return resource_.allocate_sync(bytes, alignment);
      } else {
        return resource_.allocate(bytes, alignment);
      }
    } catch (...) {
      detail::rethrow_as_stash_error(bytes, is_device_accessible);
    }
  }

  /// @brief Gives the resource back `p` with the size and alignment it was allocated with.
  /// @param p What allocate returned.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate(void* p, std::size_t bytes,
                  std::size_t alignment = cuda_allocation_alignment) noexcept
  {
    if constexpr (detail::sync_named_resource<Resource>) {
      resource_.deallocate_sync(p, bytes, alignment);
    } else {
      resource_.deallocate(p, bytes, alignment);
    }
  }

  /// @brief CCCL >= 3.1's name of allocate.
  /// @param bytes Size.
  /// @param alignment Alignment.
  /// @return The memory.
  void* allocate_sync(std::size_t bytes, std::size_t alignment = cuda_allocation_alignment)
  {
    return allocate(bytes, alignment);
  }
  /// @brief CCCL >= 3.1's name of deallocate.
  /// @param p What allocate returned.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  void deallocate_sync(void* p, std::size_t bytes,
                       std::size_t alignment = cuda_allocation_alignment) noexcept
  {
    deallocate(p, bytes, alignment);
  }

  /// @brief The adapted resource (cuda::forward_property reads stateful properties through it).
  /// @return The resource.
  [[nodiscard]] Resource const& upstream_resource() const noexcept { return resource_; }
  /// @brief The adapted resource.
  /// @return The resource.
  [[nodiscard]] Resource& upstream_resource() noexcept { return resource_; }

  /// @brief Equal when the adapted resources are (memory from one may be freed by the other).
  friend bool operator==(mr_upstream const& a, mr_upstream const& b)
  {
    return a.resource_ == b.resource_;
  }

 private:
  Resource resource_;
};

}  // namespace stash
