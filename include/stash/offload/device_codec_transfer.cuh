/**
 * @file device_codec_transfer.cuh
 * @brief The offload manager's codec path on a GPU: the encode kernel writes the compressed tensor
 * straight into the pinned host slot; on the way back the compressed tensor is copied into device
 * scratch and decoded there (or, `decode_from::mapped`, decoded from the host slot).
 *
 * Way out. Pinned host memory is mapped into the device's address space, so the encoder's stores
 * cross PCIe as they are made and the number of bytes moved is exactly the compressed size, with
 * no host round trip to learn it (cDMA's compressing DMA engine, in software). It also needs no
 * device buffer for the compressed bytes and is legal in a CUDA graph. The alternatives (encode
 * into device scratch, then a worst-case cudaMemcpyAsync, a copy kernel that reads the
 * device-written size, or a host round trip for the size) are measured against it by
 * bench_offload (benchmarks/offload/offload_bandwidth.cu, section 3).
 *
 * Way back. Decode kernels that read mapped memory pay PCIe latency on every load, some formats
 * read their bytes more than once (RLE's records), and each read is as narrow as the format's
 * fields. So by default (`decode_from::device_copy`) the compressed bytes are first staged in
 * device scratch: when the offload had completed before the prefetch was queued, the host knows
 * the size (transfer_status::encoded_bytes) and a copy engine moves exactly that prefix; otherwise
 * (still in flight, or a CUDA graph, whose launches may each differ) one kernel reads the length
 * the buffer's header declares and copies that prefix with 16-byte loads. The decode then runs
 * from device memory, its status too (read once per block), and the status is copied to the host
 * slot for the manager. bench_offload's fourth section times raw H2D, copy + decode and decode from
 * mapped memory. No GPU result is recorded yet. The staging costs device scratch of the
 * compressed size (the slot's capacity when the size is unknown) while the prefetch runs: a
 * region captured into a CUDA graph never knows the size, so reserve() the device pool for each
 * prefetch in flight with the tensor plus decode_scratch_bytes(bytes, unknown_encoded_bytes).
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/device_codec.cuh>
#include <stash/codec/device_staging.cuh>
#include <stash/core/error.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/detail/decode_staging.hpp>
#include <stash/offload/transfer.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace stash {

namespace detail {

// Kernels defined in a header are templates, launched as `kernel<><<<...>>>`: a template may be
// defined in every translation unit that includes it (`__global__ inline` draws nvcc warning
// #20050, the inline being ignored). The codec kernels (bitmask_kernels.cuh) do the same.

// The status lives in pinned host memory: a one-thread kernel clears it, which a CUDA graph
// captures like any kernel (a memset node is meant for device memory).
template <int Unused = 0>
__global__ void clear_status_kernel(codec_status* status)
{
  *status = codec_status{};
}

}  // namespace detail

/// @brief Where a device_codec_transfer's decode reads the compressed tensor from (see the file
/// docs; bench_offload times both).
enum class decode_from : std::uint8_t {
  device_copy,  ///< staged in device scratch first (a copy of exactly the compressed bytes)
  mapped,       ///< the decode kernels read the pinned host slot through the mapping
};

/// @brief Transfer through device codec `D` (device_zvc, device_bitmask, device_precision, ...).
/// @tparam D The device codec.
/// @tparam From Where the decode reads the compressed tensor (default: a device copy).
template <device_codec D, decode_from From = decode_from::device_copy>
struct device_codec_transfer {
  /// @brief The host reference that defines the bytes.
  using host_codec = typename D::host_codec;
  /// @brief The element type.
  using value_type = typename host_codec::value_type;
  /// @brief The codec that writes the bytes.
  static constexpr std::uint16_t codec_id = host_codec::id;
  /// @brief As the codec.
  static constexpr bool lossless = host_codec::lossless;
  /// @brief The kernels write a status.
  static constexpr bool reports_status = true;

  /// @brief Whether host_bytes takes a tensor of `bytes`: whole elements, within the device
  /// codec's limit: its `encodable(n)` query where it has one, else the host codec's
  /// max_elements (what device_zvc's and device_csr's expect_encodable check). A device codec
  /// with only the throwing check (device_rle) is asked that, its refusal caught here.
  /// @param bytes The tensor's size.
  /// @return Whether host_bytes takes the tensor.
  static bool accepts(std::size_t bytes) noexcept
  {
    if (bytes % sizeof(value_type) != 0) { return false; }
    std::size_t const n = bytes / sizeof(value_type);
    if constexpr (requires { D::encodable(n); }) {
      return D::encodable(n);
    } else if constexpr (requires { host_codec::max_elements; }) {
      return n <= host_codec::max_elements;
    } else if constexpr (requires { D::expect_encodable(n); }) {
      try {
        D::expect_encodable(n);
        return true;
      } catch (...) {  // a size limit it states only by throwing
        return false;
      }
    } else {
      return true;
    }
  }
  /// @brief The codec's worst case. Throws stash::logic_error for a tensor the encoder refuses
  /// (its size limit), so the offload manager refuses it before taking any memory.
  /// @param bytes The tensor's size.
  /// @return The codec's worst case for the tensor.
  static std::size_t host_bytes(std::size_t bytes)
  {
    STASH_EXPECTS(bytes % sizeof(value_type) == 0,
                  "device_codec_transfer: tensor size is not a whole number of elements");
    std::size_t const n = bytes / sizeof(value_type);
    if constexpr (requires { D::expect_encodable(n); }) { D::expect_encodable(n); }
    return host_codec::max_compressed_bytes(n);
  }
  /// @brief The larger of the encoder's and decoder's own scratch (what an offload takes).
  /// @param bytes The tensor's size.
  /// @return Device scratch bytes.
  static std::size_t scratch_bytes(std::size_t bytes)
  {
    std::size_t const n = bytes / sizeof(value_type);
    return std::max(D::encode_scratch_bytes(n), D::decode_scratch_bytes(n));
  }
  /// @brief The scratch a decode takes: the decoder's own, plus (device_copy) its status and the
  /// staged host copy of `encoded_bytes` (the capacity when unknown_encoded_bytes).
  /// @param bytes The tensor's size.
  /// @param encoded_bytes The host copy's size when known, else unknown_encoded_bytes.
  /// @return Device scratch bytes.
  static std::size_t decode_scratch_bytes(std::size_t bytes, std::size_t encoded_bytes)
  {
    std::size_t const own = D::decode_scratch_bytes(bytes / sizeof(value_type));
    if constexpr (From == decode_from::mapped) {
      return own;
    } else {
      return detail::plan_decode_staging(own, host_bytes(bytes), encoded_bytes).total_bytes;
    }
  }

  /// @brief Encodes on `s` into the pinned slot; the compressed size lands in the status record.
  /// @param s The stream.
  /// @param device The device tensor.
  /// @param bytes The tensor's size.
  /// @param host The host slot.
  /// @param capacity The host slot's size.
  /// @param scratch Device scratch (scratch_bytes()).
  /// @param status The status record the transfer writes.
  static void encode(cuda_backend&, cuda::stream_ref s, void const* device, std::size_t bytes,
                     void* host, std::size_t capacity, void* scratch, transfer_status* status)
  {
    detail::clear_status_kernel<><<<1, 1, 0, s.get()>>>(&status->status);
    STASH_CUDA_TRY(cudaGetLastError());
    D::encode_async(static_cast<value_type const*>(device), bytes / sizeof(value_type),
                    static_cast<std::byte*>(host), capacity, &status->encoded_bytes, scratch,
                    scratch_bytes(bytes), s);
  }

  /// @brief Decodes on `s` into `device`: from a device copy of the host copy's first
  /// `encoded_bytes` (device_copy), or from the pinned slot (mapped). On a bad buffer the status
  /// says why and the destination is zeroed. `scratch` holds decode_scratch_bytes(bytes,
  /// encoded_bytes), 16-byte aligned.
  /// @param b The backend.
  /// @param s The stream.
  /// @param host The host slot.
  /// @param capacity The host slot's size.
  /// @param device The device tensor.
  /// @param bytes The tensor's size.
  /// @param scratch Device scratch (scratch_bytes()).
  /// @param status The status record the transfer writes.
  /// @param encoded_bytes The host copy's size when known, else unknown_encoded_bytes.
  static void decode(cuda_backend& b, cuda::stream_ref s, void const* host, std::size_t capacity,
                     void* device, std::size_t bytes, void* scratch, transfer_status* status,
                     std::size_t encoded_bytes = unknown_encoded_bytes)
  {
    std::size_t const own = D::decode_scratch_bytes(bytes / sizeof(value_type));
    if constexpr (From == decode_from::mapped) {
      run_decoder(static_cast<std::byte const*>(host), capacity, device, bytes, scratch, own,
                  &status->status, s);
    } else {
      // decode_scratch_bytes sized the staging for a slot of host_bytes(bytes): a larger slot must
      // not stage more than that (the encoder never writes more), or it would overrun the scratch.
      std::size_t const staged = std::min(capacity, host_bytes(bytes));
      auto const plan          = detail::plan_decode_staging(own, staged, encoded_bytes);
      STASH_EXPECTS(scratch != nullptr && reinterpret_cast<std::uintptr_t>(scratch) % 16 == 0,
                    "device_codec_transfer::decode: scratch must be 16-byte aligned");
      auto* const base     = static_cast<std::byte*>(scratch);
      auto* const d_status = reinterpret_cast<codec_status*>(base + plan.status_offset);
      std::byte* const src = base + plan.source_offset;
      stage(b, s, static_cast<std::byte const*>(host), staged, src, plan);
      run_decoder(src, plan.decoder_src_bytes, device, bytes, own == 0 ? nullptr : scratch, own,
                  d_status, s);
      // The manager reads the verdict from the host slot once the stream got here.
      b.copy_async(&status->status, d_status, sizeof(codec_status), s);
    }
  }

 private:
  // The host copy's prefix into `src`: a copy-engine copy of the known size, or a kernel that
  // reads the size from the header on the device.
  static void stage(cuda_backend& b, cuda::stream_ref s, std::byte const* host,
                    std::size_t capacity, std::byte* src, detail::decode_staging const& plan)
  {
    if (plan.copy_bytes > 0) {
      b.copy_async(src, host, plan.copy_bytes, s);
    } else if (plan.device_sized_copy) {
      copy_declared_prefix_async(host, capacity, src, s);
    }
  }

  // The codec's validation and decode from `src`, then zeros on failure.
  static void run_decoder(std::byte const* src, std::size_t src_bytes, void* device,
                          std::size_t bytes, void* scratch, std::size_t scratch_bytes,
                          codec_status* d_status, cuda::stream_ref s)
  {
    D::decode_async(src, src_bytes, static_cast<value_type*>(device), bytes / sizeof(value_type),
                    d_status, scratch, scratch_bytes, s);
    zero_on_decode_error_async(device, bytes, d_status, s);
  }
};

/// @brief A codec in a Codec slot, on cuda_backend: its device codec (device_codec_for, declared
/// by the codec's device header) through device_codec_transfer.
template <codec C>
requires(!detail::transfer_policy<C> &&
         requires { typename device_codec_for<C>::type; }) struct transfer_for<cuda_backend, C> {
  using type = device_codec_transfer<device_codec_for_t<C>>;  ///< the transfer
};

}  // namespace stash
