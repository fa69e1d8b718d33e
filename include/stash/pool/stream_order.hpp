/**
 * @file stream_order.hpp
 * @brief How a pool learns that memory freed on one stream may be reused on another.
 *
 * A block freed on stream A may still be read by work queued on A. Reusing it on A is safe at once
 * (A runs in order); reusing it on stream B is safe only once that work has finished. Pools record
 * a marker when a block is freed and ask whether it has passed before handing the block to another
 * stream. The marker's type is a policy so the same pool logic runs over CUDA events on a GPU and
 * over plain flags on a CPU.
 *
 * Customization points of a stream order `O`:
 * - `using marker = ...;` (default constructible, movable)
 * - `marker record(stream_ref stream)`: mark the work queued on `stream` so far.
 * - `bool passed(marker const& m)`: true once that work has finished. Never blocks. Never called
 *   for a marker recorded on a capturing stream: cudaEventQuery fails on such an event
 *   (cudaErrorCapturedEvent) and may invalidate the capture, and its work runs only whenever the
 *   graph is launched. Callers keep a `tracked_marker` (record_tracked / tracked_passed), which
 *   remembers that and never passes.
 * - `void release(marker& m) noexcept`: free the marker's resources.
 *
 * Optional: `bool capturing(stream_ref stream)`: whether `stream` is being captured into a CUDA
 * graph; a caching_pool then refuses to take memory from its upstream (see caching_pool).
 *
 * Optional (`stream_order_with_wait`):
 * - `void wait(stream_ref stream, marker const& m)`: make work queued on `stream` from now on
 *   wait for `m`, without blocking the host. Pools that can wait reuse a block across streams at
 *   once, ordered on the device (as cudaMallocAsync's internal dependencies do), instead of
 *   taking other memory.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/stream_ref.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace stash {

/// @brief A policy that tracks when work on a stream has finished (see the file docs).
/// @tparam O The type checked.
template <class O>
concept stream_order = requires(O& o, stream_ref s, typename O::marker& m)
{
  {
    o.record(s)
    } -> std::same_as<typename O::marker>;
  {
    o.passed(m)
    } -> std::convertible_to<bool>;
  {
    o.release(m)
  }
  noexcept;
};

/// @brief A stream order that can also make a stream wait for a marker (see the file docs).
/// @tparam O The type checked.
template <class O>
concept stream_order_with_wait = stream_order<O> &&
    requires(O& o, stream_ref s, typename O::marker const& m)
{
  o.wait(s, m);
};

/// @brief CUDA events: a marker is an event recorded on the freeing stream.
class cuda_event_order {
 public:
  /// @brief An event (nullptr when none was needed).
  using marker = cudaEvent_t;

  /// @brief Records a timing-free event on `stream`.
  /// @param stream A CUDA stream.
  /// @return The event.
  /// @throws stash::logic_error For a host stream.
  /// @throws stash::cuda_error When the event cannot be created or recorded.
  marker record(stream_ref stream)
  {
    cudaStream_t const cuda_stream = stream.get();  // throws for a host stream: before the event
    cudaEvent_t event{};
    STASH_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    cudaError_t const status = cudaEventRecord(event, cuda_stream);
    if (status != cudaSuccess) {
      STASH_CUDA_CHECK_NOTHROW(cudaEventDestroy(event));
      STASH_CUDA_TRY(status);
    }
    return event;
  }

  /// @brief Queries the event without blocking; legal while another stream is being captured.
  /// Callers never pass an event recorded while capturing (see the file docs); should one come,
  /// it is reported as not passed.
  /// @param event The marker.
  /// @return Whether the marked work has finished.
  /// @throws stash::cuda_error For a status other than success, not ready or captured event.
  bool passed(marker const& event)
  {
    if (event == nullptr) { return true; }
    // A query is one of the calls a global-mode capture forbids (it would invalidate it) though
    // it touches no stream; relaxed mode for this one call lets pools run beside a capture.
    auto mode = cudaStreamCaptureModeRelaxed;
    STASH_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
    cudaError_t const status = cudaEventQuery(event);
    STASH_CUDA_CHECK_NOTHROW(cudaThreadExchangeStreamCaptureMode(&mode));
    if (status == cudaErrorNotReady || status == cudaErrorCapturedEvent) {
      clear_own_error(status);
      return false;
    }
    STASH_CUDA_TRY(status);
    return true;
  }

  /// @brief Whether `stream` is being captured into a CUDA graph (pools then take nothing from
  /// their upstream).
  /// @param stream The stream.
  /// @return Whether it is capturing.
  /// @throws stash::cuda_error When the query fails.
  bool capturing(stream_ref stream)
  {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaError_t const err          = cudaStreamIsCapturing(stream.get(), &status);
    if (err == cudaErrorStreamCaptureImplicit) {  // the legacy stream, beside a capture
      clear_own_error(err);
      return true;
    }
    STASH_CUDA_TRY(err);
    return status != cudaStreamCaptureStatusNone;
  }

  /// @brief cudaStreamWaitEvent: `stream`'s later work runs after the marked work.
  /// @param stream The stream that waits.
  /// @param event The marker.
  /// @throws stash::cuda_error When cudaStreamWaitEvent fails.
  void wait(stream_ref stream, marker const& event)
  {
    if (event != nullptr) { STASH_CUDA_TRY(cudaStreamWaitEvent(stream.get(), event, 0)); }
  }

  /// @brief Destroys the event.
  /// @param event The marker, null afterwards.
  void release(marker& event) noexcept
  {
    if (event != nullptr) {
      STASH_CUDA_CHECK_NOTHROW(cudaEventDestroy(event));
      event = nullptr;
    }
  }

 private:
  // Resets the thread's last error only if it is the expected `status` this order just caused: an
  // error the caller's own earlier launch left pending is not swallowed by a pool's query.
  static void clear_own_error(cudaError_t status) noexcept { detail::clear_last_error_if(status); }
};

/// @brief Host memory with no device work behind it: everything has always passed.
struct immediate_order {
  /// @brief Nothing to remember.
  struct marker {};
  /// @brief No-op.
  /// @return An empty marker.
  marker record(stream_ref) noexcept { return {}; }
  /// @brief Always true.
  /// @return true.
  bool passed(marker const&) const noexcept { return true; }
  /// @brief No-op: nothing is ever pending.
  void wait(stream_ref, marker const&) noexcept {}
  /// @brief No-op.
  void release(marker&) noexcept {}
};

/// @brief A stream order whose markers pass only when a test says so, to check on a CPU that
/// pools never reuse memory across streams too early. Copies share one state.
class manual_order {
 public:
  /// @brief 1 + index of a recorded marker; 0 (the default) means "nothing pending".
  using marker = std::uint64_t;

  /// @brief Records an unfinished marker and remembers its stream.
  /// @param stream The stream.
  /// @return The marker.
  marker record(stream_ref stream)
  {
    state_->finished.push_back(false);
    state_->streams.push_back(stream);
    return state_->finished.size();
  }
  /// @brief True for the default marker, and once finish(stream) was called after `m` was recorded.
  /// @param m The marker.
  /// @return Whether it has passed.
  bool passed(marker const& m) const { return m == 0 || state_->finished.at(m - 1); }
  /// @brief No-op: markers are kept for inspection.
  void release(marker&) noexcept {}
  /// @brief Remembers that `stream` was made to wait for `m` (see waits()).
  /// @param stream The stream that waits.
  /// @param m The marker.
  void wait(stream_ref stream, marker const& m) { state_->waits.emplace_back(stream, m); }
  /// @brief Every wait asked for so far: (stream, marker), in order.
  /// @return The waits.
  [[nodiscard]] std::vector<std::pair<stream_ref, marker>> const& waits() const noexcept
  {
    return state_->waits;
  }

  /// @brief Declares all work recorded so far on `stream` finished.
  /// @param stream The stream.
  void finish(stream_ref stream)
  {
    for (std::size_t i = 0; i < state_->finished.size(); ++i) {
      if (state_->streams[i] == stream) { state_->finished[i] = true; }
    }
  }

 private:
  struct state {
    std::vector<bool> finished;
    std::vector<stream_ref> streams;
    std::vector<std::pair<stream_ref, marker>> waits;
  };
  std::shared_ptr<state> state_ = std::make_shared<state>();
};

/// @brief Whether `stream` is being captured into a CUDA graph, where the order can tell (an
/// order without `capturing` never sees a capture).
/// @param order The stream order.
/// @param stream The stream.
/// @return Whether it is capturing.
template <stream_order O>
[[nodiscard]] bool order_capturing(O& order, stream_ref stream)
{
  if constexpr (requires {
                  {
                    order.capturing(stream)
                    } -> std::convertible_to<bool>;
                }) {
    return order.capturing(stream);
  } else {
    return false;
  }
}

/// @brief A marker and whether it was recorded on a capturing stream. A captured marker is never
/// queried (see the file docs) and never passes: its work runs whenever the graph is launched.
template <stream_order O>
struct tracked_marker {
  typename O::marker value{};  ///< what the order recorded
  bool captured{false};        ///< recorded while `stream` was being captured
};

/// @brief Records a marker on `stream`, remembering whether the stream was capturing.
/// @param order The stream order.
/// @param stream The stream.
/// @return The marker.
template <stream_order O>
[[nodiscard]] tracked_marker<O> record_tracked(O& order, stream_ref stream)
{
  bool const captured = order_capturing(order, stream);
  return tracked_marker<O>{order.record(stream), captured};
}

/// @brief Whether the marked work has finished; a captured marker is not queried and never has.
/// @param order The stream order.
/// @param m The marker.
/// @return Whether the marked work has finished.
template <stream_order O>
[[nodiscard]] bool tracked_passed(O& order, tracked_marker<O> const& m)
{
  return !m.captured && order.passed(m.value);
}

static_assert(stream_order<cuda_event_order>);
static_assert(stream_order<immediate_order>);
static_assert(stream_order<manual_order>);
static_assert(stream_order_with_wait<cuda_event_order>);
static_assert(stream_order_with_wait<immediate_order>);
static_assert(stream_order_with_wait<manual_order>);

}  // namespace stash
