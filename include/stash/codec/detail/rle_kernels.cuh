/**
 * @file rle_kernels.cuh
 * @brief RLE kernels, one warp per 4096-element chunk: ballots of "starts a run" count each
 * chunk's records, a CUB device-wide inclusive scan of their byte sizes writes the end-offset
 * table into device scratch, and a second pass copies it into the buffer and writes the records
 * (each run start stores its value and the previous record's length, so no lane walks a run).
 * Decode checks a chunk's records with warp prefix sums of the run lengths, then expands them 32
 * elements at a time, each lane finding its run by a shuffle binary search. Bytes match the host
 * reference (rle.hpp). Functions here return cudaError_t.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/detail/encode_scratch.hpp>
#include <stash/codec/detail/kernel_common.cuh>
#include <stash/codec/detail/rle_format.hpp>
#include <stash/codec/element_type.hpp>
#include <stash/core/cub_temp_storage.cuh>

#include <cub/device/device_scan.cuh>

#include <cstdint>

namespace stash::detail {

/// One warp per chunk: the popcounts of its "starts a run" ballots give its record bytes.
template <class T>
__global__ void rle_count_kernel(T const* in, std::uint64_t n, std::uint32_t* chunk_bytes)
{
  std::uint64_t const chunks = rle_chunks(n);
  unsigned const lane        = threadIdx.x % 32;
  for (std::uint64_t c = global_warp(); c < chunks; c += grid_warps()) {
    std::uint64_t const i0  = c * rle_chunk_elements;
    std::uint64_t const len = rle_chunk_length(n, c);
    std::uint32_t runs      = 0;
    for (std::uint64_t e = 0; e < len; e += 32) {
      bool const starts = e + lane < len && rle_starts_run(in, i0 + e + lane);
      runs += static_cast<std::uint32_t>(__popc(__ballot_sync(0xffffffffu, starts)));
    }
    if (lane == 0) { chunk_bytes[c] = runs * static_cast<std::uint32_t>(rle_record_bytes<T>); }
  }
}

/// One warp per chunk again: a lane at a run start writes that record's value and the previous
/// record's length (its distance from the previous run start, which is the highest lower lane of
/// the same ballot or the warp's carried last start); where the chunk's records start comes from
/// the scanned `table` in device scratch. The grid also copies the table into the buffer once,
/// coalesced; thread 0 writes the header and size.
template <class T>
__global__ void rle_write_kernel(T const* in, std::uint64_t n, std::uint32_t const* table,
                                 std::byte* out, std::size_t* d_size)
{
  constexpr std::uint64_t rec = rle_record_bytes<T>;
  std::uint64_t const chunks  = rle_chunks(n);
  std::byte* const runs       = out + header_bytes + 4 * chunks;
  unsigned const lane         = threadIdx.x % 32;
  auto* const out_table       = reinterpret_cast<std::uint32_t*>(out + header_bytes);
  for (std::uint64_t e = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < chunks;
       e += std::uint64_t{gridDim.x} * blockDim.x) {
    out_table[e] = table[e];
  }
  if (global_warp() == 0 && lane == 0) {
    std::uint64_t const payload = 4 * chunks + (chunks == 0 ? 0 : table[chunks - 1]);
    write_header(out, codec_ids::rle, element_type_code<T>, rle_param, n, payload);
    *d_size = static_cast<std::size_t>(header_bytes + payload);
  }
  for (std::uint64_t c = global_warp(); c < chunks; c += grid_warps()) {
    std::byte* const recs   = runs + (c == 0 ? 0 : table[c - 1]);
    std::uint64_t const i0  = c * rle_chunk_elements;
    std::uint64_t const len = rle_chunk_length(n, c);
    std::uint64_t q         = 0;  // records begun so far
    std::uint64_t last      = 0;  // chunk position of the latest run start
    for (std::uint64_t e = 0; e < len; e += 32) {
      std::uint64_t const x = e + lane;
      bool const starts     = x < len && rle_starts_run(in, i0 + x);
      std::uint32_t const m = __ballot_sync(0xffffffffu, starts);
      if (starts) {
        std::uint32_t const below = m & lanemask_lt(lane);
        std::uint64_t const mine  = q + static_cast<std::uint64_t>(__popc(below));
        rle_store_run_value(recs + mine * rec, in[i0 + x]);
        if (mine > 0) {
          std::uint64_t const prev =
              below != 0 ? e + static_cast<std::uint64_t>(31 - __clz(below)) : last;
          rle_store_run_length(recs + (mine - 1) * rec, x - prev);
        }
      }
      if (m != 0) {
        last = e + static_cast<std::uint64_t>(31 - __clz(m));
        q += static_cast<std::uint64_t>(__popc(m));
      }
    }
    // Element 0 of a chunk always starts a run, so q >= 1 here.
    if (lane == 0) { rle_store_run_length(recs + (q - 1) * rec, len - last); }
  }
}

/// Single thread: header and the payload size against the table; resets `status`.
template <class T>
__global__ void rle_validate_kernel(std::byte const* src, std::uint64_t src_bytes,
                                    std::uint64_t capacity, codec_status* status)
{
  header_fields h{};
  check_result r =
      parse_header(src, src_bytes, codec_ids::rle, element_type_code<T>, rle_param, capacity, h);
  if (r.code == codec_errc::ok) { r = rle_check_size(src, h.count, h.payload); }
  store_status(status, r);
}

/// One warp per chunk: checks the table entries, then that the records' run lengths (32 records
/// per warp prefix sum) cover the chunk exactly, then expands the chunk. Does nothing when
/// validation already failed.
// Kept whole (~75 lines): the three phases above are one warp's work on one chunk and share the
// warp-uniform verdict and the lane's record; device functions would take most locals by reference.
template <class T>
__global__ void rle_decode_kernel(std::byte const* src, T* dst, codec_status* status)
{
  constexpr std::uint64_t rec = rle_record_bytes<T>;
  unsigned const lane         = threadIdx.x % 32;
  // One read per block, so every warp agrees even if another block reports meanwhile; the header
  // is only read once validation passed (so it is known to be there).
  if (!block_status_ok(status)) { return; }
  std::uint64_t const n        = load_u64(src + off_count);
  std::uint64_t const payload  = load_u64(src + off_payload);
  std::uint64_t const chunks   = rle_chunks(n);
  std::uint64_t const runs_off = header_bytes + 4 * chunks;
  for (std::uint64_t c = global_warp(); c < chunks; c += grid_warps()) {
    std::uint64_t begin = 0;
    std::uint64_t end   = 0;
    // Every lane computes the same verdict, so the branches below stay warp-uniform.
    if (check_result const b = rle_chunk_bounds<T>(src, n, payload, c, begin, end);
        b.code != codec_errc::ok) {
      if (lane == 0) { report(status, b); }
      continue;
    }
    std::uint64_t const len     = rle_chunk_length(n, c);
    std::uint64_t const records = (end - begin) / rec;
    std::uint64_t covered       = 0;
    bool bad                    = false;
    // A corrupted table may name up to 2^32 records; the loop stops once they overrun the chunk,
    // so it runs at most len / 32 + 1 times.
    for (std::uint64_t q0 = 0; q0 < records; q0 += 32) {
      std::uint64_t const q = q0 + lane;
      std::uint32_t const run =
          q < records ? static_cast<std::uint32_t>(rle_run_length(src, runs_off, begin + q * rec))
                      : 0u;
      std::uint32_t const incl = warp_inclusive_sum(run, lane);
      std::uint32_t const over = __ballot_sync(0xffffffffu, q < records && covered + incl > len);
      if (over != 0) {
        // The first record past the chunk's end is the one the host reference names.
        if (lane == static_cast<unsigned>(__ffs(static_cast<int>(over)) - 1)) {
          report(status, {codec_errc::bad_run, runs_off + begin + q * rec});
        }
        bad = true;
        break;
      }
      covered += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (bad) { continue; }
    if (covered != len) {
      if (lane == 0) { report(status, {codec_errc::bad_run, runs_off + end}); }
      continue;
    }
    T* const out       = dst + c * rle_chunk_elements;
    std::uint32_t base = 0;  // chunk position where this group of 32 records starts
    for (std::uint64_t q0 = 0; q0 < records; q0 += 32) {
      std::uint64_t const q = q0 + lane;
      bool const have       = q < records;
      std::uint32_t const run =
          have ? static_cast<std::uint32_t>(rle_run_length(src, runs_off, begin + q * rec)) : 0u;
      std::uint32_t const incl = warp_inclusive_sum(run, lane);
      // Lanes without a record never match the search below.
      std::uint32_t const start = have ? base + incl - run : 0xffffffffu;
      T value{};
      if (have) { memcpy(&value, src + runs_off + begin + q * rec + 2, sizeof(T)); }
      std::uint32_t const stop = base + __shfl_sync(0xffffffffu, incl, 31);
      for (std::uint32_t e = base; e < stop; e += 32) {
        std::uint32_t const pos = e + lane;
        // The record holding pos: the highest lane whose start is <= pos (lane 0's start is
        // base <= pos, and starts increase with the lane).
        int owner = 0;
        for (int step = 16; step > 0; step /= 2) {
          std::uint32_t const s = __shfl_sync(0xffffffffu, start, owner + step);
          if (s <= pos) { owner += step; }
        }
        T const v = shfl_element(value, owner);
        if (pos < stop) { out[pos] = v; }
      }
      base = stop;
    }
  }
}

/// @brief Inclusive scan of the chunks' record bytes into the end-offset table.
inline auto rle_scan(std::uint32_t const* chunk_bytes, std::uint32_t* table, std::uint64_t chunks,
                     cudaStream_t stream)
{
  return [=](void* temp, std::size_t& bytes) {
    return cub::DeviceScan::InclusiveSum(temp, bytes, chunk_bytes, table,
                                         static_cast<std::int64_t>(chunks), stream);
  };
}

/// @brief Scratch for encoding n elements: the per-chunk byte counts, the scanned end-offset table
/// (both device memory, so no kernel reads a table over the bus), then CUB's temp storage.
inline cudaError_t rle_encode_scratch_bytes(std::uint64_t n, std::size_t& bytes)
{
  std::uint64_t const chunks = rle_chunks(n);
  std::size_t cub_bytes      = 0;
  cudaError_t const st =
      cub_temp_storage::query(rle_scan(nullptr, nullptr, chunks, nullptr), cub_bytes);
  bytes = 2 * cub_temp_storage::aligned(4 * chunks) + cub_bytes;
  return st;
}

/// @brief Enqueues the encode; never synchronizes. `out` is 16-byte aligned and holds
/// max_compressed_bytes(n), which fits the u32 table.
template <class T>
cudaError_t rle_encode_async(T const* in, std::uint64_t n, std::byte* out, std::size_t* d_size,
                             void* scratch, std::size_t scratch_bytes, cudaStream_t stream)
{
  std::uint64_t const chunks    = rle_chunks(n);
  std::size_t const table_bytes = cub_temp_storage::aligned(4 * chunks);
  // Too small, or null or misaligned for the u32 arrays: refused before anything is queued.
  if (!encode_scratch_usable(scratch, scratch_bytes, 2 * table_bytes)) {
    return cudaErrorInvalidValue;
  }
  auto* const table = reinterpret_cast<std::uint32_t*>(static_cast<char*>(scratch) + table_bytes);
  unsigned const blocks = warp_grid_for(chunks);
  if (chunks > 0) {
    auto* const chunk_bytes = static_cast<std::uint32_t*>(scratch);
    rle_count_kernel<T><<<blocks, codec_block_threads, 0, stream>>>(in, n, chunk_bytes);
    if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
    if (cudaError_t const e = cub_temp_storage::run(rle_scan(chunk_bytes, table, chunks, stream),
                                                    static_cast<char*>(scratch) + 2 * table_bytes,
                                                    scratch_bytes - 2 * table_bytes);
        e != cudaSuccess) {
      return e;
    }
  }
  // With no chunks the table is never read (nor is `scratch`, which may then be null).
  rle_write_kernel<T><<<blocks, codec_block_threads, 0, stream>>>(in, n, table, out, d_size);
  return cudaGetLastError();
}

/// @brief Enqueues validation and decode; errors land in `*status`, never synchronizes.
template <class T>
cudaError_t rle_decode_async(std::byte const* src, std::uint64_t src_bytes, T* dst,
                             std::uint64_t capacity, codec_status* status, cudaStream_t stream)
{
  rle_validate_kernel<T><<<1, 1, 0, stream>>>(src, src_bytes, capacity, status);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  // Sized for the largest count the destination allows (capped; the loop strides over the rest).
  // Not rle_chunks(capacity): a capacity near 2^64 would wrap.
  unsigned const blocks = warp_grid_for(capacity / rle_chunk_elements + 1);
  rle_decode_kernel<T><<<blocks, codec_block_threads, 0, stream>>>(src, dst, status);
  return cudaGetLastError();
}

}  // namespace stash::detail
