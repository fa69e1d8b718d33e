/**
 * @file upstream_resource.hpp
 * @brief The concept every upstream memory source models, its customization points, and which
 * `cuda::mr` spelling the CCCL in use has.
 *
 * An upstream is where pools get their big blocks: device memory (cudaMalloc), pinned host memory
 * (cudaHostAlloc) or plain host memory (so pools and planners run on a CPU). Its shape is the one
 * of libcu++'s synchronous `cuda::mr` resources, so an upstream also plugs into code written
 * against CCCL or RMM resources, and `stash::mr_upstream` (mr_upstream.hpp) makes any such
 * resource, RMM's included, a stash upstream.
 *
 * Customization points of an upstream `R`:
 * - `void* allocate(std::size_t bytes, std::size_t alignment)`: returns memory or throws
 *   `stash::out_of_memory` (exhaustion) / `stash::cuda_error` (any other failure). Never returns
 *   nullptr for bytes > 0.
 * - `void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept`: gives back what
 *   `allocate` returned, with the same size and alignment.
 * - `operator==`: two upstreams compare equal when memory from one may be freed by the other.
 * - `static constexpr bool is_device_accessible`, `is_host_accessible`: where the memory can be
 *   dereferenced (host tests need the latter to touch pool memory).
 * stash's upstreams also have `allocate_sync` / `deallocate_sync` (the same calls under CCCL >=
 * 3.1's names) and, where the CCCL has them, the `cuda::mr` accessibility properties.
 *
 * The two spellings of `cuda::mr`: the CUDA 13.0 toolkit's CCCL (3.0) calls a synchronous
 * resource `cuda::mr::resource` (allocate / deallocate) and gates it behind
 * LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE, which the `stash::stash` target defines; CCCL >=
 * 3.1 (RMM 26 ships 3.5) calls it `cuda::mr::synchronous_resource` (allocate_sync /
 * deallocate_sync), keeps `cuda::mr::resource` for stream-ordered ones and needs no macro.
 * `stash::cuda_mr_synchronous_resource` names the synchronous concept in either.
 */
#pragma once

#include <concepts>
#include <cstddef>

#if __has_include(<cuda/version>)
#include <cuda/version>
#endif

// CCCL 3.5 (checked) no longer gates cuda::mr; 3.1 to 3.4 may, and the stash target's macro
// covers them.
#if defined(LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE) || \
    (defined(CCCL_VERSION) && CCCL_VERSION >= 3005000)
#include <cuda/memory_resource>
/// @brief Defined when stash's upstreams and pools also model libcu++'s cuda::mr concepts.
#define STASH_HAS_CUDA_MR 1
#if defined(CCCL_VERSION) && CCCL_VERSION >= 3001000
/// @brief Defined when the CCCL in use spells a synchronous resource `allocate_sync` (>= 3.1).
#define STASH_CUDA_MR_SYNC_NAMES 1
#endif
#endif

namespace stash {

/// @brief A source of raw memory blocks, shaped like a synchronous `cuda::mr` resource (see file
/// docs).
/// @tparam R The type checked.
template <class R>
concept upstream_resource = std::equality_comparable<R> &&
    requires(R& r, void* p, std::size_t bytes, std::size_t alignment)
{
  {
    r.allocate(bytes, alignment)
    } -> std::same_as<void*>;
  {
    r.deallocate(p, bytes, alignment)
  }
  noexcept;
  {
    R::is_device_accessible
    } -> std::convertible_to<bool>;
  {
    R::is_host_accessible
    } -> std::convertible_to<bool>;
};

#if defined(STASH_HAS_CUDA_MR)
/// @brief libcu++'s synchronous resource concept as the CCCL in use spells it
/// (`cuda::mr::synchronous_resource` from 3.1 on, `cuda::mr::resource` before).
/// @tparam R The type checked.
template <class R>
concept cuda_mr_synchronous_resource =
#if defined(STASH_CUDA_MR_SYNC_NAMES)
    cuda::mr::synchronous_resource<R>;
#else
    cuda::mr::resource<R>;
#endif

/// @brief cuda_mr_synchronous_resource with every one of `Properties` (e.g.
/// `cuda::mr::host_accessible`).
/// @tparam R The type checked.
/// @tparam Properties The cuda::mr properties it must have.
template <class R, class... Properties>
concept cuda_mr_synchronous_resource_with =
#if defined(STASH_CUDA_MR_SYNC_NAMES)
    cuda::mr::synchronous_resource_with<R, Properties...>;
#else
    cuda::mr::resource_with<R, Properties...>;
#endif
#endif

/// @brief Whether `R` declares `cuda::mr::host_accessible` (false where the CCCL has no cuda::mr).
/// @tparam R A resource, upstream or pool.
/// @return Whether the property is declared.
template <class R>
[[nodiscard]] constexpr bool declares_host_accessible() noexcept
{
#if defined(STASH_HAS_CUDA_MR)
  return cuda::has_property<R, cuda::mr::host_accessible>;
#else
  return false;
#endif
}

/// @brief Whether `R` declares `cuda::mr::device_accessible` (false where the CCCL has no
/// cuda::mr).
/// @tparam R A resource, upstream or pool.
/// @return Whether the property is declared.
template <class R>
[[nodiscard]] constexpr bool declares_device_accessible() noexcept
{
#if defined(STASH_HAS_CUDA_MR)
  return cuda::has_property<R, cuda::mr::device_accessible>;
#else
  return false;
#endif
}

}  // namespace stash
