/**
 * @file host_backend.hpp
 * @brief The offload backend of worker threads: a stream is a thread draining a FIFO queue, an
 * event a completion flag, a copy a memcpy. Lets the offload manager's every ordering rule run,
 * and be stress-tested with random delays, on a CPU.
 *
 * It also models CUDA graph capture's rules (not its deferral: captured work still runs at once):
 * begin_capture(s) marks `s` capturing; a stream that waits for an event recorded while capturing
 * joins the capture; querying such an event, or a pool marker recorded on a capturing stream,
 * throws stash::logic_error (cudaEventQuery fails with cudaErrorCapturedEvent and may invalidate
 * the capture: callers must remember what they recorded while capturing and never ask), as does
 * synchronizing a capturing stream or a captured event (CUDA would invalidate the capture);
 * end_capture(s) ends it for every stream that joined.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/host_stream.hpp>
#include <stash/core/stream_ref.hpp>
#include <stash/offload/offload_backend.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>

namespace stash {

/// @brief Pools' view of host streams: a marker is a flag queued on the stream.
class host_stream_order {
 public:
  /// @brief The flag (null: nothing pending).
  using marker = std::shared_ptr<host_flag>;

  /// @brief Queues a flag on the host stream `s` (the default stream: nothing to wait for).
  /// @param s The stream.
  /// @return A marker that passes once `s`'s work so far has run.
  marker record(stream_ref s)
  {
    host_stream* const h = host_of(s, "record");
    return h == nullptr ? nullptr : h->mark();
  }
  /// @brief True once the flag is set; throws stash::logic_error for a flag recorded while
  /// capturing (see the file docs).
  /// @param m The marker.
  /// @return Whether the marker passed.
  bool passed(marker const& m) const
  {
    if (m == nullptr) { return true; }
    STASH_EXPECTS(m->capture == 0,
                  "host_stream_order::passed: the marker was recorded while capturing a graph "
                  "(cudaEventQuery would fail with cudaErrorCapturedEvent)");
    return m->done.load(std::memory_order_acquire);
  }
  /// @brief Whether the host stream `s` is capturing (see host_backend).
  /// @param s The stream.
  /// @return Whether `s` is a capturing host stream.
  bool capturing(stream_ref s) const noexcept { return s.is_host() && s.host()->capture() != 0; }
  /// @brief The host stream `s` blocks until the flag is set (what cudaStreamWaitEvent does). The
  /// default stream is the calling thread, whose work is not queued but runs at once (a pool's
  /// synchronous allocate()): the caller itself blocks until the flag is set.
  /// @param s The stream.
  /// @param m The marker.
  void wait(stream_ref s, marker const& m)
  {
    host_stream* const h = host_of(s, "wait");
    if (passed(m)) { return; }
    if (h == nullptr) {
      m->wait();
      return;
    }
    h->enqueue([m] { m->wait(); });
  }
  /// @brief Drops the flag.
  /// @param m The marker.
  void release(marker& m) noexcept { m.reset(); }

 private:
  // The host stream behind `s`; the default stream has none (nullptr). A CUDA stream here is a
  // host pool handed a device stream: refused rather than ignored.
  static host_stream* host_of(stream_ref s, const char* what)
  {
    STASH_EXPECTS(s.is_host() || s == stream_ref{},
                  std::string("host_stream_order::") + what +
                      ": a CUDA stream was given to a host stream order");
    return s.host();
  }
};

/// @brief Options of the host backend.
struct host_backend_options {
  std::chrono::microseconds max_delay{0};  ///< random delay before each task (tests)
  std::uint64_t seed{0};                   ///< for the delays
};

/// @brief Streams as worker threads, events as flags, copies as memcpy (see the file docs).
class host_backend {
 public:
  /// @brief A stream: the worker thread owned by the backend.
  using stream = host_stream*;
  /// @brief An event: a flag that a stream sets.
  using event = std::shared_ptr<host_flag>;
  /// @brief Pools order reuse by host-stream flags.
  using stream_order = host_stream_order;

  /// @brief A backend; streams it creates live as long as it does.
  /// @param options Worker settings.
  explicit host_backend(host_backend_options options = {}) : options_(options) {}

  host_backend(host_backend const&)            = delete;
  host_backend& operator=(host_backend const&) = delete;

  /// @brief A new worker thread (the priority is ignored: each stream has its own thread).
  /// @return A stream the backend owns.
  stream create_stream(int /*priority*/ = 0)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.push_back(
        std::make_unique<host_stream>(options_.max_delay, options_.seed + streams_.size()));
    return streams_.back().get();
  }
  /// @brief A flag set after the work queued on `s` so far.
  /// @param s The stream.
  /// @return An event that completes with the work queued on `s` so far.
  event record(stream s) { return s->mark(); }
  /// @brief `s` blocks its worker until `e` is set; waiting for an event recorded while capturing
  /// makes `s` join that capture (cudaStreamWaitEvent's fork).
  /// @param s The stream.
  /// @param e The event.
  void wait(stream s, event const& e)
  {
    if (e == nullptr) { return; }
    if (e->capture != 0 && s->capture() == 0) { s->set_capture(e->capture); }
    if (e->done.load(std::memory_order_acquire)) { return; }
    s->enqueue([e] { e->wait(); });
  }
  /// @brief Whether `e` is set; throws stash::logic_error for an event recorded while capturing
  /// (see the file docs).
  /// @param e The event.
  /// @return Whether `e` completed.
  bool query(event const& e) const
  {
    if (e == nullptr) { return true; }
    STASH_EXPECTS(e->capture == 0,
                  "host_backend::query: the event was recorded while capturing a graph "
                  "(cudaEventQuery would fail with cudaErrorCapturedEvent)");
    return e->done.load(std::memory_order_acquire);
  }
  /// @brief Blocks until `e` is set; throws stash::logic_error for an event recorded while
  /// capturing (cudaEventSynchronize fails on one).
  /// @param e The event.
  void synchronize(event const& e) const
  {
    if (e == nullptr) { return; }
    STASH_EXPECTS(e->capture == 0,
                  "host_backend::synchronize: the event was recorded while capturing a graph");
    e->wait();
  }
  /// @brief Blocks until `s` ran everything queued so far; throws stash::logic_error while `s` is
  /// capturing (cudaStreamSynchronize would invalidate the capture).
  /// @param s The stream.
  void synchronize(stream s)
  {
    STASH_EXPECTS(s->capture() == 0,
                  "host_backend::synchronize: the stream is being captured into a graph");
    s->mark()->wait();
  }
  /// @brief Starts modelling a capture on `s` (cudaStreamBeginCapture); see the file docs.
  /// @param s The stream.
  void begin_capture(stream s)
  {
    STASH_EXPECTS(s->capture() == 0,
                  "host_backend::begin_capture: the stream is already capturing");
    s->set_capture(++captures_);
  }
  /// @brief Ends the capture `s` began, for every stream that joined it (cudaStreamEndCapture).
  /// @param s The stream.
  void end_capture(stream s)
  {
    std::uint64_t const id = s->capture();
    STASH_EXPECTS(id != 0, "host_backend::end_capture: the stream is not capturing");
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& w : streams_) {
      if (w->capture() == id) { w->set_capture(0); }
    }
  }
  /// @brief Whether `s` is part of a capture.
  /// @param s The stream.
  /// @return Whether `s` is capturing.
  bool capturing(stream s) const noexcept { return s->capture() != 0; }
  /// @brief Drops the handle.
  /// @param e The event.
  void release(event& e) noexcept { e.reset(); }
  /// @brief memcpy in `s`'s order.
  /// @param dst Destination.
  /// @param src Source.
  /// @param bytes Bytes to copy.
  /// @param s The stream.
  void copy_async(void* dst, void const* src, std::size_t bytes, stream s)
  {
    s->enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
  }
  /// @brief Runs `task` in `s`'s order (the host backend's "kernel launch").
  /// @param s The stream.
  /// @param task Runs once the stream's earlier work has.
  void launch(stream s, std::function<void()> task) { s->enqueue(std::move(task)); }
  /// @brief The host stream as pools see it.
  /// @param s The stream.
  /// @return The stream as pools see it.
  stream_ref tag(stream s) const noexcept { return stream_ref{*s}; }

 private:
  host_backend_options options_;
  std::mutex mutex_;
  std::deque<std::unique_ptr<host_stream>> streams_;
  std::uint64_t captures_{0};
};

static_assert(offload_backend<host_backend>);

}  // namespace stash
