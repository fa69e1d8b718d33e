/**
 * @file offload_manager.hpp
 * @brief vDNN's runtime as a library: stash tensors in pinned host memory on side streams and
 * bring them back before they are needed, without stalling the compute stream.
 */
#pragma once

#include <stash/codec/codec_error.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/offload_backend.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/pool/pool.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace stash {

/// @brief Where a stashed tensor is.
enum class tensor_state : std::uint8_t {
  resident,     ///< on the device, usable after acquire()
  offloading,   ///< device -> host copy queued or running; device bytes already given back
  offloaded,    ///< only the host copy exists
  prefetching,  ///< host -> device copy queued or running
  released,     ///< dead: nothing held
};

/// @brief The state's name, for messages.
[[nodiscard]] constexpr const char* to_string(tensor_state s) noexcept
{
  switch (s) {
    case tensor_state::resident: return "resident";
    case tensor_state::offloading: return "offloading";
    case tensor_state::offloaded: return "offloaded";
    case tensor_state::prefetching: return "prefetching";
    case tensor_state::released: return "released";
  }
  return "unknown";
}

/// @brief Names one tensor the manager holds. Cheap to copy; stays valid (and reports
/// "released") after release().
struct tensor_handle {
  std::uint64_t id{~std::uint64_t{0}};  ///< index in the manager; the default is no tensor

  /// @brief Handles compare by id.
  friend bool operator==(tensor_handle, tensor_handle) = default;
};

/// @brief Counters of what the manager moved.
struct offload_stats {
  std::uint64_t offloads{0};             ///< offload_async calls that moved a tensor
  std::uint64_t prefetches{0};           ///< host -> device transfers started
  std::uint64_t demand_prefetches{0};    ///< of those, started by acquire() (not prefetched ahead)
  std::uint64_t bytes_offloaded{0};      ///< device -> host bytes (uncompressed)
  std::uint64_t bytes_prefetched{0};     ///< host -> device bytes (uncompressed)
  std::uint64_t decode_failures{0};      ///< host copies found corrupted on the way back
  /// Host-copy bytes of the offloads whose size was read back (a codec reports it once the copy
  /// is complete; raw copies are their own size); compression ratio =
  /// bytes_encoded_source / bytes_encoded.
  std::uint64_t bytes_encoded{0};
  std::uint64_t bytes_encoded_source{0};  ///< uncompressed bytes of those same offloads
};

/// @brief Streams the manager queues its copies on.
struct offload_manager_options {
  int d2h_priority = 0;   ///< offloads can wait: default priority
  int h2d_priority = -1;  ///< prefetches are on the critical path: more urgent
};

/// @brief Moves tensors between a device pool and a host pool over a backend's streams.
///
/// Every operation is stream-ordered and never blocks the host:
/// - `offload_async(h, stream)`: after the work queued so far on `stream` (which produced or read
///   the tensor), the D2H stream copies it into the host pool; the device bytes go back to the
///   device pool as a stream-ordered free on the D2H stream, so the pool reuses them only once the
///   copy has finished.
/// - `prefetch_async(h)`: the H2D stream takes device bytes from the pool, waits for the host copy
///   to be complete, and copies it back; the host bytes are freed in the H2D stream's order.
/// - `acquire(h, stream) -> pointer`: makes `stream` wait (an event wait, not a host sync) until
///   the tensor is resident; prefetches on demand if it was not. Acquired on another stream than
///   before, the new stream also waits for the work queued on the previous one, so the tensor's
///   last stream always orders all its uses.
/// - `release(h)`: the tensor is dead; whatever it holds is freed in the order of its last use.
///
/// Failures lose nothing: if the host pool cannot take a tensor, offload_async throws
/// stash::out_of_memory and the tensor stays resident; if the device pool cannot take it back,
/// prefetch_async/acquire throw stash::out_of_memory and the host copy stays valid for a retry.
/// Misuse (an unknown or released handle, offloading a tensor not resident) throws
/// stash::logic_error naming the tensor and its state. Not thread safe.
///
/// `Transfer` (transfer.hpp) moves the bytes: raw copies, or a codec that encodes on the way out
/// and decodes on the way back. A host copy that fails to decode (corrupted) is never handed out
/// as data: the decode leaves zeros and an error status, and the next call into the manager once
/// the decode has run (at the latest synchronize()) throws stash::codec_error naming the tensor.
template <offload_backend Backend, pool DevicePool, pool HostPool, class Transfer = raw_transfer>
class offload_manager {
 public:
  /// @brief The backend's stream handle.
  using stream_type = typename Backend::stream;

  /// @brief A manager over `backend`, moving tensors between `device_pool` and `host_pool`.
  offload_manager(Backend& backend, DevicePool& device_pool, HostPool& host_pool,
                  offload_manager_options options = {})
      : backend_(backend),
        device_pool_(device_pool),
        host_pool_(host_pool),
        d2h_(backend.create_stream(options.d2h_priority)),
        h2d_(backend.create_stream(options.h2d_priority))
  {
  }

  offload_manager(offload_manager const&)            = delete;
  offload_manager& operator=(offload_manager const&) = delete;

  /// @brief Waits for the manager's streams, then releases every tensor still held. Never throws.
  ~offload_manager()
  {
    try {
      backend_.synchronize(d2h_);
      backend_.synchronize(h2d_);
      drop_pending(std::nullopt);
      for (std::uint64_t id = 0; id < entries_.size(); ++id) {
        if (entries_[id].state != tensor_state::released) { release(tensor_handle{id}); }
      }
    } catch (...) {  // NOLINT(bugprone-empty-catch): destructors never throw
    }
  }

  /// @brief A new resident tensor of `bytes` from the device pool, usable on `stream`.
  tensor_handle create(std::size_t bytes, stream_type stream)
  {
    STASH_EXPECTS(bytes > 0, "offload_manager::create: a tensor needs at least one byte");
    void* p = device_pool_.allocate(bytes, backend_.tag(stream));
    return adopt(p, bytes, stream);
  }

  /// @brief Takes over `bytes` at `device` (from the device pool, last used on `stream`).
  tensor_handle adopt(void* device, std::size_t bytes, stream_type stream)
  {
    STASH_EXPECTS(device != nullptr && bytes > 0, "offload_manager::adopt: empty tensor");
    entry e;
    e.state       = tensor_state::resident;
    e.bytes       = bytes;
    e.device      = device;
    e.last_stream = stream;
    entries_.push_back(std::move(e));
    return tensor_handle{entries_.size() - 1};
  }

  /// @brief Stash the tensor on the host after the work queued on `stream`; see the class docs.
  void offload_async(tensor_handle h, stream_type stream)
  {
    reap();
    entry& e = checked(h, "offload_async");
    if (e.state != tensor_state::resident) { misuse(h, e, "offload_async", "it is not resident"); }
    std::size_t const capacity = Transfer::host_bytes(e.bytes);
    std::size_t const slot     = slot_bytes(capacity);
    void* host                 = nullptr;
    try {
      host = host_pool_.allocate(slot, backend_.tag(d2h_));
    } catch (out_of_memory const& oom) {
      throw out_of_memory("offload_manager host pool (offload of tensor #" + std::to_string(h.id) +
                            ", which stays resident)",
                          oom.requested_bytes(), oom.budget_bytes(), oom.in_use_bytes(),
                          oom.largest_free_bytes());
    }
    // Nothing below fails but CUDA itself; from here the tensor is on its way out.
    order_after(d2h_, stream);
    if (e.last_stream != stream) { order_after(d2h_, e.last_stream); }
    backend_.wait(d2h_, e.ready);  // a tensor still arriving must have arrived
    void* scratch = take_scratch(e.bytes, d2h_);
    Transfer::encode(backend_, d2h_, e.device, e.bytes, host, capacity, scratch,
                     status_of(host, capacity));
    give_back_scratch(scratch, e.bytes, d2h_);
    backend_.release(e.ready);
    e.host_ready = backend_.record(d2h_);
    device_pool_.deallocate(e.device, e.bytes, backend_.tag(d2h_));
    e.device   = nullptr;
    e.host     = host;
    e.capacity = capacity;
    e.state  = tensor_state::offloading;
    ++stats_.offloads;
    stats_.bytes_offloaded += e.bytes;
  }

  /// @brief Start bringing the tensor back (no-op when it is resident or on its way).
  void prefetch_async(tensor_handle h) { prefetch(h, false, std::nullopt); }

  /// @brief As prefetch_async(h), but the device memory is taken in `stream`'s order and the
  /// copy starts after the work queued on `stream` so far. A pool that numbers one stream's
  /// allocations (lifetime_arena) then sees the prefetch at the same place every iteration and
  /// plans it; the price is that the copy cannot start before `stream` reaches this point.
  void prefetch_async(tensor_handle h, stream_type stream) { prefetch(h, false, stream); }

  /// @brief Make `stream` wait until the tensor is resident and return its device pointer.
  [[nodiscard]] void* acquire(tensor_handle h, stream_type stream)
  {
    reap();
    entry& e = checked(h, "acquire");
    refresh(e);
    if (e.state == tensor_state::offloading || e.state == tensor_state::offloaded) {
      prefetch(h, true, stream);  // `stream` waits for it anyway
    }
    backend_.wait(stream, e.ready);
    // Uses on the previous stream come first, so the last stream's order covers every use.
    if (e.state == tensor_state::resident && e.last_stream != stream) {
      order_after(stream, e.last_stream);
    }
    if (e.state == tensor_state::prefetching) { e.state = tensor_state::resident; }
    e.last_stream = stream;
    return e.device;
  }

  /// @brief The tensor is dead: free what it holds, in the order of its last use.
  void release(tensor_handle h)
  {
    reap();
    entry& e = checked(h, "release");
    if (e.device != nullptr) {
      // After a prefetch nobody acquired, the last use of the bytes is the H2D copy.
      auto const last = e.state == tensor_state::prefetching ? h2d_ : e.last_stream;
      device_pool_.deallocate(e.device, e.bytes, backend_.tag(last));
    }
    if (e.host != nullptr) { host_pool_.deallocate(e.host, slot_bytes(e.capacity), backend_.tag(d2h_)); }
    drop_pending(h.id);
    backend_.release(e.ready);
    backend_.release(e.host_ready);
    e.device = nullptr;
    e.host   = nullptr;
    e.state  = tensor_state::released;
  }

  /// @brief Where the tensor is now (completed copies are taken into account).
  [[nodiscard]] tensor_state state(tensor_handle h)
  {
    STASH_EXPECTS(h.id < entries_.size(),
                  "offload_manager::state: unknown tensor #" + std::to_string(h.id));
    refresh(entries_[h.id]);
    return entries_[h.id].state;
  }

  /// @brief The host copy of an offloaded tensor (as the transfer wrote it: raw bytes or a codec
  /// buffer a host reference decodes), e.g. to inspect stashed data on the host. Blocks until the
  /// copy is complete.
  [[nodiscard]] std::span<std::byte const> host_copy(tensor_handle h)
  {
    entry& e = checked(h, "host_copy");
    if (e.state != tensor_state::offloading && e.state != tensor_state::offloaded) {
      misuse(h, e, "host_copy", "only an offloaded tensor has a host copy");
    }
    backend_.synchronize(e.host_ready);
    refresh(e);
    return {static_cast<std::byte const*>(e.host), e.capacity};
  }

  /// @brief The tensor's size in bytes.
  [[nodiscard]] std::size_t bytes(tensor_handle h) const
  {
    STASH_EXPECTS(h.id < entries_.size(),
                  "offload_manager::bytes: unknown tensor #" + std::to_string(h.id));
    return entries_[h.id].bytes;
  }

  /// @brief Blocks until the manager's copies queued so far have finished; throws
  /// stash::codec_error if a host copy failed to decode.
  void synchronize()
  {
    backend_.synchronize(d2h_);
    backend_.synchronize(h2d_);
    reap();
  }

  /// @brief What was moved so far.
  [[nodiscard]] offload_stats const& stats() const noexcept { return stats_; }
  /// @brief The device-to-host stream.
  [[nodiscard]] stream_type d2h_stream() const noexcept { return d2h_; }
  /// @brief The host-to-device stream.
  [[nodiscard]] stream_type h2d_stream() const noexcept { return h2d_; }

 private:
  using event_type = typename Backend::event;

  struct entry {
    tensor_state state{tensor_state::released};
    std::size_t bytes{0};
    std::size_t capacity{0};  // of the host copy
    void* device{nullptr};
    void* host{nullptr};
    event_type ready{};       // the device copy is complete (after a prefetch)
    event_type host_ready{};  // the host copy is complete (after an offload)
    stream_type last_stream{};
  };

  entry& checked(tensor_handle h, const char* what)
  {
    STASH_EXPECTS(h.id < entries_.size(), std::string("offload_manager::") + what +
                                            ": unknown tensor #" + std::to_string(h.id));
    entry& e = entries_[h.id];
    if (e.state == tensor_state::released) { misuse(h, e, what, "it was released"); }
    return e;
  }

  [[noreturn]] void misuse(tensor_handle h, entry const& e, const char* what, const char* why) const
  {
    STASH_FAIL(std::string("offload_manager::") + what + ": tensor #" + std::to_string(h.id) +
               " is " + to_string(e.state) + ", and " + why);
  }

  // A decode whose status is read once its event has passed; the host copy is kept until then.
  struct pending_check {
    std::uint64_t id;
    void* host;
    std::size_t capacity;
    event_type decoded;
  };

  // The host slot: the copy, then (16-byte aligned) the transfer_status the transfer writes.
  static std::size_t slot_bytes(std::size_t capacity) noexcept
  {
    return align_up(capacity, 16) + sizeof(transfer_status);
  }
  static transfer_status* status_of(void* host, std::size_t capacity) noexcept
  {
    return reinterpret_cast<transfer_status*>(static_cast<char*>(host) + align_up(capacity, 16));
  }

  void* take_scratch(std::size_t bytes, stream_type s)
  {
    std::size_t const n = Transfer::scratch_bytes(bytes);
    return n == 0 ? nullptr : device_pool_.allocate(n, backend_.tag(s));
  }
  void give_back_scratch(void* scratch, std::size_t bytes, stream_type s)
  {
    if (scratch != nullptr) {
      device_pool_.deallocate(scratch, Transfer::scratch_bytes(bytes), backend_.tag(s));
    }
  }

  // Frees the host copies of finished decodes; throws codec_error for one that failed.
  void reap()
  {
    for (std::size_t i = 0; i < pending_.size();) {
      if (!backend_.query(pending_[i].decoded)) {
        ++i;
        continue;
      }
      pending_check p = pending_[i];
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      codec_status const status = status_of(p.host, p.capacity)->status;
      backend_.release(p.decoded);
      host_pool_.deallocate(p.host, slot_bytes(p.capacity), backend_.tag(h2d_));
      if (status.code != 0) {
        ++stats_.decode_failures;
        throw codec_error(static_cast<codec_errc>(status.code), status.offset,
                          "offload_manager: the host copy of tensor #" + std::to_string(p.id) +
                            " failed to decode; its device bytes are zeros, not data");
      }
    }
  }

  // Drops the unchecked decodes of tensor `id` (or all), freeing their host copies in the H2D
  // stream's order. Never throws on a bad status: the tensor is gone.
  void drop_pending(std::optional<std::uint64_t> id) noexcept
  {
    std::erase_if(pending_, [&](pending_check& p) {
      if (id && p.id != *id) { return false; }
      backend_.release(p.decoded);
      host_pool_.deallocate(p.host, slot_bytes(p.capacity), backend_.tag(h2d_));
      return true;
    });
  }

  // Work queued on `later` from now on runs after the work queued on `earlier` so far.
  void order_after(stream_type later, stream_type earlier)
  {
    auto marker = backend_.record(earlier);
    backend_.wait(later, marker);
    backend_.release(marker);
  }

  // Takes completed copies into account (no blocking).
  void refresh(entry& e)
  {
    if (e.state == tensor_state::offloading && backend_.query(e.host_ready)) {
      e.state = tensor_state::offloaded;
      count_encoded(e);
    }
  }

  // The size of a completed host copy, for the compression ratio.
  void count_encoded(entry const& e) noexcept
  {
    if constexpr (Transfer::reports_status) {
      stats_.bytes_encoded += status_of(e.host, e.capacity)->encoded_bytes;
    } else {
      stats_.bytes_encoded += e.bytes;
    }
    stats_.bytes_encoded_source += e.bytes;
  }

  // `in`: the stream whose order the device memory is taken in (default: the H2D stream's).
  void prefetch(tensor_handle h, bool on_demand, std::optional<stream_type> in)
  {
    entry& e = checked(h, "prefetch_async");
    if (e.state == tensor_state::resident || e.state == tensor_state::prefetching) { return; }
    refresh(e);  // a copy that has completed is counted before its slot is recycled
    void* device = nullptr;
    try {
      device = device_pool_.allocate(e.bytes, backend_.tag(in ? *in : h2d_));
    } catch (out_of_memory const& oom) {
      throw out_of_memory("offload_manager device pool (prefetch of tensor #" +
                            std::to_string(h.id) + "; its host copy stays valid)",
                          oom.requested_bytes(), oom.budget_bytes(), oom.in_use_bytes(),
                          oom.largest_free_bytes());
    }
    if (in && *in != h2d_) { order_after(h2d_, *in); }  // the memory is ours from here on
    backend_.wait(h2d_, e.host_ready);
    void* scratch = take_scratch(e.bytes, h2d_);
    Transfer::decode(backend_, h2d_, e.host, e.capacity, device, e.bytes, scratch,
                     status_of(e.host, e.capacity));
    give_back_scratch(scratch, e.bytes, h2d_);
    e.ready = backend_.record(h2d_);
    backend_.release(e.host_ready);
    if constexpr (Transfer::reports_status) {
      // The host copy is kept until the decode's status has been read.
      pending_.push_back(pending_check{h.id, e.host, e.capacity, backend_.record(h2d_)});
    } else {
      host_pool_.deallocate(e.host, slot_bytes(e.capacity), backend_.tag(h2d_));
    }
    e.host   = nullptr;
    e.device = device;
    e.state  = tensor_state::prefetching;
    ++stats_.prefetches;
    if (on_demand) { ++stats_.demand_prefetches; }
    stats_.bytes_prefetched += e.bytes;
  }

  Backend& backend_;
  DevicePool& device_pool_;
  HostPool& host_pool_;
  stream_type d2h_;
  stream_type h2d_;
  std::vector<entry> entries_;
  std::vector<pending_check> pending_;
  offload_stats stats_;
};

}  // namespace stash
