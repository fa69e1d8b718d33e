/**
 * @file csr_kernels.cuh
 * @brief CSR kernels: one warp per row of 256 columns (8 ballots) counts the nonzeros, a CUB
 * device-wide exclusive scan turns the counts into the row pointers in device scratch, and a
 * second pass copies them into the buffer and scatters column indices and values. Decode checks
 * each row in its warp, zero-fills it and scatters its entries. Bytes match the host reference
 * (csr.hpp). Functions here return cudaError_t.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/detail/csr_format.hpp>
#include <stash/codec/detail/encode_scratch.hpp>
#include <stash/codec/detail/kernel_common.cuh>
#include <stash/codec/element_type.hpp>
#include <stash/core/cub_temp_storage.cuh>

#include <cub/device/device_scan.cuh>

#include <cstdint>

namespace stash::detail {

/// Warp ballots per row: 32 columns each.
inline constexpr unsigned csr_ballots_per_row = static_cast<unsigned>(csr_row_width / 32);

/// One warp per row: its 8 ballots give the row's nonzero count.
template <class T>
__global__ void csr_count_kernel(T const* in, std::uint64_t n, std::uint32_t* counts)
{
  std::uint64_t const rows = make_csr_layout(n, 0).rows;
  unsigned const lane      = threadIdx.x % 32;
  if (global_warp() == 0 && lane == 0) { counts[rows] = 0; }  // the scan's extra slot: nnz
  for (std::uint64_t r = global_warp(); r < rows; r += grid_warps()) {
    std::uint64_t const width = csr_row_columns(n, r);
    std::uint32_t count       = 0;
    for (unsigned b = 0; b < csr_ballots_per_row; ++b) {
      std::uint64_t const c = b * 32 + lane;
      bool const nz         = c < width && bits_nonzero(in[r * csr_row_width + c]);
      count += static_cast<std::uint32_t>(__popc(__ballot_sync(0xffffffffu, nz)));
    }
    if (lane == 0) { counts[r] = count; }
  }
}

/// One warp per row again: each nonzero lane writes its column and value at the row's pointer
/// (from the scanned `row_ptr` in device scratch) plus the nonzeros of lower lanes. The grid also
/// copies the row pointers into the buffer once, coalesced; thread 0 writes the header, the
/// padding and the size.
template <class T>
__global__ void csr_scatter_kernel(T const* in, std::uint64_t n, std::uint32_t const* row_ptr,
                                   std::byte* out, std::size_t* d_size)
{
  std::uint64_t const rows = make_csr_layout(n, 0).rows;
  std::uint64_t const nnz  = row_ptr[rows];
  csr_layout const l       = make_csr_layout(n, nnz);
  unsigned const lane      = threadIdx.x % 32;
  auto* const out_row_ptr  = reinterpret_cast<std::uint32_t*>(out + l.row_ptr_off);
  for (std::uint64_t e = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; e <= rows;
       e += std::uint64_t{gridDim.x} * blockDim.x) {
    out_row_ptr[e] = row_ptr[e];
  }
  if (global_warp() == 0 && lane == 0) {
    for (std::uint64_t p = l.cols_off + nnz; p < l.values_off; ++p) { out[p] = std::byte{0}; }
    std::uint64_t const bytes = l.values_off + nnz * sizeof(T);
    write_header(out, codec_ids::csr, element_type_code<T>, csr_param, n, bytes - header_bytes);
    *d_size = static_cast<std::size_t>(bytes);
  }
  T* values = reinterpret_cast<T*>(out + l.values_off);
  for (std::uint64_t r = global_warp(); r < rows; r += grid_warps()) {
    std::uint64_t const width = csr_row_columns(n, r);
    std::uint64_t k           = row_ptr[r];
    for (unsigned b = 0; b < csr_ballots_per_row; ++b) {
      std::uint64_t const c = b * 32 + lane;
      T const v             = c < width ? in[r * csr_row_width + c] : T{};
      bool const nz         = c < width && bits_nonzero(v);
      std::uint32_t const m = __ballot_sync(0xffffffffu, nz);
      if (nz) {
        std::uint64_t const at = k + static_cast<std::uint64_t>(__popc(m & lanemask_lt(lane)));
        out[l.cols_off + at]   = static_cast<std::byte>(c);
        values[at]             = v;
      }
      k += static_cast<std::uint64_t>(__popc(m));
    }
  }
}

/// Single thread: header and everything outside the rows (sizes, first pointer, padding);
/// resets `status`.
template <class T>
__global__ void csr_validate_kernel(std::byte const* src, std::uint64_t src_bytes,
                                    std::uint64_t capacity, codec_status* status)
{
  header_fields h{};
  check_result r =
      parse_header(src, src_bytes, codec_ids::csr, element_type_code<T>, csr_param, capacity, h);
  if (r.code == codec_errc::ok) {
    std::uint64_t nnz = 0;
    r                 = csr_check_head<T>(src, h.count, h.payload, nnz);
    if (r.code == codec_errc::ok) {
      r = csr_check_padding(src, make_csr_layout(h.count, nnz), nnz);
    }
  }
  store_status(status, r);
}

/// One warp per row: checks its pointers and (a lane per entry) its column indices, then
/// zero-fills the row and scatters its entries. Does nothing when validation already failed.
template <class T>
__global__ void csr_decode_kernel(std::byte const* src, T* dst, codec_status* status)
{
  unsigned const lane = threadIdx.x % 32;
  // One read per block, so every warp agrees even if another block reports meanwhile; the header
  // is only read once validation passed (so it is known to be there).
  if (!block_status_ok(status)) { return; }
  std::uint64_t const n    = load_u64(src + off_count);
  std::uint64_t const rows = make_csr_layout(n, 0).rows;
  std::uint64_t const nnz  = load_u32(src + header_bytes + 4 * rows);
  csr_layout const l       = make_csr_layout(n, nnz);
  for (std::uint64_t r = global_warp(); r < rows; r += grid_warps()) {
    // Every lane computes the same verdict, so the branches below stay warp-uniform.
    if (check_result const p = csr_check_row_pointers(src, l, nnz, r); p.code != codec_errc::ok) {
      if (lane == 0) { report(status, p); }
      continue;
    }
    std::uint64_t const width = csr_row_columns(n, r);
    std::uint64_t const k0    = load_u32(src + l.row_ptr_off + 4 * r);
    std::uint64_t const k1    = load_u32(src + l.row_ptr_off + 4 * (r + 1));
    bool bad                  = false;
    for (std::uint64_t kb = k0; kb < k1; kb += 32) {
      std::uint64_t const k         = kb + lane;
      check_result const e          = k < k1 ? csr_check_entry(src, l, width, k0, k) : check_ok();
      std::uint32_t const bad_lanes = __ballot_sync(0xffffffffu, e.code != codec_errc::ok);
      if (bad_lanes != 0) {
        // The lowest entry is the one the host reference names.
        if (lane == static_cast<unsigned>(__ffs(static_cast<int>(bad_lanes)) - 1)) {
          report(status, e);
        }
        bad = true;
        break;
      }
    }
    if (bad) { continue; }
    for (std::uint64_t c = lane; c < width; c += 32) { dst[r * csr_row_width + c] = T{}; }
    __syncwarp();  // the zeros land before the entries that overwrite some of them
    for (std::uint64_t k = k0 + lane; k < k1; k += 32) { csr_decode_entry(src, l, r, k, dst); }
  }
}

/// @brief Scan of rows + 1 counts into the row pointers.
inline auto csr_scan(std::uint32_t const* counts, std::uint32_t* row_ptr, std::uint64_t rows,
                     cudaStream_t stream)
{
  return [=](void* temp, std::size_t& bytes) {
    return cub::DeviceScan::ExclusiveSum(temp, bytes, counts, row_ptr,
                                         static_cast<std::int64_t>(rows + 1), stream);
  };
}

/// @brief Scratch for encoding n elements: the counts, the scanned row pointers (both device
/// memory, so no kernel reads them over the bus), then CUB's temp storage.
inline cudaError_t csr_encode_scratch_bytes(std::uint64_t n, std::size_t& bytes)
{
  std::uint64_t const rows = make_csr_layout(n, 0).rows;
  std::size_t cub_bytes    = 0;
  cudaError_t const st =
      cub_temp_storage::query(csr_scan(nullptr, nullptr, rows, nullptr), cub_bytes);
  bytes = 2 * cub_temp_storage::aligned(4 * (rows + 1)) + cub_bytes;
  return st;
}

/// @brief Enqueues the encode; never synchronizes. `out` is 16-byte aligned and holds
/// max_compressed_bytes(n).
template <class T>
cudaError_t csr_encode_async(T const* in, std::uint64_t n, std::byte* out, std::size_t* d_size,
                             void* scratch, std::size_t scratch_bytes, cudaStream_t stream)
{
  std::uint64_t const rows      = make_csr_layout(n, 0).rows;
  std::size_t const table_bytes = cub_temp_storage::aligned(4 * (rows + 1));
  // Too small, or null or misaligned for the u32 arrays: refused before anything is queued.
  if (!encode_scratch_usable(scratch, scratch_bytes, 2 * table_bytes)) {
    return cudaErrorInvalidValue;
  }
  auto* const counts  = static_cast<std::uint32_t*>(scratch);
  auto* const row_ptr = reinterpret_cast<std::uint32_t*>(static_cast<char*>(scratch) + table_bytes);
  unsigned const blocks = warp_grid_for(rows);
  csr_count_kernel<T><<<blocks, codec_block_threads, 0, stream>>>(in, n, counts);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  if (cudaError_t const e = cub_temp_storage::run(csr_scan(counts, row_ptr, rows, stream),
                                                  static_cast<char*>(scratch) + 2 * table_bytes,
                                                  scratch_bytes - 2 * table_bytes);
      e != cudaSuccess) {
    return e;
  }
  csr_scatter_kernel<T><<<blocks, codec_block_threads, 0, stream>>>(in, n, row_ptr, out, d_size);
  return cudaGetLastError();
}

/// @brief Enqueues validation and decode; errors land in `*status`, never synchronizes.
template <class T>
cudaError_t csr_decode_async(std::byte const* src, std::uint64_t src_bytes, T* dst,
                             std::uint64_t capacity, codec_status* status, cudaStream_t stream)
{
  csr_validate_kernel<T><<<1, 1, 0, stream>>>(src, src_bytes, capacity, status);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  // Sized for the largest count the destination allows; surplus warps exit at once.
  unsigned const blocks = warp_grid_for(make_csr_layout(capacity, 0).rows);
  csr_decode_kernel<T><<<blocks, codec_block_threads, 0, stream>>>(src, dst, status);
  return cudaGetLastError();
}

}  // namespace stash::detail
