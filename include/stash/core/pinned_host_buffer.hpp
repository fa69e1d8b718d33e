/**
 * @file pinned_host_buffer.hpp
 * @brief An owning, move-only block of pinned (page-locked) host memory.
 */
#pragma once

#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace stash {

/// @brief Owns `size()` bytes from cudaHostAlloc; frees them on destruction (never throws).
class pinned_host_buffer {
 public:
  /// @brief An empty buffer.
  pinned_host_buffer() noexcept = default;

  /// @brief Pins `bytes` of host memory with cudaHostAlloc `flags`.
  /// @param bytes Size of the buffer.
  /// @param flags cudaHostAlloc flags (cudaHostAllocMapped for device-visible memory).
  /// @throws stash::cuda_error When cudaHostAlloc fails.
  explicit pinned_host_buffer(std::size_t bytes, unsigned int flags = cudaHostAllocDefault)
      : size_(bytes)
  {
    if (bytes > 0) { STASH_CUDA_TRY(cudaHostAlloc(&data_, bytes, flags)); }
  }

  pinned_host_buffer(pinned_host_buffer const&)            = delete;
  pinned_host_buffer& operator=(pinned_host_buffer const&) = delete;

  /// @brief Takes `other`'s memory; `other` becomes empty.
  /// @param other The buffer to take.
  pinned_host_buffer(pinned_host_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0))
  {
  }

  /// @brief Frees the held memory and takes `other`'s.
  /// @param other The buffer to take.
  /// @return This buffer.
  pinned_host_buffer& operator=(pinned_host_buffer&& other) noexcept
  {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  ~pinned_host_buffer() { reset(); }

  /// @brief Start of the buffer (nullptr when empty).
  /// @return The first byte, or nullptr.
  [[nodiscard]] void* data() noexcept { return data_; }
  /// @brief Start of the buffer (nullptr when empty).
  /// @return The first byte, or nullptr.
  [[nodiscard]] void const* data() const noexcept { return data_; }
  /// @brief Size in bytes.
  /// @return The size given at construction (0 when empty).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// @brief True when no memory is held.
  /// @return Whether the buffer holds nothing.
  [[nodiscard]] bool empty() const noexcept { return data_ == nullptr; }

 private:
  void reset() noexcept
  {
    if (data_ != nullptr) {
      STASH_CUDA_CHECK_NOTHROW(cudaFreeHost(data_));
      data_ = nullptr;
      size_ = 0;
    }
  }

  void* data_{nullptr};
  std::size_t size_{0};
};

}  // namespace stash
