/**
 * @file format.hpp
 * @brief The 32-byte buffer header and little-endian field access, shared by the host reference
 * and the kernels (see docs/codec_format.md).
 */
#pragma once

#include <stash/codec/codec_error.hpp>
#include <stash/core/config.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace stash::detail {

static_assert(std::endian::native == std::endian::little,
              "stash codec buffers are little-endian and the implementation assumes a "
              "little-endian host");

/// "STSH" read as a little-endian u32.
inline constexpr std::uint32_t codec_magic  = 0x48535453u;
inline constexpr std::uint8_t codec_version = 1;
inline constexpr std::size_t header_bytes   = 32;
inline constexpr std::uint8_t flag_checksum = 1;

// Byte offsets of the header fields.
inline constexpr std::size_t off_magic    = 0;
inline constexpr std::size_t off_version  = 4;
inline constexpr std::size_t off_flags    = 5;
inline constexpr std::size_t off_codec_id = 6;
inline constexpr std::size_t off_type     = 8;
inline constexpr std::size_t off_reserved = 9;
inline constexpr std::size_t off_param    = 10;
inline constexpr std::size_t off_checksum = 12;
inline constexpr std::size_t off_count    = 16;
inline constexpr std::size_t off_payload  = 24;

STASH_HOST_DEVICE STASH_FORCEINLINE std::uint16_t load_u16(std::byte const* p)
{
  return static_cast<std::uint16_t>(static_cast<unsigned>(p[0]) |
                                    (static_cast<unsigned>(p[1]) << 8));
}
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint32_t load_u32(std::byte const* p)
{
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t load_u64(std::byte const* p)
{
  return static_cast<std::uint64_t>(load_u32(p)) |
         (static_cast<std::uint64_t>(load_u32(p + 4)) << 32);
}
STASH_HOST_DEVICE STASH_FORCEINLINE void store_u16(std::byte* p, std::uint16_t v)
{
  p[0] = static_cast<std::byte>(v & 0xffu);
  p[1] = static_cast<std::byte>(v >> 8);
}
STASH_HOST_DEVICE STASH_FORCEINLINE void store_u32(std::byte* p, std::uint32_t v)
{
  for (int i = 0; i < 4; ++i) { p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu); }
}
STASH_HOST_DEVICE STASH_FORCEINLINE void store_u64(std::byte* p, std::uint64_t v)
{
  store_u32(p, static_cast<std::uint32_t>(v));
  store_u32(p + 4, static_cast<std::uint32_t>(v >> 32));
}

/// @brief The header fields a decoder needs.
struct header_fields {
  std::uint16_t codec_id;
  std::uint8_t type;
  std::uint8_t flags;
  std::uint16_t param;
  std::uint32_t checksum;
  std::uint64_t count;
  std::uint64_t payload;
};

/// @brief A decoder's verdict: code and byte offset (code == ok means valid).
struct check_result {
  codec_errc code;
  std::uint64_t offset;
};

STASH_HOST_DEVICE STASH_FORCEINLINE check_result check_ok() { return {codec_errc::ok, 0}; }

/// @brief Writes a header with no checksum (flags 0).
STASH_HOST_DEVICE inline void write_header(std::byte* out, std::uint16_t codec_id,
                                           std::uint8_t type, std::uint16_t param,
                                           std::uint64_t count, std::uint64_t payload)
{
  store_u32(out + off_magic, codec_magic);
  out[off_version] = static_cast<std::byte>(codec_version);
  out[off_flags]   = std::byte{0};
  store_u16(out + off_codec_id, codec_id);
  out[off_type]     = static_cast<std::byte>(type);
  out[off_reserved] = std::byte{0};
  store_u16(out + off_param, param);
  store_u32(out + off_checksum, 0);
  store_u64(out + off_count, count);
  store_u64(out + off_payload, payload);
}

/// @brief Parses and checks the codec-independent part of a header: magic, version, flags,
/// codec id, element type, parameter, the payload fitting in `src_bytes`, and the element count
/// fitting in `capacity` elements. Reads only src[0, 32) and only when src_bytes >= 32.
STASH_HOST_DEVICE inline check_result parse_header(std::byte const* src, std::uint64_t src_bytes,
                                                   std::uint16_t codec_id, std::uint8_t type,
                                                   std::uint16_t param, std::uint64_t capacity,
                                                   header_fields& h)
{
  if (src_bytes < header_bytes) { return {codec_errc::truncated_header, src_bytes}; }
  if (load_u32(src + off_magic) != codec_magic) { return {codec_errc::bad_magic, off_magic}; }
  if (static_cast<std::uint8_t>(src[off_version]) != codec_version) {
    return {codec_errc::bad_version, off_version};
  }
  h.flags = static_cast<std::uint8_t>(src[off_flags]);
  if ((h.flags & ~flag_checksum) != 0) { return {codec_errc::bad_flags, off_flags}; }
  if (static_cast<std::uint8_t>(src[off_reserved]) != 0) {
    return {codec_errc::bad_flags, off_reserved};
  }
  h.codec_id = load_u16(src + off_codec_id);
  if (h.codec_id != codec_id) { return {codec_errc::wrong_codec, off_codec_id}; }
  h.type = static_cast<std::uint8_t>(src[off_type]);
  if (h.type != type) { return {codec_errc::wrong_element_type, off_type}; }
  h.param = load_u16(src + off_param);
  if (h.param != param) { return {codec_errc::bad_param, off_param}; }
  h.checksum = load_u32(src + off_checksum);
  if ((h.flags & flag_checksum) == 0 && h.checksum != 0) {
    return {codec_errc::bad_flags, off_checksum};
  }
  h.count   = load_u64(src + off_count);
  h.payload = load_u64(src + off_payload);
  if (h.payload > src_bytes - header_bytes) { return {codec_errc::truncated_payload, off_payload}; }
  if (h.count > capacity) { return {codec_errc::destination_too_small, off_count}; }
  return check_ok();
}

/// @brief How many leading bytes of a buffer in a slot of `capacity` bytes a decoder told that
/// source size may read: header + the payload length its header declares (`declared_payload`, the
/// u64 at off_payload), or the whole capacity when the slot cannot hold a header or the header
/// declares more than the slot holds (parse_header then rejects it, reading only the header).
/// Never more than `capacity`, and no sum can wrap: a corrupted length is just a number here.
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t declared_prefix_bytes(
    std::uint64_t capacity, std::uint64_t declared_payload)
{
  if (capacity < header_bytes || declared_payload > capacity - header_bytes) { return capacity; }
  return header_bytes + declared_payload;
}

/// @brief FNV-1a (32-bit) of `bytes`: the optional payload checksum.
STASH_HOST_DEVICE inline std::uint32_t fnv1a32(std::byte const* p, std::uint64_t bytes)
{
  std::uint32_t h = 2166136261u;
  for (std::uint64_t i = 0; i < bytes; ++i) {
    h ^= static_cast<std::uint32_t>(p[i]);
    h *= 16777619u;
  }
  return h;
}

/// @brief Number of 32-bit words holding `n` bits.
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t words_for_bits(std::uint64_t n)
{
  return (n + 31) / 32;
}

STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t align16(std::uint64_t v)
{
  return (v + 15) & ~std::uint64_t{15};
}

STASH_HOST_DEVICE STASH_FORCEINLINE int popcount32(std::uint32_t v)
{
#if defined(__CUDA_ARCH__)
  return __popc(v);
#else
  return std::popcount(v);
#endif
}

/// @brief Host side: turns a failed check into stash::codec_error.
inline void throw_if(check_result r, std::string const& where = {})
{
  if (r.code != codec_errc::ok) { throw codec_error(r.code, r.offset, where); }
}

/// @brief Host side: verifies the optional payload checksum of a parsed header.
inline void verify_checksum(std::byte const* src, header_fields const& h)
{
  if ((h.flags & flag_checksum) != 0 && fnv1a32(src + header_bytes, h.payload) != h.checksum) {
    throw codec_error(codec_errc::checksum_mismatch, off_checksum);
  }
}

/// @brief The bit pattern of `v` as an unsigned integer of the same size (lossless codecs compare
/// bit patterns, never values).
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE auto bit_pattern(T v)
{
  if constexpr (sizeof(T) == 1) {
    std::uint8_t u;
    memcpy(&u, &v, 1);
    return u;
  } else if constexpr (sizeof(T) == 2) {
    std::uint16_t u;
    memcpy(&u, &v, 2);
    return u;
  } else if constexpr (sizeof(T) == 4) {
    std::uint32_t u;
    memcpy(&u, &v, 4);
    return u;
  } else {
    static_assert(sizeof(T) == 8, "element size must be 1, 2, 4 or 8 bytes");
    std::uint64_t u;
    memcpy(&u, &v, 8);
    return u;
  }
}

/// @brief Bit pattern of `v` is not all zero (so -0.0 and NaN count as nonzero: lossless codecs
/// keep them bit-exactly).
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE bool bits_nonzero(T v)
{
  return bit_pattern(v) != 0;
}

/// @brief Bitwise equality (NaN == NaN with the same payload, -0.0 != 0.0).
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE bool bits_equal(T a, T b)
{
  return bit_pattern(a) == bit_pattern(b);
}

}  // namespace stash::detail
