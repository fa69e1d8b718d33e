/**
 * @file two_value_format.hpp
 * @brief two_value layout (a value slot, then one mask bit per element) and its per-element /
 * per-word logic, shared by the host reference (two_value.hpp) and the kernels
 * (two_value_kernels.cuh; see docs/codec_format.md).
 */
#pragma once

#include <stash/codec/detail/format.hpp>

#include <cstdint>
#include <cstring>

namespace stash::detail {

/// @brief Byte offset of the value slot (8 bytes: c's bit pattern, zero-extended).
inline constexpr std::uint64_t two_value_value_off = header_bytes;
/// @brief Byte offset of the first mask word (8-aligned after the value slot).
inline constexpr std::uint64_t two_value_mask_off = header_bytes + 8;

/// @brief Payload bytes for n elements: the value slot plus ceil(n/32) u32 mask words.
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t two_value_payload_bytes(std::uint64_t n)
{
  return 8 + 4 * words_for_bits(n);
}

/// @brief The bit pattern of `v` zero-extended to 64 bits (the value slot's contents).
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t two_value_bits(T v)
{
  return static_cast<std::uint64_t>(bit_pattern(v));
}

/// @brief Whether an element of bit pattern `b` has its mask bit set for value `c_bits`: it is c
/// (never the all-zero pattern, whatever c_bits is).
STASH_HOST_DEVICE STASH_FORCEINLINE bool two_value_is_value(std::uint64_t b, std::uint64_t c_bits)
{
  return b != 0 && b == c_bits;
}

/// @brief Whether an element of bit pattern `b` is foreign to value `c_bits`: neither the all-zero
/// pattern nor c (the input is not two-valued: the encoder must refuse it).
STASH_HOST_DEVICE STASH_FORCEINLINE bool two_value_is_foreign(std::uint64_t b, std::uint64_t c_bits)
{
  return b != 0 && b != c_bits;
}

/// @brief Mask word w for value bit pattern `c_bits`: bit i set iff element 32w+i has exactly the
/// bit pattern c_bits. `foreign` is set when an element is neither the all-zero pattern nor c
/// (the input is not two-valued: the encoder must refuse it). With c_bits == 0 (no nonzero
/// element found) every nonzero element is foreign and the word is 0.
template <class T>
STASH_HOST_DEVICE inline std::uint32_t two_value_word(T const* in, std::uint64_t n, std::uint64_t w,
                                                      std::uint64_t c_bits, bool& foreign)
{
  std::uint32_t m          = 0;
  std::uint64_t const base = w * 32;
  for (std::uint32_t i = 0; i < 32 && base + i < n; ++i) {
    std::uint64_t const b = two_value_bits(in[base + i]);
    if (two_value_is_value(b, c_bits)) {
      m |= (std::uint32_t{1} << i);
    } else if (two_value_is_foreign(b, c_bits)) {
      foreign = true;
    }
  }
  return m;
}

/// @brief The value slot must hold a pattern of sizeof(T) bytes (higher bytes zero) and the
/// payload exactly the slot plus ceil(n/32) words whose bits past n are zero. O(1): the rule tying
/// the value to the mask needs the whole mask (two_value_check_value).
template <class T>
STASH_HOST_DEVICE inline check_result two_value_check_body(std::byte const* src, std::uint64_t n,
                                                           std::uint64_t payload)
{
  if (payload != two_value_payload_bytes(n)) {
    return {codec_errc::payload_size_mismatch, off_payload};
  }
  std::uint64_t const c_bits = load_u64(src + two_value_value_off);
  if constexpr (sizeof(T) < 8) {
    if ((c_bits >> (8 * sizeof(T))) != 0) {
      return {codec_errc::bad_padding, two_value_value_off + sizeof(T)};
    }
  }
  std::uint64_t const words = words_for_bits(n);
  if (n % 32 != 0) {
    std::uint64_t const at   = two_value_mask_off + 4 * (words - 1);
    std::uint32_t const last = load_u32(src + at);
    if ((last >> (n % 32)) != 0) { return {codec_errc::bad_mask_tail, at}; }
  }
  return check_ok();
}

/// @brief Canonical value slot: c's pattern is nonzero exactly when some mask bit is set (all-zero
/// data writes value 0; a set bit with value 0 would be a second encoding of zeros).
/// @param c_bits The value slot.
/// @param any_bit Whether any mask word is nonzero.
STASH_HOST_DEVICE STASH_FORCEINLINE check_result two_value_check_value(std::uint64_t c_bits,
                                                                       bool any_bit)
{
  if ((c_bits != 0) != any_bit) { return {codec_errc::bad_value, two_value_value_off}; }
  return check_ok();
}

/// @brief The T whose bit pattern is `c_bits`' low sizeof(T) bytes (a value slot already
/// checked).
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE T two_value_from_bits(std::uint64_t c_bits)
{
  T v;
  memcpy(&v, &c_bits, sizeof(T));  // little-endian: the low bytes hold the pattern
  return v;
}

/// @brief The value slot as a T (the slot already checked).
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE T two_value_value(std::byte const* src)
{
  return two_value_from_bits<T>(load_u64(src + two_value_value_off));
}

/// @brief Element i decoded: c where its mask bit is set, else the all-zero pattern.
template <class T>
STASH_HOST_DEVICE STASH_FORCEINLINE T two_value_element(std::byte const* src, T c, std::uint64_t i)
{
  bool const set = ((load_u32(src + two_value_mask_off + 4 * (i / 32)) >> (i % 32)) & 1u) != 0;
  if (set) { return c; }
  T z;
  memset(&z, 0, sizeof(T));
  return z;
}

}  // namespace stash::detail
