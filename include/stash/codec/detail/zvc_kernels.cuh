/**
 * @file zvc_kernels.cuh
 * @brief ZVC kernels: warp ballots build the mask words, a CUB device-wide exclusive scan turns
 * per-chunk nonzero counts into the chunk table, and a second pass scatters the nonzeros. Bytes
 * match the host reference (zvc.hpp) exactly. Functions here return cudaError_t.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/detail/encode_scratch.hpp>
#include <stash/codec/detail/kernel_common.cuh>
#include <stash/codec/detail/zvc_format.hpp>
#include <stash/codec/element_type.hpp>
#include <stash/core/cub_temp_storage.cuh>

#include <cub/device/device_scan.cuh>

#include <cstdint>

namespace stash::detail {

/// One warp per 1024-element chunk: 32 ballots give its 32 mask words and its nonzero count.
/// Lane k keeps word k, so the chunk's mask goes out as one coalesced 128-byte store per warp
/// (`out` is usually the mapped pinned slot: one bus transaction, not 32 four-byte ones).
template <class T>
__global__ void zvc_mask_kernel(T const* in, std::uint64_t n, std::byte* out, std::uint32_t* counts)
{
  zvc_layout const l     = make_zvc_layout(n);
  std::uint64_t const gw = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  unsigned const lane    = threadIdx.x % 32;
  if (gw == 0 && lane == 0) { counts[l.chunks] = 0; }  // the scan's extra slot: total count
  if (gw >= l.chunks) { return; }
  std::uint32_t count = 0;
  std::uint32_t mine  = 0;  // mask word gw * 32 + lane
  for (unsigned k = 0; k < zvc_words_per_chunk; ++k) {
    std::uint64_t const w = gw * zvc_words_per_chunk + k;
    if (w >= l.words) { break; }  // warp-uniform: w does not depend on the lane
    std::uint64_t const i = w * 32 + lane;
    bool const nz         = i < n && bits_nonzero(in[i]);
    std::uint32_t const m = __ballot_sync(0xffffffffu, nz);
    if (lane == k) { mine = m; }
    count += static_cast<std::uint32_t>(__popc(m));
  }
  auto* mask               = reinterpret_cast<std::uint32_t*>(out + l.mask_off);
  std::uint64_t const my_w = gw * zvc_words_per_chunk + lane;
  if (my_w < l.words) { mask[my_w] = mine; }
  if (lane == 0) { counts[gw] = count; }
}

/// One warp per chunk again: each nonzero lane writes its value at the chunk's offset (from the
/// scanned `table` in device scratch) plus the nonzeros of lower lanes. The grid also copies the
/// table into the buffer once, coalesced; warp 0 writes the header, padding and the size.
template <class T>
__global__ void zvc_scatter_kernel(T const* in, std::uint64_t n, std::uint32_t const* table,
                                   std::byte* out, std::size_t* d_size)
{
  zvc_layout const l     = make_zvc_layout(n);
  std::uint64_t const gt = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::uint64_t const gw = gt / 32;
  unsigned const lane    = threadIdx.x % 32;
  auto* const out_table  = reinterpret_cast<std::uint32_t*>(out + l.table_off);
  for (std::uint64_t e = gt; e <= l.chunks; e += std::uint64_t{gridDim.x} * blockDim.x) {
    out_table[e] = table[e];
  }
  if (gw == 0 && lane == 0) {
    std::uint64_t const total = table[l.chunks];
    for (std::uint64_t p = l.table_off + 4 * (l.chunks + 1); p < l.values_off; ++p) {
      out[p] = std::byte{0};
    }
    std::uint64_t const bytes = l.values_off + total * sizeof(T);
    write_header(out, codec_ids::zvc, element_type_code<T>, zvc_param, n, bytes - header_bytes);
    *d_size = static_cast<std::size_t>(bytes);
  }
  if (gw >= l.chunks) { return; }
  T* values          = reinterpret_cast<T*>(out + l.values_off);
  std::uint64_t base = table[gw];
  for (std::uint64_t w = gw * zvc_words_per_chunk;
       w < (gw + 1) * zvc_words_per_chunk && w < l.words; ++w) {
    std::uint64_t const i = w * 32 + lane;
    T const v             = i < n ? in[i] : T{};
    bool const nz         = i < n && bits_nonzero(v);
    std::uint32_t const m = __ballot_sync(0xffffffffu, nz);
    if (nz) { values[base + __popc(m & lanemask_lt(lane))] = v; }
    base += static_cast<std::uint64_t>(__popc(m));
  }
}

/// Single thread: header and everything outside the chunks; resets `status`.
template <class T>
__global__ void zvc_validate_kernel(std::byte const* src, std::uint64_t src_bytes,
                                    std::uint64_t capacity, codec_status* status)
{
  header_fields h{};
  check_result r =
      parse_header(src, src_bytes, codec_ids::zvc, element_type_code<T>, zvc_param, capacity, h);
  if (r.code == codec_errc::ok) {
    std::uint64_t total = 0;
    r                   = zvc_check_body<T>(src, make_zvc_layout(h.count), h.payload, total);
  }
  store_status(status, r);
}

/// One warp per chunk: checks the chunk's table entries against the popcount of its mask words
/// (warp reduction), then expands it. Does nothing when validation already failed.
template <class T>
__global__ void zvc_decode_kernel(std::byte const* src, T* dst, codec_status* status)
{
  unsigned const lane = threadIdx.x % 32;
  // One read per block, so every warp agrees even if another block reports meanwhile; the header
  // is only read once validation passed (so it is known to be there).
  if (!block_status_ok(status)) { return; }
  zvc_layout const l     = make_zvc_layout(load_u64(src + off_count));
  std::uint64_t const gw = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  if (gw >= l.chunks) { return; }
  auto const* mask          = reinterpret_cast<std::uint32_t const*>(src + l.mask_off);
  auto const* table         = reinterpret_cast<std::uint32_t const*>(src + l.table_off);
  std::uint64_t const my_w  = gw * zvc_words_per_chunk + lane;
  std::uint32_t const my_m  = my_w < l.words ? mask[my_w] : 0u;
  std::uint64_t const total = table[l.chunks];
  std::uint64_t const t0    = table[gw];
  std::uint64_t const t1    = table[gw + 1];
  bool const tail_bad       = my_w == l.words - 1 && (l.n % 32) != 0 && (my_m >> (l.n % 32)) != 0;
  if (__any_sync(0xffffffffu, tail_bad)) {
    if (tail_bad) { report(status, {codec_errc::bad_mask_tail, l.mask_off + 4 * my_w}); }
    return;
  }
  auto const pop = static_cast<std::uint64_t>(warp_sum(static_cast<unsigned>(__popc(my_m))));
  if (t0 > t1 || t1 > total || pop != t1 - t0) {
    if (lane == 0) { report(status, {codec_errc::bad_chunk_table, l.table_off + 4 * (gw + 1)}); }
    return;
  }
  auto const* values = reinterpret_cast<T const*>(src + l.values_off);
  std::uint64_t base = t0;
  for (unsigned w = 0; w < zvc_words_per_chunk; ++w) {
    std::uint64_t const word = gw * zvc_words_per_chunk + w;
    if (word >= l.words) { break; }
    std::uint32_t const m = __shfl_sync(0xffffffffu, my_m, static_cast<int>(w));
    std::uint64_t const i = word * 32 + lane;
    if (i < l.n) {
      dst[i] = ((m >> lane) & 1u) ? values[base + __popc(m & lanemask_lt(lane))] : T{};
    }
    base += static_cast<std::uint64_t>(__popc(m));
  }
}

/// @brief Scan of chunks + 1 counts into the chunk table.
inline auto zvc_scan(std::uint32_t const* counts, std::uint32_t* table, std::uint64_t chunks,
                     cudaStream_t stream)
{
  return [=](void* temp, std::size_t& bytes) {
    return cub::DeviceScan::ExclusiveSum(temp, bytes, counts, table,
                                         static_cast<std::int64_t>(chunks + 1), stream);
  };
}

/// @brief Scratch for encoding n elements: the counts, the scanned table (both device memory, so
/// no kernel reads a table over the bus), then CUB's temp storage.
inline cudaError_t zvc_encode_scratch_bytes(std::uint64_t n, std::size_t& bytes)
{
  std::uint64_t const chunks = make_zvc_layout(n).chunks;
  std::size_t cub_bytes      = 0;
  cudaError_t const st =
      cub_temp_storage::query(zvc_scan(nullptr, nullptr, chunks, nullptr), cub_bytes);
  bytes = 2 * cub_temp_storage::aligned(4 * (chunks + 1)) + cub_bytes;
  return st;
}

/// @brief Enqueues the encode; never synchronizes. `out` is 16-byte aligned and holds
/// max_compressed_bytes(n).
template <class T>
cudaError_t zvc_encode_async(T const* in, std::uint64_t n, std::byte* out, std::size_t* d_size,
                             void* scratch, std::size_t scratch_bytes, cudaStream_t stream)
{
  zvc_layout const l            = make_zvc_layout(n);
  std::size_t const table_bytes = cub_temp_storage::aligned(4 * (l.chunks + 1));
  // Too small, or null or misaligned for the u32 arrays: refused before anything is queued.
  if (!encode_scratch_usable(scratch, scratch_bytes, 2 * table_bytes)) {
    return cudaErrorInvalidValue;
  }
  auto* const counts = static_cast<std::uint32_t*>(scratch);
  auto* const table  = reinterpret_cast<std::uint32_t*>(static_cast<char*>(scratch) + table_bytes);
  unsigned const blocks = blocks_for(l.chunks, codec_warps_per_block);
  zvc_mask_kernel<T><<<blocks, codec_block_threads, 0, stream>>>(in, n, out, counts);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  if (cudaError_t const e = cub_temp_storage::run(zvc_scan(counts, table, l.chunks, stream),
                                                  static_cast<char*>(scratch) + 2 * table_bytes,
                                                  scratch_bytes - 2 * table_bytes);
      e != cudaSuccess) {
    return e;
  }
  zvc_scatter_kernel<T><<<blocks, codec_block_threads, 0, stream>>>(in, n, table, out, d_size);
  return cudaGetLastError();
}

/// @brief Enqueues validation and decode; errors land in `*status`, never synchronizes.
template <class T>
cudaError_t zvc_decode_async(std::byte const* src, std::uint64_t src_bytes, T* dst,
                             std::uint64_t capacity, codec_status* status, cudaStream_t stream)
{
  zvc_validate_kernel<T><<<1, 1, 0, stream>>>(src, src_bytes, capacity, status);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  // Sized for the largest count the destination allows; surplus warps exit at once.
  unsigned const blocks = blocks_for(make_zvc_layout(capacity).chunks, codec_warps_per_block);
  zvc_decode_kernel<T><<<blocks, codec_block_threads, 0, stream>>>(src, dst, status);
  return cudaGetLastError();
}

}  // namespace stash::detail
