/**
 * @file cuda_backend.hpp
 * @brief The offload backend of CUDA streams, events and cudaMemcpyAsync.
 */
#pragma once

#include <stash/core/cuda_stream.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/offload_backend.hpp>
#include <stash/pool/stream_order.hpp>

#include <cuda_runtime_api.h>
#include <cuda/stream_ref>

#include <cstddef>
#include <deque>

namespace stash {

/// @brief CUDA streams and events; copies are cudaMemcpyAsync (pinned host memory makes them
/// asynchronous and lets them run on the copy engines).
class cuda_backend {
 public:
  /// @brief A CUDA stream, by reference (owned by the backend when it created it).
  using stream = cuda::stream_ref;
  /// @brief A timing-free CUDA event.
  using event = cudaEvent_t;
  /// @brief Pools order cross-stream reuse with CUDA events.
  using stream_order = cuda_event_order;

  /// @brief A backend on the current device.
  cuda_backend()                               = default;
  cuda_backend(cuda_backend const&)            = delete;
  cuda_backend& operator=(cuda_backend const&) = delete;

  /// @brief A non-blocking stream with `priority`, clamped to the device's range.
  /// @param priority Lower is more urgent (CUDA stream priorities).
  /// @return A stream the backend owns.
  stream create_stream(int priority = 0)
  {
    int least = 0, greatest = 0;
    STASH_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    int const p = priority < greatest ? greatest : (priority > least ? least : priority);
    streams_.emplace_back(p);
    return cuda::stream_ref{streams_.back().value()};
  }
  /// @brief Records a new event on `s` (the same events pools order their reuse with).
  /// @param s The stream.
  /// @return An event that completes with the work queued on `s` so far.
  event record(stream s) { return events_.record(s); }
  /// @brief cudaStreamWaitEvent: device-side ordering, no host block.
  /// @param s The stream.
  /// @param e The event.
  void wait(stream s, event e)
  {
    if (e != nullptr) { STASH_CUDA_TRY(cudaStreamWaitEvent(s.get(), e, 0)); }
  }
  /// @brief cudaEventQuery, without blocking; legal beside a capture. Never called for an event
  /// recorded while capturing (see offload_backend.hpp).
  /// @param e The event.
  /// @return Whether `e` completed.
  bool query(event e) { return events_.passed(e); }
  /// @brief cudaEventSynchronize.
  /// @param e The event.
  void synchronize(event e)
  {
    if (e != nullptr) { STASH_CUDA_TRY(cudaEventSynchronize(e)); }
  }
  /// @brief cudaStreamSynchronize.
  /// @param s The stream.
  void synchronize(stream s) { STASH_CUDA_TRY(cudaStreamSynchronize(s.get())); }
  /// @brief cudaStreamIsCapturing: whether `s` is part of a CUDA graph capture.
  /// @param s The stream.
  /// @return Whether `s` is being captured into a CUDA graph.
  bool capturing(stream s) { return events_.capturing(s); }
  /// @brief cudaEventDestroy (safe while the event is pending: the runtime defers it).
  /// @param e The event.
  void release(event& e) noexcept { events_.release(e); }
  /// @brief cudaMemcpyAsync with direction inferred from the pointers (unified addressing).
  /// @param dst Destination.
  /// @param src Source.
  /// @param bytes Bytes to copy.
  /// @param s The stream.
  void copy_async(void* dst, void const* src, std::size_t bytes, stream s)
  {
    STASH_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s.get()));
  }
  /// @brief The stream itself.
  /// @param s The stream.
  /// @return The stream as pools see it.
  stream_ref tag(stream s) const noexcept { return stream_ref{s}; }

 private:
  std::deque<cuda_stream> streams_;
  cuda_event_order events_;
};

static_assert(offload_backend<cuda_backend>);

}  // namespace stash
