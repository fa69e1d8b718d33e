/**
 * @file bitmask_format.hpp
 * @brief Binarize (Gist) layout and per-word logic shared by the host reference and the kernels.
 */
#pragma once

#include <stash/codec/detail/format.hpp>

#include <cstdint>

namespace stash::detail {

/// @brief Bit i of word w is set when element 32w+i is > 0 (false for NaN, -0.0 and negatives).
STASH_HOST_DEVICE inline std::uint32_t bitmask_word(float const* in, std::uint64_t n,
                                                    std::uint64_t w)
{
  std::uint32_t m          = 0;
  std::uint64_t const base = w * 32;
  for (std::uint32_t i = 0; i < 32 && base + i < n; ++i) {
    if (in[base + i] > 0.0f) { m |= (std::uint32_t{1} << i); }
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
