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

/// @brief Checks chunk c's run records (u16 length-1, then the value): the table entry is within
/// the payload and after the previous one, the records fill it exactly, and the runs cover
/// exactly the chunk's elements.
template <class T>
STASH_HOST_DEVICE inline check_result rle_check_chunk(std::byte const* src,
                                                      std::uint64_t n,
                                                      std::uint64_t payload,
                                                      std::uint64_t c)
{
  constexpr std::uint64_t rec = 2 + sizeof(T);
  std::uint64_t const chunks  = rle_chunks(n);
  std::uint64_t const runs_off = header_bytes + 4 * chunks;
  std::uint64_t const runs_cap = payload - 4 * chunks;
  std::uint64_t const begin    = c == 0 ? 0 : load_u32(src + header_bytes + 4 * (c - 1));
  std::uint64_t const end      = load_u32(src + header_bytes + 4 * c);
  if (begin > end || end > runs_cap || (end - begin) % rec != 0) {
    return {codec_errc::bad_chunk_table, header_bytes + 4 * c};
  }
  std::uint64_t const len = n - c * rle_chunk_elements < rle_chunk_elements
                              ? n - c * rle_chunk_elements
                              : rle_chunk_elements;
  std::uint64_t covered = 0;
  for (std::uint64_t p = begin; p < end; p += rec) {
    covered += std::uint64_t{load_u16(src + runs_off + p)} + 1;
    if (covered > len) { return {codec_errc::bad_run, runs_off + p}; }
  }
  if (covered != len) { return {codec_errc::bad_run, runs_off + end}; }
  return check_ok();
}

/// @brief Expands chunk c (already checked) into dst.
template <class T>
STASH_HOST_DEVICE inline void rle_decode_chunk(std::byte const* src, std::uint64_t n, std::uint64_t c, T* dst)
{
  constexpr std::uint64_t rec  = 2 + sizeof(T);
  std::uint64_t const runs_off = header_bytes + 4 * rle_chunks(n);
  std::uint64_t const begin    = c == 0 ? 0 : load_u32(src + header_bytes + 4 * (c - 1));
  std::uint64_t const end      = load_u32(src + header_bytes + 4 * c);
  std::uint64_t i              = c * rle_chunk_elements;
  for (std::uint64_t p = begin; p < end; p += rec) {
    std::uint64_t const run = std::uint64_t{load_u16(src + runs_off + p)} + 1;
    T v;
    memcpy(&v, src + runs_off + p + 2, sizeof(T));
    for (std::uint64_t j = 0; j < run; ++j) { dst[i + j] = v; }
    i += run;
  }
}

}  // namespace stash::detail
