/**
 * @file csr_format.hpp
 * @brief Gist's SSDC layout: the tensor viewed as rows of 256 columns, stored as CSR with 1-byte
 * column indices. Shared by the host reference and any kernel.
 */
#pragma once

#include <stash/codec/detail/format.hpp>

#include <cstdint>

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

/// @brief Checks the row pointers, column indices and padding; on success `nnz` is the count.
template <class T>
STASH_HOST_DEVICE inline check_result csr_check(std::byte const* src,
                                                std::uint64_t n,
                                                std::uint64_t payload,
                                                std::uint64_t& nnz)
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
  std::uint64_t prev = 0;
  for (std::uint64_t r = 0; r < l.rows; ++r) {
    std::uint64_t const next  = load_u32(src + l.row_ptr_off + 4 * (r + 1));
    std::uint64_t const width = n - r * csr_row_width < csr_row_width ? n - r * csr_row_width
                                                                      : csr_row_width;
    if (next < prev || next - prev > width || next > nnz) {
      return {codec_errc::bad_chunk_table, l.row_ptr_off + 4 * (r + 1)};
    }
    for (std::uint64_t k = prev; k < next; ++k) {
      std::uint64_t const col = static_cast<std::uint8_t>(src[l.cols_off + k]);
      if (col >= width ||
          (k > prev && col <= static_cast<std::uint8_t>(src[l.cols_off + k - 1]))) {
        return {codec_errc::bad_column_index, l.cols_off + k};
      }
    }
    prev = next;
  }
  for (std::uint64_t p = l.cols_off + nnz; p < l.values_off; ++p) {
    if (src[p] != std::byte{0}) { return {codec_errc::bad_padding, p}; }
  }
  return check_ok();
}

}  // namespace stash::detail
