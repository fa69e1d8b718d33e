/**
 * @file range_mask_format.hpp
 * @brief range_mask layout (the bounds, then one bit per element) and its per-element / per-word
 * logic on float bit patterns, shared by the host reference (range_mask.hpp) and the kernels
 * (range_mask_kernels.cuh; see docs/codec_format.md).
 */
#pragma once

#include <stash/codec/detail/format.hpp>
#include <stash/codec/detail/minifloat.hpp>

#include <cstdint>

namespace stash::detail {

/// @brief Byte offset of lo's bit pattern (u32), then hi's (u32).
inline constexpr std::uint64_t range_mask_lo_off = header_bytes;
/// @brief Byte offset of hi's bit pattern.
inline constexpr std::uint64_t range_mask_hi_off = header_bytes + 4;
/// @brief Byte offset of the first mask word.
inline constexpr std::uint64_t range_mask_words_off = header_bytes + 8;

/// @brief Payload bytes for n elements: the two bounds plus ceil(n/32) u32 mask words.
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t range_mask_payload_bytes(std::uint64_t n)
{
  return 8 + 4 * words_for_bits(n);
}

/// @brief Whether float32 bits `b` are a NaN (exponent all ones, mantissa nonzero).
STASH_HOST_DEVICE constexpr bool range_mask_is_nan(std::uint32_t b)
{
  return (b & 0x7fffffffu) > 0x7f800000u;
}

/// @brief The order key of non-NaN float32 bits: an integer that orders as IEEE `<` orders the
/// floats, +0 and -0 both 0 (so it equals where `==` does). Keys of adjacent floats differ by 1,
/// so a float lies strictly between two others iff their keys differ by at least 2. Integers, not
/// a float comparison: under flush-to-zero (nvcc -ftz, a host with DAZ) a denormal would compare
/// as 0 on one side and not the other, and host and device bytes would differ.
STASH_HOST_DEVICE constexpr std::int32_t range_mask_key(std::uint32_t b)
{
  auto const magnitude = static_cast<std::int32_t>(b & 0x7fffffffu);
  return (b & 0x80000000u) != 0 ? -magnitude : magnitude;
}

/// @brief The float32 bits of order key `k` (key 0 is +0).
STASH_HOST_DEVICE constexpr std::uint32_t range_mask_bits_of_key(std::int32_t k)
{
  return k >= 0 ? static_cast<std::uint32_t>(k) : (0x80000000u | static_cast<std::uint32_t>(-k));
}

/// @brief Whether lo and hi (bit patterns) are usable bounds: neither is NaN and some float lies
/// strictly between them (so lo < hi, and the decoder has a value inside to write).
STASH_HOST_DEVICE constexpr bool range_mask_bounds_ok(std::uint32_t lo, std::uint32_t hi)
{
  if (range_mask_is_nan(lo) || range_mask_is_nan(hi)) { return false; }
  return std::int64_t{range_mask_key(hi)} - range_mask_key(lo) >= 2;
}

/// @brief Whether an element of bits `b` is inside (lo, hi) as hardtanh's backward sees it: its
/// gradient passes unless `x <= lo || x >= hi`, which is false for NaN. The bounds as order keys.
STASH_HOST_DEVICE constexpr bool range_mask_inside(std::uint32_t b, std::int32_t lo_key,
                                                   std::int32_t hi_key)
{
  if (range_mask_is_nan(b)) { return true; }
  std::int32_t const k = range_mask_key(b);
  return lo_key < k && k < hi_key;
}

/// @brief The value an inside element decodes to: the float strictly between lo and hi (valid
/// bounds) with the fewest significant key bits, +0 when 0 is inside ({0, 6} gives 2.0f, {-1, 1}
/// gives +0.0f). Integer work on the keys, so host and device agree bit for bit; "simplest"
/// rather than a midpoint so the stored tensor holds a readable value, not 2^-63.
STASH_HOST_DEVICE constexpr std::uint32_t range_mask_inside_bits(std::uint32_t lo, std::uint32_t hi)
{
  std::int32_t const a = range_mask_key(lo) + 1;  // the inside keys are [a, b]
  std::int32_t const b = range_mask_key(hi) - 1;
  if (a <= 0 && 0 <= b) { return 0u; }
  bool const negative  = b < 0;  // then the interval mirrored onto positive keys
  auto const low       = static_cast<std::uint32_t>(negative ? -b : a);
  auto const high      = static_cast<std::uint32_t>(negative ? -a : b);
  std::uint32_t spread = low ^ high;  // every bit at or below the highest differing one
  for (unsigned s = 1; s < 32; s *= 2) { spread |= spread >> s; }
  // high with the bits below the highest difference cleared: > low (it has that bit, low has
  // not, above it they agree) and <= high.
  auto const k = static_cast<std::int32_t>(high & ~(spread >> 1));
  return range_mask_bits_of_key(negative ? -k : k);
}

/// @brief Mask word w: bit i set iff element 32w+i is inside (range_mask_inside).
STASH_HOST_DEVICE inline std::uint32_t range_mask_word(float const* in, std::uint64_t n,
                                                       std::uint64_t w, std::int32_t lo_key,
                                                       std::int32_t hi_key)
{
  std::uint32_t m          = 0;
  std::uint64_t const base = w * 32;
  for (std::uint32_t i = 0; i < 32 && base + i < n; ++i) {
    if (range_mask_inside(f32_bits(in[base + i]), lo_key, hi_key)) { m |= (std::uint32_t{1} << i); }
  }
  return m;
}

/// @brief Payload exactly the bounds plus ceil(n/32) words, the bounds usable
/// (range_mask_bounds_ok; reported at lo's offset) and no mask bit past n.
STASH_HOST_DEVICE inline check_result range_mask_check_body(std::byte const* src, std::uint64_t n,
                                                            std::uint64_t payload)
{
  // Past 2^62 elements ceil(n/32) words would wrap the payload size: no real buffer has them.
  if (n > (std::uint64_t{1} << 62) || payload != range_mask_payload_bytes(n)) {
    return {codec_errc::payload_size_mismatch, off_payload};
  }
  if (!range_mask_bounds_ok(load_u32(src + range_mask_lo_off), load_u32(src + range_mask_hi_off))) {
    return {codec_errc::bad_value, range_mask_lo_off};
  }
  if (n % 32 != 0) {
    std::uint64_t const at   = range_mask_words_off + 4 * (words_for_bits(n) - 1);
    std::uint32_t const last = load_u32(src + at);
    if ((last >> (n % 32)) != 0) { return {codec_errc::bad_mask_tail, at}; }
  }
  return check_ok();
}

/// @brief Bit i of the mask (the buffer already checked).
STASH_HOST_DEVICE STASH_FORCEINLINE bool range_mask_bit(std::byte const* src, std::uint64_t i)
{
  return ((load_u32(src + range_mask_words_off + 4 * (i / 32)) >> (i % 32)) & 1u) != 0;
}

}  // namespace stash::detail
