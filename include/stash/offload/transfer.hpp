/**
 * @file transfer.hpp
 * @brief How the offload manager moves a tensor's bytes: raw, or through a codec.
 *
 * A transfer policy `T` turns a device tensor into a host copy and back, in a stream's order, on a
 * backend `B`. The manager gives it a host slot of `T::host_bytes(bytes)` and, right after it, a
 * `transfer_status` the transfer writes (so errors travel back without a host round trip), and
 * device scratch of `T::scratch_bytes(bytes)` from the device pool, freed in the stream's order.
 *
 * Customization points:
 * - `static std::size_t host_bytes(std::size_t bytes)`: the most bytes the host copy can need;
 *   throws stash::logic_error for a tensor the transfer cannot encode (a codec's size limit). The
 *   manager asks first, before it takes any memory.
 * - optional `static bool accepts(std::size_t bytes) noexcept` (or `accepts(bytes, descriptor_type
 *   const&)`): whether host_bytes takes the tensor, asked without an exception (stash::allocator
 *   asks it to choose a member of a transfer_set; offload_manager::accepts forwards it). A
 *   transfer without one takes every tensor its host_bytes does not refuse.
 * - `static std::size_t scratch_bytes(std::size_t bytes)`: device scratch for encode or decode.
 * - `static void encode(B&, typename B::stream, void const* device, std::size_t bytes,
 *    void* host, std::size_t capacity, void* scratch, transfer_status* status)`
 * - `static void decode(B&, typename B::stream, void const* host, std::size_t capacity,
 *    void* device, std::size_t bytes, void* scratch, transfer_status* status,
 *    std::size_t encoded_bytes)`: on a bad host copy, writes the error to `*status` instead of
 *    throwing (it runs asynchronously). `encoded_bytes` is the host copy's size when the host
 *    knows it (the offload had completed when the prefetch was queued: the manager read
 *    `status->encoded_bytes`), else `unknown_encoded_bytes`; it may exceed `capacity` only if the
 *    slot was corrupted. (A transfer may omit the last parameter; it then always reads `capacity`.)
 * - optional `static std::size_t decode_scratch_bytes(std::size_t bytes, std::size_t
 *   encoded_bytes)`: device scratch for that decode, when it differs from `scratch_bytes(bytes)`
 *   (device_codec_transfer stages the host copy in it).
 * - `static constexpr bool lossless`
 * - `static constexpr bool reports_status`: whether encode/decode write `*status` (the manager
 *   reads it only then).
 * - optional `static constexpr std::uint16_t codec_id`: the codec whose bytes the transfer writes
 *   (codec_ids); a transfer without one copies raw bytes. stash::allocator maps it to the
 *   encoding a schedule entry names (swap_entry::encoding).
 * - optional, for a transfer that needs more than the size: `using descriptor_type = D;` its
 *   per-tensor descriptor (pool_argmax_transfer: the max pool's `pool_geometry`;
 *   range_mask_transfer: the clamp's `range_bounds`), owned by the
 *   transfer, not by the generic API. Then `accepts`, `host_bytes` and encode / decode take a
 *   `D const&` after their other parameters. The manager passes the descriptor given to
 *   offload_async (kept with the tensor for its prefetch) as a transfer_descriptor_t of its set;
 *   a tensor given no `D` is refused before anything is taken (accepts says false, host_bytes
 *   throws stash::logic_error), as is a `D` host_bytes cannot use, so the tensor stays resident.
 *
 * What a tensor holds. The manager does not know element types: a codec reads every tensor as
 * its `value_type`. A lossless member copies bit patterns (zvc, csr, rle compare bits), so any data
 * comes back exact; a lossy one (precision, bitmask) rounds the bits *as its value_type*, which
 * destroys data of another type (an int64 max-pool index read as two floats rounds to 0 in fp16).
 * So every set's descriptor also takes an `element_type` (say what an undescribed tensor holds:
 * `element_type::i64`, `element_type::u8`), and a lossy member that takes no descriptor_type
 * refuses, like a size it cannot encode, every tensor described as anything but its own
 * value_type: another element type, or another member's descriptor (a `pool_geometry` describes
 * int64 indices). Such a tensor travels through a lossless member or raw (stash::allocator counts
 * it in encoding_fallbacks). An undescribed tensor is taken to be of the member's type.
 *
 * A `transfer_set<T...>` stands for several transfers, one chosen per offload
 * (offload_manager::offload_async's `transfer` index): the per-tensor encodings of a schedule.
 *
 * Choosing the compressed size without a host round trip: the encoder writes straight into the
 * pinned host slot (the host backend's memcpy; on a GPU, the encode kernel's stores go over PCIe to
 * mapped pinned memory — a software "compressing DMA engine", cDMA's idea), so no D2H copy has to
 * know the size in advance; the slot is sized for the worst case. bench_offload's third section
 * measures this against a worst-case cudaMemcpyAsync from device scratch, a copy kernel that
 * reads the device-written size, and a host round trip for the size.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/codec_error.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/codec/element_type.hpp>
#include <stash/offload/backend/host_backend.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace stash {

/// @brief The `encoded_bytes` a transfer's decode gets when the host does not know the host copy's
/// size (the offload was still running, or the tensor belongs to a CUDA graph being captured).
inline constexpr std::size_t unknown_encoded_bytes = std::numeric_limits<std::size_t>::max();

/// @brief What a transfer reports back through the host slot (written by the transfer's own
/// stream, read by the manager once that stream got there).
struct transfer_status {
  codec_status status;        ///< decode (or encode) result; code 0 is success
  std::size_t encoded_bytes;  ///< compressed size written by the encoder, where it knows it
  std::uint64_t reserved;     ///< keeps the record 32 bytes
};

/// @brief Bytes as they are: one copy each way.
struct raw_transfer {
  /// @brief Nothing is lost.
  static constexpr bool lossless = true;
  /// @brief Copies cannot find a corrupted buffer: no status is written.
  static constexpr bool reports_status = false;
  /// @brief Every tensor.
  /// @return true.
  static bool accepts(std::size_t) noexcept { return true; }
  /// @brief The tensor's own size.
  /// @param bytes The tensor's size.
  /// @return `bytes`.
  static std::size_t host_bytes(std::size_t bytes) noexcept { return bytes; }
  /// @brief None.
  /// @return 0.
  static std::size_t scratch_bytes(std::size_t) noexcept { return 0; }

  /// @brief A copy in `s`'s order.
  /// @tparam Backend The offload backend.
  /// @param b The backend.
  /// @param s The stream.
  /// @param device The device tensor.
  /// @param bytes The tensor's size.
  /// @param host The host slot.
  template <class Backend>
  static void encode(Backend& b, typename Backend::stream s, void const* device, std::size_t bytes,
                     void* host, std::size_t, void*, transfer_status*)
  {
    b.copy_async(host, device, bytes, s);
  }

  /// @brief A copy in `s`'s order.
  /// @tparam Backend The offload backend.
  /// @param b The backend.
  /// @param s The stream.
  /// @param host The host slot.
  /// @param device The device tensor.
  /// @param bytes The tensor's size.
  template <class Backend>
  static void decode(Backend& b, typename Backend::stream s, void const* host, std::size_t,
                     void* device, std::size_t bytes, void*, transfer_status*,
                     std::size_t /*encoded_bytes*/ = unknown_encoded_bytes)
  {
    b.copy_async(device, host, bytes, s);
  }
};

/// @brief A codec's host reference run on the host backend's streams (or any backend with
/// `launch(stream, task)`, e.g. stash::testing::fault_injecting_backend): the CPU twin of the
/// device codec transfer, so the manager's codec path (sizes, status, errors) is tested without a
/// GPU.
/// @tparam Codec The codec whose host reference runs.
template <codec Codec>
struct host_codec_transfer {
  /// @brief As the codec.
  static constexpr bool lossless = Codec::lossless;
  /// @brief encode and decode write a codec_status.
  static constexpr bool reports_status = true;
  /// @brief The codec's element type.
  using value_type = typename Codec::value_type;
  /// @brief The codec that writes the bytes.
  static constexpr std::uint16_t codec_id = Codec::id;

  /// @brief Whether host_bytes takes a tensor of `bytes`: whole elements, within the codec's
  /// limit.
  /// @param bytes The tensor's size.
  /// @return Whether host_bytes takes the tensor.
  static bool accepts(std::size_t bytes) noexcept
  {
    if (bytes % sizeof(value_type) != 0) { return false; }
    if constexpr (requires { Codec::max_elements; }) {
      return bytes / sizeof(value_type) <= Codec::max_elements;
    }
    return true;
  }
  /// @brief The codec's worst case for the tensor's elements.
  /// @param bytes The tensor's size.
  /// @return The codec's worst case for the tensor.
  static std::size_t host_bytes(std::size_t bytes)
  {
    STASH_EXPECTS(bytes % sizeof(value_type) == 0,
                  "host_codec_transfer: tensor size is not a whole number of elements");
    std::size_t const n = bytes / sizeof(value_type);
    if constexpr (requires { Codec::max_elements; }) {
      // Refused here, before the manager takes memory, not in the encoder on a worker thread.
      STASH_EXPECTS(n <= Codec::max_elements, "host_codec_transfer: " + std::to_string(n) +
                                                  " elements exceed the codec's limit of " +
                                                  std::to_string(Codec::max_elements));
    }
    return Codec::max_compressed_bytes(n);
  }
  /// @brief None: the host reference needs none.
  /// @return 0.
  static std::size_t scratch_bytes(std::size_t) noexcept { return 0; }

  /// @brief host_encode in `s`'s order.
  /// @tparam Backend A backend with `launch(stream, task)` (host_backend).
  /// @param b The backend.
  /// @param s The stream.
  /// @param device The device tensor.
  /// @param bytes The tensor's size.
  /// @param host The host slot.
  /// @param capacity The host slot's size.
  /// @param status The status record the transfer writes.
  template <class Backend>
  static void encode(Backend& b, typename Backend::stream s, void const* device, std::size_t bytes,
                     void* host, std::size_t capacity, void*, transfer_status* status)
  {
    b.launch(s, [=] {
      try {
        auto const used =
            Codec::host_encode(std::span<value_type const>(static_cast<value_type const*>(device),
                                                           bytes / sizeof(value_type)),
                               std::span<std::byte>(static_cast<std::byte*>(host), capacity));
        *status = transfer_status{codec_status{0, 0, 0}, used, 0};
      } catch (codec_error const& e) {
        *status = transfer_status{codec_status{static_cast<std::uint32_t>(e.code()), 0, e.offset()},
                                  0, 0};
      }
    });
  }

  /// @brief host_decode in `s`'s order; a bad host copy leaves zeros and an error in `*status`.
  /// Reads only the first `encoded_bytes` of the slot when the host knows them (as the device
  /// transfer copies only those), so a size the manager got wrong fails here too.
  /// @tparam Backend A backend with `launch(stream, task)` (host_backend).
  /// @param b The backend.
  /// @param s The stream.
  /// @param host The host slot.
  /// @param capacity The host slot's size.
  /// @param device The device tensor.
  /// @param bytes The tensor's size.
  /// @param status The status record the transfer writes.
  /// @param encoded_bytes The host copy's size when known, else unknown_encoded_bytes.
  template <class Backend>
  static void decode(Backend& b, typename Backend::stream s, void const* host, std::size_t capacity,
                     void* device, std::size_t bytes, void*, transfer_status* status,
                     std::size_t encoded_bytes = unknown_encoded_bytes)
  {
    std::size_t const readable = encoded_bytes < capacity ? encoded_bytes : capacity;
    b.launch(s, [=] {
      try {
        (void)Codec::host_decode(
            std::span<std::byte const>(static_cast<std::byte const*>(host), readable),
            std::span<value_type>(static_cast<value_type*>(device), bytes / sizeof(value_type)));
        status->status = codec_status{0, 0, 0};
      } catch (codec_error const& e) {
        std::memset(device, 0, bytes);  // no half-decoded data
        status->status = codec_status{static_cast<std::uint32_t>(e.code()), 0, e.offset()};
      }
    });
  }
};

/// @brief Several transfers, one chosen per offload by its index in the list (see
/// offload_manager::offload_async). The members are transfer policies; in stash::allocator's Codec
/// slot they may also be codecs or `void` (raw copies), mapped as the slot maps one.
/// @tparam Transfers The members, in index order; index 0 is the default.
template <class... Transfers>
struct transfer_set {
  static_assert(sizeof...(Transfers) > 0, "stash::transfer_set needs at least one member");
  static_assert(sizeof...(Transfers) <= 255, "stash::transfer_set holds at most 255 members");
  /// @brief Number of members.
  static constexpr std::size_t size = sizeof...(Transfers);
};

namespace detail {

// A transfer policy (as opposed to a codec the Codec slot maps to one).
template <class T>
concept transfer_policy = requires
{
  T::reports_status;
  T::lossless;
};

// A backend that runs host tasks in a stream's order (host_backend, a fault-injecting wrapper of
// it): codecs run there as their host references.
template <class B>
concept host_task_backend = requires(B& b, typename B::stream s, std::function<void()> task)
{
  b.launch(s, std::move(task));
};

template <class>
inline constexpr bool no_transfer_for = false;

// A transfer's descriptor type (std::monostate: it needs none).
template <class T>
struct descriptor_of {
  using type = std::monostate;
};
template <class T>
requires requires { typename T::descriptor_type; }
struct descriptor_of<T> {
  using type = typename T::descriptor_type;
};

// std::variant<Vs..., Ds...> without repeats.
template <class V, class... Ds>
struct unique_variant {
  using type = V;
};
template <class... Vs, class D, class... Ds>
struct unique_variant<std::variant<Vs...>, D, Ds...> {
  using type =
      typename unique_variant<std::conditional_t<(std::is_same_v<D, Vs> || ...),
                                                 std::variant<Vs...>, std::variant<Vs..., D>>,
                              Ds...>::type;
};

template <class Set>
struct descriptor_variant;
template <class... Ts>
struct descriptor_variant<transfer_set<Ts...>> {
  using type = typename unique_variant<std::variant<std::monostate, element_type>,
                                       typename descriptor_of<Ts>::type...>::type;
};

}  // namespace detail

/// @brief A tensor's per-transfer descriptor for any member of transfer_set `Set`: one of the
/// members' `descriptor_type`s, an `element_type` (what the tensor holds, for a tensor no member
/// describes: lossy members refuse a type not theirs, see the file docs), or std::monostate (none,
/// the default). A descriptor is passed as its own type (a `pool_geometry`, an `element_type`
/// converts); every set takes `{}` and an element_type.
/// @tparam Set A transfer_set of transfer policies.
template <class Set>
using transfer_descriptor_t = typename detail::descriptor_variant<Set>::type;

/// @brief The transfer policy that carries `Codec` on `Backend`: one spelling of a codec on every
/// backend, its device form chosen from the backend. `void` is raw copies; a transfer policy is
/// itself (a custom transfer); a codec (`zvc<float>`, `bitmask`, `precision<float, fp16>`, ...)
/// runs its host reference on a host-task backend (host_codec_transfer) and its device codec on
/// cuda_backend (device_codec_transfer.cuh, with the codec's device header included);
/// `pool_argmax` is pool_argmax_transfer / device_pool_argmax_transfer, `two_value<T>`
/// two_value_transfer / device_two_value_transfer (both with an unchanged fallback),
/// `range_mask` range_mask_transfer / device_range_mask_transfer; a transfer_set maps each member
/// so.
/// @tparam Backend The offload backend.
/// @tparam Codec `void`, a codec, `pool_argmax`, `range_mask`, a transfer policy, or a
///   transfer_set of them.
template <class Backend, class Codec>
struct transfer_for {
  static_assert(detail::no_transfer_for<Codec>,
                "stash::transfer_for: no transfer carries this codec on this backend. On "
                "cuda_backend include <stash/offload/device_codec_transfer.cuh> and the codec's "
                "device header (e.g. <stash/codec/device_zvc.cuh>; for pool_argmax "
                "<stash/offload/device_pool_argmax_transfer.cuh>, for two_value "
                "<stash/offload/device_two_value_transfer.cuh>, for range_mask "
                "<stash/offload/device_range_mask_transfer.cuh>; on the host backend, for "
                "range_mask <stash/offload/range_mask_transfer.hpp>)");
};

/// @brief Raw copies.
template <class Backend>
struct transfer_for<Backend, void> {
  using type = raw_transfer;  ///< the transfer
};

/// @brief A transfer policy is itself.
template <class Backend, detail::transfer_policy T>
struct transfer_for<Backend, T> {
  using type = T;  ///< the transfer
};

/// @brief A codec's host reference on the backend's host tasks.
template <detail::host_task_backend Backend, codec C>
requires(!detail::transfer_policy<C>) struct transfer_for<Backend, C> {
  using type = host_codec_transfer<C>;  ///< the transfer
};

/// @brief Each member mapped.
template <class Backend, class... Cs>
struct transfer_for<Backend, transfer_set<Cs...>> {
  using type = transfer_set<typename transfer_for<Backend, Cs>::type...>;  ///< the transfer set
};

/// @brief transfer_for's type.
/// @tparam Backend The offload backend.
/// @tparam Codec `void`, a codec, `pool_argmax`, `range_mask`, a transfer policy, or a
///   transfer_set of them.
template <class Backend, class Codec>
using transfer_for_t = typename transfer_for<Backend, Codec>::type;

}  // namespace stash
