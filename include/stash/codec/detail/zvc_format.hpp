/**
 * @file zvc_format.hpp
 * @brief Zero-value compression layout and per-chunk logic shared by the host reference and the
 * kernels (format: docs/codec_format.md, "zvc").
 */
#pragma once

#include <stash/codec/detail/format.hpp>

#include <cstdint>
#include <cstring>

namespace stash::detail {

/// Elements per chunk: 32 mask words of 32 bits; the chunk table holds one entry per chunk.
inline constexpr std::uint64_t zvc_chunk_elements  = 1024;
inline constexpr std::uint64_t zvc_words_per_chunk = 32;
/// Header param: log2 of the chunk size, so a reader with another chunk size refuses the buffer.
inline constexpr std::uint16_t zvc_param = 10;

/// @brief Byte offsets (from the buffer start) of a zvc buffer's sections for n elements.
struct zvc_layout {
  std::uint64_t n;
  std::uint64_t words;       ///< mask words, ceil(n / 32)
  std::uint64_t chunks;      ///< ceil(n / 1024)
  std::uint64_t mask_off;    ///< u32 mask words
  std::uint64_t table_off;   ///< u32 table of chunks + 1 exclusive prefix counts of nonzeros
  std::uint64_t values_off;  ///< packed nonzero values, 16-byte aligned
};

STASH_HOST_DEVICE STASH_FORCEINLINE zvc_layout make_zvc_layout(std::uint64_t n)
{
  zvc_layout l{};
  l.n          = n;
  l.words      = words_for_bits(n);
  l.chunks     = (n + zvc_chunk_elements - 1) / zvc_chunk_elements;
  l.mask_off   = header_bytes;
  l.table_off  = l.mask_off + 4 * l.words;
  l.values_off = align16(l.table_off + 4 * (l.chunks + 1));
  return l;
}

/// @brief Mask word `w` of `in` (bit i set when element 32w+i is nonzero) — the host's
/// definition of what the kernels compute with a warp ballot.
template <class T>
STASH_HOST_DEVICE inline std::uint32_t zvc_mask_word(T const* in, std::uint64_t n, std::uint64_t w)
{
  std::uint32_t m          = 0;
  std::uint64_t const base = w * 32;
  for (std::uint32_t i = 0; i < 32 && base + i < n; ++i) {
    if (bits_nonzero(in[base + i])) { m |= (std::uint32_t{1} << i); }
  }
  return m;
}

/// @brief Checks everything outside the chunks: table fits the payload, table[0] == 0, padding is
/// zero, payload size matches table[chunks] nonzeros. On success `total` is the nonzero count.
template <class T>
STASH_HOST_DEVICE inline check_result zvc_check_body(std::byte const* src, zvc_layout const& l,
                                                     std::uint64_t payload, std::uint64_t& total)
{
  if (header_bytes + payload < l.values_off) {
    return {codec_errc::payload_size_mismatch, off_payload};
  }
  if (load_u32(src + l.table_off) != 0) { return {codec_errc::bad_chunk_table, l.table_off}; }
  std::uint64_t const last = l.table_off + 4 * l.chunks;
  total                    = load_u32(src + last);
  if (total > l.n) { return {codec_errc::bad_chunk_table, last}; }
  for (std::uint64_t p = last + 4; p < l.values_off; ++p) {
    if (src[p] != std::byte{0}) { return {codec_errc::bad_padding, p}; }
  }
  if (header_bytes + payload != l.values_off + total * sizeof(T)) {
    return {codec_errc::payload_size_mismatch, off_payload};
  }
  return check_ok();
}

/// @brief Checks chunk `c`: its table entries are ordered, within `total`, and differ by the
/// popcount of its mask words; the last word has no bits past n.
STASH_HOST_DEVICE inline check_result zvc_check_chunk(std::byte const* src, zvc_layout const& l,
                                                      std::uint64_t total, std::uint64_t c)
{
  std::uint64_t const t0 = load_u32(src + l.table_off + 4 * c);
  std::uint64_t const t1 = load_u32(src + l.table_off + 4 * (c + 1));
  if (t0 > t1 || t1 > total) { return {codec_errc::bad_chunk_table, l.table_off + 4 * (c + 1)}; }
  std::uint64_t const w0 = c * zvc_words_per_chunk;
  std::uint64_t const w1 = w0 + zvc_words_per_chunk < l.words ? w0 + zvc_words_per_chunk : l.words;
  std::uint64_t pop      = 0;
  for (std::uint64_t w = w0; w < w1; ++w) {
    std::uint32_t const m = load_u32(src + l.mask_off + 4 * w);
    if (w == l.words - 1 && (l.n % 32) != 0 && (m >> (l.n % 32)) != 0) {
      return {codec_errc::bad_mask_tail, l.mask_off + 4 * w};
    }
    pop += static_cast<std::uint64_t>(popcount32(m));
  }
  if (pop != t1 - t0) { return {codec_errc::bad_chunk_table, l.table_off + 4 * (c + 1)}; }
  return check_ok();
}

/// @brief Expands chunk `c` (already checked) into dst.
template <class T>
STASH_HOST_DEVICE inline void zvc_decode_chunk(std::byte const* src, zvc_layout const& l,
                                               std::uint64_t c, T* dst)
{
  std::uint64_t k         = load_u32(src + l.table_off + 4 * c);
  std::byte const* values = src + l.values_off;
  std::uint64_t const e1  = (c + 1) * zvc_chunk_elements < l.n ? (c + 1) * zvc_chunk_elements : l.n;
  for (std::uint64_t i = c * zvc_chunk_elements; i < e1; i += 32) {
    std::uint32_t const m   = load_u32(src + l.mask_off + 4 * (i / 32));
    std::uint64_t const lim = i + 32 < e1 ? 32 : e1 - i;
    for (std::uint64_t j = 0; j < lim; ++j) {
      if ((m >> j) & 1u) {
        memcpy(dst + i + j, values + k * sizeof(T), sizeof(T));
        ++k;
      } else {
        dst[i + j] = T{};
      }
    }
  }
}

}  // namespace stash::detail
