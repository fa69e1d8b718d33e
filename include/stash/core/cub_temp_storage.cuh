/**
 * @file cub_temp_storage.cuh
 * @brief The one wrapper of CUB's two-phase temporary-storage idiom: ask the algorithm how much
 * scratch it needs (null pointer call), then run it in scratch the caller provides. stash never
 * allocates inside an async call, so the scratch always comes from the caller.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace stash {

/// @brief Two-phase temp storage for a CUB device-wide algorithm wrapped in a callable
/// `cudaError_t alg(void* d_temp, std::size_t& temp_bytes)`.
struct cub_temp_storage {
  /// @brief Alignment of every sub-block carved out of a caller's scratch.
  static constexpr std::size_t alignment = 256;

  /// @brief Rounds up to `alignment`.
  /// @param bytes A size.
  /// @return `bytes` rounded up to a multiple of 256.
  [[nodiscard]] static constexpr std::size_t aligned(std::size_t bytes) noexcept
  {
    return (bytes + alignment - 1) & ~(alignment - 1);
  }

  /// @brief Phase one: the scratch bytes `alg` needs (0 and the error on failure).
  /// @tparam Algorithm A callable (void* scratch, std::size_t& bytes) -> cudaError_t, as CUB's
  ///   two-phase calls.
  /// @param alg The algorithm.
  /// @param bytes Receives the size.
  /// @return CUB's status.
  template <class Algorithm>
  [[nodiscard]] static cudaError_t query(Algorithm&& alg, std::size_t& bytes)
  {
    bytes = 0;
    return std::forward<Algorithm>(alg)(nullptr, bytes);
  }

  /// @brief Phase two: runs `alg` in `scratch`; cudaErrorInvalidValue when it is too small.
  /// @tparam Algorithm A callable (void* scratch, std::size_t& bytes) -> cudaError_t, as CUB's
  ///   two-phase calls.
  /// @param alg The algorithm.
  /// @param scratch Device memory for it.
  /// @param scratch_bytes Bytes at `scratch`.
  /// @return CUB's status, or cudaErrorInvalidValue for scratch too small or null.
  template <class Algorithm>
  [[nodiscard]] static cudaError_t run(Algorithm&& alg, void* scratch, std::size_t scratch_bytes)
  {
    std::size_t need    = 0;
    cudaError_t const q = alg(nullptr, need);
    if (q != cudaSuccess) { return q; }
    if (need > scratch_bytes || (need > 0 && scratch == nullptr)) { return cudaErrorInvalidValue; }
    return std::forward<Algorithm>(alg)(scratch, need);
  }
};

}  // namespace stash
