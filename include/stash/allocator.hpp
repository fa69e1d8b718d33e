/**
 * @file allocator.hpp
 * @brief `stash::allocator<Pool, SwapPolicy, Codec, Backend>`: the one type a training loop uses.
 *
 * It composes the three policy slots: where device memory comes from (a `stash::pool`), what
 * leaves the device and when (a `stash::swap_policy`), and how it travels (a codec such as
 * `zvc<float>`, spelled the same on every backend: stash::transfer_for_t picks its host or device
 * form from the Backend; or `void` for raw copies), over an offload backend (CUDA streams, or
 * host threads for CPU tests).
 *
 * Life cycle:
 * 1. Storages allocated before the first `begin_iteration()` are persistent (parameters,
 *    optimizer state). A schedule may move them between two of their uses inside an iteration
 *    (search_swap's any-kind variant, `search`): they are offloaded and prefetched like
 *    activations, their handles stay valid, and they are resident again when the iteration ends
 *    (allocator_stats::persistent_offloads, persistent_restores). An entry's gap lies between
 *    two accesses of the recorded iteration, so none spans the iteration's end; a recompute entry
 *    for one is a stash::schedule_error (state is not recomputed). A wrap entry
 *    (swap_entry::wrap, search_swap::wrap) moves one across the iteration's end instead: it is
 *    offloaded after its last use (by end_iteration() when that is the last op), stays on the host
 *    between iterations, and is prefetched at the planned op of the next one; the recorded
 *    iteration ends by offloading it (counted in scheduled_offloads and persistent_offloads), so
 *    every replayed iteration starts as the schedule plans.
 *    An iteration that deviates or stops early brings it back at its end, as the others (the next
 *    one is recorded with everything resident); one whose offload fails stays resident and its
 *    prefetch is skipped. A loop that keeps raw pointers to its parameters across ops sets
 *    allocator_options::keep_persistent.
 * 2. The first iteration is recorded (a stash::trace_recorder sees every allocate / deallocate / op
 * / phase); nothing is offloaded.
 * 3. At its end, the policy object's `plan(analysis, budget)` gives the schedule, which the
 *    allocator validates (stash::schedule_error naming the policy).
 * 4. Later iterations replay it: the k-th allocation of the iteration is the recording's k-th
 *    storage (if its size matches), the j-th op the recording's j-th op. A scheduled storage is
 *    offloaded when op `offload_at` starts, once its last use before the gap has been enqueued
 *    (at the next op at the earliest), and prefetched when the op the schedule names starts;
 *    `op()` hands out pointers that are resident for the work the caller queues on its stream
 *    (on-demand prefetch covers anything the schedule missed).
 * 5. An iteration that deviates from the recording (other sizes, more or fewer allocations or
 *    ops) stays correct — unmatched storages are simply not swapped — and the next iteration is
 *    recorded anew and re-planned.
 * A pool that learns iterations itself (lifetime_arena) gets begin/end_iteration forwarded, and
 * prefetches take their memory in the compute stream's order, so the pool learns the split
 * lifetimes of swapped tensors (freed at the offload, allocated again at the prefetch) and of
 * recomputed ones (freed at the drop, allocated again with the re-runs' transients). The recorded
 * iteration moves nothing, so a plan that swaps or recomputes tells the pool to learn from the
 * first replayed iteration instead (lifetime_arena::relearn): that one is served by the pool's
 * fallback, and from the next on the pool's plan reuses the memory of tensors that are away.
 *
 * Per-tensor encodings: a schedule entry names how its storage crosses the link
 * (swap_entry::encoding, e.g. search_swap with `encodings` set, or stash::with_encodings). With a
 * `transfer_set<...>` in the Codec slot, each offload runs the member whose codec writes that
 * encoding (`configured` is member 0) and its prefetch decodes with the same member. Raw copies
 * are always available; an entry whose encoding the set does not carry, or whose storage the
 * member cannot encode (a size that is not a whole number of its elements), travels raw and is
 * counted in allocator_stats::encoding_fallbacks. The members' element types must be the tensors'
 * (the allocator does not know dtypes): zvc<float> and bitmask read float32. Lossless members
 * move bit patterns, so other data comes back exact; lossy ones (fp16, bf16, fp8, bitmask) would
 * round it as floats, so describe a tensor that does not hold floats at allocate_async() (an
 * `element_type`, e.g. element_type::i64 for indices, or its pool_geometry): lossy members refuse
 * it and it travels through a lossless member or raw (offload/transfer.hpp, "What a tensor holds").
 * `two_value<float>` in the slot (two_value_transfer on the host backend; on cuda_backend
 * device_two_value_transfer, with <stash/offload/device_two_value_transfer.cuh> included)
 * carries the entries that choose two_value (scaled dropout masks); data that turns out not
 * two-valued is written unchanged by its encoder, so it still comes back exact.
 * Gist's 4-bit pool argmax (`pool_argmax` in the slot) replaces a max
 * pool's int64 indices and needs that pool's geometry, which a trace does not carry: pass it to
 * allocate_async() (a `pool_geometry`: pool_argmax's per-transfer descriptor, see descriptor_type)
 * every iteration. Likewise `range_mask` (1 bit per element, exact for hardtanh's / ReLU6's
 * backward) needs the clamp's bounds: pass a `range_bounds` ({0, 6} for ReLU6) for the clamp's
 * saved input. The member is
 * chosen from the recorded iteration's descriptions; a replayed tensor described otherwise (or
 * not at all) travels raw and is counted in encoding_fallbacks.
 *
 * Recompute entries (schedule::recomputes, from `search`, `checkpoint`, `dtr`): a storage planned
 * for recompute is dropped once its last use before the gap has been enqueued (the offload
 * manager's drop_async: device bytes released, nothing copied, tensor_state::dropped), and before
 * op `at` hands out its pointers it is allocated again (rematerialize_async) and its writers are
 * re-run on that op's stream, in the schedule's order (chains: an earlier entry of the batch
 * rematerialises what a later one reads). The re-runs are the loop's: `op()` takes an optional
 * stash::recompute_fn, called with the op's pointers (reads, then writes, as op() returns them)
 * and a stream; the re-run of op w gets the rematerialised storage, w's live reads, and transient
 * buffers (from the device pool, freed in the stream's order right after) for w's other writes.
 * @code
 * auto p = alloc.op("aten::mul.Tensor", reads, writes, s,
 *                   [](std::span<void* const> p, cuda::stream_ref st) {
 *                     mul<<<g, b, 0, st.get()>>>(p[0], p[1]);
 *                   });
 * @endcode
 * Re-runs are not capturable: an iteration whose schedule recomputes is not run inside a CUDA
 * graph capture (the manager refuses the drop or the rematerialisation with a logic_error).
 * The schedule's work due before op j (offloads, drops, prefetches, re-runs) runs at the first
 * allocate_async() or op() call after op j - 1, where the planner counts it: a drop frees its
 * bytes before op j's outputs are allocated, and a re-run's outputs and transients are not
 * counted on top of them.
 * Re-run uses (sim/schedule.hpp; joint_search::redrop): a storage the re-runs before op p read
 * may come back for them (a swap entry whose next_use is p: prefetched before they run) and
 * leave again over the sub-gap after p. An entry whose last_use p is such a read only, with
 * offload_at = p (or a recompute entry), leaves right after the re-runs, before op p's pointers
 * (an early departure); with a later offload_at, when that op starts. A redrop entry
 * (swap_entry::redrop) copies nothing: the prefetch before it kept the host copy
 * (offload_manager's host_copy_mode::keep) and the redrop gives the device bytes back to it
 * (offload_manager::redrop_async; allocator_stats::scheduled_redrops); the last prefetch of the
 * chain frees it, so the host pool holds one copy of the storage at a time. A tensor written in
 * between (op() writes it, or acquire_async() hands out its pointer) gives up its kept copy: its
 * redrop then copies (allocator_stats::redrop_fallbacks), as does one whose kept prefetch failed
 * or came on demand. Kept copies a deviating iteration left unused are freed at its end.
 * A writer given no callable in the iteration that needs it: stash::logic_error from op() naming
 * both, and the storage stays resident from then on (allocator_stats::recompute_fallbacks). A
 * callable that throws leaves op() with the storage allocated. Counted in allocator_stats:
 * recomputes, recompute_ops, recomputed_bytes, recompute_fallbacks.
 *
 * Failures. A scheduled offload or prefetch that fails (the host pool out of memory, a copy that
 * cannot be queued) leaves its tensor where it was (resident, or offloaded until an op needs it)
 * and is counted in allocator_stats::failed_offloads / failed_prefetches: it is never thrown from
 * op() or end_iteration(), and end_iteration() closes the iteration whatever happens, so the next
 * begin_iteration() works. A size no allocation can have (near 2^64) is stash::out_of_memory from
 * allocate_async() with nothing taken; a device_budget below the recorded iteration's largest
 * storage is stash::out_of_memory from the end_iteration() that plans it, naming both. A pool's
 * end_iteration() that throws (one that learns iterations) leaves end_iteration() after the
 * allocator's: the next iteration is recorded afresh, and every persistent tensor still away
 * (wrapped ones included) is brought back first (allocator_stats::persistent_restores), so it is
 * recorded with everything resident.
 *
 * Tensors are named by stash::tensor_handle (offload/tensor_handle.hpp): a freed tensor's handle
 * and another allocator's handles are refused with stash::logic_error, and the tables behind them
 * reuse freed slots, so their size is the most tensors alive at once however long the run
 * (allocator_stats::tensor_slots).
 *
 * Thread safety: none. A stash::allocator (and its offload manager) is used by one host thread at
 * a time: one allocator per thread or training loop. Its backend's worker threads (host_backend)
 * or streams (CUDA) run the copies; every call into the allocator comes from the owning thread.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/error.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/pinned_host_upstream.hpp>
#include <stash/detail/recompute_replay.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/offload/pool_argmax_transfer.hpp>
#include <stash/offload/range_mask_transfer.hpp>
#include <stash/offload/tensor_handle.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/offload/two_value_transfer.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/pool.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/swap_policy.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_recorder.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace stash {

namespace detail {

// What the offload manager runs: the slot's transfers, then raw copies, which every backend can
// do and every schedule may ask for.
template <class Transfer>
struct with_raw {
  using type = transfer_set<Transfer, raw_transfer>;
};
template <class... Ts>
struct with_raw<transfer_set<Ts...>> {
  using type = transfer_set<Ts..., raw_transfer>;
};

// The encoding a transfer's bytes are (raw without a codec id; none for a format no schedule
// names).
template <class T>
constexpr std::optional<swap_encoding> transfer_encoding() noexcept
{
  if constexpr (requires { T::codec_id; }) {
    return encoding_of_codec(T::codec_id);
  } else {
    return swap_encoding::raw;
  }
}

// Encodings exact only for particular readers (a sign, a max-pool index, a clamp's inside bit):
// never a default.
constexpr bool sign_or_index_only(std::optional<swap_encoding> e) noexcept
{
  return e == swap_encoding::bitmask || e == swap_encoding::pool_argmax ||
         e == swap_encoding::range_mask;
}

template <class Set>
struct set_encodings;
template <class... Ts>
struct set_encodings<transfer_set<Ts...>> {
  static constexpr std::array<std::optional<swap_encoding>, sizeof...(Ts)> value{
      transfer_encoding<Ts>()...};
};

// The device scratch one transfer of member T takes for a `bytes`-byte tensor: the larger of its
// offload's (scratch_bytes) and its decode's with the host copy's size not known (the device
// codecs' staged copy at the slot's capacity: the worst case). A tensor the member refuses (a
// size it cannot encode), or whose scratch cannot be sized (a failing CUDA query: the CUB temp
// size), takes none here: the manager refuses that offload before taking anything (it fails,
// counted, the tensor resident), so planning goes on.
template <class T>
std::uint64_t member_scratch_bytes(std::size_t bytes)
{
  try {
    std::uint64_t const offload = T::scratch_bytes(bytes);
    if constexpr (requires { T::decode_scratch_bytes(bytes, unknown_encoded_bytes); }) {
      return std::max<std::uint64_t>(offload,
                                     T::decode_scratch_bytes(bytes, unknown_encoded_bytes));
    } else {
      return offload;
    }
  } catch (logic_error const&) {
    return 0;
  } catch (cuda_error const&) {
    return 0;
  }
}

template <class Set>
struct set_scratch;
template <class... Ts>
struct set_scratch<transfer_set<Ts...>> {
  // member_scratch_bytes of member `i`.
  static std::uint64_t bytes(std::size_t i, std::size_t tensor_bytes)
  {
    std::uint64_t out = 0;
    std::size_t k     = 0;
    ((k++ == i ? (out = member_scratch_bytes<Ts>(tensor_bytes)) : 0), ...);
    return out;
  }
};

// Where a backend's host copies live: pinned memory for CUDA, plain memory for host threads.
template <class Backend>
struct staging_for {
  using upstream = pinned_host_upstream;
};
template <>
struct staging_for<host_backend> {
  using upstream = host_upstream;
};

// The host-copy upstream of an allocator over `backend`: the backend's own staging_upstream()
// when it names one (stash::testing::fault_injecting_backend), else staging_for's.
template <class Backend>
auto staging_upstream_of(Backend& backend)
{
  if constexpr (requires { backend.staging_upstream(); }) {
    return backend.staging_upstream();
  } else {
    return typename staging_for<Backend>::upstream{};
  }
}
template <class Backend>
using staging_upstream_t = decltype(staging_upstream_of(std::declval<Backend&>()));

// The stream order a pool frees in, where the allocator can tell (caching_pool, lifetime_arena
// through its fallback pool); void for a pool it cannot see into (not checked).
template <class Pool>
struct pool_order {
  using type = void;
};
template <class Pool>
requires requires(Pool& p) { p.order(); }
struct pool_order<Pool> {
  using type = std::remove_cvref_t<decltype(std::declval<Pool&>().order())>;
};
template <class Pool>
requires(
    !requires(Pool & p) { p.order(); } &&
    requires(Pool const& p) { p.fallback(); }) struct pool_order<Pool> {
  using type = typename pool_order<
      std::remove_cvref_t<decltype(std::declval<Pool const&>().fallback())>>::type;
};

// A pool must reuse memory freed on the backend's streams only once their work has finished:
// its stream order must be the backend's.
template <class Pool, class Backend>
constexpr bool check_pool_order()
{
  using order = typename pool_order<Pool>::type;
  static_assert(std::is_void_v<order> || std::is_same_v<order, typename Backend::stream_order>,
                "Pool slot: the pool's stream order cannot serve the backend: memory freed on the "
                "backend's streams would be reused before their work has finished (e.g. "
                "caching_pool<host_upstream> orders nothing: on host_backend use "
                "caching_pool<host_upstream, host_stream_order>, i.e. "
                "stash::default_pool_t<stash::host_backend>)");
  return true;
}

}  // namespace detail

/// @brief The device pool a Backend's allocator uses unless told otherwise: a caching_pool over
/// the backend's memory, freeing in the backend's stream order.
/// @tparam Backend host_backend or cuda_backend.
template <class Backend>
struct default_pool;
/// @brief Host memory, host streams' order.
template <>
struct default_pool<host_backend> {
  using type = caching_pool<host_upstream, host_stream_order>;  ///< the pool
};
/// @brief Device memory, CUDA events' order.
template <>
struct default_pool<cuda_backend> {
  using type = caching_pool<device_upstream, cuda_event_order>;  ///< the pool
};
/// @brief default_pool's type.
/// @tparam Backend host_backend or cuda_backend.
template <class Backend>
using default_pool_t = typename default_pool<Backend>::type;

/// @brief Settings of a stash::allocator.
struct allocator_options {
  /// Device memory the swap policy must fit the iteration into (bytes), a device codec's scratch
  /// included: the policy plans for this less the most scratch one transfer of its schedule
  /// takes from the device pool (0 for host codecs and raw copies; for a device codec up to about
  /// the tensor's size, its staged compressed copy), which schedule::budget then says.
  std::uint64_t device_budget = std::numeric_limits<std::uint64_t>::max();
  /// The machine the policy plans for: a preset (stash::presets::pcie4_x16, ...; from a command
  /// line, stash::hardware_preset(name)) or your own figures (see sim/hardware.hpp).
  stash::hardware hardware = presets::pcie4_x16;
  /// Cap on the host staging pool (pinned memory on a GPU).
  std::size_t host_budget = std::numeric_limits<std::size_t>::max();
  /// The host staging pool grows in steps of this many bytes.
  std::size_t host_step = 64 * MiB;
  /// How entries whose encoding is `configured` travel: the Codec slot's first member (nullopt),
  /// or the member that writes this encoding (`raw`: plain copies). With a transfer_set in the
  /// slot, a program chooses its codec at run time with one instantiation.
  std::optional<swap_encoding> default_encoding{};
  /// Whether persistent tensors (allocated before the first begin_iteration(): parameters,
  /// optimizer state) stay on the device whatever the policy plans. false (the default): the
  /// schedule's entries for them run like any other, inside the iteration (offloaded after
  /// their last use before a gap, prefetched before the next use; their handles stay valid and
  /// they are resident again when the iteration ends). true: those entries are removed from the
  /// schedule in force (current_schedule(), its device_peak recomputed without them), for a loop
  /// that keeps raw pointers to its parameters across ops.
  bool keep_persistent = false;
};

/// @brief Where a stash::allocator stands.
enum class allocator_state : std::uint8_t {
  persistent,  ///< before the first iteration
  recording,   ///< recording an iteration
  replaying,   ///< following the planned schedule
};

/// @brief Counters of a stash::allocator.
struct allocator_stats {
  std::uint64_t iterations{0};  ///< completed iterations
  std::uint64_t replanned{0};   ///< schedules planned (the first one included)
  std::uint64_t deviations{0};  ///< iterations that did not match the recording
  /// Offloads issued from the schedule (the recorded iteration's closing wrap offloads included:
  /// one per wrap entry more than the replayed iterations' offloads).
  std::uint64_t scheduled_offloads{0};
  std::uint64_t scheduled_prefetches{0};  ///< prefetches issued from the schedule
  /// Entries of the schedule in force whose encoding the Codec slot does not carry (or cannot
  /// apply to the storage's size or descriptor): they travel raw. Plus replayed offloads whose
  /// descriptor the planned member refused (they too travel raw). Zero when every entry runs as
  /// planned.
  std::uint64_t encoding_fallbacks{0};
  /// Scheduled offloads that failed (host pool out of memory, a copy that could not be queued):
  /// the tensor stayed resident. Never thrown from op() or end_iteration().
  std::uint64_t failed_offloads{0};
  /// Scheduled prefetches that failed (device pool out of memory, ...): the tensor stayed
  /// offloaded, and the op that uses it brings it back on demand (throwing if that fails too).
  std::uint64_t failed_prefetches{0};
  /// Slots of the tensor table: the most tensors alive at once (freed slots are reused), so it
  /// stays bounded over a run of any length.
  std::uint64_t tensor_slots{0};
  /// Recompute entries run: storages rematerialised by re-running their writers.
  std::uint64_t recomputes{0};
  /// Op re-runs those took (a chain re-runs a producer and the in-place ops over it).
  std::uint64_t recompute_ops{0};
  /// Bytes rematerialised (the recomputed storages' sizes).
  std::uint64_t recomputed_bytes{0};
  /// Recompute entries of the schedule in force kept resident instead, because a writer they
  /// re-run was given no callable (see op()): no storage is dropped without a way back.
  std::uint64_t recompute_fallbacks{0};
  /// Of scheduled_offloads, those of persistent tensors (parameters, optimizer state allocated
  /// before the first iteration), offloaded between two of their uses inside an iteration or,
  /// for wrap entries, after their last use of an iteration (the recorded one's included).
  std::uint64_t persistent_offloads{0};
  /// Persistent tensors brought back by end_iteration() because the iteration ended before the
  /// op that was to prefetch them (a deviating iteration), or because the next iteration is
  /// recorded after all (a pool whose end_iteration() threw; wrapped ones included): they are
  /// resident between iterations.
  std::uint64_t persistent_restores{0};
  /// Redrop entries run (swap_entry::redrop): the storage left again by giving its device bytes
  /// back to the host copy its prefetch kept, with no device -> host copy (not in
  /// scheduled_offloads; offload_stats::redrops counts the manager's side).
  std::uint64_t scheduled_redrops{0};
  /// Redrop entries whose storage held no kept host copy when it was to leave (its prefetch
  /// failed or came on demand, a write since): offloaded with a copy instead, counted in
  /// scheduled_offloads too. Zero when every redrop runs as planned.
  std::uint64_t redrop_fallbacks{0};
  /// What the allocator's offload manager moved (its own tensor_slots included).
  offload_stats offload{};
};

/// @brief Pool x SwapPolicy x Codec over an offload Backend (see the file docs).
/// @tparam Pool The device pool (lifetime_arena, caching_pool, ...): a stash::pool.
/// @tparam SwapPolicy What to offload and when: a stash::swap_policy (no_swap, vdnn_all, auto_swap,
///   any_swap_policy, ...).
/// @tparam Codec How offloaded bytes travel: `void` (raw copies), a codec (`zvc<float>`,
///   `pool_argmax`, ...; its form on Backend is transfer_for_t's), or a transfer_set of them from
///   which each schedule entry's encoding picks (see the file docs). A custom transfer policy
///   (transfer.hpp) is taken as it is.
/// @tparam Backend Streams, events and copies: a stash::offload_backend.
template <class Pool, class SwapPolicy, class Codec = void, offload_backend Backend = cuda_backend>
class allocator {
  static_assert(detail::check_pool_slot<Pool>());
  static_assert(detail::check_swap_policy_slot<SwapPolicy>());
  static_assert(detail::check_pool_order<Pool, Backend>());

 public:
  /// @brief The backend's stream type.
  using stream_type = typename Backend::stream;
  /// @brief What op() is given to re-run that op (see stash::recompute_fn).
  using recompute_fn = stash::recompute_fn<stream_type>;
  /// @brief How bytes travel (a transfer_set when the Codec slot is one).
  using transfer_type = transfer_for_t<Backend, Codec>;
  /// @brief What the offload manager runs: transfer_type's members, then raw copies.
  using manager_transfer_type = typename detail::with_raw<transfer_type>::type;
  /// @brief What allocate_async() may be told about a tensor: the descriptor of a member that
  /// takes one (a pool_geometry for pool_argmax, a range_bounds for range_mask), its element_type
  /// (lossy members refuse a tensor not of theirs), or none (`{}`); see transfer_descriptor_t.
  using descriptor_type = transfer_descriptor_t<manager_transfer_type>;
  static_assert(!detail::sign_or_index_only(detail::set_encodings<manager_transfer_type>::value[0]),
                "stash::allocator: the Codec slot's first member runs every entry whose encoding "
                "is 'configured' (any tensor); it must not be bitmask, pool_argmax or "
                "range_mask, which keep only a sign, an index or a clamp's inside bit: put it "
                "after a general codec (or void) in the set");
  /// @brief The host staging pool.
  using host_pool_type =
      caching_pool<detail::staging_upstream_t<Backend>, typename Backend::stream_order>;

  /// @brief An allocator over `backend`, taking device memory from `device_pool`, planning with
  /// `policy` (a copy is kept).
  /// @param backend The backend (outlives this object).
  /// @param device_pool Where tensors live on the device (outlives this object).
  /// @param options Budget, hardware, encodings.
  /// @param policy The swap policy object, with its settings.
  allocator(Backend& backend, Pool& device_pool, allocator_options options = {},
            SwapPolicy policy = SwapPolicy{})
      : backend_(backend),
        pool_(device_pool),
        options_(options),
        policy_(std::move(policy)),
        host_pool_(detail::staging_upstream_of(backend),
                   pinned_host_pool_options(options_.host_budget, options_.host_step)),
        manager_(backend, device_pool, host_pool_),
        model_(options_.hardware)
  {
    auto const d = options_.default_encoding;
    STASH_EXPECTS(!detail::sign_or_index_only(d) && d != swap_encoding::configured,
                  "stash::allocator: default_encoding " +
                      std::string(to_string(d.value_or(swap_encoding::raw))) +
                      " cannot run every tensor (bitmask, pool_argmax and range_mask keep only "
                      "a sign, an index or a clamp's inside bit; 'configured' is what it "
                      "defines)");
  }

  allocator(allocator const&)            = delete;
  allocator& operator=(allocator const&) = delete;

  /// @brief Starts an iteration.
  void begin_iteration()
  {
    STASH_EXPECTS(!in_iteration_, "stash::allocator::begin_iteration: iteration already begun");
    in_iteration_    = true;
    alloc_index_     = 0;
    op_index_        = 0;
    next_offload_op_ = 0;
    prepared_        = false;
    deviated_        = false;
    for (auto& f : callables_) { f = nullptr; }
    kept_.clear();
    if (state_ == allocator_state::persistent || rerecord_) { start_recording(); }
    if constexpr (iteration_aware_pool<Pool>) { pool_.begin_iteration(); }
  }

  /// @brief Ends an iteration: plans after a recorded one, notes deviations of a replayed one.
  /// The iteration is closed whatever happens (the next begin_iteration() works): scheduled
  /// offloads that fail are counted, not thrown; a planning error (an invalid schedule, a budget
  /// below the largest storage) is thrown after the iteration was closed, and the next iteration
  /// is recorded afresh.
  void end_iteration()
  {
    STASH_EXPECTS(in_iteration_, "stash::allocator::end_iteration: no iteration begun");
    in_iteration_ = false;
    ++stats_.iterations;
    if (state_ == allocator_state::replaying) {
      if (op_index_ != recorded_ops_ || alloc_index_ != recorded_allocs_) { deviated_ = true; }
      issue_offloads_before(end_of_iteration, stream_type{});
      discard_kept_copies();
      restore_persistent();
    }
    bool const recorded = state_ == allocator_state::recording;
    std::exception_ptr planning;
    if (recorded) {
      try {
        plan();
      } catch (...) {
        rerecord_ = true;  // the next iteration is recorded afresh
        planning  = std::current_exception();
      }
    }
    if (recorded && !planning) { offload_wraps(); }
    if (!recorded && deviated_) {  // counted before the pool's end, which may throw (review H2)
      ++stats_.deviations;
      rerecord_ = true;
    }
    end_pool_iteration(recorded && !planning);
    if (planning) { std::rethrow_exception(planning); }
  }

  /// @brief A new tensor of `bytes`, usable by work queued on `stream`.
  /// @param bytes Its size.
  /// @param kind What it holds (act, param, ...), recorded in the trace.
  /// @param label Its name in the trace.
  /// @param stream The stream of its first use.
  /// @param desc A member's descriptor of the tensor: for max-pool indices, the pool's
  ///   pool_geometry, without which pool_argmax entries travel raw; for a clamp's saved input
  ///   (ReLU6's), its range_bounds, without which range_mask entries travel raw; for other data
  ///   that is not float32, its element_type (lossy members then refuse it: it travels lossless
  ///   or raw).
  /// @throws stash::out_of_memory when the device pool cannot take it, or for a size no
  ///   allocation can have (above offload_manager::max_tensor_bytes); nothing is then taken or
  ///   recorded.
  /// In replay, the first allocation after an op first runs the schedule's work due before the
  /// next op (its offloads and drops, prefetches and recomputes, on `stream`), where the planner
  /// counts it: the storages leaving after op j - 1 are gone, and those back for op j are back,
  /// before op j's own outputs are allocated. A recompute callable that throws there leaves this
  /// call with nothing allocated (as from op(): end the iteration and go on).
  /// @return The tensor's handle, valid until deallocate_async().
  [[nodiscard]] tensor_handle allocate_async(std::size_t bytes, storage_kind kind,
                                             std::string label, stream_type stream,
                                             descriptor_type const& desc = {})
  {
    if (state_ == allocator_state::replaying && in_iteration_ && !prepared_ &&
        op_index_ < recorded_ops_) {
      prepared_ = true;
      run_schedule_before(op_index_, stream);
    }
    tensor_handle const h = manager_.allocate_async(bytes, stream);
    try {
      tensor& t = slot(h);
      t         = tensor{};
      t.handle  = h;
      t.bytes   = bytes;
      t.desc    = desc;
      if (state_ != allocator_state::replaying) {
        t.storage = recorder_->allocate(bytes, kind, std::move(label));
        record_desc(*t.storage, desc);
      } else if (in_iteration_) {
        std::uint64_t const k = alloc_index_++;
        if (k < recorded_allocs_ && recording_->storages()[first_storage_ + k].bytes == bytes) {
          t.storage               = first_storage_ + k;
          by_storage_[*t.storage] = h;
        } else {
          deviated_ = true;
        }
      }
      t.alive = true;
    } catch (...) {
      manager_.deallocate_async(h);
      throw;
    }
    return h;
  }

  /// @brief The tensor is dead.
  /// @param h A live tensor of this allocator (stash::logic_error otherwise: freed, or another
  ///   allocator's).
  void deallocate_async(tensor_handle h)
  {
    tensor& t = checked(h, "deallocate_async");
    manager_.deallocate_async(t.handle);
    t.alive = false;
    if (state_ == allocator_state::recording && t.storage) { recorder_->deallocate(*t.storage); }
    if (state_ == allocator_state::replaying && t.storage && *t.storage < by_storage_.size()) {
      by_storage_[*t.storage] = tensor_handle{};
    }
  }

  /// @brief Records a phase change (forward, backward, optimizer).
  /// @param p The phase the next ops belong to.
  void phase(stash::phase p)
  {
    if (state_ == allocator_state::recording) { recorder_->phase(p); }
  }

  /// @brief An op about to be queued on `stream`: runs the schedule up to it and returns device
  /// pointers, reads first then writes, resident for work queued on `stream` from now on.
  /// Scheduled offloads and prefetches that fail here are counted (allocator_stats), not thrown;
  /// what this op's own tensors need (an on-demand prefetch) is thrown when it fails.
  /// @param name The op's name in the trace.
  /// @param reads The tensors it reads.
  /// @param writes The tensors it writes.
  /// Recompute entries: a storage planned for recompute is dropped (device bytes released,
  /// nothing copied) when the op after its last use starts, and before op `at` takes its pointers
  /// it is allocated again and its writers re-run on `stream`, by the callables this iteration's
  /// op() calls were given. A writer without one: this call throws stash::logic_error naming the
  /// op and the storage before doing anything (call it again to go on), and that storage stays
  /// resident from then on (allocator_stats::recompute_fallbacks). A callable that throws: the
  /// exception leaves this op() with the storage allocated and the allocator consistent; end the
  /// iteration and go on (it deviated: the next one is recorded afresh).
  /// @param stream The stream its work is queued on.
  /// @param recompute How to re-run this op (see stash::recompute_fn); kept for this iteration only
  ///   when a recompute entry of the schedule re-runs it.
  /// @return One device pointer per tensor: reads, then writes.
  std::vector<void*> op(std::string name, std::span<tensor_handle const> reads,
                        std::span<tensor_handle const> writes, stream_type stream,
                        recompute_fn recompute = {})
  {
    // A handle refused (freed, another allocator's) is refused before anything is done: the op
    // is not counted, so a replayed iteration stays in step with its recording.
    for (auto id : reads) { (void)checked(id, "op"); }
    for (auto id : writes) { (void)checked(id, "op"); }
    bool const replay = state_ == allocator_state::replaying && in_iteration_;
    if (replay && !recompute_.empty()) { check_callables_before(op_index_); }
    std::uint64_t const j   = op_index_++;
    bool const was_prepared = std::exchange(prepared_, false);
    if (state_ == allocator_state::recording) {
      std::vector<storage_id> r, w;
      for (auto id : reads) { r.push_back(storage_of(id, "op")); }
      for (auto id : writes) { w.push_back(storage_of(id, "op")); }
      recorder_->op(std::move(name), std::move(r), std::move(w));
      last_stream_ = stream;  // where the recorded iteration's end offloads wrapped tensors
    } else if (replay) {
      if (j >= recorded_ops_) { deviated_ = true; }
      if (!was_prepared) { run_schedule_before(j, stream); }
      // Op j's own callable is for recomputes after it (its writes' drops and re-runs come later).
      if (!recompute_.empty() && j < recorded_ops_ && recompute_.needs_fn[j]) {
        callables_[j] = std::move(recompute);
      }
    }
    std::vector<void*> pointers;
    pointers.reserve(reads.size() + writes.size());
    for (auto id : reads) {
      pointers.push_back(manager_.acquire_async(checked(id, "op").handle, stream));
    }
    for (auto id : writes) { pointers.push_back(acquire_async(id, stream)); }
    return pointers;
  }

  /// @brief The device pointer of `h` for work queued on `stream` (prefetched on demand). The
  /// caller may write through it: a host copy kept for a redrop of `h` is given up (the redrop
  /// then copies, counted in allocator_stats::redrop_fallbacks).
  /// @param h The tensor.
  /// @param stream The stream the pointer is used on.
  /// @return The device pointer, valid for work queued on `stream` until the next call.
  [[nodiscard]] void* acquire_async(tensor_handle h, stream_type stream)
  {
    tensor& t = checked(h, "acquire_async");
    // Asked of every tensor, not only those kept in this iteration: a copy that outlived its
    // iteration (discard_kept_copies could not free it) must not be redropped after a write.
    manager_.discard_host_copy(t.handle);
    return manager_.acquire_async(t.handle, stream);
  }

  /// @brief The schedule in force (empty before the first iteration ends).
  /// @return The schedule in force (empty while recording).
  [[nodiscard]] schedule const& current_schedule() const noexcept { return schedule_; }
  /// @brief The last recorded iteration's trace (nullptr before one was recorded).
  /// @return The last recording, or null before the first iteration ended.
  [[nodiscard]] trace const* recorded_trace() const noexcept
  {
    return recording_ ? &*recording_ : nullptr;
  }
  /// @brief persistent, recording or replaying.
  /// @return Recording or replaying.
  [[nodiscard]] allocator_state state() const noexcept { return state_; }
  /// @brief The allocator's counters, with its offload manager's (allocator_stats::offload).
  /// @return A copy: the counters as they are now.
  [[nodiscard]] allocator_stats stats() const noexcept
  {
    allocator_stats s = stats_;
    s.offload         = manager_.stats();
    return s;
  }
  /// @brief The host staging pool's figures: host bytes the offloaded copies hold now
  /// (in_use_bytes) and at most since the start (peak_in_use_bytes), and what the pool took from
  /// its upstream (reserved_bytes, peak_reserved_bytes).
  /// @return The host pool's counters.
  [[nodiscard]] pool_stats host_pool_stats() const { return host_pool_.stats(); }
  /// @brief Where tensor `h` is now.
  /// @param h The tensor.
  /// @return The tensor's state.
  [[nodiscard]] tensor_state where(tensor_handle h)
  {
    return manager_.state(checked(h, "where").handle);
  }
  /// @brief Waits for the allocator's transfers, then reports the oldest decode failure not
  /// reported yet.
  /// @throws stash::codec_error naming the tensor whose host copy failed to decode (its bytes are
  ///   zeros); no other call of the allocator throws one.
  void synchronize() { manager_.synchronize(); }
  /// @brief The decode failures found so far and not reported yet, without blocking (see
  /// offload_manager::poll_decode_failures).
  /// @return The failures, oldest first, each naming its tensor.
  [[nodiscard]] std::vector<decode_failure> poll_decode_failures()
  {
    return manager_.poll_decode_failures();
  }

 private:
  // Ends the iteration of a pool that learns iterations. After a plan that swaps or recomputes,
  // the replayed iterations allocate otherwise than the recorded one (prefetches and
  // rematerialisations on the compute stream, frees at offloads and drops): such a pool learns
  // from the next iteration instead of this one (lifetime_arena::relearn; review 2026-11-25 C5).
  void end_pool_iteration(bool planned)
  {
    if constexpr (iteration_aware_pool<Pool>) {
      if constexpr (requires(Pool & p) { p.relearn(); }) {
        if (planned && (!schedule_.entries.empty() || !recompute_.empty())) { pool_.relearn(); }
      }
      try {
        pool_.end_iteration();
      } catch (...) {
        // The next iteration is recorded, with everything resident: the wrapped tensors this
        // iteration's end sent to the host come back now (review 2026-11-26 G2). Their offloads
        // were issued before the pool could say no; restoring them cannot throw.
        rerecord_ = true;
        restore_persistent(true);
        throw;
      }
    }
  }

  // issue_offloads_before's op index for "the iteration has ended".
  static constexpr std::uint64_t end_of_iteration = std::numeric_limits<std::uint64_t>::max();

  static constexpr std::size_t manager_transfer_type_size =
      detail::set_encodings<manager_transfer_type>::value.size();

  struct scheduled_offload {
    storage_id storage;
    std::uint8_t transfer;  // member of manager_transfer_type
    bool redrop;            // swap_entry::redrop: back to the kept host copy, nothing copied
  };
  struct scheduled_prefetch {
    storage_id storage;
    host_copy_mode copy;  // keep: a redrop entry of the storage starts at this entry's next_use
  };

  struct tensor {
    tensor_handle handle{};
    std::size_t bytes{0};
    std::optional<storage_id> storage;  // in the recording, when matched
    bool alive{false};
    descriptor_type desc{};  // as given to allocate_async()
  };

  // The table entry of a handle the manager just made (the table grows with the manager's).
  tensor& slot(tensor_handle h)
  {
    if (h.index() >= tensors_.size()) {
      tensors_.resize(std::size_t{h.index()} + 1);
      stats_.tensor_slots = tensors_.size();
    }
    return tensors_[h.index()];
  }

  // The live tensor `h` names; stash::logic_error for another allocator's handle, a freed tensor
  // (its slot may hold a newer one) or a forged handle.
  tensor& checked(tensor_handle h, const char* what)
  {
    std::string const where = std::string("stash::allocator::") + what + ": tensor " + to_string(h);
    if (h.owner() != manager_.owner_tag()) {
      STASH_FAIL(where + (h.is_null() ? " is no tensor (a default handle)"
                                      : " belongs to another allocator"));
    }
    STASH_EXPECTS(h.index() < tensors_.size(), where + " was never allocated here");
    tensor& t = tensors_[h.index()];
    STASH_EXPECTS(t.alive && t.handle == h,
                  where + (t.handle.generation() >= h.generation() ? " was freed" : " is forged"));
    return t;
  }

  storage_id storage_of(tensor_handle h, const char* what)
  {
    tensor& t = checked(h, what);
    STASH_EXPECTS(t.storage.has_value(), "stash::allocator: tensor " + to_string(h) +
                                             " was allocated outside the recording");
    return *t.storage;
  }

  // Starts a fresh recording; tensors alive now enter it as persistent storages.
  void start_recording()
  {
    recorder_.emplace();
    by_storage_.clear();
    storage_descs_.clear();
    for (auto& t : tensors_) {
      if (!t.alive) { continue; }
      t.storage = recorder_->allocate(t.bytes, storage_kind::param,
                                      "persistent#" + std::to_string(t.handle.index()));
      record_desc(*t.storage, t.desc);
    }
    first_storage_ = recorder_->trace().storages().size();
    first_op_      = recorder_->trace().ops().size();
    state_         = allocator_state::recording;
    rerecord_      = false;
  }

  // The policy's schedule for `t`, checked: a policy's mistake is a schedule_error naming it,
  // found before anything is offloaded.
  [[nodiscard]] std::pair<schedule, detail::recompute_table> plan_and_validate(trace const& t) const
  {
    check_budget(t);
    trace_analysis const analysis(t, model_);
    schedule planned = plan_with_scratch(analysis, t);
    try {
      refuse_persistent_recomputes(t, planned);
      validate_schedule(analysis, planned);
    } catch (schedule_error const& e) {
      throw schedule_error(e.entry(), e.reason(), std::string(policy_.name()));
    }
    if (options_.keep_persistent) { planned = without_persistent(analysis, std::move(planned)); }
    auto table = detail::make_recompute_table(analysis, planned, first_storage_, first_op_,
                                              t.ops().size() - first_op_, uncallable_ops_);
    return {std::move(planned), std::move(table)};
  }

  // The policy's schedule for the device budget less the device codec scratch its transfers
  // take (scratch_reserve: a device codec's counts, tables and staged copy come from the budgeted
  // device pool too), so a schedule that holds the budget still does with a device codec. Planned
  // again while a schedule's scratch exceeds the room it was planned with (the reserve only
  // grows). After 3 replans still growing, one last plan keeps the most any storage's transfer
  // could take (scratch_bound), which covers whatever that schedule picks (GPU review
  // 2026-11-26d, W6: the last schedule was kept with more scratch than its reserve). Host codecs
  // take none: one plan, as before.
  [[nodiscard]] schedule plan_with_scratch(trace_analysis const& analysis, trace const& t) const
  {
    std::uint64_t const budget = options_.device_budget;
    std::uint64_t reserve      = 0;
    schedule planned           = policy_.plan(analysis, budget);
    for (int replans = 0;; ++replans) {
      std::uint64_t const need = scratch_reserve(t, planned);
      if (need <= reserve || need >= budget) { break; }
      if (replans == 3) {
        std::uint64_t const bound = scratch_bound(t);
        if (bound > reserve && bound < budget) {
          reserve = bound;
          planned = policy_.plan(analysis, budget - reserve);
        }
        break;
      }
      reserve = need;
      planned = policy_.plan(analysis, budget - reserve);
    }
    if (reserve > 0) {
      planned.note += std::string(planned.note.empty() ? "" : "; ") + std::to_string(reserve) +
                      " B of the device budget kept for codec scratch";
    }
    return planned;
  }

  // The most device scratch one transfer of `s` takes from the device pool (its member's
  // set_scratch). The manager gives an offload's or a prefetch's scratch back, in its copy
  // stream's order, before the call that took it returns, and calls come from one host thread:
  // the pool never holds two at once, so the budget less this much leaves room for each.
  [[nodiscard]] std::uint64_t scratch_reserve(trace const& t, schedule const& s) const
  {
    std::uint64_t most = 0;
    for (auto const& e : s.entries) {
      if (e.id >= t.storages().size()) { continue; }  // validate_schedule names it
      std::size_t const bytes = t.storages()[e.id].bytes;
      auto const member       = member_for_entry(e, bytes, desc_of_storage(e.id)).first;
      most = std::max(most, detail::set_scratch<manager_transfer_type>::bytes(member, bytes));
    }
    return most;
  }

  // The most device scratch any one transfer of a storage of `t` could take, whichever member
  // moves it: at least scratch_reserve of any schedule of `t`.
  [[nodiscard]] std::uint64_t scratch_bound(trace const& t) const
  {
    std::uint64_t most = 0;
    for (auto const& s : t.storages()) {
      for (std::size_t m = 0; m < manager_transfer_type_size; ++m) {
        most = std::max(most, detail::set_scratch<manager_transfer_type>::bytes(m, s.bytes));
      }
    }
    return most;
  }

  // A persistent storage is state (a parameter, optimizer state): its value comes from the
  // previous iteration, which no re-run of this iteration's ops rebuilds. A wrap entry needs a
  // tensor that outlives the iteration: one allocated before the first begin_iteration().
  void refuse_persistent_recomputes(trace const& t, schedule const& s) const
  {
    for (std::size_t k = 0; k < s.entries.size(); ++k) {
      storage_id const id = s.entries[k].id;
      if (!s.entries[k].wrap || id < first_storage_) { continue; }
      throw schedule_error(
          k, "storage " + std::to_string(id) +
                 (id < t.storages().size() ? " '" + t.storages()[id].label + "'" : "") +
                 " has a wrap entry but was allocated inside the iteration; only "
                 "tensors allocated before the first begin_iteration() may wrap");
    }
    for (std::size_t k = 0; k < s.recomputes.size(); ++k) {
      storage_id const id = s.recomputes[k].id;
      if (id >= first_storage_) { continue; }
      throw schedule_error::in_recompute(
          k, "storage " + std::to_string(id) +
                 (id < t.storages().size() ? " '" + t.storages()[id].label + "'" : "") +
                 " is persistent (allocated before the first iteration: a parameter or optimizer "
                 "state), which is state and cannot be recomputed; swap it instead");
    }
  }

  // `s` without the entries of persistent storages, its planned peak recomputed
  // (allocator_options::keep_persistent).
  [[nodiscard]] schedule without_persistent(trace_analysis const& analysis, schedule s) const
  {
    std::erase_if(s.entries, [&](swap_entry const& e) { return e.id < first_storage_; });
    schedule out      = make_schedule(analysis, std::move(s.policy), s.budget, std::move(s.entries),
                                      std::move(s.recomputes));
    out.note          = std::move(s.note);
    out.shared_reruns = s.shared_reruns;
    return out;
  }

  // A budget below the largest storage fits no schedule (the op using it needs it resident):
  // stash::out_of_memory naming both, before the policy runs.
  void check_budget(trace const& t) const
  {
    auto const storages = t.storages();
    auto const largest  = std::max_element(
         storages.begin(), storages.end(),
         [](storage_record const& a, storage_record const& b) { return a.bytes < b.bytes; });
    if (largest == storages.end() || largest->bytes <= options_.device_budget) { return; }
    throw out_of_memory(
        "stash::allocator planning the recorded iteration: allocator_options::device_budget (" +
            std::to_string(options_.device_budget) + " B) is below its largest storage, #" +
            std::to_string(largest - storages.begin()) + " '" + largest->label + "' of " +
            std::to_string(largest->bytes) + " B, which no schedule can fit",
        static_cast<std::size_t>(largest->bytes),
        static_cast<std::size_t>(std::min<std::uint64_t>(options_.device_budget, SIZE_MAX)),
        std::nullopt);
  }

  // Plans the schedule for the recorded iteration and switches to replay.
  void plan()
  {
    // Plan before anything changes: a policy that throws leaves the allocator recording.
    auto [planned, table] = plan_and_validate(recorder_->trace());
    recording_            = std::move(*recorder_).trace();
    recorder_.reset();
    recorded_allocs_ = recording_->storages().size() - first_storage_;
    recorded_ops_    = recording_->ops().size() - first_op_;
    schedule_        = std::move(planned);
    ++stats_.replanned;
    offloads_by_op_.assign(recorded_ops_ + 1, {});
    departures_by_op_.assign(recorded_ops_ + 1, {});
    prefetches_by_op_.assign(recorded_ops_ + 1, {});
    stats_.encoding_fallbacks  = 0;
    recompute_                 = std::move(table);
    stats_.recompute_fallbacks = recompute_.kept;
    recompute_kept_.assign(recompute_.steps.size(), false);
    recompute_adopted_.assign(recompute_.steps.size(), false);
    callables_.assign(recompute_.empty() ? 0 : recorded_ops_, nullptr);
    wrapped_.assign(first_storage_, std::nullopt);
    std::vector<std::pair<storage_id, std::uint64_t>> redrops;  // (storage, last_use)
    for (auto const& e : schedule_.entries) {
      if (e.redrop) { redrops.emplace_back(e.id, e.last_use); }
    }
    std::sort(redrops.begin(), redrops.end());
    for (auto const& e : schedule_.entries) { index_entry(e, redrops); }
    by_storage_.assign(recording_->storages().size(), tensor_handle{});
    for (auto& t : tensors_) {  // matches are made anew in each iteration; persistent ones stay
      if (t.alive && t.storage && *t.storage < first_storage_) {
        by_storage_[*t.storage] = t.handle;  // a recompute may read them
      } else {
        t.storage.reset();
      }
    }
    state_ = allocator_state::replaying;
  }

  // Files swap entry `e` of the schedule in force under the op that sends it away and the op that
  // brings it back. Persistent storages too: an entry's gap lies between two uses in the recorded
  // iteration (validate_schedule), so it never spans the iteration's end, unless it is a wrap
  // entry: offloaded after the last op (index recorded_ops_: by end_iteration()) and prefetched
  // in the next iteration. It leaves when op offload_at starts, not before its last use has been
  // enqueued (the manager gives the device bytes back once the copy is done; an op still to read
  // it would fetch it back); an early departure (sim/schedule.hpp: offload_at = last_use, a
  // re-run use only) right after the re-runs before op last_use. The prefetch of an entry whose
  // storage a redrop entry sends away again at its next_use (`redrops`: their storages and
  // last uses, sorted) keeps the host copy.
  void index_entry(swap_entry const& e,
                   std::span<std::pair<storage_id, std::uint64_t> const> redrops)
  {
    if (e.last_use < first_op_ || e.prefetch_at < first_op_) { return; }
    auto const transfer =
        transfer_for_entry(e, recording_->storages()[e.id].bytes, desc_of_storage(e.id));
    if (e.wrap) { wrapped_[e.id] = transfer; }
    scheduled_offload const leave{e.id, transfer, e.redrop};
    if (!e.wrap && e.offload_at == e.last_use && !accessed_at(e.id, e.last_use)) {
      departures_by_op_[e.last_use - first_op_].push_back(leave);
    } else {
      auto const at = std::max(e.last_use + 1, e.offload_at) - first_op_;
      offloads_by_op_[std::min(at, recorded_ops_)].push_back(leave);
    }
    bool const redropped_after =
        !e.wrap && std::binary_search(redrops.begin(), redrops.end(), std::pair{e.id, e.next_use});
    prefetches_by_op_[std::min(e.prefetch_at - first_op_, recorded_ops_)].push_back(
        {e.id, redropped_after ? host_copy_mode::keep : host_copy_mode::release});
  }

  // Whether op `op` of the recording reads or writes storage `s` (not a re-run use).
  [[nodiscard]] bool accessed_at(storage_id s, std::uint64_t op) const
  {
    auto const& rec = recording_->ops()[op];
    return std::find(rec.reads.begin(), rec.reads.end(), s) != rec.reads.end() ||
           std::find(rec.writes.begin(), rec.writes.end(), s) != rec.writes.end();
  }

  // The manager_transfer_type member that runs entry `e` of a `bytes`-byte storage: for the
  // configured encoding index 0 (or the default_encoding's member), else the first member writing
  // the entry's encoding that can encode the storage; raw copies (the last member) when none can,
  // counted in encoding_fallbacks.
  std::uint8_t transfer_for_entry(swap_entry const& e, std::size_t bytes,
                                  descriptor_type const& desc)
  {
    auto const [member, fallback] = member_for_entry(e, bytes, desc);
    if (fallback) { ++stats_.encoding_fallbacks; }
    return member;
  }

  // transfer_for_entry's member, and whether it is raw copies standing in for an encoding the
  // slot cannot run for that storage (a fallback).
  [[nodiscard]] std::pair<std::uint8_t, bool> member_for_entry(swap_entry const& e,
                                                               std::size_t bytes,
                                                               descriptor_type const& desc) const
  {
    constexpr auto encodings = detail::set_encodings<manager_transfer_type>::value;
    constexpr auto raw       = static_cast<std::uint8_t>(encodings.size() - 1);
    auto encodes             = [&](std::size_t i) { return member_encodes(i, bytes, desc); };
    auto wanted              = e.encoding;
    if (wanted == swap_encoding::configured) {
      if (!options_.default_encoding) {
        if (encodes(0)) { return {std::uint8_t{0}, false}; }
      } else {
        wanted = *options_.default_encoding;
      }
    }
    for (std::size_t i = 0; i < encodings.size(); ++i) {
      if (encodings[i] == wanted && encodes(i)) { return {static_cast<std::uint8_t>(i), false}; }
    }
    return {raw, wanted != swap_encoding::raw};
  }

  // Whether member `i` of manager_transfer_type takes a `bytes`-byte tensor described by `desc`
  // (a size or description it refuses: element size, limit, geometry), asked as a query.
  static bool member_encodes(std::size_t i, std::size_t bytes, descriptor_type const& desc) noexcept
  {
    return decltype(manager_)::accepts(bytes, i, desc);
  }

  // The description a storage of the recording was allocated with.
  [[nodiscard]] descriptor_type const& desc_of_storage(storage_id s) const
  {
    static descriptor_type const none{};
    return s < storage_descs_.size() ? storage_descs_[s] : none;
  }
  void record_desc(storage_id s, descriptor_type const& desc)
  {
    // Most tensors have none: the vector grows only for the others.
    if (std::holds_alternative<std::monostate>(desc)) { return; }
    if (storage_descs_.size() <= s) { storage_descs_.resize(s + 1); }
    storage_descs_[s] = desc;
  }

  // The planned member for this iteration's tensor, whose description may differ from the
  // recording's: raw copies, counted, when the member refuses it.
  std::uint8_t transfer_for_tensor(std::uint8_t planned, tensor const& t)
  {
    constexpr auto raw = static_cast<std::uint8_t>(manager_transfer_type_size - 1);
    if (planned == raw || member_encodes(planned, t.bytes, t.desc)) { return planned; }
    ++stats_.encoding_fallbacks;
    return raw;
  }

  // Offloads the scheduled storages whose last use before the gap was op < j (their readers are
  // queued by now), ordered after `stream`'s work.
  void issue_offloads_before(std::uint64_t j, stream_type stream)
  {
    std::uint64_t const end = std::min<std::uint64_t>(j, recorded_ops_);
    stream_type const after = stream == stream_type{} ? last_stream_ : stream;
    for (; next_offload_op_ <= end && next_offload_op_ < offloads_by_op_.size();
         ++next_offload_op_) {
      for (auto const& o : offloads_by_op_[next_offload_op_]) {
        // At the iteration's end (a deviating iteration that stopped early), a persistent tensor
        // would only come back at once (see restore_persistent); a wrapped one of a complete
        // iteration leaves for the next.
        if (o.storage < first_storage_ && j == end_of_iteration &&
            !(wraps(o.storage) && !deviated_)) {
          continue;
        }
        depart(o, after);
      }
    }
    if (stream != stream_type{}) { last_stream_ = stream; }
  }

  // Sends the storage of `o` away after the work queued on `stream`: a redrop gives its device
  // bytes back to the host copy its prefetch kept (no copy), anything else (a redrop whose copy
  // was not kept: counted in redrop_fallbacks) is offloaded. One not resident stays where it is;
  // a failure leaves it resident, counted in failed_offloads (the manager's promise).
  void depart(scheduled_offload const& o, stream_type stream)
  {
    tensor* const t = matched(o.storage);
    if (t == nullptr) { return; }
    try {
      if (o.redrop && manager_.holds_host_copy(t->handle)) {
        manager_.redrop_async(t->handle);
        ++stats_.scheduled_redrops;
        return;
      }
      if (manager_.state(t->handle) != tensor_state::resident) { return; }
      manager_.offload_async(t->handle, stream, transfer_for_tensor(o.transfer, *t), t->desc);
      ++stats_.scheduled_offloads;
      if (o.redrop) { ++stats_.redrop_fallbacks; }
      if (o.storage < first_storage_) { ++stats_.persistent_offloads; }
    } catch (std::bad_alloc const&) {  // stash::out_of_memory: the host pool is full
      ++stats_.failed_offloads;
    } catch (cuda_error const&) {
      ++stats_.failed_offloads;
    } catch (logic_error const&) {  // a pool refusing a request (e.g. while capturing)
      ++stats_.failed_offloads;
    }
  }

  // The early departures at op j (sim/schedule.hpp): swap entries and recompute drops whose last
  // use is a read by the re-runs before op j leave right after them, ordered after `stream`.
  void depart_after_run(std::uint64_t j, stream_type stream)
  {
    if (j >= recorded_ops_) { return; }
    for (auto const& o : departures_by_op_[j]) { depart(o, stream); }
    if (!recompute_.empty()) { drop_steps(recompute_.drops_after_run[j]); }
  }

  // Frees the host copies kept for redrops that did not run (an iteration that deviated or
  // stopped early), so none is normally held between iterations. discard_host_copy throws only
  // while the manager's side streams capture (an iteration ended inside a capture; logic_error,
  // or a cuda_error from the capture query): freeing the pinned slot then would give it back in a
  // captured stream's order. The copy stays with its tensor instead, and is freed by the tensor's
  // next offload, drop or release, or by acquire_async ahead of a write (so a later redrop never
  // sends the tensor back to a stale copy). Pinned bytes are held longer; nothing is lost or
  // freed twice; end_iteration does not throw for it.
  void discard_kept_copies() noexcept
  {
    for (auto const h : kept_) {
      try {
        if (manager_.state(h) != tensor_state::released) { manager_.discard_host_copy(h); }
      } catch (...) {  // NOLINT(bugprone-empty-catch): kept with its tensor (see above)
      }
    }
    kept_.clear();
  }

  // Persistent tensors are resident between iterations: one still away at the iteration's end
  // (its iteration stopped before the op that prefetches it) comes back on the last stream the
  // allocator saw. One that cannot (the device pool full) stays away, counted in
  // failed_prefetches, and comes back on demand at its next use: end_iteration() never throws it.
  // A wrapped one stays away after a complete iteration (the next fetches it) unless `wrapped_too`
  // (the next iteration is recorded after all: the pool's end_iteration() failed).
  void restore_persistent(bool wrapped_too = false)
  {
    for (storage_id s = 0; s < first_storage_ && s < by_storage_.size(); ++s) {
      tensor* const t = matched(s);
      if (t == nullptr || (wraps(s) && !deviated_ && !wrapped_too)) { continue; }
      tensor_state const where = manager_.state(t->handle);
      if (where == tensor_state::resident || where == tensor_state::released) { continue; }
      try {
        (void)manager_.acquire_async(t->handle, last_stream_);
        ++stats_.persistent_restores;
      } catch (std::bad_alloc const&) {
        ++stats_.failed_prefetches;
      } catch (cuda_error const&) {
        ++stats_.failed_prefetches;
      } catch (logic_error const&) {
        ++stats_.failed_prefetches;
      }
    }
  }

  // Whether persistent storage `s` has a wrap entry in the schedule in force.
  [[nodiscard]] bool wraps(storage_id s) const noexcept
  {
    return s < wrapped_.size() && wrapped_[s].has_value();
  }

  // The end of the recorded iteration, planned with wrap entries: their tensors leave now, so
  // every replayed iteration starts with them on the host, as the schedule plans (and the pool
  // learns). An offload that fails leaves its tensor resident, counted in failed_offloads.
  void offload_wraps()
  {
    for (storage_id s = 0; s < wrapped_.size(); ++s) {
      tensor* const t = wraps(s) ? matched(s) : nullptr;
      if (t == nullptr || manager_.state(t->handle) != tensor_state::resident) { continue; }
      try {
        manager_.offload_async(t->handle, last_stream_, transfer_for_tensor(*wrapped_[s], *t),
                               t->desc);
        ++stats_.scheduled_offloads;  // counted as the replayed iterations' wrap offloads are
        ++stats_.persistent_offloads;
      } catch (std::bad_alloc const&) {
        ++stats_.failed_offloads;
      } catch (cuda_error const&) {
        ++stats_.failed_offloads;
      } catch (logic_error const&) {
        ++stats_.failed_offloads;
      }
    }
  }

  // The live tensor matched to storage `s` of the recording in this iteration, if any.
  tensor* matched(storage_id s)
  {
    if (s >= by_storage_.size() || by_storage_[s].is_null()) { return nullptr; }
    tensor& t = tensors_[by_storage_[s].index()];
    return t.alive && t.handle == by_storage_[s] ? &t : nullptr;
  }

  // A pool that learns iterations numbers the allocations of the compute stream: the prefetch
  // takes its memory there, so the pool sees (and plans) the re-fetched tensor's second lifetime.
  void issue_prefetches_at(std::uint64_t j, stream_type stream)
  {
    if (j >= prefetches_by_op_.size()) { return; }
    for (auto const [s, copy] : prefetches_by_op_[j]) {
      tensor* const t = matched(s);
      if (t == nullptr) { continue; }
      // A wrapped tensor whose offload failed (or that came back on demand) is already here.
      if (wraps(s) && manager_.state(t->handle) == tensor_state::resident) { continue; }
      try {
        if constexpr (iteration_aware_pool<Pool>) {
          manager_.prefetch_async(t->handle, stream, copy);
        } else {
          manager_.prefetch_async(t->handle, copy);
        }
        if (copy == host_copy_mode::keep) { kept_.push_back(t->handle); }
        ++stats_.scheduled_prefetches;
      } catch (std::bad_alloc const&) {  // the op that needs it brings it back on demand
        ++stats_.failed_prefetches;
      } catch (cuda_error const&) {
        ++stats_.failed_prefetches;
      } catch (logic_error const&) {
        ++stats_.failed_prefetches;
      }
    }
  }

  // Before op j: a storage that drops at j (when op j starts, or right after its re-runs) whose
  // writers were not all given a callable stays resident from now on, and this op() is refused
  // naming both (nothing done for op j yet).
  void check_callables_before(std::uint64_t j)
  {
    if (j >= recorded_ops_) { return; }
    for (auto const* list : {&recompute_.drops_by_op[j], &recompute_.drops_after_run[j]}) {
      for (auto const k : *list) { check_callables_of(k, j); }
    }
  }

  // Recompute step k, dropping at op j: refused as check_callables_before says.
  void check_callables_of(std::size_t k, std::uint64_t j)
  {
    auto const& step = recompute_.steps[k];
    tensor* const t  = matched(step.storage);
    if (recompute_kept_[k] || t == nullptr) { return; }
    for (auto const w : step.ops) {
      if (callables_[w]) { continue; }
      recompute_kept_[k] = true;
      ++stats_.recompute_fallbacks;
      auto const& name = recording_->ops()[first_op_ + w].name;
      detail::uncallable_op const u{first_op_ + w, name};
      if (std::find(uncallable_ops_.begin(), uncallable_ops_.end(), u) == uncallable_ops_.end()) {
        uncallable_ops_.push_back(u);
      }
      STASH_FAIL("stash::allocator::op: " + detail::describe(*recording_, step.storage) +
                 " is planned for recompute (dropped after op " + std::to_string(step.last_use) +
                 ", rematerialised before op " + std::to_string(step.at) + ") but its writer op " +
                 std::to_string(w) + " '" + name +
                 "' was given no recompute callable in this iteration; it stays resident from "
                 "now on (allocator_stats::recompute_fallbacks). Nothing was done for op " +
                 std::to_string(j) + ": call op() again to go on");
    }
  }

  // The schedule's work due before op j (see allocate_async and op): offloads and drops of what
  // left after op j - 1, then prefetches and rematerialisations of what op j needs back.
  void run_schedule_before(std::uint64_t j, stream_type stream)
  {
    issue_offloads_before(j, stream);
    bool const recomputes = !recompute_.empty() && j < recorded_ops_;
    if (recomputes) { drop_steps(recompute_.drops_by_op[j]); }
    issue_prefetches_at(j, stream);
    if (recomputes) { rematerialise_at(j, stream); }
    depart_after_run(j, stream);
  }

  // Drops the storages of recompute `steps` (stream-ordered after their last use). One whose
  // writers were not all given a callable is left for op j's check (it stays).
  void drop_steps(std::span<std::size_t const> steps)
  {
    for (auto const k : steps) {
      auto const& step = recompute_.steps[k];
      tensor* const t  = matched(step.storage);
      if (recompute_kept_[k] || t == nullptr ||
          manager_.state(t->handle) != tensor_state::resident ||
          !std::all_of(step.ops.begin(), step.ops.end(),
                       [&](std::uint64_t w) { return static_cast<bool>(callables_[w]); })) {
        continue;
      }
      manager_.drop_async(t->handle);
    }
  }

  // Rematerialises the storages recomputed before op j, in the schedule's order, on `stream`.
  // With shared re-runs (schedule::shared_reruns), a step whose transient input is a later
  // step's dropped storage rebuilds it into that storage's own bytes (adopt), and the later step
  // then re-runs only its ops after the shared ones.
  void rematerialise_at(std::uint64_t j, stream_type stream)
  {
    for (auto const k : recompute_.runs_by_op[j]) {
      auto const& step      = recompute_.steps[k];
      tensor* const t       = matched(step.storage);
      bool const adopted    = recompute_adopted_[k];
      recompute_adopted_[k] = false;
      if (t == nullptr || (!adopted && manager_.state(t->handle) != tensor_state::dropped)) {
        continue;
      }
      try {
        if (!adopted) { manager_.rematerialize_async(t->handle, stream); }
        transients rebuilt{*this, stream, {}};  // inputs rebuilt for this chain, freed after it
        std::vector<std::pair<void*, std::size_t>> inputs;  // step.transients[i]'s buffer
        for (auto const r : step.transients) {
          std::size_t const bytes = recording_->storages()[r].bytes;
          void* const own         = adopt(step, r, stream);
          inputs.emplace_back(own != nullptr ? own : rebuilt.take(bytes), bytes);
        }
        for (auto const w : step.ops) {
          if (adopted &&
              std::find(step.skipped.begin(), step.skipped.end(), w) != step.skipped.end()) {
            continue;  // the earlier step of the batch re-ran it into this storage
          }
          rerun(w, *t, step, inputs, stream);
        }
      } catch (...) {
        deviated_ = true;  // as op() promises: the next iteration is recorded afresh
        throw;
      }
      ++stats_.recomputes;
      stats_.recomputed_bytes += t->bytes;
    }
  }

  // For transient input r of `step`, handed to a later step of the batch whose storage it is
  // (recompute_step::hands): rematerialises that storage, marks the later step adopted and
  // returns its bytes; nullptr when r is not handed on or its storage is not dropped (kept).
  void* adopt(detail::recompute_step const& step, storage_id r, stream_type stream)
  {
    for (auto const& [input, k] : step.hands) {
      if (input != r) { continue; }
      tensor* const x = matched(r);
      if (x == nullptr || recompute_kept_[k] ||
          manager_.state(x->handle) != tensor_state::dropped) {
        return nullptr;
      }
      manager_.rematerialize_async(x->handle, stream);
      recompute_adopted_[k] = true;
      return manager_.acquire_async(x->handle, stream);
    }
    return nullptr;
  }

  // Transient buffers of one re-run, given back in `stream`'s order however it ends.
  struct transients {
    allocator& owner;
    stream_type stream;
    std::vector<std::pair<void*, std::size_t>> blocks;
    void* take(std::size_t bytes)
    {
      blocks.reserve(blocks.size() + 1);
      blocks.emplace_back(pool_allocate(owner.pool_, owner.backend_.tag(stream), bytes), bytes);
      return blocks.back().first;
    }
    ~transients()
    {
      for (auto [p, bytes] : blocks) {
        pool_deallocate(owner.pool_, owner.backend_.tag(stream), p, bytes);  // noexcept
      }
    }
  };

  // Re-runs op w of the iteration for `step` (writing `target`, its storage s): its live reads,
  // `target`, the step's rebuilt inputs (`rebuilt[i]` holds step.transients[i]), and transient
  // buffers for its other writes (other results, skipped persistent state).
  // Skipped state (a skip_state op's persistent write: running statistics) starts as a copy of
  // the live state, queued before the callable: a kernel that updates it in place through its write
  // pointer reads initialised bytes (compute-sanitizer's initcheck), and the live state is not
  // touched. Other results are fresh (the op created them), so the callable writes them whole.
  void rerun(std::uint64_t w, tensor& target, detail::recompute_step const& step,
             std::span<std::pair<void*, std::size_t> const> rebuilt, stream_type stream)
  {
    auto const s          = step.storage;
    auto const& rec       = recording_->ops()[first_op_ + w];
    auto const rebuilt_at = [&](storage_id r) -> void* {
      auto const it = std::find(step.transients.begin(), step.transients.end(), r);
      return it == step.transients.end() ? nullptr : rebuilt[it - step.transients.begin()].first;
    };
    std::vector<void*> pointers;
    pointers.reserve(rec.reads.size() + rec.writes.size());
    for (auto const r : rec.reads) {
      if (auto* const p = rebuilt_at(r)) {
        pointers.push_back(p);
        continue;
      }
      tensor* const x = r == s ? &target : matched(r);
      STASH_EXPECTS(x != nullptr, "stash::allocator: re-running op " + std::to_string(w) + " '" +
                                      rec.name + "' for " + detail::describe(*recording_, s) +
                                      ": its input " + detail::describe(*recording_, r) +
                                      " is not alive in this iteration");
      pointers.push_back(manager_.acquire_async(x->handle, stream));
    }
    transients scratch{*this, stream, {}};
    for (auto const o : rec.writes) {
      if (o == s) {
        pointers.push_back(manager_.acquire_async(target.handle, stream));
        continue;
      }
      if (auto* const p = rebuilt_at(o)) {
        pointers.push_back(p);
        continue;
      }
      std::size_t const bytes = recording_->storages()[o].bytes;
      void* const p           = scratch.take(bytes);
      tensor* const state     = o < first_storage_ ? matched(o) : nullptr;
      if (state != nullptr) {
        backend_.copy_async(p, manager_.acquire_async(state->handle, stream), bytes, stream);
      }
      pointers.push_back(p);
    }
    callables_[w](std::span<void* const>(pointers), stream);
    ++stats_.recompute_ops;
  }

  Backend& backend_;
  Pool& pool_;
  allocator_options options_;
  SwapPolicy policy_;
  host_pool_type host_pool_;
  offload_manager<Backend, Pool, host_pool_type, manager_transfer_type> manager_;
  cost_model model_;

  allocator_state state_{allocator_state::persistent};
  bool in_iteration_{false};
  bool deviated_{false};
  bool rerecord_{false};
  std::optional<trace_recorder> recorder_{std::in_place};
  std::optional<trace> recording_;
  schedule schedule_;
  std::uint64_t first_storage_{0};
  std::uint64_t first_op_{0};
  std::uint64_t recorded_allocs_{0};
  std::uint64_t recorded_ops_{0};
  std::uint64_t alloc_index_{0};
  std::uint64_t op_index_{0};
  std::uint64_t next_offload_op_{0};
  bool prepared_{false};  // the schedule's work before op op_index_ ran (at an allocation)
  stream_type last_stream_{};
  std::vector<std::vector<scheduled_offload>> offloads_by_op_;
  std::vector<std::vector<scheduled_offload>> departures_by_op_;  // right after op j's re-runs
  std::vector<std::vector<scheduled_prefetch>> prefetches_by_op_;
  std::vector<tensor_handle> kept_;  // prefetched with host_copy_mode::keep in this iteration
  std::vector<std::optional<std::uint8_t>> wrapped_;  // by persistent storage: its wrap's member
  std::vector<tensor_handle> by_storage_;             // the live tensor matched to each storage
  std::vector<descriptor_type> storage_descs_;  // of the recording's storages (described ones only)
  std::vector<tensor> tensors_;        // indexed by tensor_handle::index(), as the manager's table
  detail::recompute_table recompute_;  // the schedule's recompute entries, by op
  std::vector<bool> recompute_kept_;   // by step: fell back to resident (no callable)
  std::vector<bool> recompute_adopted_;  // by step: an earlier step of its batch rebuilt it
  std::vector<recompute_fn> callables_;  // this iteration's, for the ops recomputes re-run
  std::vector<detail::uncallable_op> uncallable_ops_;  // kept across plans (see op())
  allocator_stats stats_;
};

/// @brief stash::allocator on the host backend (worker threads for streams, CPU memory for the
/// device) with its default pool: what a test or a CPU run instantiates.
/// @tparam SwapPolicy What to offload and when (search_swap: the planner to use).
/// @tparam Codec How offloaded bytes travel (void: raw copies; a codec; a transfer_set).
template <class SwapPolicy = search_swap, class Codec = void>
using host_allocator = allocator<default_pool_t<host_backend>, SwapPolicy, Codec, host_backend>;

/// @brief stash::allocator on CUDA streams with its default pool (a caching_pool of device
/// memory).
/// @tparam SwapPolicy What to offload and when (search_swap: the planner to use).
/// @tparam Codec How offloaded bytes travel (void: raw copies; a codec, its device form from
///   device_codec_transfer.cuh and the codec's device header; a transfer_set).
template <class SwapPolicy = search_swap, class Codec = void>
using cuda_allocator = allocator<default_pool_t<cuda_backend>, SwapPolicy, Codec, cuda_backend>;

}  // namespace stash
