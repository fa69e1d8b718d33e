/**
 * @file bitmask_format.hpp
 * @brief Binarize (Gist) layout and per-word logic shared by the host reference and the kernels.
 */
#pragma once

#include <stash/codec/detail/format.hpp>
#include <stash/codec/detail/minifloat.hpp>

#include <cstdint>

namespace stash::detail {

/// @brief Whether a float32 with bit pattern `bits` sets its mask bit: IEEE `x > 0` decided on the
/// bits, not by a float comparison. Sign clear and magnitude in (0, +inf]: positive denormals,
/// normals and +inf set it; +0, -0, NaN and negatives do not. A float comparison would depend on
/// the FP mode (nvcc -ftz=true / --use_fast_math flushes a denormal operand to 0 on the device;
/// a host with DAZ set does the same), so host and device bytes could differ.
STASH_HOST_DEVICE constexpr bool bitmask_positive(std::uint32_t bits)
{
  // bits - 1 wraps +0 to 0xffffffff; every pattern with the sign set is >= 0x7fffffff.
  return bits - 1u < 0x7f800000u;
}

/// @brief Bit i of word w is set when element 32w+i is positive (bitmask_positive).
STASH_HOST_DEVICE inline std::uint32_t bitmask_word(float const* in, std::uint64_t n,
                                                    std::uint64_t w)
{
  std::uint32_t m          = 0;
  std::uint64_t const base = w * 32;
  for (std::uint32_t i = 0; i < 32 && base + i < n; ++i) {
    if (bitmask_positive(f32_bits(in[base + i]))) { m |= (std::uint32_t{1} << i); }
  }
  return m;
}

/// @brief Payload is exactly ceil(n/32) words and the last word has no bits past n.
STASH_HOST_DEVICE inline check_result bitmask_check_body(std::byte const* src, std::uint64_t n,
                                                         std::uint64_t payload)
{
  std::uint64_t const words = words_for_bits(n);
  if (payload != 4 * words) { return {codec_errc::payload_size_mismatch, off_payload}; }
  if (n % 32 != 0) {
    std::uint32_t const last = load_u32(src + header_bytes + 4 * (words - 1));
    if ((last >> (n % 32)) != 0) {
      return {codec_errc::bad_mask_tail, header_bytes + 4 * (words - 1)};
    }
  }
  return check_ok();
}

/// @brief Bit i of the mask (already checked).
STASH_HOST_DEVICE STASH_FORCEINLINE bool bitmask_bit(std::byte const* src, std::uint64_t i)
{
  return ((load_u32(src + header_bytes + 4 * (i / 32)) >> (i % 32)) & 1u) != 0;
}

}  // namespace stash::detail
