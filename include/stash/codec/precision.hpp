/**
 * @file precision.hpp
 * @brief Gist's Delayed Precision Reduction: float32 stored as fp16, bf16, fp8 (e4m3 / e5m2) or
 * fp10 (1/5/4, three per 32-bit word). Lossy, with the error bound documented per format.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/detail/minifloat.hpp>
#include <stash/codec/element_type.hpp>

#include <type_traits>

namespace stash {

/// @brief The layout of a reduced-precision format: sign, `ExponentBits`, `MantissaBits`, whether
/// the top exponent is reserved for Inf/NaN, the codec id's low byte, and how many elements share
/// how many stored bytes.
template <int ExponentBits, int MantissaBits, bool ReservedTop, std::uint8_t Code,
          int GroupElements, int GroupBytes>
struct minifloat_format {
  static constexpr int exponent_bits  = ExponentBits;   ///< exponent field width
  static constexpr int mantissa_bits  = MantissaBits;   ///< stored mantissa bits
  static constexpr bool reserved_top  = ReservedTop;    ///< top exponent is Inf/NaN
  static constexpr std::uint8_t code  = Code;           ///< low byte of the codec id
  static constexpr int group_elements = GroupElements;  ///< elements per storage group
  static constexpr int group_bytes    = GroupBytes;     ///< bytes per storage group
};

/// @brief IEEE binary16 layout (1/5/10); no denormals.
struct fp16 : minifloat_format<5, 10, true, 1, 1, 2> {};
/// @brief bfloat16 (1/8/7); no denormals.
struct bf16 : minifloat_format<8, 7, true, 2, 1, 2> {};
/// @brief OCP fp8 e4m3 (1/4/3, max 448, no infinities: only S.1111.111 is NaN); no denormals.
struct fp8_e4m3 : minifloat_format<4, 3, false, 3, 1, 1> {};
/// @brief OCP fp8 e5m2 (1/5/2, max 57344); no denormals.
struct fp8_e5m2 : minifloat_format<5, 2, true, 4, 1, 1> {};
/// @brief Gist's fp10 (1/5/4, max 63488), three per 32-bit word; no denormals.
struct fp10 : minifloat_format<5, 4, true, 5, 3, 4> {};

/// @brief Error bound of a format: for |x| <= max_finite, |decode(encode(x)) - x| <=
/// max(relative * |x|, flush_below); beyond it, the result is +-max_finite.
/// @tparam To The narrow format.
template <class To>
struct precision_bounds {
  /// @brief 2^-(M+1): half a unit in the last place, relative.
  static constexpr double relative = 1.0 / static_cast<double>(2ull << To::mantissa_bits);
  /// @brief Smallest normal, 2^(1-bias): smaller magnitudes may flush to zero.
  static constexpr double flush_below = [] {
    double v = 1.0;
    for (int i = 0; i < (1 << (To::exponent_bits - 1)) - 2; ++i) { v /= 2.0; }
    return v;
  }();
  /// @brief Largest finite value of the format.
  static constexpr double max_finite = [] {
    constexpr int bias   = (1 << (To::exponent_bits - 1)) - 1;
    constexpr int top    = (1 << To::exponent_bits) - 1 - (To::reserved_top ? 1 : 0);
    constexpr int m_ones = (1 << To::mantissa_bits) - 1 - (To::reserved_top ? 0 : 1);
    double v             = 1.0 + static_cast<double>(m_ones) / (1 << To::mantissa_bits);
    for (int i = 0; i < top - bias; ++i) { v *= 2.0; }
    return v;
  }();
};

/// @brief Lossy float32 storage in format To (fp16, bf16, fp8_e4m3, fp8_e5m2, fp10).
/// @tparam From The stored element type (float).
/// @tparam To The narrow format (fp16, bf16, fp8_e4m3, fp8_e5m2, fp10).
template <class From, class To>
class precision {
  static_assert(std::is_same_v<From, float>, "stash::precision converts from float32 only");

 public:
  /// @brief Uncompressed element type.
  using value_type = float;
  /// @brief Rounds.
  static constexpr bool lossless = false;
  /// @brief Header codec id: family and format.
  static constexpr std::uint16_t id = codec_ids::precision | To::code;

  /// @brief Exactly header + the storage groups.
  /// @param n Element count.
  /// @return The buffer size for n elements.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t n)
  {
    return detail::header_bytes +
           static_cast<std::size_t>(detail::precision_groups<To>(n)) * To::group_bytes;
  }

  /// @brief Host reference encoder; returns bytes written.
  /// @param in The float32 elements.
  /// @param out At least max_compressed_bytes(in.size()) bytes.
  /// @return Bytes written.
  /// @throws stash::logic_error When `out` is too small.
  static std::size_t host_encode(std::span<float const> in, std::span<std::byte> out)
  {
    std::size_t const total = max_compressed_bytes(in.size());
    detail::expect_capacity(out.size(), total, "precision");
    auto const groups = detail::precision_groups<To>(in.size());
    for (std::uint64_t g = 0; g < groups; ++g) {
      detail::precision_encode_group<To>(in.data(), in.size(), g,
                                         out.data() + detail::header_bytes);
    }
    detail::write_header(out.data(), id, static_cast<std::uint8_t>(element_type::f32), 0, in.size(),
                         total - detail::header_bytes);
    return total;
  }

  /// @brief Host reference decoder; returns the element count.
  /// @param src A precision buffer of this format.
  /// @param dst At least the encoded element count.
  /// @return The element count.
  /// @throws stash::codec_error For a malformed buffer or a destination too small.
  static std::size_t host_decode(std::span<std::byte const> src, std::span<float> dst)
  {
    auto const h =
        detail::host_parse(src, id, static_cast<std::uint8_t>(element_type::f32), 0, dst.size());
    auto const groups = detail::precision_groups<To>(h.count);
    if (h.payload != groups * To::group_bytes) {
      throw codec_error(codec_errc::payload_size_mismatch, detail::off_payload);
    }
    for (std::uint64_t g = 0; g < groups; ++g) {
      detail::throw_if(detail::precision_decode_group<To>(src.data() + detail::header_bytes,
                                                          h.count, g, dst.data()));
    }
    return static_cast<std::size_t>(h.count);
  }
};

}  // namespace stash
