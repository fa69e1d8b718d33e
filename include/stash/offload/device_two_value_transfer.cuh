/**
 * @file device_two_value_transfer.cuh
 * @brief two_value_transfer on a GPU: a tensor of zeros and one value c (a scaled dropout mask)
 * crosses the link as one bit per element plus c, written by the encode kernels straight into the
 * pinned host slot, and comes back exact.
 *
 * As on the host backend (two_value_transfer.hpp), whether the tensor is two-valued is known only
 * to the encoder, in the stream's order: device_two_value refuses data holding a third bit pattern
 * (exactly where two_value::two_value_of says nullopt) into a word of this transfer's device
 * scratch, and a kernel reading that word then writes the elements unchanged (an identity<T>
 * buffer) into the slot, so nothing is lost and the wire carries 32 + sizeof(T) n bytes
 * (offload_stats::bytes_encoded shows it). No host round trip: a CUDA graph may capture either
 * way. The way back reads the pinned slot through the mapping (each mask word and each unchanged
 * element once, as device_pool_argmax_transfer does), with the decoder's state and verdict in
 * device scratch; the verdict is copied to the host slot's status at the end.
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/device_staging.cuh>
#include <stash/codec/device_two_value.cuh>
#include <stash/codec/two_value.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/transfer.hpp>
#include <stash/offload/two_value_transfer.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace stash {

/// @brief two_value<T> through its kernels, falling back to the elements unchanged for data that
/// is not two-valued (the device twin of two_value_transfer). Lossless either way.
/// @tparam T The element type.
template <codec_element T>
struct device_two_value_transfer {
  /// @brief The elements come back exactly.
  static constexpr bool lossless = true;
  /// @brief The kernels write a status.
  static constexpr bool reports_status = true;
  /// @brief The tensor's element type.
  using value_type = T;
  /// @brief The codec that writes the bytes (identity's when the data is not two-valued).
  static constexpr std::uint16_t codec_id = two_value<T>::id;

  /// @brief As two_value_transfer::accepts: whole elements.
  /// @param bytes The tensor's size.
  /// @return Whether host_bytes takes the tensor.
  static bool accepts(std::size_t bytes) noexcept { return two_value_transfer<T>::accepts(bytes); }
  /// @brief As two_value_transfer::host_bytes: room for either form.
  /// @param bytes The tensor's size.
  /// @return The slot's bytes.
  /// @throws stash::logic_error For a size that is not whole elements.
  static std::size_t host_bytes(std::size_t bytes)
  {
    return two_value_transfer<T>::host_bytes(bytes);
  }
  /// @brief The encoder's: its own scratch, then the refusal word (padded to 16).
  /// @return The scratch bytes.
  static std::size_t scratch_bytes(std::size_t) noexcept { return refused_offset + 16; }
  /// @brief The decoder's: its state, then the verdict (the decode reads the mapped slot).
  /// @return The scratch bytes.
  static std::size_t decode_scratch_bytes(std::size_t, std::size_t) noexcept
  {
    return status_offset + sizeof(codec_status);
  }

  /// @brief Encodes on `s` into the pinned slot, or writes the elements unchanged there when they
  /// are not two-valued; the size lands in the status record.
  /// @param s The stream the encode runs in the order of.
  /// @param device The tensor.
  /// @param bytes Its size.
  /// @param host The pinned host slot (16-byte aligned).
  /// @param capacity Its size (host_bytes).
  /// @param scratch scratch_bytes() of device scratch (8-byte aligned).
  /// @param status Where the encoded size lands.
  /// @throws stash::logic_error For a size that is not whole elements, a null or misaligned
  ///   pointer, a slot or scratch too small (nothing queued).
  /// @throws stash::cuda_error For a launch that failed.
  static void encode(cuda_backend&, cuda::stream_ref s, void const* device, std::size_t bytes,
                     void* host, std::size_t capacity, void* scratch, transfer_status* status)
  {
    STASH_EXPECTS(accepts(bytes), "device_two_value_transfer::encode: a tensor of " +
                                      std::to_string(bytes) + " bytes is not whole elements");
    STASH_EXPECTS(status != nullptr && scratch != nullptr,
                  "device_two_value_transfer::encode: null status or scratch");
    // device_two_value checks this too, but only after the status clear below is queued.
    STASH_EXPECTS(reinterpret_cast<std::uintptr_t>(scratch) % alignof(std::uint64_t) == 0,
                  "device_two_value_transfer::encode: scratch must be 8-byte aligned");
    std::size_t const n = bytes / sizeof(T);
    auto const* in      = static_cast<T const*>(device);
    auto* const out     = static_cast<std::byte*>(host);
    auto* const refused =
        reinterpret_cast<std::uint32_t*>(static_cast<std::byte*>(scratch) + refused_offset);
    // Checked before anything is queued: the fallback's needs, then the encoder's.
    detail::expect_device_encode_args("device_two_value_transfer::encode", in, n, out, capacity,
                                      host_bytes(bytes), &status->encoded_bytes);
    // A kernel, not a memset: the status is in pinned host memory (see device_codec_transfer).
    detail::clear_status_kernel<><<<1, 1, 0, s.get()>>>(&status->status);
    STASH_CUDA_TRY(cudaGetLastError());
    device_two_value<T>::encode_async(in, n, out, capacity, &status->encoded_bytes, refused,
                                      scratch, refused_offset, s);
    device_two_value<T>::keep_unchanged_async(in, n, out, capacity, &status->encoded_bytes, refused,
                                              s);
  }

  /// @brief Decodes on `s` into `device` from the pinned slot's first `encoded_bytes` (the
  /// capacity when unknown): either form. On a bad buffer the status says why and the elements
  /// are zeroed.
  /// @param b The backend.
  /// @param s The stream the decode runs in the order of.
  /// @param host The pinned host slot (16-byte aligned).
  /// @param capacity Its size.
  /// @param device Where the elements go.
  /// @param bytes Their size.
  /// @param scratch decode_scratch_bytes() of device scratch (8-byte aligned).
  /// @param status Where a decode error lands.
  /// @param encoded_bytes The host copy's size when known (else unknown_encoded_bytes).
  /// @throws stash::logic_error For a size that is not whole elements, a null or misaligned
  ///   pointer (nothing queued).
  /// @throws stash::cuda_error For a launch or copy that failed.
  static void decode(cuda_backend& b, cuda::stream_ref s, void const* host, std::size_t capacity,
                     void* device, std::size_t bytes, void* scratch, transfer_status* status,
                     std::size_t encoded_bytes = unknown_encoded_bytes)
  {
    STASH_EXPECTS(accepts(bytes), "device_two_value_transfer::decode: a tensor of " +
                                      std::to_string(bytes) + " bytes is not whole elements");
    STASH_EXPECTS(status != nullptr && scratch != nullptr,
                  "device_two_value_transfer::decode: null status or scratch");
    std::size_t const readable = encoded_bytes < capacity ? encoded_bytes : capacity;
    auto* const d_status =
        reinterpret_cast<codec_status*>(static_cast<std::byte*>(scratch) + status_offset);
    device_two_value<T>::decode_or_unchanged_async(static_cast<std::byte const*>(host), readable,
                                                   static_cast<T*>(device), bytes / sizeof(T),
                                                   d_status, scratch, status_offset, s);
    zero_on_decode_error_async(device, bytes, d_status, s);
    // The manager reads the verdict from the host slot once the stream got here.
    b.copy_async(&status->status, d_status, sizeof(codec_status), s);
  }

 private:
  // Scratch layouts: the codec's own first (its u64 fields 8-byte aligned at the scratch's start),
  // then the transfer's word (encode) or the device verdict (decode), 16-byte aligned.
  static constexpr std::size_t refused_offset = device_two_value<T>::encode_scratch_bytes();
  static constexpr std::size_t status_offset  = device_two_value<T>::decode_scratch_bytes();
  static_assert(refused_offset % 16 == 0 && status_offset % 16 == 0);
};

/// @brief `two_value<T>` in a Codec slot, on cuda_backend: with its fallback (a plain
/// device_codec_transfer could not keep data that is not two-valued).
/// @tparam T The element type.
template <codec_element T>
struct transfer_for<cuda_backend, two_value<T>> {
  using type = device_two_value_transfer<T>;  ///< the transfer
};

}  // namespace stash
