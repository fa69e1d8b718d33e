/**
 * @file device_pool_argmax_transfer.cuh
 * @brief pool_argmax_transfer on a GPU: max-pool indices packed as 4-bit window positions by a
 * kernel that writes straight into the pinned host slot, unpacked back into the exact indices.
 *
 * The way back reads the pinned slot through the mapping (device_codec_transfer's
 * decode_from::mapped): each payload word is read once, so staging it in device scratch first
 * would only add a copy. Same refusals and same fallback for indices outside their windows as
 * the host twin (pool_argmax_transfer.hpp); the encoder's scratch is one device word, which
 * records that fallback.
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/device_pool_argmax.cuh>
#include <stash/codec/device_staging.cuh>
#include <stash/codec/pool_argmax.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/pool_argmax_transfer.hpp>
#include <stash/offload/transfer.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace stash {

/// @brief Max-pool indices through the pool_argmax kernels (the device twin of
/// pool_argmax_transfer). Exact: a lossless transfer of int64 indices.
struct device_pool_argmax_transfer {
  /// @brief The indices come back exactly.
  static constexpr bool lossless = true;
  /// @brief The kernels write a status.
  static constexpr bool reports_status = true;
  /// @brief The tensor's element type.
  using value_type = std::int64_t;
  /// @brief The codec that writes the bytes.
  static constexpr std::uint16_t codec_id = pool_argmax::id;
  /// @brief The per-tensor descriptor: the max pool whose indices the tensor holds.
  using descriptor_type = pool_geometry;

  /// @brief As pool_argmax_transfer::accepts.
  /// @param bytes The tensor's size.
  /// @param g The pool's geometry.
  /// @return Whether `g` describes the tensor.
  static bool accepts(std::size_t bytes, pool_geometry const& g) noexcept
  {
    return pool_argmax_transfer::accepts(bytes, g);
  }
  /// @brief As pool_argmax_transfer::host_bytes.
  /// @param bytes The tensor's size.
  /// @param g The pool's geometry.
  /// @return The slot's bytes.
  /// @throws stash::logic_error Unless `g` describes the tensor.
  static std::size_t host_bytes(std::size_t bytes, pool_geometry const& g)
  {
    return pool_argmax_transfer::host_bytes(bytes, g);
  }
  /// @brief The encoder's: one device word (did an index fall outside its window?).
  /// @return The scratch bytes.
  static std::size_t scratch_bytes(std::size_t) noexcept
  {
    return device_pool_argmax::encode_scratch_bytes();
  }
  /// @brief None: the decode reads the mapped slot.
  /// @return 0.
  static std::size_t decode_scratch_bytes(std::size_t, std::size_t) noexcept { return 0; }

  /// @brief Packs on `s` into the pinned slot; the size lands in the status record.
  /// @param s The stream the encode runs in the order of.
  /// @param device The indices.
  /// @param bytes Their size.
  /// @param host The pinned host slot.
  /// @param capacity Its size.
  /// @param scratch scratch_bytes() of device scratch.
  /// @param status Where the encoded size lands.
  /// @param geometry The pool's geometry.
  /// @throws stash::logic_error Unless `geometry` describes the tensor (nothing queued).
  static void encode(cuda_backend&, cuda::stream_ref s, void const* device, std::size_t bytes,
                     void* host, std::size_t capacity, void* scratch, transfer_status* status,
                     pool_geometry const& geometry)
  {
    auto const& g = detail::argmax_geometry(bytes, geometry, "device_pool_argmax_transfer::encode");
    // A kernel, not a memset: the status is in pinned host memory (see device_codec_transfer).
    detail::clear_status_kernel<><<<1, 1, 0, s.get()>>>(&status->status);
    STASH_CUDA_TRY(cudaGetLastError());
    device_pool_argmax::encode_indices_async(
        static_cast<std::int64_t const*>(device), g, static_cast<std::byte*>(host), capacity,
        &status->encoded_bytes, scratch, scratch_bytes(bytes), s);
  }

  /// @brief Unpacks on `s` into `device` from the pinned slot's first `encoded_bytes` (the
  /// capacity when unknown). On a bad buffer the status says why and the indices are zeroed.
  /// @param s The stream the decode runs in the order of.
  /// @param host The pinned host slot.
  /// @param capacity Its size.
  /// @param device Where the indices go.
  /// @param bytes Their size.
  /// @param status Where a decode error lands.
  /// @param encoded_bytes The host copy's size when known (else unknown_encoded_bytes).
  /// @param geometry The pool's geometry.
  /// @throws stash::logic_error Unless `geometry` describes the tensor (nothing queued).
  static void decode(cuda_backend&, cuda::stream_ref s, void const* host, std::size_t capacity,
                     void* device, std::size_t bytes, void* /*scratch*/, transfer_status* status,
                     std::size_t encoded_bytes, pool_geometry const& geometry)
  {
    auto const& g = detail::argmax_geometry(bytes, geometry, "device_pool_argmax_transfer::decode");
    std::size_t const readable = encoded_bytes < capacity ? encoded_bytes : capacity;
    device_pool_argmax::decode_indices_async(static_cast<std::byte const*>(host), readable, g,
                                             static_cast<std::int64_t*>(device),
                                             bytes / sizeof(std::int64_t), &status->status, s);
    zero_on_decode_error_async(device, bytes, &status->status, s);
  }
};

/// @brief `pool_argmax` in a Codec slot, on cuda_backend.
template <>
struct transfer_for<cuda_backend, pool_argmax> {
  using type = device_pool_argmax_transfer;  ///< the transfer
};

}  // namespace stash
