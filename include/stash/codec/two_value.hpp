/**
 * @file two_value.hpp
 * @brief Lossless codec of two-valued data: elements that are all either zero or one and the
 * same value c (a dropout mask scaled by 1/(1-p)). One bit per element plus c: 32x smaller than
 * float32, and bit-exact, unlike bitmask (which decodes to 1.0 / 0.0).
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/detail/two_value_format.hpp>
#include <stash/codec/element_type.hpp>

#include <optional>
#include <string>

namespace stash {

/// @brief Lossless two-valued codec of T. "Zero" is the all-zero bit pattern; c is whatever other
/// single bit pattern the data holds, compared bitwise: -0.0 and a NaN are values like any other
/// (kept exactly), so {+0.0, -0.0} encodes with c = -0.0, while data holding two different nonzero
/// patterns (three values, two NaN payloads, +0.0 with -0.0 and 1.0) is refused: host_encode
/// throws and two_value_of() returns nullopt, so a caller falls back to another codec and nothing
/// is lost. Size: exactly 40 + 4 ceil(n/32) bytes.
/// @tparam T The element type.
template <codec_element T>
class two_value {
 public:
  /// @brief Uncompressed element type.
  using value_type = T;
  /// @brief Bit-exact (on the data it accepts).
  static constexpr bool lossless = true;
  /// @brief Header codec id.
  static constexpr std::uint16_t id = codec_ids::two_value;

  /// @brief Exactly header + value slot + 4 ceil(n/32).
  /// @param n Element count.
  /// @return The buffer size for n elements.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t n)
  {
    return detail::header_bytes + static_cast<std::size_t>(detail::two_value_payload_bytes(n));
  }

  /// @brief The nonzero bit pattern of `in` when it is two-valued: 0 for all-zero (or empty)
  /// data, nullopt when it holds two different nonzero patterns.
  /// @param in The elements.
  /// @return c's bit pattern zero-extended, or nullopt (not encodable).
  [[nodiscard]] static std::optional<std::uint64_t> two_value_of(std::span<T const> in)
  {
    std::uint64_t c = 0;
    for (T const v : in) {
      std::uint64_t const b = detail::two_value_bits(v);
      if (b == 0 || b == c) { continue; }
      if (c != 0) { return std::nullopt; }
      c = b;
    }
    return c;
  }

  /// @brief Host reference encoder; returns bytes written.
  /// @param in The elements: zero and at most one other bit pattern.
  /// @param out At least max_compressed_bytes(in.size()) bytes.
  /// @return Bytes written.
  /// @throws stash::logic_error When `out` is too small or `in` is not two-valued (then nothing
  /// is written: the caller keeps the data another way).
  static std::size_t host_encode(std::span<T const> in, std::span<std::byte> out)
  {
    std::size_t const total = max_compressed_bytes(in.size());
    detail::expect_capacity(out.size(), total, "two_value");
    auto const c = two_value_of(in);
    STASH_EXPECTS(c.has_value(), "two_value::host_encode: the " + std::to_string(in.size()) +
                                     " elements hold more than zero and one other bit pattern");
    std::byte* o = out.data();
    detail::store_u64(o + detail::two_value_value_off, *c);
    bool foreign     = false;
    auto const words = detail::words_for_bits(in.size());
    for (std::uint64_t w = 0; w < words; ++w) {
      detail::store_u32(o + detail::two_value_mask_off + 4 * w,
                        detail::two_value_word(in.data(), in.size(), w, *c, foreign));
    }
    STASH_EXPECTS(!foreign, "two_value::host_encode: a foreign value after two_value_of");
    detail::write_header(o, id, static_cast<std::uint8_t>(element_type_of<T>()), 0, in.size(),
                         total - detail::header_bytes);
    return total;
  }

  /// @brief Host reference decoder; validates the whole buffer, then expands it.
  /// @param src A two_value buffer.
  /// @param dst At least the encoded element count.
  /// @return The element count.
  /// @throws stash::codec_error For a malformed buffer or a destination too small.
  static std::size_t host_decode(std::span<std::byte const> src, std::span<T> dst)
  {
    auto const h =
        detail::host_parse(src, id, static_cast<std::uint8_t>(element_type_of<T>()), 0, dst.size());
    std::byte const* s = src.data();
    detail::throw_if(detail::two_value_check_body<T>(s, h.count, h.payload));
    bool any_bit     = false;
    auto const words = detail::words_for_bits(h.count);
    for (std::uint64_t w = 0; w < words && !any_bit; ++w) {
      any_bit = detail::load_u32(s + detail::two_value_mask_off + 4 * w) != 0;
    }
    detail::throw_if(
        detail::two_value_check_value(detail::load_u64(s + detail::two_value_value_off), any_bit));
    T const c = detail::two_value_value<T>(s);
    for (std::uint64_t i = 0; i < h.count; ++i) { dst[i] = detail::two_value_element(s, c, i); }
    return static_cast<std::size_t>(h.count);
  }
};

}  // namespace stash
