/**
 * @file decode_checks.hpp
 * @brief The offload manager's deferred decode checks: a prefetch whose transfer reports a
 * status keeps its host copy until the decode has run, then the status is read without blocking
 * ("reaping"). A failure is kept for the tensor it belongs to (stash::decode_failure) until
 * synchronize() or poll_decode_failures() reports it: no call on another tensor throws it.
 * Internals of offload_manager.hpp.
 */
#pragma once

#include <stash/codec/codec_error.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/offload/detail/host_slot.hpp>
#include <stash/offload/tensor_handle.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stash {

/// @brief A host copy that failed to decode (corrupted): its tensor's device bytes are zeros, not
/// data. Reported by offload_manager::synchronize() (as a stash::codec_error) or
/// offload_manager::poll_decode_failures().
struct decode_failure {
  tensor_handle tensor;     ///< the tensor whose host copy it was
  codec_errc code{};        ///< what the decoder found
  std::uint64_t offset{0};  ///< where in the host copy
  /// @brief The stash::codec_error naming the tensor.
  /// @return The exception synchronize() throws for this failure.
  [[nodiscard]] codec_error to_error() const
  {
    return codec_error(code, offset,
                       "offload_manager: the host copy of tensor " + to_string(tensor) +
                           " failed to decode; its device bytes are zeros, not data");
  }
};

namespace detail {

// Unchecked decodes and unreported failures. `Event` is the backend's event type.
template <class Event>
class decode_checks {
 public:
  // A decode whose status is read once its event has passed; the host copy is kept until then.
  struct pending {
    tensor_handle handle;
    void* host;
    std::size_t capacity;
    Event decoded;
    bool captured;             // recorded while capturing: never queried, freed only when orphaned
    std::size_t uncounted{0};  // source bytes whose encoded size is still to be counted
    bool orphan{false};        // the tensor was released: a bad status is counted, not kept
    // Whether the check frees the host copy once reaped: false while its tensor keeps the copy
    // (offload_manager's host_copy::keep), until the tensor hands it over (hand_host).
    bool owns_host{true};
  };

  // Room for one more check, taken before the decode is queued (adding then cannot fail).
  void reserve_one() { pending_.reserve(pending_.size() + 1); }
  void add(pending const& p) noexcept { pending_.push_back(p); }  // capacity reserved

  // Reads the statuses of the decodes that have run (`passed(event)`), counting encoded sizes
  // and failures in `stats`, and hands each host copy to `free_host(host, capacity)` (which
  // never throws). Failures of live tensors are kept to be reported, never thrown: only what
  // `passed` throws (a backend error) leaves it.
  template <class Passed, class Release, class FreeHost, class Stats>
  void reap(Passed&& passed, Release&& release, FreeHost&& free_host, Stats& stats)
  {
    for (std::size_t i = 0; i < pending_.size();) {
      if (pending_[i].captured || !passed(pending_[i].decoded)) {
        ++i;
        continue;
      }
      pending p = pending_[i];
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      transfer_status const* const record = host_slot_status(p.host, p.capacity);
      codec_status const status           = record->status;
      if (p.uncounted > 0) {  // the encode ran before the decode: its size is there
        stats.bytes_encoded += record->encoded_bytes;
        stats.bytes_encoded_source += p.uncounted;
      }
      release(p.decoded);
      if (p.owns_host) { free_host(p.host, p.capacity); }
      if (status.code == 0) { continue; }
      ++stats.decode_failures;
      if (p.orphan) { continue; }
      try {  // somebody holds the tensor: kept until reported
        failures_.push_back({p.handle, static_cast<codec_errc>(status.code), status.offset});
      } catch (...) {  // NOLINT(bugprone-empty-catch): no room for the note; still counted
      }
    }
  }

  // Tensor `h` was released: its unchecked decodes are still reaped (host copies freed, encoded
  // sizes counted) but no failure is kept; captured ones, never queried, are dropped now.
  template <class Release, class FreeHost>
  void orphan(tensor_handle h, Release&& release, FreeHost&& free_host) noexcept
  {
    for (std::size_t i = 0; i < pending_.size();) {
      pending& p = pending_[i];
      if (p.handle == h && p.captured) {
        release(p.decoded);
        if (p.owns_host) { free_host(p.host, p.capacity); }
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (p.handle == h) { p.orphan = true; }
      ++i;
    }
  }

  // Drops every unchecked decode (the manager is going away), freeing the host copies.
  template <class Release, class FreeHost>
  void drop_all(Release&& release, FreeHost&& free_host) noexcept
  {
    for (auto& p : pending_) {
      release(p.decoded);
      if (p.owns_host) { free_host(p.host, p.capacity); }
    }
    pending_.clear();
  }

  // Tensor `h` gives up the host copy at `host` that it kept: the latest unchecked decode of it
  // frees it once reaped (its status is read from that copy) and true is returned; false when
  // none is pending (the caller frees it).
  bool hand_host(tensor_handle h, void const* host) noexcept
  {
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
      if (it->handle == h && it->host == host) {
        it->owns_host = true;
        return true;
      }
    }
    return false;
  }

  // A new decode of the host copy at `host` that tensor `h` kept is about to be queued after the
  // earlier ones: their checks are dropped (the new one reads the status they would have, since
  // both decode the same bytes, and reading it while the new decode writes it would race).
  // Returns the source bytes whose encoded size they were still to count.
  template <class Release>
  std::size_t supersede(tensor_handle h, void const* host, Release&& release) noexcept
  {
    std::size_t uncounted = 0;
    for (std::size_t i = 0; i < pending_.size();) {
      if (pending_[i].handle == h && pending_[i].host == host) {
        uncounted += pending_[i].uncounted;
        release(pending_[i].decoded);
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      ++i;
    }
    return uncounted;
  }

  [[nodiscard]] bool has_failures() const noexcept { return !failures_.empty(); }

  // The oldest unreported failure, now reported (has_failures() first).
  decode_failure take_first() noexcept
  {
    decode_failure f = failures_.front();
    failures_.erase(failures_.begin());
    return f;
  }

  // Every unreported failure, now reported.
  std::vector<decode_failure> take_all() noexcept { return std::exchange(failures_, {}); }

 private:
  std::vector<pending> pending_;
  std::vector<decode_failure> failures_;
};

}  // namespace detail
}  // namespace stash
