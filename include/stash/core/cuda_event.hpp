/**
 * @file cuda_event.hpp
 * @brief An owning, move-only CUDA event.
 */
#pragma once

#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>
#include <cuda/stream_ref>

#include <utility>

namespace stash {

/// @brief Owns a cudaEvent_t; destroys it on destruction (never throws).
class cuda_event {
 public:
  /// @brief Creates an event. Timing is off by default: such events are cheaper to record and
  /// wait on, which is what ordering between streams needs.
  /// @param flags cudaEventCreateWithFlags flags.
  /// @throws stash::cuda_error When the event cannot be created.
  explicit cuda_event(unsigned int flags = cudaEventDisableTiming)
  {
    STASH_CUDA_TRY(cudaEventCreateWithFlags(&event_, flags));
  }

  cuda_event(cuda_event const&)            = delete;
  cuda_event& operator=(cuda_event const&) = delete;

  /// @brief Takes the event from `other`, which becomes empty.
  /// @param other The event to take.
  cuda_event(cuda_event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

  /// @brief Destroys the held event and takes `other`'s.
  /// @param other The event to take.
  /// @return This event.
  cuda_event& operator=(cuda_event&& other) noexcept
  {
    if (this != &other) {
      reset();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }

  ~cuda_event() { reset(); }

  /// @brief The raw handle (nullptr once moved from).
  /// @return The event handle.
  [[nodiscard]] cudaEvent_t value() const noexcept { return event_; }
  /// @brief Implicit use wherever a cudaEvent_t is expected.
  operator cudaEvent_t() const noexcept { return event_; }  // NOLINT(google-explicit-constructor)

  /// @brief Records the event after the work queued so far on `stream`.
  /// @param stream Whose queued work the event marks.
  /// @throws stash::cuda_error When cudaEventRecord fails.
  void record(cuda::stream_ref stream) { STASH_CUDA_TRY(cudaEventRecord(event_, stream.get())); }

  /// @brief Makes `stream` wait for this event on the device; the host does not block.
  /// @param stream The stream that waits.
  /// @throws stash::cuda_error When cudaStreamWaitEvent fails.
  void wait_on(cuda::stream_ref stream) const
  {
    STASH_CUDA_TRY(cudaStreamWaitEvent(stream.get(), event_, 0));
  }

  /// @brief True when the recorded work has completed; throws on an error other than "not ready".
  /// @return Whether the marked work has completed.
  /// @throws stash::cuda_error For any status but success and cudaErrorNotReady.
  [[nodiscard]] bool ready() const
  {
    cudaError_t const status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) {
      detail::clear_last_error_if(status);  // an error the caller left pending stays
      return false;
    }
    STASH_CUDA_TRY(status);
    return true;
  }

  /// @brief Blocks the host until the recorded work has completed.
  void synchronize() const { STASH_CUDA_TRY(cudaEventSynchronize(event_)); }

 private:
  void reset() noexcept
  {
    if (event_ != nullptr) {
      STASH_CUDA_CHECK_NOTHROW(cudaEventDestroy(event_));
      event_ = nullptr;
    }
  }

  cudaEvent_t event_{nullptr};
};

}  // namespace stash
