/**
 * @file buffer_header.hpp
 * @brief Reading the 32-byte header every compressed buffer starts with, and sealing a buffer
 * with the optional payload checksum.
 */
#pragma once

#include <stash/codec/codec_error.hpp>
#include <stash/codec/detail/format.hpp>
#include <stash/codec/element_type.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace stash {

/// @brief Stable codec identifiers (byte 6 of the header). The high byte names the codec family,
/// the low byte a variant (precision's target format).
namespace codec_ids {
inline constexpr std::uint16_t identity    = 0x0100;  ///< stash::identity
inline constexpr std::uint16_t zvc         = 0x0200;  ///< stash::zvc
inline constexpr std::uint16_t bitmask     = 0x0300;  ///< stash::bitmask
inline constexpr std::uint16_t pool_argmax = 0x0400;  ///< stash::pool_argmax
inline constexpr std::uint16_t csr         = 0x0500;  ///< stash::csr
inline constexpr std::uint16_t precision   = 0x0600;  ///< stash::precision (| format code)
inline constexpr std::uint16_t rle         = 0x0700;  ///< stash::rle
inline constexpr std::uint16_t chain       = 0x0800;  ///< stash::chain
inline constexpr std::uint16_t two_value   = 0x0900;  ///< stash::two_value
inline constexpr std::uint16_t range_mask  = 0x0A00;  ///< stash::range_mask
}  // namespace codec_ids

/// @brief The decoded header of a compressed buffer.
struct buffer_header {
  std::uint16_t codec_id;       ///< which codec wrote it (codec_ids)
  std::uint8_t type;            ///< element type of the uncompressed data (element_type)
  std::uint8_t flags;           ///< bit 0: checksum present
  std::uint16_t param;          ///< codec-specific parameter
  std::uint32_t checksum;       ///< FNV-1a of the payload when flags bit 0 is set
  std::uint64_t element_count;  ///< elements of the uncompressed data
  std::uint64_t payload_bytes;  ///< bytes after the header
  /// @brief Total buffer size: header plus payload.
  /// @return header_bytes + payload_bytes.
  [[nodiscard]] std::uint64_t total_bytes() const noexcept
  {
    return detail::header_bytes + payload_bytes;
  }
};

/// @brief Parses the codec-independent part of a header (magic, version, flags, payload fits in
/// `src`) without knowing the codec; throws stash::codec_error when it is malformed.
/// @param src The encoded buffer.
/// @return The parsed header.
/// @throws stash::codec_error For a malformed header or a payload larger than `src`.
[[nodiscard]] inline buffer_header read_header(std::span<std::byte const> src)
{
  if (src.size() < detail::header_bytes) {
    throw codec_error(codec_errc::truncated_header, src.size());
  }
  detail::header_fields h{};
  std::byte const* p = src.data();
  // Accept whatever codec/type/param the buffer names by passing them back in.
  auto const r =
      detail::parse_header(p, src.size(), detail::load_u16(p + detail::off_codec_id),
                           static_cast<std::uint8_t>(p[detail::off_type]),
                           detail::load_u16(p + detail::off_param), ~std::uint64_t{0}, h);
  detail::throw_if(r);
  return {h.codec_id, h.type, h.flags, h.param, h.checksum, h.count, h.payload};
}

/// @brief Computes the payload checksum of an encoded buffer and sets the checksum flag, so
/// decoders detect corruption of the payload. Device decoders do not verify it (see
/// docs/codec_format.md); verify on the host with verify_checksum() where that matters.
/// @param buffer An encoded buffer, changed in place (checksum field and flag).
/// @throws stash::codec_error For a malformed header.
inline void seal_checksum(std::span<std::byte> buffer)
{
  auto const h         = read_header(buffer);
  std::byte* p         = buffer.data();
  p[detail::off_flags] = static_cast<std::byte>(h.flags | detail::flag_checksum);
  detail::store_u32(p + detail::off_checksum,
                    detail::fnv1a32(p + detail::header_bytes, h.payload_bytes));
}

/// @brief Throws stash::codec_error when the buffer carries a checksum that does not match.
/// @param buffer An encoded buffer.
/// @throws stash::codec_error For a malformed header or a checksum mismatch.
inline void verify_checksum(std::span<std::byte const> buffer)
{
  auto const h = read_header(buffer);
  detail::header_fields f{};
  f.flags    = h.flags;
  f.checksum = h.checksum;
  f.payload  = h.payload_bytes;
  detail::verify_checksum(buffer.data(), f);
}

}  // namespace stash
