/**
 * @file cuda_stream.hpp
 * @brief An owning, move-only CUDA stream.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/stream_ref.hpp>

#include <cuda_runtime_api.h>

#include <utility>

namespace stash {

/// @brief Owns a cudaStream_t; destroys it on destruction (never throws).
class cuda_stream {
 public:
  /// @brief Creates a non-blocking stream (it does not synchronise with the legacy default stream).
  /// @param priority stream priority; lower numbers are higher priority (see
  ///        cudaDeviceGetStreamPriorityRange). 0 is the default priority.
  /// @param flags cudaStreamCreateWithPriority flags (default: cudaStreamNonBlocking).
  explicit cuda_stream(int priority = 0, unsigned int flags = cudaStreamNonBlocking)
  {
    STASH_CUDA_TRY(cudaStreamCreateWithPriority(&stream_, flags, priority));
  }

  cuda_stream(cuda_stream const&)            = delete;
  cuda_stream& operator=(cuda_stream const&) = delete;

  /// @brief Takes the stream from `other`, which becomes empty.
  /// @param other The stream to take.
  cuda_stream(cuda_stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

  /// @brief Destroys the held stream and takes `other`'s.
  /// @param other The stream to take.
  /// @return This stream.
  cuda_stream& operator=(cuda_stream&& other) noexcept
  {
    if (this != &other) {
      reset();
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }

  ~cuda_stream() { reset(); }

  /// @brief The raw handle (nullptr once moved from).
  /// @return The stream handle.
  [[nodiscard]] cudaStream_t value() const noexcept { return stream_; }
  /// @brief Implicit use wherever a cudaStream_t is expected.
  operator cudaStream_t() const noexcept { return stream_; }  // NOLINT(google-explicit-constructor)
  /// @brief Implicit use wherever a cuda::stream_ref is expected (CCCL, RMM, stash's codecs).
  operator cuda::stream_ref() const noexcept  // NOLINT(*-explicit-*)
  {
    return cuda::stream_ref{stream_};
  }
  /// @brief Implicit use wherever a stash::stream_ref is expected (pools, stream orders).
  operator stream_ref() const noexcept { return stream_ref{stream_}; }  // NOLINT(*-explicit-*)

  /// @brief Blocks the host until all work queued on the stream has finished.
  void synchronize() const { STASH_CUDA_TRY(cudaStreamSynchronize(stream_)); }

  /// @brief True when all queued work has finished; throws on an error other than "not ready".
  /// @return Whether the stream has no unfinished work.
  /// @throws stash::cuda_error For any status but success and cudaErrorNotReady.
  [[nodiscard]] bool is_idle() const
  {
    cudaError_t const status = cudaStreamQuery(stream_);
    if (status == cudaErrorNotReady) {
      detail::clear_last_error_if(status);  // an error the caller left pending stays
      return false;
    }
    STASH_CUDA_TRY(status);
    return true;
  }

 private:
  void reset() noexcept
  {
    if (stream_ != nullptr) {
      STASH_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_));
      stream_ = nullptr;
    }
  }

  cudaStream_t stream_{nullptr};
};

}  // namespace stash
