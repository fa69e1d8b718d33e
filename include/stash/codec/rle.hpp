/**
 * @file rle.hpp
 * @brief Run-length encoding of equal consecutive elements, in chunks of 4096 elements that
 * decode independently. cDMA found it weaker than ZVC on activations; kept for comparison and
 * for data with long runs (masks, padding, dead channels).
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/detail/rle_format.hpp>
#include <stash/codec/element_type.hpp>

#include <limits>
#include <string>

namespace stash {

/// @brief RLE of T; runs compare bit patterns (NaN payloads and -0.0 are kept exactly).
/// @tparam T The element type.
template <codec_element T>
class rle {
 public:
  /// @brief Uncompressed element type.
  using value_type = T;
  /// @brief Bit-exact.
  static constexpr bool lossless = true;
  /// @brief Header codec id.
  static constexpr std::uint16_t id = codec_ids::rle;
  /// @brief Elements per independently decodable chunk.
  static constexpr std::size_t chunk_elements = detail::rle_chunk_elements;

  /// @brief The size when no two neighbours are equal: one (2 + sizeof(T))-byte run each.
  /// @param n Element count.
  /// @return The bound for n elements.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t n)
  {
    return detail::header_bytes + 4 * static_cast<std::size_t>(detail::rle_chunks(n)) +
           n * (2 + sizeof(T));
  }

  /// @brief Host reference encoder; returns bytes written.
  /// @param in The elements.
  /// @param out At least max_compressed_bytes(in.size()) bytes.
  /// @return Bytes written.
  /// @throws stash::logic_error When `out` is too small.
  static std::size_t host_encode(std::span<T const> in, std::span<std::byte> out)
  {
    detail::expect_capacity(out.size(), max_compressed_bytes(in.size()), "rle");
    std::uint64_t const n      = in.size();
    std::uint64_t const chunks = detail::rle_chunks(n);
    STASH_EXPECTS(
        chunks == 0 || max_compressed_bytes(n) <= std::numeric_limits<std::uint32_t>::max(),
        "rle::host_encode: " + std::to_string(n) + " elements exceed the u32 chunk table");
    std::byte* const runs = out.data() + detail::header_bytes + 4 * chunks;
    std::uint64_t p       = 0;
    for (std::uint64_t c = 0; c < chunks; ++c) {
      p = detail::rle_encode_chunk(in.data(), n, c, runs, p);
      detail::store_u32(out.data() + detail::header_bytes + 4 * c, static_cast<std::uint32_t>(p));
    }
    std::uint64_t const payload = 4 * chunks + p;
    detail::write_header(out.data(), id, static_cast<std::uint8_t>(element_type_of<T>()),
                         detail::rle_param, n, payload);
    return static_cast<std::size_t>(detail::header_bytes + payload);
  }

  /// @brief Host reference decoder; validates the whole buffer, then expands it.
  /// @param src An rle buffer.
  /// @param dst At least the encoded element count.
  /// @return The element count.
  /// @throws stash::codec_error For a malformed buffer or a destination too small.
  static std::size_t host_decode(std::span<std::byte const> src, std::span<T> dst)
  {
    auto const h = detail::host_parse(src, id, static_cast<std::uint8_t>(element_type_of<T>()),
                                      detail::rle_param, dst.size());
    std::uint64_t const chunks = detail::rle_chunks(h.count);
    if (h.payload < 4 * chunks) {
      throw codec_error(codec_errc::payload_size_mismatch, detail::off_payload);
    }
    for (std::uint64_t c = 0; c < chunks; ++c) {
      detail::throw_if(detail::rle_check_chunk<T>(src.data(), h.count, h.payload, c));
    }
    detail::throw_if(detail::rle_check_size(src.data(), h.count, h.payload));
    for (std::uint64_t c = 0; c < chunks; ++c) {
      detail::rle_decode_chunk(src.data(), h.count, c, dst.data());
    }
    return static_cast<std::size_t>(h.count);
  }
};

}  // namespace stash
