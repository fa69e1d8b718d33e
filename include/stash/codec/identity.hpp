/**
 * @file identity.hpp
 * @brief The identity codec: header plus the raw elements. The baseline every codec is
 * compared with, and the fallback when compression does not pay.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/element_type.hpp>

#include <cstring>

namespace stash {

/// @brief Stores the elements unchanged after the 32-byte header.
/// @tparam T The element type.
template <codec_element T>
class identity {
 public:
  /// @brief Uncompressed element type.
  using value_type = T;
  /// @brief Bit-exact.
  static constexpr bool lossless = true;
  /// @brief Header codec id.
  static constexpr std::uint16_t id = codec_ids::identity;

  /// @brief Exactly header + n * sizeof(T).
  /// @param n Element count.
  /// @return The buffer size for n elements.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t n)
  {
    return detail::header_bytes + n * sizeof(T);
  }

  /// @brief Host reference encoder; returns bytes written.
  /// @param in The elements.
  /// @param out At least max_compressed_bytes(in.size()) bytes.
  /// @return Bytes written.
  /// @throws stash::logic_error When `out` is too small.
  static std::size_t host_encode(std::span<T const> in, std::span<std::byte> out)
  {
    std::size_t const total = max_compressed_bytes(in.size());
    detail::expect_capacity(out.size(), total, "identity");
    detail::write_header(out.data(), id, static_cast<std::uint8_t>(element_type_of<T>()), 0,
                         in.size(), in.size_bytes());
    if (!in.empty()) { std::memcpy(out.data() + detail::header_bytes, in.data(), in.size_bytes()); }
    return total;
  }

  /// @brief Host reference decoder; returns the element count.
  /// @param src An identity buffer.
  /// @param dst At least the encoded element count.
  /// @return The element count.
  /// @throws stash::codec_error For a malformed buffer or a destination too small.
  static std::size_t host_decode(std::span<std::byte const> src, std::span<T> dst)
  {
    auto const h =
        detail::host_parse(src, id, static_cast<std::uint8_t>(element_type_of<T>()), 0, dst.size());
    if (h.payload != h.count * sizeof(T)) {
      throw codec_error(codec_errc::payload_size_mismatch, detail::off_payload);
    }
    auto const n = static_cast<std::size_t>(h.count);
    if (n > 0) { std::memcpy(dst.data(), src.data() + detail::header_bytes, n * sizeof(T)); }
    return n;
  }
};

}  // namespace stash
