// An owning cudaMalloc allocation for the GPU tests (256-byte aligned, as every device codec's
// 16-byte requirement is met by it).
#pragma once

#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace stash::test {

/// @brief `bytes` of device memory (one byte for 0, so the pointer is never null), freed on
/// destruction.
class device_bytes {
 public:
  explicit device_bytes(std::size_t bytes) : bytes_(bytes)
  {
    STASH_CUDA_TRY(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes));
  }
  device_bytes(device_bytes const&)            = delete;
  device_bytes& operator=(device_bytes const&) = delete;
  ~device_bytes() { STASH_CUDA_CHECK_NOTHROW(cudaFree(ptr_)); }
  /// @brief The memory as `T*`.
  template <class T>
  T* as() const
  {
    return static_cast<T*>(ptr_);
  }
  /// @brief The size asked for.
  [[nodiscard]] std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

}  // namespace stash::test
