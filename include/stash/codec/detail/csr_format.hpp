/**
 * @file csr_format.hpp
 * @brief Gist's SSDC layout: the tensor viewed as rows of 256 columns, stored as CSR with 1-byte
 * column indices. Shared by the host reference and any kernel.
 */
#pragma once

#include <stash/codec/detail/format.hpp>

#include <cstdint>
#include <cstring>

namespace stash::detail {

inline constexpr std::uint64_t csr_row_width = 256;
/// Header param: log2 of the row width.
inline constexpr std::uint16_t csr_param = 8;

/// @brief Byte offsets of a csr buffer's sections for n elements and nnz nonzeros.
struct csr_layout {
  std::uint64_t n;
  std::uint64_t rows;         ///< ceil(n / 256)
  std::uint64_t row_ptr_off;  ///< u32 x (rows + 1) cumulative nonzero counts
  std::uint64_t cols_off;     ///< u8 x nnz column indices
  std::uint64_t values_off;   ///< T x nnz, 16-byte aligned
};

STASH_HOST_DEVICE STASH_FORCEINLINE csr_layout make_csr_layout(std::uint64_t n, std::uint64_t nnz)
{
  csr_layout l{};
  l.n           = n;
  l.rows        = (n + csr_row_width - 1) / csr_row_width;
  l.row_ptr_off = header_bytes;
  l.cols_off    = l.row_ptr_off + 4 * (l.rows + 1);
  l.values_off  = align16(l.cols_off + nnz);
  return l;
}

/// @brief Columns of row r (256 except possibly the last row).
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t csr_row_columns(std::uint64_t n, std::uint64_t r)
{
  return n - r * csr_row_width < csr_row_width ? n - r * csr_row_width : csr_row_width;
}

/// @brief Nonzeros of row r of `in` — the host's definition of what the kernels count with 8
/// warp ballots per row.
template <class T>
STASH_HOST_DEVICE inline std::uint64_t csr_row_nnz(T const* in, std::uint64_t n, std::uint64_t r)
{
  std::uint64_t const width = csr_row_columns(n, r);
  std::uint64_t count       = 0;
  for (std::uint64_t c = 0; c < width; ++c) {
    count += bits_nonzero(in[r * csr_row_width + c]) ? 1u : 0u;
  }
  return count;
}

/// @brief Writes row r's column indices and values from entry k on; returns the next entry.
template <class T>
STASH_HOST_DEVICE inline std::uint64_t csr_encode_row(T const* in, csr_layout const& l,
                                                      std::uint64_t r, std::uint64_t k,
                                                      std::byte* out)
{
  std::uint64_t const width = csr_row_columns(l.n, r);
  for (std::uint64_t c = 0; c < width; ++c) {
    T const& v = in[r * csr_row_width + c];
    if (bits_nonzero(v)) {
      out[l.cols_off + k] = static_cast<std::byte>(c);
      memcpy(out + l.values_off + k * sizeof(T), &v, sizeof(T));
      ++k;
    }
  }
  return k;
}

/// @brief Checks what lies outside the rows: the payload holds the row pointers, the last pointer
/// (nnz) is at most n and agrees with the payload size, the first pointer is 0. On success `nnz`
/// is the count.
template <class T>
STASH_HOST_DEVICE inline check_result csr_check_head(std::byte const* src, std::uint64_t n,
                                                     std::uint64_t payload, std::uint64_t& nnz)
{
  csr_layout l = make_csr_layout(n, 0);
  if (header_bytes + payload < l.cols_off) {
    return {codec_errc::payload_size_mismatch, off_payload};
  }
  nnz = load_u32(src + l.row_ptr_off + 4 * l.rows);
  if (nnz > n) { return {codec_errc::bad_chunk_table, l.row_ptr_off + 4 * l.rows}; }
  l = make_csr_layout(n, nnz);
  if (header_bytes + payload != l.values_off + nnz * sizeof(T)) {
    return {codec_errc::payload_size_mismatch, off_payload};
  }
  if (load_u32(src + l.row_ptr_off) != 0) { return {codec_errc::bad_chunk_table, l.row_ptr_off}; }
  return check_ok();
}

/// @brief Checks the zero padding between the column indices and the values (after
/// csr_check_head, so `l` is the buffer's layout).
STASH_HOST_DEVICE inline check_result csr_check_padding(std::byte const* src, csr_layout const& l,
                                                        std::uint64_t nnz)
{
  for (std::uint64_t p = l.cols_off + nnz; p < l.values_off; ++p) {
    if (src[p] != std::byte{0}) { return {codec_errc::bad_padding, p}; }
  }
  return check_ok();
}

/// @brief Checks row r's pointers: ordered, at most the row's width apart, within nnz (after
/// csr_check_head, so the pointer table is inside the payload).
STASH_HOST_DEVICE inline check_result csr_check_row_pointers(std::byte const* src,
                                                             csr_layout const& l, std::uint64_t nnz,
                                                             std::uint64_t r)
{
  std::uint64_t const k0 = load_u32(src + l.row_ptr_off + 4 * r);
  std::uint64_t const k1 = load_u32(src + l.row_ptr_off + 4 * (r + 1));
  if (k1 < k0 || k1 - k0 > csr_row_columns(l.n, r) || k1 > nnz) {
    return {codec_errc::bad_chunk_table, l.row_ptr_off + 4 * (r + 1)};
  }
  return check_ok();
}

/// @brief Checks entry k of a row whose entries start at k0 (pointers already checked): its
/// column is inside the row and above the previous entry's.
STASH_HOST_DEVICE STASH_FORCEINLINE check_result csr_check_entry(std::byte const* src,
                                                                 csr_layout const& l,
                                                                 std::uint64_t width,
                                                                 std::uint64_t k0, std::uint64_t k)
{
  std::uint64_t const col = static_cast<std::uint8_t>(src[l.cols_off + k]);
  if (col >= width || (k > k0 && col <= static_cast<std::uint8_t>(src[l.cols_off + k - 1]))) {
    return {codec_errc::bad_column_index, l.cols_off + k};
  }
  return check_ok();
}

/// @brief Checks row r: its pointers, then its entries in order.
STASH_HOST_DEVICE inline check_result csr_check_row(std::byte const* src, csr_layout const& l,
                                                    std::uint64_t nnz, std::uint64_t r)
{
  if (check_result const p = csr_check_row_pointers(src, l, nnz, r); p.code != codec_errc::ok) {
    return p;
  }
  std::uint64_t const width = csr_row_columns(l.n, r);
  std::uint64_t const k0    = load_u32(src + l.row_ptr_off + 4 * r);
  std::uint64_t const k1    = load_u32(src + l.row_ptr_off + 4 * (r + 1));
  for (std::uint64_t k = k0; k < k1; ++k) {
    if (check_result const e = csr_check_entry(src, l, width, k0, k); e.code != codec_errc::ok) {
      return e;
    }
  }
  return check_ok();
}

/// @brief Checks the row pointers, column indices and padding; on success `nnz` is the count.
template <class T>
STASH_HOST_DEVICE inline check_result csr_check(std::byte const* src, std::uint64_t n,
                                                std::uint64_t payload, std::uint64_t& nnz)
{
  if (check_result const h = csr_check_head<T>(src, n, payload, nnz); h.code != codec_errc::ok) {
    return h;
  }
  csr_layout const l = make_csr_layout(n, nnz);
  for (std::uint64_t r = 0; r < l.rows; ++r) {
    if (check_result const e = csr_check_row(src, l, nnz, r); e.code != codec_errc::ok) {
      return e;
    }
  }
  return csr_check_padding(src, l, nnz);
}

/// @brief Stores entry k (of row r, checked) into dst. The device path loads the value as a T:
/// device sources are 16-byte aligned and so is the values section; the host may get any span.
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE void csr_decode_entry(std::byte const* src, csr_layout const& l,
                                                          std::uint64_t r, std::uint64_t k, T* dst)
{
  std::uint64_t const col = static_cast<std::uint8_t>(src[l.cols_off + k]);
#if defined(__CUDA_ARCH__)
  dst[r * csr_row_width + col] = reinterpret_cast<T const*>(src + l.values_off)[k];
#else
  memcpy(dst + r * csr_row_width + col, src + l.values_off + k * sizeof(T), sizeof(T));
#endif
}

/// @brief Expands row r (checked) into dst: zeros, then its entries.
template <class T>
STASH_HOST_DEVICE inline void csr_decode_row(std::byte const* src, csr_layout const& l,
                                             std::uint64_t r, T* dst)
{
  std::uint64_t const width = csr_row_columns(l.n, r);
  for (std::uint64_t c = 0; c < width; ++c) { dst[r * csr_row_width + c] = T{}; }
  std::uint64_t const k1 = load_u32(src + l.row_ptr_off + 4 * (r + 1));
  for (std::uint64_t k = load_u32(src + l.row_ptr_off + 4 * r); k < k1; ++k) {
    csr_decode_entry(src, l, r, k, dst);
  }
}

}  // namespace stash::detail
