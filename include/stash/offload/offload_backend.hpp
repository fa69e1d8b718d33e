/**
 * @file offload_backend.hpp
 * @brief The small interface the offload manager is written over: streams, events and copies.
 *
 * The manager's state machine and ordering rules are written once. `cuda_backend` runs them on
 * CUDA streams and events; `host_backend` runs them on worker threads with FIFO queues, completion
 * flags and memcpy, so every rule and every error path runs in CI without a GPU.
 *
 * Customization points of a backend `B`:
 * - `using stream = ...;` a cheap, copyable handle to an in-order queue of work.
 * - `using event = ...;` a cheap, copyable handle marking a point in a stream.
 * - `using stream_order = ...;` a `stash::stream_order` for pools whose memory the backend's
 *   streams use, so a pool reuses memory freed on a stream only once that stream got there.
 * - `stream create_stream(int priority)`: a new stream owned by the backend (lower = more urgent).
 * - `event record(stream s)`: an event that completes when the work queued on `s` so far has.
 * - `void wait(stream s, event e)`: work queued on `s` after this call starts after `e` completed.
 *   The host does not block.
 * - `bool query(event e)`: whether `e` completed. Never blocks.
 * - `void synchronize(event e)` / `void synchronize(stream s)`: blocks the host.
 * - `void release(event& e) noexcept`: drops the handle's resources.
 * - `void copy_async(void* dst, void const* src, std::size_t bytes, stream s)`: a copy in `s`'s
 * order.
 * - `stash::stream_ref tag(stream s)`: the stream as pools and stream orders see it.
 * - `bool capturing(stream s)`: whether `s` is part of a CUDA graph capture (it began one, or
 *   waited for an event recorded in one). An event recorded while capturing is never passed to
 *   `query` (cudaEventQuery fails on it with cudaErrorCapturedEvent and may invalidate the
 *   capture; the host backend throws stash::logic_error): callers remember which events they
 *   recorded while capturing. `synchronize` of a capturing stream is illegal.
 */
#pragma once

#include <stash/core/stream_ref.hpp>
#include <stash/pool/stream_order.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>

namespace stash {

/// @brief A stream/event/copy backend for the offload manager (see the file docs).
/// @tparam B The type checked.
template <class B>
concept offload_backend = stream_order<typename B::stream_order> &&
    requires(B& b, typename B::stream s, typename B::event e, void* dst, void const* src,
             std::size_t bytes, int priority)
{
  {
    b.create_stream(priority)
    } -> std::same_as<typename B::stream>;
  {
    b.record(s)
    } -> std::same_as<typename B::event>;
  b.wait(s, e);
  {
    b.query(e)
    } -> std::convertible_to<bool>;
  b.synchronize(e);
  b.synchronize(s);
  {
    b.release(e)
  }
  noexcept;
  b.copy_async(dst, src, bytes, s);
  {
    b.tag(s)
    } -> std::same_as<stream_ref>;
  {
    b.capturing(s)
    } -> std::convertible_to<bool>;
};

}  // namespace stash
