/**
 * @file upstream_resource.hpp
 * @brief The concept every upstream memory source models, and its customization points.
 *
 * An upstream is where pools get their big blocks: device memory (cudaMalloc), pinned host memory
 * (cudaHostAlloc) or plain host memory (so pools and planners run on a CPU). Its shape is the one
 * of libcu++'s `cuda::mr::resource`, so an upstream also plugs into code written against CCCL or
 * RMM resources; where the toolkit's CCCL offers those concepts (the `stash::stash` target turns
 * them on), each upstream also declares its `cuda::mr` accessibility properties.
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
 */
#pragma once

#include <concepts>
#include <cstddef>

#if defined(LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE)
#include <cuda/memory_resource>
/// @brief Defined when stash's upstreams also model libcu++'s cuda::mr resource concepts.
#define STASH_HAS_CUDA_MR 1
#endif

namespace stash {

/// @brief A source of raw memory blocks, shaped like `cuda::mr::resource` (see file docs).
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

}  // namespace stash
