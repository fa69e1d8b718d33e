/**
 * @file device_range_mask_transfer.cuh
 * @brief range_mask_transfer on a GPU: a clamp's float32 input crosses the link as one bit per
 * element, written by the encode kernel straight into the pinned host slot, and comes back as lo
 * or the inside value, which the clamp's backward reads as it read the original.
 *
 * The way back reads the pinned slot through the mapping (device_codec_transfer's
 * decode_from::mapped): each mask word is read once, so staging it in device scratch first would
 * only add a copy, as device_pool_argmax_transfer does. Same refusals as the host twin
 * (range_mask_transfer.hpp), before anything is queued; no scratch either way.
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/device_range_mask.cuh>
#include <stash/codec/device_staging.cuh>
#include <stash/codec/range_mask.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/range_mask_transfer.hpp>
#include <stash/offload/transfer.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace stash {

/// @brief A clamp's input through the range_mask kernels (the device twin of
/// range_mask_transfer). Lossy: exact for the clamp's backward only.
struct device_range_mask_transfer {
  /// @brief The values come back as lo or the inside value.
  static constexpr bool lossless = false;
  /// @brief The kernels write a status.
  static constexpr bool reports_status = true;
  /// @brief The tensor's element type.
  using value_type = float;
  /// @brief The codec that writes the bytes.
  static constexpr std::uint16_t codec_id = range_mask::id;
  /// @brief The per-tensor descriptor: the clamp whose backward reads the tensor.
  using descriptor_type = range_bounds;

  /// @brief As range_mask_transfer::accepts.
  /// @param bytes The tensor's size.
  /// @param bounds The clamp's bounds.
  /// @return Whether the bounds are usable and the tensor whole float32 elements.
  static bool accepts(std::size_t bytes, range_bounds const& bounds) noexcept
  {
    return range_mask_transfer::accepts(bytes, bounds);
  }
  /// @brief As range_mask_transfer::host_bytes.
  /// @param bytes The tensor's size.
  /// @param bounds The clamp's bounds.
  /// @return The slot's bytes.
  /// @throws stash::logic_error Unless accepts(bytes, bounds).
  static std::size_t host_bytes(std::size_t bytes, range_bounds const& bounds)
  {
    return range_mask_transfer::host_bytes(bytes, bounds);
  }
  /// @brief None: the encoder needs none.
  /// @return 0.
  static std::size_t scratch_bytes(std::size_t) noexcept { return 0; }
  /// @brief None: the decode reads the mapped slot.
  /// @return 0.
  static std::size_t decode_scratch_bytes(std::size_t, std::size_t) noexcept { return 0; }

  /// @brief Encodes on `s` into the pinned slot; the size lands in the status record.
  /// @param s The stream the encode runs in the order of.
  /// @param device The tensor.
  /// @param bytes Its size.
  /// @param host The pinned host slot (16-byte aligned).
  /// @param capacity Its size (host_bytes).
  /// @param status Where the encoded size lands.
  /// @param bounds The clamp's bounds.
  /// @throws stash::logic_error Unless accepts(bytes, bounds), or for a null or misaligned
  ///   pointer or a slot too small (nothing queued).
  /// @throws stash::cuda_error For a launch that failed.
  static void encode(cuda_backend&, cuda::stream_ref s, void const* device, std::size_t bytes,
                     void* host, std::size_t capacity, void* /*scratch*/, transfer_status* status,
                     range_bounds const& bounds)
  {
    auto const& r = detail::range_mask_bounds(bytes, bounds, "device_range_mask_transfer::encode");
    STASH_EXPECTS(status != nullptr, "device_range_mask_transfer::encode: null status");
    std::size_t const n = bytes / sizeof(float);
    auto const* in      = static_cast<float const*>(device);
    auto* const out     = static_cast<std::byte*>(host);
    // Checked before anything is queued (device_range_mask checks again, after the clear).
    detail::expect_device_encode_args("device_range_mask_transfer::encode", in, n, out, capacity,
                                      range_mask::max_compressed_bytes(n), &status->encoded_bytes);
    // A kernel, not a memset: the status is in pinned host memory (see device_codec_transfer).
    detail::clear_status_kernel<><<<1, 1, 0, s.get()>>>(&status->status);
    STASH_CUDA_TRY(cudaGetLastError());
    device_range_mask::encode_async(in, n, r, out, capacity, &status->encoded_bytes, s);
  }

  /// @brief Decodes on `s` into `device` from the pinned slot's first `encoded_bytes` (the
  /// capacity when unknown); the buffer must hold exactly the tensor's elements. On a bad buffer
  /// the status says why and the elements are zeroed.
  /// @param s The stream the decode runs in the order of.
  /// @param host The pinned host slot (16-byte aligned).
  /// @param capacity Its size.
  /// @param device Where the elements go.
  /// @param bytes Their size.
  /// @param status Where a decode error lands.
  /// @param encoded_bytes The host copy's size when known (else unknown_encoded_bytes).
  /// @param bounds The clamp's bounds (the host copy carries its own; these are checked usable).
  /// @throws stash::logic_error Unless accepts(bytes, bounds), or for a null or misaligned
  ///   pointer (nothing queued).
  /// @throws stash::cuda_error For a launch that failed.
  static void decode(cuda_backend&, cuda::stream_ref s, void const* host, std::size_t capacity,
                     void* device, std::size_t bytes, void* /*scratch*/, transfer_status* status,
                     std::size_t encoded_bytes, range_bounds const& bounds)
  {
    (void)detail::range_mask_bounds(bytes, bounds, "device_range_mask_transfer::decode");
    STASH_EXPECTS(status != nullptr, "device_range_mask_transfer::decode: null status");
    std::size_t const readable = encoded_bytes < capacity ? encoded_bytes : capacity;
    device_range_mask::decode_exact_async(static_cast<std::byte const*>(host), readable,
                                          static_cast<float*>(device), bytes / sizeof(float),
                                          &status->status, s);
    zero_on_decode_error_async(device, bytes, &status->status, s);
  }
};

/// @brief `range_mask` in a Codec slot, on cuda_backend.
template <>
struct transfer_for<cuda_backend, range_mask> {
  using type = device_range_mask_transfer;  ///< the transfer
};

}  // namespace stash
