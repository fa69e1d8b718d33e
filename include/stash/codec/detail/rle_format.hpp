/**
 * @file rle_format.hpp
 * @brief Run-length encoding layout and per-chunk logic (format: docs/codec_format.md, "rle").
 */
#pragma once

#include <stash/codec/detail/format.hpp>

#include <cstdint>
#include <cstring>

namespace stash::detail {

inline constexpr std::uint64_t rle_chunk_elements = 4096;
/// Header param: log2 of the chunk size.
inline constexpr std::uint16_t rle_param = 12;

STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t rle_chunks(std::uint64_t n)
{
  return (n + rle_chunk_elements - 1) / rle_chunk_elements;
}

/// @brief Bytes of one run record of T: u16 (length - 1), then the value.
template <class T>
inline constexpr std::uint64_t rle_record_bytes = 2 + sizeof(T);

/// @brief Elements of chunk c (4096 except possibly the last chunk).
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t rle_chunk_length(std::uint64_t n, std::uint64_t c)
{
  return n - c * rle_chunk_elements < rle_chunk_elements ? n - c * rle_chunk_elements
                                                         : rle_chunk_elements;
}

/// @brief Element i starts a run: it begins a chunk or differs (bitwise) from its predecessor.
/// Runs never reach 65536 elements (the u16 limit) because chunks are 4096 long, so nothing
/// else splits them.
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE bool rle_starts_run(T const* in, std::uint64_t i)
{
  return i % rle_chunk_elements == 0 || !bits_equal(in[i], in[i - 1]);
}

/// @brief Runs (records) of chunk c of `in` — the host's definition of what the kernels count
/// with warp ballots.
template <class T>
STASH_HOST_DEVICE inline std::uint64_t rle_chunk_runs(T const* in, std::uint64_t n, std::uint64_t c)
{
  std::uint64_t const i0 = c * rle_chunk_elements;
  std::uint64_t const i1 = i0 + rle_chunk_length(n, c);
  std::uint64_t runs     = 0;
  for (std::uint64_t i = i0; i < i1; ++i) { runs += rle_starts_run(in, i) ? 1u : 0u; }
  return runs;
}

/// @brief Stores the length field of the record at `rec` (unaligned).
STASH_HOST_DEVICE STASH_FORCEINLINE void rle_store_run_length(std::byte* rec, std::uint64_t run)
{
  store_u16(rec, static_cast<std::uint16_t>(run - 1));
}

/// @brief Stores the value field of the record at `rec` (unaligned, so byte-wise).
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE void rle_store_run_value(std::byte* rec, T v)
{
  memcpy(rec + 2, &v, sizeof(T));
}

/// @brief Writes chunk c's records at `runs + p`; returns the end offset (p after them).
template <class T>
STASH_HOST_DEVICE inline std::uint64_t rle_encode_chunk(T const* in, std::uint64_t n,
                                                        std::uint64_t c, std::byte* runs,
                                                        std::uint64_t p)
{
  std::uint64_t const i0 = c * rle_chunk_elements;
  std::uint64_t const i1 = i0 + rle_chunk_length(n, c);
  std::uint64_t start    = i0;
  for (std::uint64_t i = i0 + 1; i <= i1; ++i) {
    if (i == i1 || rle_starts_run(in, i)) {
      rle_store_run_length(runs + p, i - start);
      rle_store_run_value(runs + p, in[start]);
      p += rle_record_bytes<T>;
      start = i;
    }
  }
  return p;
}

/// @brief Reads chunk c's table entries (relative to the records): the chunk's records are
/// [begin, end). Checks they are ordered, inside the payload and whole records.
template <class T>
STASH_HOST_DEVICE inline check_result rle_chunk_bounds(std::byte const* src, std::uint64_t n,
                                                       std::uint64_t payload, std::uint64_t c,
                                                       std::uint64_t& begin, std::uint64_t& end)
{
  std::uint64_t const runs_cap = payload - 4 * rle_chunks(n);
  begin                        = c == 0 ? 0 : load_u32(src + header_bytes + 4 * (c - 1));
  end                          = load_u32(src + header_bytes + 4 * c);
  if (begin > end || end > runs_cap || (end - begin) % rle_record_bytes<T> != 0) {
    return {codec_errc::bad_chunk_table, header_bytes + 4 * c};
  }
  return check_ok();
}

/// @brief Run length of the record at offset p of the records.
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t rle_run_length(std::byte const* src,
                                                                 std::uint64_t runs_off,
                                                                 std::uint64_t p)
{
  return std::uint64_t{load_u16(src + runs_off + p)} + 1;
}

/// @brief Checks chunk c's run records (u16 length-1, then the value): the table entry is within
/// the payload and after the previous one, the records fill it exactly, and the runs cover
/// exactly the chunk's elements. The caller has checked that the payload holds the table.
template <class T>
STASH_HOST_DEVICE inline check_result rle_check_chunk(std::byte const* src, std::uint64_t n,
                                                      std::uint64_t payload, std::uint64_t c)
{
  std::uint64_t begin = 0;
  std::uint64_t end   = 0;
  if (check_result const b = rle_chunk_bounds<T>(src, n, payload, c, begin, end);
      b.code != codec_errc::ok) {
    return b;
  }
  std::uint64_t const runs_off = header_bytes + 4 * rle_chunks(n);
  std::uint64_t const len      = rle_chunk_length(n, c);
  std::uint64_t covered        = 0;
  for (std::uint64_t p = begin; p < end; p += rle_record_bytes<T>) {
    covered += rle_run_length(src, runs_off, p);
    if (covered > len) { return {codec_errc::bad_run, runs_off + p}; }
  }
  if (covered != len) { return {codec_errc::bad_run, runs_off + end}; }
  return check_ok();
}

/// @brief Checks what lies outside the chunks: the payload holds the table and exactly the
/// records the last table entry names.
STASH_HOST_DEVICE inline check_result rle_check_size(std::byte const* src, std::uint64_t n,
                                                     std::uint64_t payload)
{
  std::uint64_t const chunks = rle_chunks(n);
  if (payload < 4 * chunks) { return {codec_errc::payload_size_mismatch, off_payload}; }
  std::uint64_t const used = chunks == 0 ? 0 : load_u32(src + header_bytes + 4 * (chunks - 1));
  if (payload != 4 * chunks + used) { return {codec_errc::payload_size_mismatch, off_payload}; }
  return check_ok();
}

/// @brief Expands chunk c (already checked) into dst.
template <class T>
STASH_HOST_DEVICE inline void rle_decode_chunk(std::byte const* src, std::uint64_t n,
                                               std::uint64_t c, T* dst)
{
  std::uint64_t const runs_off = header_bytes + 4 * rle_chunks(n);
  std::uint64_t const begin    = c == 0 ? 0 : load_u32(src + header_bytes + 4 * (c - 1));
  std::uint64_t const end      = load_u32(src + header_bytes + 4 * c);
  std::uint64_t i              = c * rle_chunk_elements;
  for (std::uint64_t p = begin; p < end; p += rle_record_bytes<T>) {
    std::uint64_t const run = rle_run_length(src, runs_off, p);
    T v;
    memcpy(&v, src + runs_off + p + 2, sizeof(T));
    for (std::uint64_t j = 0; j < run; ++j) { dst[i + j] = v; }
    i += run;
  }
}

}  // namespace stash::detail
