/**
 * @file zvc.hpp
 * @brief Zero-value compression (cDMA): a bit mask marking nonzero elements plus the packed
 * nonzero values, in chunks of 1024 elements that decode independently.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/detail/zvc_format.hpp>
#include <stash/codec/element_type.hpp>

#include <cstring>
#include <limits>
#include <string>

namespace stash {

/// @brief Zero-value compression of T. "Zero" means the all-zero bit pattern, so -0.0 and NaN
/// are kept bit-exactly. Size: 32 + 4 ceil(n/32) + 4 (ceil(n/1024) + 1) (+ <= 15 padding) +
/// sizeof(T) * nonzeros. At most 2^32 - 1 elements per buffer.
/// @tparam T The element type.
template <codec_element T>
class zvc {
 public:
  /// @brief Uncompressed element type.
  using value_type = T;
  /// @brief Bit-exact.
  static constexpr bool lossless = true;
  /// @brief Header codec id.
  static constexpr std::uint16_t id = codec_ids::zvc;
  /// @brief Elements per independently decodable chunk.
  static constexpr std::size_t chunk_elements = detail::zvc_chunk_elements;
  /// @brief Largest element count one buffer holds (the chunk table stores u32 counts).
  static constexpr std::size_t max_elements = std::numeric_limits<std::uint32_t>::max();

  /// @brief The size when no element is zero.
  /// @param n Element count.
  /// @return The bound for n elements.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t n)
  {
    return static_cast<std::size_t>(detail::make_zvc_layout(n).values_off) + n * sizeof(T);
  }

  /// @brief Host reference encoder; returns bytes written.
  /// @param in The elements.
  /// @param out At least max_compressed_bytes(in.size()) bytes.
  /// @return Bytes written.
  /// @throws stash::logic_error When `in` exceeds max_elements or `out` is too small.
  static std::size_t host_encode(std::span<T const> in, std::span<std::byte> out)
  {
    STASH_EXPECTS(in.size() <= max_elements, "zvc::host_encode: " + std::to_string(in.size()) +
                                                 " elements exceed the "
                                                 "per-buffer limit of 2^32-1");
    detail::expect_capacity(out.size(), max_compressed_bytes(in.size()), "zvc");
    auto const l    = detail::make_zvc_layout(in.size());
    std::byte* o    = out.data();
    std::uint64_t k = 0;
    for (std::uint64_t w = 0; w < l.words; ++w) {
      if (w % detail::zvc_words_per_chunk == 0) {
        detail::store_u32(o + l.table_off + 4 * (w / detail::zvc_words_per_chunk),
                          static_cast<std::uint32_t>(k));
      }
      std::uint32_t const m = detail::zvc_mask_word(in.data(), in.size(), w);
      detail::store_u32(o + l.mask_off + 4 * w, m);
      for (std::uint32_t i = 0; i < 32; ++i) {
        if ((m >> i) & 1u) {
          std::memcpy(o + l.values_off + k * sizeof(T), &in[w * 32 + i], sizeof(T));
          ++k;
        }
      }
    }
    detail::store_u32(o + l.table_off + 4 * l.chunks, static_cast<std::uint32_t>(k));
    for (std::uint64_t p = l.table_off + 4 * (l.chunks + 1); p < l.values_off; ++p) {
      o[p] = std::byte{0};
    }
    std::uint64_t const total = l.values_off + k * sizeof(T);
    detail::write_header(o, id, static_cast<std::uint8_t>(element_type_of<T>()), detail::zvc_param,
                         in.size(), total - detail::header_bytes);
    return static_cast<std::size_t>(total);
  }

  /// @brief Host reference decoder; validates the whole buffer, then expands it.
  /// @param src A zvc buffer.
  /// @param dst At least the encoded element count.
  /// @return The element count.
  /// @throws stash::codec_error For a malformed buffer or a destination too small.
  static std::size_t host_decode(std::span<std::byte const> src, std::span<T> dst)
  {
    std::size_t const cap = dst.size() < max_elements ? dst.size() : max_elements;
    auto const h = detail::host_parse(src, id, static_cast<std::uint8_t>(element_type_of<T>()),
                                      detail::zvc_param, cap);
    auto const l = detail::make_zvc_layout(h.count);
    std::uint64_t total = 0;
    detail::throw_if(detail::zvc_check_body<T>(src.data(), l, h.payload, total));
    for (std::uint64_t c = 0; c < l.chunks; ++c) {
      detail::throw_if(detail::zvc_check_chunk(src.data(), l, total, c));
    }
    for (std::uint64_t c = 0; c < l.chunks; ++c) {
      detail::zvc_decode_chunk(src.data(), l, c, dst.data());
    }
    return static_cast<std::size_t>(h.count);
  }
};

}  // namespace stash
