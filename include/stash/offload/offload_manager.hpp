/**
 * @file offload_manager.hpp
 * @brief vDNN's runtime as a library: stash tensors in pinned host memory on side streams and
 * bring them back before they are needed, without stalling the compute stream.
 *
 * CUDA graphs. A region of calls can be captured into a graph and the graph launched any number
 * of times. The supported pattern is a closed region, as a captured training step is:
 *
 * ```cpp
 * host_pool.reserve(...); device_pool.reserve(...);   // 1. everything the region takes, up front
 * cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
 * auto t = m.allocate_async(bytes, s);                 // 2. tensors born in the region...
 * produce<<<..., s>>>(m.acquire_async(t, s));
 * m.offload_async(t, s);
 * m.prefetch_async(t, s);                              // 3. ...every call names a capturing stream
 * consume<<<..., s>>>(m.acquire_async(t, s));
 * m.deallocate_async(t);                               // 4. ...and die in it
 * m.join_async(s);                                     // 5. the side streams rejoin s
 * cudaStreamEndCapture(s, &graph);
 * ```
 *
 * Why these rules:
 * - The side streams join the capture the legal way: an event recorded on the capturing stream
 *   and cudaStreamWaitEvent on it (a fork); join_async(s) is the matching join, without which
 *   cudaStreamEndCapture fails if a copy is left that `s` does not already wait for.
 * - Nothing is allocated while capturing: cudaHostAlloc and cudaMalloc are illegal then, and a
 *   graph replays no allocation. Memory is taken from the pools in the capturing stream's order,
 *   so a caching_pool (pinned_host_pool included) sees the capture and refuses a request its
 *   cached blocks cannot serve with stash::logic_error, before anything was queued: the tensor
 *   and the pools are as they were. reserve() is the way to have the memory ready.
 * - At capture time the manager only decides addresses and queues work; the graph moves the
 *   bytes at each launch, to those same addresses. A tensor from outside the region would be
 *   read at its old address by every launch although the pool may have reused it, and one that
 *   outlived the region would have events that never complete on the host (an event recorded
 *   while capturing is not a real event). So a tensor created while capturing is usable only
 *   while capturing, one created outside only outside (stash::logic_error otherwise), except
 *   that deallocate_async() is always allowed. Tensors the region only reads (weights) are acquired
 *   before capturing, their pointers used inside.
 * - Host-side polling (returning finished host copies, counting compressed bytes) never queries
 *   an event recorded while capturing: cudaEventQuery fails on one (cudaErrorCapturedEvent) and
 *   may invalidate the capture. A tensor created while capturing is never polled; its copies
 *   count as unfinished, so no slot the graph has not written is read. Other events are queried
 *   in relaxed capture mode, which is legal during a global capture. synchronize(), host_copy()
 *   and prefetch_async(h) without a stream are refused while capturing.
 * - The graph owns the device and host blocks the capture took; the pools count them as free
 *   once the region released them. Give a manager that captures a graph its own pools, and use
 *   them only through the graph while it may be launched (PyTorch likewise keeps a private pool
 *   per graph). Launch the graph on one stream at a time.
 * - stats() counts the captured calls once, at capture time; decode errors inside a launched
 *   graph are not reported (the decode still zeroes the tensor: no corrupt data is handed out).
 */
// The pieces behind the API live in offload/detail/: the capture rules (capture_rules.hpp), the
// deferred decode checks (decode_checks.hpp), the host slot's layout (host_slot.hpp) and the
// transfer protocol's optional forms (transfer_protocol.hpp over transfer_dispatch.hpp).
#pragma once

#include <stash/codec/codec_error.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/detail/capture_rules.hpp>
#include <stash/offload/detail/decode_checks.hpp>
#include <stash/offload/detail/host_slot.hpp>
#include <stash/offload/detail/transfer_protocol.hpp>
#include <stash/offload/offload_backend.hpp>
#include <stash/offload/tensor_handle.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/pool/pool.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace stash {

/// @brief Where a stashed tensor is.
enum class tensor_state : std::uint8_t {
  resident,     ///< on the device, usable after acquire_async()
  offloading,   ///< device -> host copy queued or running; device bytes already given back
  offloaded,    ///< only the host copy exists
  prefetching,  ///< host -> device copy queued or running
  released,     ///< dead: nothing held
  dropped,      ///< device bytes given back, nothing copied (drop_async); see rematerialize_async
};

/// @brief The state's name, for messages.
/// @param s The state.
/// @return The name.
[[nodiscard]] constexpr const char* to_string(tensor_state s) noexcept
{
  switch (s) {
    case tensor_state::resident:
      return "resident";
    case tensor_state::offloading:
      return "offloading";
    case tensor_state::offloaded:
      return "offloaded";
    case tensor_state::prefetching:
      return "prefetching";
    case tensor_state::released:
      return "released";
    case tensor_state::dropped:
      return "dropped";
  }
  return "unknown";
}

/// @brief What a prefetch does with the host copy it reads back.
enum class host_copy_mode : std::uint8_t {
  release,  ///< freed once the copy back has read it (the default)
  /// kept and held with the resident tensor, for a caller that will not write the tensor before
  /// it leaves again: offload_manager::redrop_async() then gives its device bytes back without a
  /// second device -> host copy (issue 22: a storage leaving again after a re-run read it)
  keep,
};

/// @brief Counters of what the manager moved.
struct offload_stats {
  std::uint64_t offloads{0};    ///< offload_async calls that moved a tensor
  std::uint64_t prefetches{0};  ///< host -> device transfers started
  std::uint64_t demand_prefetches{
      0};  ///< of those, started by acquire_async() (not prefetched ahead)
  std::uint64_t bytes_offloaded{0};   ///< device -> host bytes (uncompressed)
  std::uint64_t bytes_prefetched{0};  ///< host -> device bytes (uncompressed)
  std::uint64_t decode_failures{0};   ///< host copies found corrupted on the way back
  /// Host-copy bytes of the offloads whose size was read back (a codec reports it once the copy
  /// is complete, read when the host sees it complete or when the prefetch's decode has run; raw
  /// copies are their own size); compression ratio = bytes_encoded_source / bytes_encoded.
  std::uint64_t bytes_encoded{0};
  std::uint64_t bytes_encoded_source{0};  ///< uncompressed bytes of those same offloads
  /// Slots of the tensor table: the most tensors alive at once (released tensors' slots are
  /// reused), so a long run's bookkeeping stays bounded.
  std::uint64_t tensor_slots{0};
  /// Device or host blocks whose give-back to their pool threw after a copy was queued: kept and
  /// given back at a later call (the copy was already on its way, so the tensor moved anyway).
  std::uint64_t deferred_frees{0};
  /// redrop_async calls: tensors sent back to the host copy they kept, no copy made (not in
  /// offloads nor bytes_offloaded).
  std::uint64_t redrops{0};
  /// Host copies kept past a prefetch (host_copy_mode::keep) and freed without a redrop using them
  /// (discard_host_copy, an offload, a drop or a release of the tensor).
  std::uint64_t discarded_host_copies{0};
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
/// - `acquire_async(h, stream) -> pointer`: makes `stream` wait (an event wait, not a host sync)
/// until
///   the tensor is resident; prefetches on demand if it was not. Acquired on another stream than
///   before, the new stream also waits for the work queued on the previous one, so the tensor's
///   last stream always orders all its uses.
/// - `deallocate_async(h)`: the tensor is dead; whatever it holds is freed in the order of its last
/// use.
/// - `join_async(stream)`: `stream` waits for every copy queued so far (ends a captured region).
/// - `prefetch_async(h, [stream,] host_copy_mode::keep)` then `redrop_async(h)`: the prefetch
///   keeps the host copy with the resident tensor; the redrop gives the device bytes back to it
///   without a copy (the caller did not write the tensor since); the next prefetch reads the same
///   copy, and the last one frees it (or discard_host_copy(), an offload, a drop, the release).
///
/// Calls can be captured into a CUDA graph under the rules in the file docs.
///
/// Failures lose nothing: if the host pool cannot take a tensor, offload_async throws
/// stash::out_of_memory and the tensor stays resident; a tensor the transfer cannot encode (a
/// codec's size limit) is refused with stash::logic_error before anything is taken, and should
/// queueing the copy (or recording its event) fail anyway, the host slot and scratch go back to
/// the pools and the tensor stays resident; if the device pool cannot take it back,
/// prefetch_async/acquire throw stash::out_of_memory, and should queueing the copy back fail, the
/// device memory and scratch go back to the pool: either way the host copy stays valid for a
/// retry. Once a copy is queued the tensor has moved: the entry takes the host copy (offload) or
/// the device bytes (prefetch) before anything else, and what goes back to the pools goes through
/// a path that cannot throw (a pool's deallocate is noexcept; a block a pool refuses anyway is kept
/// and given back at a later call, counted in offload_stats::deferred_frees).
/// tests/offload/fault_injection_test.cpp injects each of these at every point of a real trace.
/// Misuse (an unknown or released handle, offloading a tensor not resident) throws
/// stash::logic_error naming the tensor and its state. Not thread safe.
///
/// `Transfer` (transfer.hpp) moves the bytes: raw copies, or a codec that encodes on the way out
/// and decodes on the way back. A host copy that fails to decode (corrupted) is never handed out
/// as data: the decode leaves zeros and an error status, which the manager reads without blocking
/// once the decode has run and keeps for that tensor (stash::decode_failure). It is reported by
/// synchronize() (stash::codec_error naming the tensor) or poll_decode_failures(), never by a
/// call on another tensor; if the tensor was released before its status was read, the failure is
/// only counted (offload_stats::decode_failures), and the host copy is freed once the decode has
/// run.
/// @tparam Backend Streams, events and copies: a stash::offload_backend.
/// @tparam DevicePool Where tensors live on the device: a stash::pool.
/// @tparam HostPool Where offloaded copies live on the host (pinned): a stash::pool.
/// @tparam Transfer How the bytes move: a codec (`zvc<float>`, `pool_argmax`, ...: its form on
///   Backend is transfer_for_t's), a transfer policy (raw_transfer, a custom one), or a
///   transfer_set of them, one chosen per offload.
template <offload_backend Backend, pool DevicePool, pool HostPool, class Transfer = raw_transfer>
class offload_manager {
 public:
  /// @brief The backend's stream handle.
  using stream_type = typename Backend::stream;
  /// @brief The members of Transfer, as Backend runs them, as a transfer_set (a single transfer is
  /// a set of one).
  using transfer_set_type =
      typename detail::transfer_members<transfer_for_t<Backend, Transfer>>::type;
  /// @brief How many transfers offload_async can choose from (1 unless Transfer is a set).
  static constexpr std::size_t transfer_count = transfer_set_type::size;
  /// @brief A tensor's per-transfer descriptor: any member's `descriptor_type` (a pool_geometry
  /// for pool_argmax), or none (`{}`).
  using descriptor_type = transfer_descriptor_t<transfer_set_type>;

  /// @brief A manager over `backend`, moving tensors between `device_pool` and `host_pool`.
  /// @param backend The backend (outlives this object).
  /// @param device_pool Where tensors live on the device (outlives this object).
  /// @param host_pool Where host copies live (outlives this object).
  /// @param options Stream priorities.
  offload_manager(Backend& backend, DevicePool& device_pool, HostPool& host_pool,
                  offload_manager_options options = {})
      : backend_(backend),
        device_pool_(device_pool),
        host_pool_(host_pool),
        d2h_(backend.create_stream(options.d2h_priority)),
        h2d_(backend.create_stream(options.h2d_priority)),
        capture_(backend, d2h_, h2d_)
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
      checks_.drop_all(release_event(), free_host_slot());
      for (std::size_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].state != tensor_state::released) { deallocate_async(handle_of(i)); }
      }
      retry_deferred_frees();
    } catch (...) {  // NOLINT(bugprone-empty-catch): destructors never throw
    }
  }

  /// @brief Host pool bytes one offload of a `bytes`-byte tensor takes, before the pool rounds
  /// them (the transfer's worst case plus its status record): size a host pool's budget and
  /// reserve() with it.
  /// @param bytes The tensor's size.
  /// @param transfer Which member of a transfer_set (0 for a single transfer).
  /// @param desc The member's descriptor of the tensor, if it takes one (see offload_async).
  /// @return The host pool bytes.
  /// @throws stash::logic_error For a tensor the member cannot encode (or an index past the set).
  [[nodiscard]] static std::size_t host_slot_bytes(std::size_t bytes, std::size_t transfer = 0,
                                                   descriptor_type const& desc = {})
  {
    return detail::host_slot_bytes(protocol::host_bytes(transfer, bytes, desc));
  }

  /// @brief Whether member `transfer` can move a `bytes`-byte tensor described by `desc`: the
  /// member's `accepts` query (transfer.hpp), asked without an exception. When it says yes,
  /// host_slot_bytes() and offload_async() take the tensor (the pools permitting).
  /// @param bytes The tensor's size.
  /// @param transfer Which member of a transfer_set (false for an index past the set).
  /// @param desc The member's descriptor of the tensor, if it takes one.
  /// @return Whether the member encodes such a tensor.
  [[nodiscard]] static bool accepts(std::size_t bytes, std::size_t transfer = 0,
                                    descriptor_type const& desc = {}) noexcept
  {
    return protocol::accepts(transfer, bytes, desc);
  }

  /// @brief The largest tensor the manager takes: half the address space, so that no size it
  /// computes from a tensor's (a pool's rounding, a host slot with its status record) can wrap.
  static constexpr std::size_t max_tensor_bytes = std::numeric_limits<std::size_t>::max() / 2;

  /// @brief A new resident tensor of `bytes` from the device pool, usable on `stream`. A size
  /// above max_tensor_bytes is stash::out_of_memory before the pool is asked (nothing taken).
  /// @param bytes The tensor's size.
  /// @param stream The stream whose order the call joins.
  /// @return The tensor's handle.
  tensor_handle allocate_async(std::size_t bytes, stream_type stream)
  {
    STASH_EXPECTS(bytes > 0, "offload_manager::allocate_async: a tensor needs at least one byte");
    check_size(bytes, "allocate_async");
    bool const captured = capture_of(stream, "allocate_async");
    reserve_slot();  // the table cannot fail once the memory is taken
    void* p = pool_allocate(device_pool_, backend_.tag(stream), bytes);
    return install(p, bytes, stream, captured);
  }

  /// @brief Takes over `bytes` at `device` (from the device pool, last used on `stream`).
  /// @param device Memory from the device pool.
  /// @param bytes The tensor's size.
  /// @param stream The stream whose order the call joins.
  /// @return The tensor's handle.
  tensor_handle adopt(void* device, std::size_t bytes, stream_type stream)
  {
    STASH_EXPECTS(device != nullptr && bytes > 0, "offload_manager::adopt: empty tensor");
    check_size(bytes, "adopt");
    bool const captured = capture_of(stream, "adopt");
    reserve_slot();
    return install(device, bytes, stream, captured);
  }

  /// @brief Stash the tensor on the host after the work queued on `stream`; see the class docs.
  /// @param h The tensor.
  /// @param stream Its producers' stream.
  /// @param transfer Which member of a transfer_set moves it (0 for a single transfer); its
  ///   prefetch decodes with the same member.
  /// @param desc The member's descriptor of the tensor, if it takes one (pool_argmax: the max
  ///   pool's geometry); kept with the tensor for its prefetch.
  /// @throws stash::logic_error Before anything is taken, for a misuse or a tensor the member
  ///   cannot encode (none or an unusable descriptor, a size over its limit).
  void offload_async(tensor_handle h, stream_type stream, std::size_t transfer = 0,
                     descriptor_type const& desc = {})
  {
    reap();
    entry& e             = checked(h, "offload_async");
    bool const capturing = check_capture(h, e, "offload_async", stream);
    if (e.state != tensor_state::resident) { misuse(h, e, "offload_async", "it is not resident"); }
    // The transfer's limits (and the index) are checked here, before anything is taken.
    std::size_t const capacity = protocol::host_bytes(transfer, e.bytes, desc);
    if (e.kept) { free_kept_copy(h, e); }  // a new copy replaces it (it is the same value)
    // Asked once, before anything is taken: a device codec's answer is a CUDA call (CUB's query),
    // which must not be repeated where a throw would skip a give-back.
    std::size_t const scratch_n = protocol::scratch_bytes(transfer, e.bytes);
    e.transfer                  = static_cast<std::uint8_t>(transfer);
    e.desc                      = desc;
    std::size_t const slot      = detail::host_slot_bytes(capacity);
    // While capturing, memory is taken in the capturing stream's order: the pools can see that
    // stream capturing (the D2H stream joins the capture only below), and every use of the
    // memory on the D2H stream is ordered after it.
    stream_ref const tag  = backend_.tag(capturing ? stream : d2h_);
    std::string const why = "offload of tensor " + to_string(h) + ", which stays resident";
    void* host            = take(host_pool_, slot, tag, "host pool", why);
    void* scratch         = nullptr;
    try {
      scratch = take_scratch(scratch_n, tag, why);
    } catch (...) {
      give_back(pool_side::host, host, slot, capturing ? stream : d2h_);
      throw;
    }
    event_type host_ready{};
    try {
      queue_encode(e, stream, host, capacity, scratch);
      host_ready = backend_.record(d2h_);  // a failed record is a failed offload, too
    } catch (...) {
      // Work queued before the failure (the copy) may still read the tensor, which stays
      // resident: its next writer on another stream must not race that copy, so this error path
      // (never the success path) waits for the D2H stream; outside a capture only. The memory
      // then goes back in the D2H stream's order.
      if (!capturing) {
        try {
          backend_.synchronize(d2h_);
        } catch (...) {  // NOLINT(bugprone-empty-catch): the first failure is the one reported
        }
      }
      give_back(pool_side::device, scratch, scratch_n, d2h_);
      give_back(pool_side::host, host, slot, d2h_);
      throw;
    }
    // From here the tensor is on its way out: the entry owns the host slot before anything else
    // can fail, then the scratch and the device bytes go back (later, should a pool refuse them
    // now: give_back never throws).
    void* const device = e.device;
    backend_.release(e.ready);
    e.host_ready      = host_ready;
    e.device          = nullptr;
    e.host            = host;
    e.host_read       = false;
    e.capacity        = capacity;
    e.state           = tensor_state::offloading;
    e.encoded_counted = false;
    ++stats_.offloads;
    stats_.bytes_offloaded += e.bytes;
    give_back(pool_side::device, scratch, scratch_n, d2h_);
    give_back(pool_side::device, device, e.bytes, d2h_);
  }

  /// @brief Gives a resident tensor's device bytes back in the order of its last use, copying
  /// nothing: its contents are gone (tensor_state::dropped) until rematerialize_async() gives it
  /// bytes again for the caller to recompute (stash::allocator's recompute entries). Refused
  /// (stash::logic_error) for a tensor that is not resident or while capturing.
  /// @param h The tensor.
  void drop_async(tensor_handle h)
  {
    reap();
    entry& e = checked(h, "drop_async");
    (void)check_capture(h, e, "drop_async", std::nullopt);
    if (e.state != tensor_state::resident) { misuse(h, e, "drop_async", "it is not resident"); }
    if (e.kept) { free_kept_copy(h, e); }
    give_back(pool_side::device, e.device, e.bytes, e.last_stream);
    // The last prefetch's event orders nothing any more (the bytes it brought are gone): released
    // here rather than waited for by every acquire of the rematerialised tensor.
    backend_.release(e.ready);
    e.device = nullptr;
    e.state  = tensor_state::dropped;
  }

  /// @brief Fresh device bytes for a dropped tensor, taken in `stream`'s order, for the caller to
  /// write its contents on `stream` (they are undefined until then); resident from here. A pool
  /// that throws (stash::out_of_memory) leaves the tensor dropped.
  /// @param h The tensor.
  /// @param stream The stream whose order the call joins.
  void rematerialize_async(tensor_handle h, stream_type stream)
  {
    reap();
    entry& e = checked(h, "rematerialize_async");
    (void)check_capture(h, e, "rematerialize_async", stream);  // before the pool is asked
    if (e.state != tensor_state::dropped) {
      misuse(h, e, "rematerialize_async", "only a dropped tensor is rematerialised");
    }
    e.device      = pool_allocate(device_pool_, backend_.tag(stream), e.bytes);
    e.state       = tensor_state::resident;
    e.last_stream = stream;
  }

  /// @brief Start bringing the tensor back (no-op when it is resident or on its way).
  /// @param h The tensor.
  void prefetch_async(tensor_handle h) { prefetch(h, false, std::nullopt); }

  /// @brief As prefetch_async(h), keeping the host copy when `copy` is host_copy_mode::keep (see
  /// redrop_async). Ignored (the copy is released) for a tensor of a captured graph or while
  /// capturing: a graph's host slots are its own.
  /// @param h The tensor.
  /// @param copy What becomes of the host copy.
  void prefetch_async(tensor_handle h, host_copy_mode copy)
  {
    prefetch(h, false, std::nullopt, copy);
  }

  /// @brief As prefetch_async(h), but the device memory is taken in `stream`'s order and the
  /// copy starts after the work queued on `stream` so far. A pool that numbers one stream's
  /// allocations (lifetime_arena) then sees the prefetch at the same place every iteration and
  /// plans it; the price is that the copy cannot start before `stream` reaches this point.
  /// @param h The tensor.
  /// @param stream The stream whose order the call joins.
  void prefetch_async(tensor_handle h, stream_type stream) { prefetch(h, false, stream); }

  /// @brief As prefetch_async(h, stream), keeping the host copy when `copy` is host_copy_mode::keep
  /// (see redrop_async and prefetch_async(h, copy)).
  /// @param h The tensor.
  /// @param stream The stream whose order the call joins.
  /// @param copy What becomes of the host copy.
  void prefetch_async(tensor_handle h, stream_type stream, host_copy_mode copy)
  {
    prefetch(h, false, stream, copy);
  }

  /// @brief Sends a tensor prefetched with host_copy_mode::keep back to that host copy: its device
  /// bytes go back to the pool in the order of its last use and nothing is copied (the caller
  /// promises it did not write the tensor since the prefetch: the host copy is still its value).
  /// The tensor is offloaded again (tensor_state::offloading until the host has seen its original
  /// copy complete); its next prefetch reads the same host copy. Refused (stash::logic_error) for
  /// a tensor holding no kept copy (holds_host_copy()) and while capturing.
  /// @param h The tensor.
  void redrop_async(tensor_handle h)
  {
    reap();
    entry& e = checked(h, "redrop_async");
    (void)check_capture(h, e, "redrop_async", std::nullopt);
    if (!e.kept) {
      misuse(
          h, e, "redrop_async",
          "it holds no host copy kept by its prefetch (prefetch_async with host_copy_mode::keep)");
    }
    // After a prefetch nobody acquired, the last use of the bytes is the H2D copy.
    give_back(pool_side::device, e.device, e.bytes,
              e.state == tensor_state::prefetching ? h2d_ : e.last_stream);
    backend_.release(e.ready);
    e.device = nullptr;
    e.kept   = false;
    e.state  = tensor_state::offloading;  // refresh() sees host_ready passed: offloaded
    ++stats_.redrops;
  }

  /// @brief Whether the tensor holds a host copy its prefetch kept (host_copy_mode::keep), which
  /// redrop_async() can send it back to.
  /// @param h The tensor.
  /// @return True while such a copy is held.
  [[nodiscard]] bool holds_host_copy(tensor_handle h) { return checked(h, "holds_host_copy").kept; }

  /// @brief Frees the host copy the tensor's prefetch kept, if it holds one (a caller about to
  /// write the tensor, or done with the copy). In the order of the copies that read it; refused
  /// (stash::logic_error) while capturing, when that order is a captured stream's.
  /// @param h The tensor.
  void discard_host_copy(tensor_handle h)
  {
    entry& e = checked(h, "discard_host_copy");
    if (!e.kept) { return; }
    (void)check_capture(h, e, "discard_host_copy", std::nullopt);
    free_kept_copy(h, e);
  }

  /// @brief Make `stream` wait until the tensor is resident and return its device pointer.
  /// @param h The tensor.
  /// @param stream The stream whose order the call joins.
  /// @return The device pointer, valid for work queued on `stream`.
  [[nodiscard]] void* acquire_async(tensor_handle h, stream_type stream)
  {
    reap();
    entry& e = checked(h, "acquire_async");
    (void)check_capture(h, e, "acquire_async", stream);
    refresh(e);
    if (e.state == tensor_state::dropped) {
      misuse(h, e, "acquire_async", "its contents were dropped: rematerialize_async() it first");
    }
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

  /// @brief The tensor is dead: free what it holds, in the order of its last use. Allowed in and
  /// out of a capture (see the file docs).
  /// @param h The tensor.
  void deallocate_async(tensor_handle h)
  {
    reap();
    entry& e = checked(h, "deallocate_async");
    // After a prefetch nobody acquired, the last use of the bytes is the H2D copy.
    give_back(pool_side::device, e.device, e.bytes,
              e.state == tensor_state::prefetching ? h2d_ : e.last_stream);
    if (e.kept) {
      free_kept_copy(h, e);
    } else if (e.host != nullptr) {
      free_host_copy(h, e);
    }
    checks_.orphan(h, release_event(), free_host_slot());
    backend_.release(e.ready);
    backend_.release(e.host_ready);
    e.device = nullptr;
    e.host   = nullptr;
    e.state  = tensor_state::released;
    // The slot is free for the next tensor; its new generation refuses this handle from now on.
    // A slot whose generation would wrap is retired instead.
    if (++e.generation != 0) { free_slots_.push_back(h.index()); }
  }

  /// @brief Where the tensor is now (completed copies are taken into account); `released` for a
  /// handle whose tensor was released. A handle of another manager is stash::logic_error.
  /// @param h The tensor.
  /// @return Where the tensor is.
  [[nodiscard]] tensor_state state(tensor_handle h)
  {
    entry& e = slot_of(h, "state");
    if (e.generation != h.generation()) { return tensor_state::released; }
    refresh(e);
    return e.state;
  }

  /// @brief The host copy of an offloaded tensor (as the transfer wrote it: raw bytes or a codec
  /// buffer a host reference decodes), e.g. to inspect stashed data on the host. Blocks until the
  /// copy is complete.
  /// @param h The tensor.
  /// @return The host copy's bytes.
  [[nodiscard]] std::span<std::byte const> host_copy(tensor_handle h)
  {
    entry& e = checked(h, "host_copy");
    if (e.captured || side_capturing()) {
      misuse(h, e, "host_copy",
             "the host cannot wait for a copy while a CUDA graph is captured, "
             "nor for one that a graph makes");
    }
    if (e.state != tensor_state::offloading && e.state != tensor_state::offloaded) {
      misuse(h, e, "host_copy", "only an offloaded tensor has a host copy");
    }
    backend_.synchronize(e.host_ready);
    refresh(e);
    return {static_cast<std::byte const*>(e.host), e.capacity};
  }

  /// @brief The tensor's size in bytes.
  /// @param h The tensor.
  /// @return The tensor's size.
  [[nodiscard]] std::size_t bytes(tensor_handle h) { return checked(h, "bytes").bytes; }

  /// @brief Blocks until the manager's copies queued so far have finished, then reports the
  /// oldest decode failure not reported yet (see poll_decode_failures()).
  /// @throws stash::codec_error naming the tensor whose host copy failed to decode (call again
  ///   for the next one); stash::logic_error while capturing (synchronizing would invalidate the
  ///   capture).
  void synchronize()
  {
    STASH_EXPECTS(!side_capturing(),
                  "offload_manager::synchronize: the manager's streams are being captured into a "
                  "CUDA graph; synchronizing them would invalidate the capture");
    backend_.synchronize(d2h_);
    backend_.synchronize(h2d_);
    reap();
    if (checks_.has_failures()) { throw checks_.take_first().to_error(); }
  }

  /// @brief The decode failures found so far and not reported yet, without blocking (decodes
  /// still running are found by a later call); each is reported once, here or by synchronize().
  /// @return The failures, oldest first, each naming its tensor.
  [[nodiscard]] std::vector<decode_failure> poll_decode_failures()
  {
    reap();
    return checks_.take_all();
  }

  /// @brief Makes `stream` wait, on the device, for every copy the manager queued so far. Ends a
  /// captured region: the side streams that joined the capture rejoin the capturing `stream`
  /// (cudaStreamEndCapture requires it). Never blocks the host.
  /// @param stream The stream whose order the call joins.
  void join_async(stream_type stream)
  {
    bool const capturing = backend_.capturing(stream);
    // A stream outside the capture must not wait for captured work (that would fork it into the
    // capture), nor a capturing one for work outside it (an isolation error).
    for (stream_type side : {d2h_, h2d_}) {
      if (backend_.capturing(side) == capturing) { order_after(stream, side); }
    }
  }

  /// @brief What was moved so far.
  /// @return The counters.
  [[nodiscard]] offload_stats const& stats() const noexcept { return stats_; }
  /// @brief The tag every handle of this manager carries (tensor_handle::owner).
  /// @return The tag this manager's handles carry.
  [[nodiscard]] std::uint64_t owner_tag() const noexcept { return owner_; }
  /// @brief The device-to-host stream.
  /// @return The offload stream.
  [[nodiscard]] stream_type d2h_stream() const noexcept { return d2h_; }
  /// @brief The host-to-device stream.
  /// @return The prefetch stream.
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
    bool captured{false};         // created while capturing: belongs to that graph
    std::uint8_t transfer{0};     // the transfer_set member of the last offload
    descriptor_type desc{};       // what the last offload's member was told about the tensor
    bool encoded_counted{false};  // the host copy's size is in stats_ (see count_encoded)
    // Resident (or prefetching) and `host` still holds its value: host_copy_mode::keep.
    bool kept{false};
    // A prefetch read the host copy: its last readers are on the H2D stream (which waited for
    // the D2H copy), so it is freed in that stream's order, through the decode check if one is
    // pending (which reads its status record).
    bool host_read{false};
    std::uint32_t generation{1};  // of the slot: grows at each release (see tensor_handle)
  };

  // Which pool a block goes back to.
  enum class pool_side : std::uint8_t { device, host };

  // A block whose give-back threw: given back at a later call.
  struct deferred_free {
    pool_side side;
    void* p;
    std::size_t bytes;
    stream_type stream;
  };

  using protocol = detail::transfer_protocol<transfer_set_type>;

  // The slot `h` names, for a handle of this manager (stash::logic_error otherwise); its tensor
  // may have been released since (the generations then differ).
  entry& slot_of(tensor_handle h, const char* what)
  {
    if (h.owner() != owner_) {
      STASH_FAIL(std::string("offload_manager::") + what + ": tensor " + to_string(h) +
                 (h.is_null() ? " is no tensor (a default handle)"
                              : " belongs to another manager (or allocator)"));
    }
    STASH_EXPECTS(h.index() < entries_.size() && h.generation() != 0 &&
                      h.generation() <= entries_[h.index()].generation,
                  std::string("offload_manager::") + what + ": tensor " + to_string(h) +
                      " was never made by this manager (table of " +
                      std::to_string(entries_.size()) + " slots)");
    return entries_[h.index()];
  }

  // The live tensor `h` names (stash::logic_error for a released, foreign or forged handle).
  entry& checked(tensor_handle h, const char* what)
  {
    entry& e = slot_of(h, what);
    if (e.generation != h.generation() || e.state == tensor_state::released) {
      STASH_FAIL(std::string("offload_manager::") + what + ": tensor " + to_string(h) +
                 " was released (its slot is now at generation " + std::to_string(e.generation) +
                 ")");
    }
    return e;
  }

  [[noreturn]] void misuse(tensor_handle h, entry const& e, const char* what, const char* why) const
  {
    STASH_FAIL(std::string("offload_manager::") + what + ": tensor " + to_string(h) + " is " +
               to_string(e.state) + ", and " + why);
  }

  // The handle of the tensor now in slot `i`.
  [[nodiscard]] tensor_handle handle_of(std::size_t i) const noexcept
  {
    return tensor_handle(owner_, static_cast<std::uint32_t>(i), entries_[i].generation);
  }

  // A size past max_tensor_bytes: stash::out_of_memory, before anything is taken.
  static void check_size(std::size_t bytes, const char* what)
  {
    if (bytes > max_tensor_bytes) {
      throw out_of_memory(std::string("offload_manager::") + what +
                              " (a tensor larger than half the address space, max_tensor_bytes)",
                          bytes, max_tensor_bytes, std::nullopt);
    }
  }

  // Makes sure install() finds a slot without allocating (taken before the tensor's memory, so
  // that nothing can fail once it is held).
  void reserve_slot()
  {
    if (!free_slots_.empty()) { return; }
    STASH_EXPECTS(entries_.size() < std::numeric_limits<std::uint32_t>::max(),
                  "offload_manager: more than 2^32 - 1 tensors alive at once");
    entries_.reserve(entries_.size() + 1);
    free_slots_.reserve(entries_.size() + 1);  // deallocate_async() never allocates
  }

  // A resident tensor at `device` in a free slot (reserve_slot() came first). Never throws.
  tensor_handle install(void* device, std::size_t bytes, stream_type stream, bool captured) noexcept
  {
    std::size_t i = 0;
    if (free_slots_.empty()) {
      entries_.emplace_back();  // capacity reserved
      i                   = entries_.size() - 1;
      stats_.tensor_slots = entries_.size();
    } else {
      i = free_slots_.back();
      free_slots_.pop_back();
    }
    entry& e                       = entries_[i];
    std::uint32_t const generation = e.generation;
    e                              = entry{};
    e.generation                   = generation;
    e.state                        = tensor_state::resident;
    e.bytes                        = bytes;
    e.device                       = device;
    e.last_stream                  = stream;
    e.captured                     = captured;
    return handle_of(i);
  }

  // Frees the host copy the entry holds, in the order of its last readers: through the decode
  // check still pending on it (it reads the copy's status record once the decode has run), else
  // on the H2D stream when a prefetch read it (that stream waited for the D2H copy), else on the
  // D2H stream (its writer). Never throws.
  void free_host_copy(tensor_handle h, entry& e) noexcept
  {
    if (e.host == nullptr) { return; }
    if (!e.host_read || !checks_.hand_host(h, e.host)) {
      give_back(pool_side::host, e.host, detail::host_slot_bytes(e.capacity),
                e.host_read ? h2d_ : d2h_);
    }
    e.host      = nullptr;
    e.host_read = false;
  }

  // Frees the host copy a resident tensor kept (host_copy_mode::keep) and no redrop used.
  void free_kept_copy(tensor_handle h, entry& e) noexcept
  {
    backend_.release(e.host_ready);
    free_host_copy(h, e);
    e.kept = false;
    ++stats_.discarded_host_copies;
  }

  // Gives `p` back to its pool in `s`'s order; a pool that throws keeps nothing lost: the block
  // is given back at a later call (retry_deferred_frees), counted in offload_stats.
  void give_back(pool_side side, void* p, std::size_t bytes, stream_type s) noexcept
  {
    if (p == nullptr) { return; }
    try {
      free_to(side, p, bytes, s);
    } catch (...) {
      ++stats_.deferred_frees;
      try {
        deferred_.push_back(deferred_free{side, p, bytes, s});
      } catch (...) {  // NOLINT(bugprone-empty-catch): no memory for the note: the block is lost
      }
    }
  }
  void free_to(pool_side side, void* p, std::size_t bytes, stream_type s)
  {
    if (side == pool_side::device) {
      pool_deallocate(device_pool_, backend_.tag(s), p, bytes);
    } else {
      pool_deallocate(host_pool_, backend_.tag(s), p, bytes);
    }
  }
  // Gives back the blocks a pool refused before; those it refuses again wait for the next call.
  void retry_deferred_frees() noexcept
  {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < deferred_.size(); ++i) {
      try {
        free_to(deferred_[i].side, deferred_[i].p, deferred_[i].bytes, deferred_[i].stream);
      } catch (...) {
        deferred_[kept++] = deferred_[i];
      }
    }
    deferred_.resize(kept);
  }

  // The capture rules (detail/capture_rules.hpp), naming the tensor in a refusal.
  bool side_capturing() const { return capture_.side_capturing(); }
  bool capture_of(stream_type stream, const char* what) const
  {
    return capture_.capture_of(stream, what);
  }
  bool check_capture(tensor_handle h, entry const& e, const char* what,
                     std::optional<stream_type> stream)
  {
    detail::capture_verdict const v = capture_.check(e.captured, what, stream);
    if (v.refusal != nullptr) { misuse(h, e, what, v.refusal); }
    return v.capturing;
  }

  // The D2H stream waits for the tensor's producers, then encodes it into the host slot.
  void queue_encode(entry const& e, stream_type stream, void* host, std::size_t capacity,
                    void* scratch)
  {
    order_after(d2h_, stream);
    if (e.last_stream != stream) { order_after(d2h_, e.last_stream); }
    backend_.wait(d2h_, e.ready);  // a tensor still arriving must have arrived
    protocol::encode(
        e.transfer, backend_, d2h_,
        detail::encode_call<descriptor_type>{e.device, e.bytes, host, capacity, scratch,
                                             detail::host_slot_status(host, capacity), e.desc});
  }

  // pool.allocate, with the tensor in the message of a refusal.
  template <class Pool>
  void* take(Pool& pool, std::size_t bytes, stream_ref tag, const char* which,
             std::string const& why)
  {
    try {
      return pool_allocate(pool, tag, bytes);
    } catch (out_of_memory const& oom) {
      throw out_of_memory(std::string("offload_manager ") + which + " (" + why + ")",
                          oom.requested_bytes(), oom.budget_bytes(), oom.in_use_bytes(),
                          oom.largest_free_bytes());
    } catch (logic_error const& refused) {
      throw logic_error(std::string(refused.what()) + " [offload_manager " + which + ", " + why +
                        "]");
    }
  }

  void* take_scratch(std::size_t n, stream_ref tag, std::string const& why)
  {
    return n == 0 ? nullptr : take(device_pool_, n, tag, "device pool (codec scratch)", why);
  }

  // What the decode checks use to release an event and free a host slot (in the H2D stream's
  // order, after the decode that read it); neither throws.
  auto release_event() noexcept
  {
    return [this](event_type& ev) noexcept { backend_.release(ev); };
  }
  auto free_host_slot() noexcept
  {
    return [this](void* host, std::size_t capacity) noexcept {
      give_back(pool_side::host, host, detail::host_slot_bytes(capacity), h2d_);
    };
  }

  // Frees the host copies of finished decodes and keeps their failures for their tensors
  // (detail/decode_checks.hpp); never throws one. Not while the side streams capture: a free then
  // would be ordered on a capturing stream and the pool would hold the slot until a graph launch
  // that never frees it; the next call after the capture reaps.
  void reap()
  {
    if (side_capturing()) { return; }
    if (!deferred_.empty()) { retry_deferred_frees(); }
    checks_.reap([this](event_type const& ev) { return backend_.query(ev); }, release_event(),
                 free_host_slot(), stats_);
  }

  // Work queued on `later` from now on runs after the work queued on `earlier` so far.
  void order_after(stream_type later, stream_type earlier)
  {
    auto marker = backend_.record(earlier);
    backend_.wait(later, marker);
    backend_.release(marker);
  }

  // Takes completed copies into account (no blocking). A tensor created while capturing is never
  // polled: its events were recorded while capturing (see the file docs).
  void refresh(entry& e)
  {
    if (e.captured) { return; }
    if (e.state == tensor_state::offloading && backend_.query(e.host_ready)) {
      e.state = tensor_state::offloaded;
      if (!e.encoded_counted) { count_encoded(e); }  // a redropped tensor's was counted
    }
  }

  // The size of a completed host copy, for the compression ratio.
  void count_encoded(entry& e) noexcept
  {
    e.encoded_counted = true;
    if (protocol::reports_status_of[e.transfer]) {
      stats_.bytes_encoded += detail::host_slot_status(e.host, e.capacity)->encoded_bytes;
    } else {
      stats_.bytes_encoded += e.bytes;
    }
    stats_.bytes_encoded_source += e.bytes;
  }

  // `in`: the stream whose order the device memory is taken in (default: the H2D stream's).
  // `copy`: host_copy_mode::keep holds the host copy with the resident tensor (not for a tensor of
  // a captured graph, whose host slots are the graph's).
  void prefetch(tensor_handle h, bool on_demand, std::optional<stream_type> in,
                host_copy_mode copy = host_copy_mode::release)
  {
    entry& e = checked(h, "prefetch_async");
    if (!on_demand) { (void)check_capture(h, e, "prefetch_async", in); }
    if (e.state == tensor_state::resident || e.state == tensor_state::prefetching) { return; }
    if (e.state == tensor_state::dropped) {
      misuse(h, e, "prefetch_async", "it was dropped (no host copy): rematerialize_async() it");
    }
    refresh(e);  // a copy that has completed is counted before its slot is recycled
    // While capturing `in` is a capturing stream, which the pools see (see offload_async).
    stream_ref const tag  = backend_.tag(in ? *in : h2d_);
    std::string const why = "prefetch of tensor " + to_string(h) + "; its host copy stays valid";
    checks_.reserve_one();                            // nothing can fail once the decode is queued
    stream_ref const scratch = scratch_tag(in, tag);  // may throw: before anything is taken
    void* device             = take(device_pool_, e.bytes, tag, "device pool", why);
    queued_decode const q    = queue_prefetch(e, in, device, scratch, why);
    // From here the tensor is on its way back: the entry holds the device bytes first, then the
    // host copy is handed to its status check or given back (give_back never throws), or kept.
    void* const host      = e.host;
    bool const keep       = copy == host_copy_mode::keep && !e.captured;
    e.ready               = q.ready;
    e.device              = device;
    e.state               = tensor_state::prefetching;
    std::size_t uncounted = e.encoded_counted ? 0 : e.bytes;
    // A host copy read before (a kept one): the earlier decodes' checks give way to this one's
    // (nothing may read its status record while this decode writes it).
    if (e.host_read) { uncounted += checks_.supersede(h, host, release_event()); }
    if (!keep) {
      backend_.release(e.host_ready);
      e.host = nullptr;
    }
    e.kept      = keep;
    e.host_read = keep;
    if (protocol::reports_status_of[e.transfer]) {
      // The host copy stays until the decode's status has been read (and the encoded size, if
      // the host did not see the offload complete); while the tensor keeps it, the tensor frees
      // it (free_host_copy hands it to this check if still pending).
      typename detail::decode_checks<event_type>::pending p{h,         host,       e.capacity,
                                                            q.decoded, e.captured, uncounted};
      p.owns_host = !keep;
      checks_.add(p);
      e.encoded_counted = true;  // counted by the check
    } else {
      if (!e.encoded_counted) { count_encoded(e); }  // a raw copy is its own size
      if (!keep) { give_back(pool_side::host, host, detail::host_slot_bytes(e.capacity), h2d_); }
    }
    ++stats_.prefetches;
    if (on_demand) { ++stats_.demand_prefetches; }
    stats_.bytes_prefetched += e.bytes;
  }

  // Where a decode's scratch is taken: in the H2D stream's order, the decode being its only user.
  // Its size follows the host copy's (the encoded size, data dependent, or the capacity while the
  // host has not seen the offload complete, timing dependent), so in `in`'s order a pool that
  // numbers that stream's allocations (lifetime_arena) would meet another size every iteration
  // and serve it as a deviation (GPU review 2026-11-26b W5). While `in` is being captured, its
  // order, which the pools see (they take nothing new while capturing).
  stream_ref scratch_tag(std::optional<stream_type> in, stream_ref tag)
  {
    return in && !backend_.capturing(*in) ? backend_.tag(h2d_) : tag;
  }

  // The host copy's size, when the host knows it: the offload's event has passed (a tensor of a
  // captured graph is never polled, so its size is never known: each launch may differ).
  [[nodiscard]] std::size_t known_encoded_bytes(entry const& e) const noexcept
  {
    if (e.captured || e.state != tensor_state::offloaded) { return unknown_encoded_bytes; }
    if (protocol::reports_status_of[e.transfer]) {
      return detail::host_slot_status(e.host, e.capacity)->encoded_bytes;
    }
    return e.capacity;
  }

  // The events of a prefetch: the device copy is complete; its status may be read.
  struct queued_decode {
    event_type ready{};
    event_type decoded{};
  };

  // Queues the decode of `e`'s host copy into `device` on the H2D stream, its scratch taken in
  // `tag`'s order (scratch_tag). On any failure, `device` and the scratch go back in the H2D
  // stream's order (work queued before the failure may still use them) and the error propagates:
  // the host copy and the entry are untouched, ready for a retry.
  queued_decode queue_prefetch(entry const& e, std::optional<stream_type> in, void* device,
                               stream_ref tag, std::string const& why)
  {
    std::size_t const encoded = known_encoded_bytes(e);
    std::size_t n             = 0;
    void* scratch             = nullptr;
    try {
      // A transfer's sizing may throw too (a device codec's CUB query is a CUDA call).
      n       = protocol::decode_scratch_bytes(e.transfer, e.bytes, encoded);
      scratch = n == 0 ? nullptr : take(device_pool_, n, tag, "device pool (codec scratch)", why);
    } catch (...) {
      give_back(pool_side::device, device, e.bytes, in.value_or(h2d_));
      throw;
    }
    queued_decode q;
    try {
      if (in && *in != h2d_) { order_after(h2d_, *in); }  // the memory is ours from here on
      backend_.wait(h2d_, e.host_ready);
      transfer_decode(e, device, scratch, encoded);
      q.ready = backend_.record(h2d_);
      if (protocol::reports_status_of[e.transfer]) { q.decoded = backend_.record(h2d_); }
    } catch (...) {
      backend_.release(q.ready);
      give_back(pool_side::device, scratch, n, h2d_);
      give_back(pool_side::device, device, e.bytes, h2d_);
      // The host copy stays with the entry, which frees it in the D2H stream's order
      // (deallocate_async()), but the work queued here may still read it and write its status
      // record: the D2H stream waits for it. Best effort (the original error is the one reported);
      // a captured tensor's slot belongs to its graph, and the D2H stream may not be in that
      // capture.
      if (!e.captured) {
        try {
          order_after(d2h_, h2d_);
        } catch (...) {  // NOLINT(bugprone-empty-catch): the first failure is the one to report
        }
      }
      throw;
    }
    give_back(pool_side::device, scratch, n, h2d_);  // the decode is queued: never throws
    return q;
  }

  // The entry's transfer member's decode of its host copy into `device`, on the H2D stream.
  void transfer_decode(entry const& e, void* device, void* scratch, std::size_t encoded)
  {
    protocol::decode(e.transfer, backend_, h2d_,
                     detail::decode_call<descriptor_type>{
                         e.host, e.capacity, device, e.bytes, scratch,
                         detail::host_slot_status(e.host, e.capacity), encoded, e.desc});
  }

  Backend& backend_;
  DevicePool& device_pool_;
  HostPool& host_pool_;
  stream_type d2h_;
  stream_type h2d_;
  std::uint64_t owner_{detail::next_owner_tag()};
  std::vector<entry> entries_;
  std::vector<std::uint32_t> free_slots_;  // released slots, reused first
  detail::capture_rules<Backend> capture_;
  detail::decode_checks<event_type> checks_;
  std::vector<deferred_free> deferred_;
  offload_stats stats_;
};

}  // namespace stash
