/**
 * @file pool_argmax_kernels.cuh
 * @brief Max-pool indices <-> 4-bit window positions on the device, one thread per payload word
 * (8 outputs); bytes match pool_argmax::host_encode_indices. An index outside its window turns
 * the whole buffer into an identity<int64_t> buffer of the indices (see pool_argmax_transfer.hpp).
 * Functions here return cudaError_t.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/detail/kernel_common.cuh>
#include <stash/codec/detail/pool_argmax_format.hpp>
#include <stash/codec/element_type.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace stash::detail {

inline constexpr std::uint8_t argmax_index_type = element_type_code<std::int64_t>;

// The payload is accessed as aligned u32 words / int64 indices, as the other codecs' kernels do
// (not byte by byte: on the transfer's mapped pinned slot every byte access would be its own PCIe
// request). Aligned because the public layer checks `out` / `src` 16-byte aligned and the header
// is a multiple of 8 bytes; GPUs are little-endian, so the bytes are load_u32 / store_u32's.
static_assert(header_bytes % 8 == 0, "payload words and indices must stay aligned");

/// Each thread packs words; any index outside its window sets *outside. (Templates so that a
/// header may define them without violating the one-definition rule.)
template <int Unused = 0>
__global__ void argmax_pack_kernel(std::int64_t const* in, pool_dims d, std::uint64_t n,
                                   std::byte* out, std::uint32_t* outside)
{
  for (std::uint64_t w = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; w < (n + 7) / 8;
       w += std::uint64_t{gridDim.x} * blockDim.x) {
    std::uint32_t word = 0;
    bool bad           = false;
    for (std::uint64_t o = 8 * w; o < n && o < 8 * w + 8; ++o) {
      std::uint32_t const k = argmax_nibble(d, o, in[o]);
      bad                   = bad || k == outside_window;
      word |= (k & 0xfu) << (4 * (o - 8 * w));
    }
    if (bad) { atomicOr(outside, 1u); }
    reinterpret_cast<std::uint32_t*>(out + header_bytes)[w] = word;
  }
}

/// The header and size once every word is packed; or, when an index was outside its window, the
/// indices unchanged under an identity header.
template <int Unused = 0>
__global__ void argmax_finish_kernel(std::int64_t const* in, std::uint64_t n, std::uint16_t param,
                                     std::byte* out, std::size_t* size,
                                     std::uint32_t const* outside)
{
  bool const unchanged      = *outside != 0;
  std::uint64_t const first = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (unchanged) {
    for (std::uint64_t i = first; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
      reinterpret_cast<std::int64_t*>(out + header_bytes)[i] = in[i];
    }
  }
  if (first == 0) {
    std::uint64_t const payload = unchanged ? 8 * n : 4 * ((n + 7) / 8);
    write_header(out, unchanged ? codec_ids::identity : codec_ids::pool_argmax, argmax_index_type,
                 unchanged ? 0 : param, n, payload);
    *size = static_cast<std::size_t>(header_bytes + payload);
  }
}

/// One thread: the header is a pool_argmax buffer of n outputs for `param`, or an identity buffer
/// of n int64 indices.
template <int Unused = 0>
__global__ void argmax_validate_kernel(std::byte const* src, std::uint64_t src_bytes,
                                       std::uint64_t n, std::uint16_t param, codec_status* status)
{
  header_fields h{};
  bool const unchanged =
      src_bytes >= header_bytes && load_u16(src + off_codec_id) == codec_ids::identity;
  check_result r =
      parse_header(src, src_bytes, unchanged ? codec_ids::identity : codec_ids::pool_argmax,
                   argmax_index_type, unchanged ? 0 : param, n, h);
  if (r.code == codec_errc::ok && h.count != n) {
    r = {codec_errc::payload_size_mismatch, off_count};
  }
  if (r.code == codec_errc::ok && h.payload != (unchanged ? 8 * n : 4 * ((n + 7) / 8))) {
    r = {codec_errc::payload_size_mismatch, off_payload};
  }
  store_status(status, r);
}

/// After validation: each thread unpacks words (checking every nibble) or copies indices.
template <int Unused = 0>
__global__ void argmax_unpack_kernel(std::byte const* src, pool_dims d, std::uint64_t n,
                                     std::int64_t* dst, codec_status* status)
{
  if (!block_status_ok(status)) { return; }  // one read per block; the header is valid
  // The format, read once per block like the status (src may be the mapped host slot: a read per
  // thread would be a PCIe round trip for each of up to 2^24 threads, most of them idle). The
  // exit above is block-uniform, so every thread of the block reaches this barrier.
  __shared__ bool unchanged_shared;
  if (threadIdx.x == 0) { unchanged_shared = load_u16(src + off_codec_id) == codec_ids::identity; }
  __syncthreads();
  bool const unchanged      = unchanged_shared;
  std::uint64_t const first = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::uint64_t const step  = std::uint64_t{gridDim.x} * blockDim.x;
  if (unchanged) {
    for (std::uint64_t i = first; i < n; i += step) {
      dst[i] = reinterpret_cast<std::int64_t const*>(src + header_bytes)[i];
    }
    return;
  }
  auto const window = static_cast<std::uint32_t>(d.window_h * d.window_w);
  for (std::uint64_t w = first; w < (n + 7) / 8; w += step) {
    std::uint32_t const word = reinterpret_cast<std::uint32_t const*>(src + header_bytes)[w];
    check_result const r     = argmax_check_word(word, w, n, window);
    if (r.code != codec_errc::ok) {
      report(status, r);  // the caller zeroes the destination
      continue;
    }
    for (std::uint64_t o = 8 * w; o < n && o < 8 * w + 8; ++o) {
      dst[o] = argmax_index(d, o, argmax_nibble_of_word(word, o - 8 * w));
    }
  }
}

inline unsigned int argmax_grid(std::uint64_t items)
{
  std::uint64_t const b = (items + codec_block_threads - 1) / codec_block_threads;
  return static_cast<unsigned int>(b == 0 ? 1 : (b > 65535 ? 65535 : b));
}

/// Encode of n indices into `out` (header + max(4 ceil(n/8), 8n) bytes); `outside` is a device
/// word of scratch.
inline cudaError_t argmax_encode_async(std::int64_t const* in, pool_dims const& d, std::uint64_t n,
                                       std::uint16_t param, std::byte* out, std::size_t* size,
                                       std::uint32_t* outside, cudaStream_t stream)
{
  if (cudaError_t const e = cudaMemsetAsync(outside, 0, sizeof(std::uint32_t), stream);
      e != cudaSuccess) {
    return e;
  }
  argmax_pack_kernel<>
      <<<argmax_grid((n + 7) / 8), codec_block_threads, 0, stream>>>(in, d, n, out, outside);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  argmax_finish_kernel<>
      <<<argmax_grid(n), codec_block_threads, 0, stream>>>(in, n, param, out, size, outside);
  return cudaGetLastError();
}

/// Validation, then decode of n indices into `dst`; the verdict lands in *status.
inline cudaError_t argmax_decode_async(std::byte const* src, std::uint64_t src_bytes,
                                       pool_dims const& d, std::uint64_t n, std::uint16_t param,
                                       std::int64_t* dst, codec_status* status, cudaStream_t stream)
{
  argmax_validate_kernel<><<<1, 1, 0, stream>>>(src, src_bytes, n, param, status);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  argmax_unpack_kernel<>
      <<<argmax_grid(n), codec_block_threads, 0, stream>>>(src, d, n, dst, status);
  return cudaGetLastError();
}

}  // namespace stash::detail
