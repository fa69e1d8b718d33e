/**
 * @file minifloat.hpp
 * @brief float32 to small floating-point formats and back (Gist's DPR), per element and per
 * storage group, shared by the host reference and the kernels.
 *
 * Rules: round to nearest even; results below the smallest normal flush to a zero of the same
 * sign (no denormals); finite values beyond the largest finite value and infinities clamp to
 * +-max finite; NaN becomes the format's canonical NaN (exponent and mantissa all ones).
 */
#pragma once

#include <stash/codec/detail/format.hpp>

#include <cstdint>
#include <cstring>

namespace stash::detail {

STASH_HOST_DEVICE STASH_FORCEINLINE std::uint32_t f32_bits(float f)
{
  std::uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
STASH_HOST_DEVICE STASH_FORCEINLINE float f32_from_bits(std::uint32_t u)
{
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/// @brief Encodes `f` as 1 sign, E exponent and M mantissa bits (bias 2^(E-1)-1). With
/// `ReservedTop` the top exponent is Inf/NaN (IEEE style); without it (e4m3) only mantissa all
/// ones at the top exponent is NaN.
template <int E, int M, bool ReservedTop>
STASH_HOST_DEVICE inline std::uint32_t minifloat_encode(float f)
{
  constexpr std::uint32_t man_mask = (1u << M) - 1;
  constexpr std::uint32_t exp_all  = (1u << E) - 1;
  constexpr int bias               = (1 << (E - 1)) - 1;
  constexpr std::uint32_t max_exp  = ReservedTop ? exp_all - 1 : exp_all;
  constexpr std::uint32_t max_man  = ReservedTop ? man_mask : man_mask - 1;
  constexpr std::uint32_t max_code = (max_exp << M) | max_man;
  constexpr std::uint32_t nan_code = (exp_all << M) | man_mask;
  std::uint32_t const x            = f32_bits(f);
  std::uint32_t const sign         = (x >> 31) << (E + M);
  std::uint32_t mag                = x & 0x7fffffffu;
  if (mag > 0x7f800000u) { return sign | nan_code; }
  if (mag == 0x7f800000u) { return sign | max_code; }
  constexpr int shift = 23 - M;
  if constexpr (shift > 0) {
    std::uint32_t const lsb = (mag >> shift) & 1u;
    mag += (1u << (shift - 1)) - 1u + lsb;  // round to nearest, ties to even
    mag >>= shift;
  }
  std::uint32_t const e32 = mag >> M;  // float32 biased exponent after rounding (may be 255)
  std::uint32_t const m   = mag & man_mask;
  int const te            = static_cast<int>(e32) - 127 + bias;
  if (e32 == 0 || te < 1) { return sign; }  // flush: no denormals
  if (static_cast<std::uint32_t>(te) > max_exp ||
      (static_cast<std::uint32_t>(te) == max_exp && m > max_man)) {
    return sign | max_code;
  }
  return sign | (static_cast<std::uint32_t>(te) << M) | m;
}

/// @brief Decodes a code written by minifloat_encode (any bit pattern is accepted: exponent 0
/// decodes to a signed zero).
template <int E, int M, bool ReservedTop>
STASH_HOST_DEVICE inline float minifloat_decode(std::uint32_t c)
{
  constexpr std::uint32_t man_mask = (1u << M) - 1;
  constexpr std::uint32_t exp_all  = (1u << E) - 1;
  constexpr int bias               = (1 << (E - 1)) - 1;
  std::uint32_t const sign         = ((c >> (E + M)) & 1u) << 31;
  std::uint32_t const e            = (c >> M) & exp_all;
  std::uint32_t const m            = c & man_mask;
  if (e == 0) { return f32_from_bits(sign); }
  if (e == exp_all) {
    if constexpr (ReservedTop) {
      return f32_from_bits(sign | 0x7f800000u | (m != 0 ? 0x00400000u : 0u));
    } else {
      if (m == man_mask) { return f32_from_bits(sign | 0x7fc00000u); }
    }
  }
  std::uint32_t const e32 = static_cast<std::uint32_t>(static_cast<int>(e) - bias + 127);
  return f32_from_bits(sign | (e32 << 23) | (m << (23 - M)));
}

/// @brief Encodes storage group g of `in` (n elements) into `payload`: one element per 2- or
/// 1-byte code, or three 10-bit codes per little-endian u32 (bits 0-9, 10-19, 20-29; 30-31 zero).
template <class Fmt>
STASH_HOST_DEVICE inline void precision_encode_group(float const* in, std::uint64_t n,
                                                     std::uint64_t g, std::byte* payload)
{
  constexpr int E = Fmt::exponent_bits, M = Fmt::mantissa_bits;
  constexpr bool R = Fmt::reserved_top;
  if constexpr (Fmt::group_elements == 3) {
    std::uint32_t word = 0;
    for (std::uint64_t j = 0; j < 3 && 3 * g + j < n; ++j) {
      word |= minifloat_encode<E, M, R>(in[3 * g + j]) << (10 * j);
    }
    store_u32(payload + 4 * g, word);
  } else if constexpr (Fmt::group_bytes == 2) {
    store_u16(payload + 2 * g, static_cast<std::uint16_t>(minifloat_encode<E, M, R>(in[g])));
  } else {
    payload[g] = static_cast<std::byte>(minifloat_encode<E, M, R>(in[g]));
  }
}

/// @brief Decodes storage group g into `out`; for fp10 reports nonzero padding bits.
template <class Fmt>
STASH_HOST_DEVICE inline check_result precision_decode_group(std::byte const* payload,
                                                             std::uint64_t n, std::uint64_t g,
                                                             float* out)
{
  constexpr int E = Fmt::exponent_bits, M = Fmt::mantissa_bits;
  constexpr bool R = Fmt::reserved_top;
  if constexpr (Fmt::group_elements == 3) {
    std::uint32_t const word      = load_u32(payload + 4 * g);
    std::uint64_t const used      = n - 3 * g < 3 ? n - 3 * g : 3;
    std::uint32_t const used_mask = used == 3 ? 0x3fffffffu : ((1u << (10 * used)) - 1u);
    if ((word & ~used_mask) != 0) { return {codec_errc::bad_padding, header_bytes + 4 * g}; }
    for (std::uint64_t j = 0; j < used; ++j) {
      out[3 * g + j] = minifloat_decode<E, M, R>((word >> (10 * j)) & 0x3ffu);
    }
  } else if constexpr (Fmt::group_bytes == 2) {
    out[g] = minifloat_decode<E, M, R>(load_u16(payload + 2 * g));
  } else {
    out[g] = minifloat_decode<E, M, R>(static_cast<std::uint32_t>(payload[g]));
  }
  return check_ok();
}

/// @brief Storage groups for n elements.
template <class Fmt>
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t precision_groups(std::uint64_t n)
{
  return (n + Fmt::group_elements - 1) / Fmt::group_elements;
}

}  // namespace stash::detail
