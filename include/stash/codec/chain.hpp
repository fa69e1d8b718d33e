/**
 * @file chain.hpp
 * @brief Two codecs in sequence: A encodes the tensor, B encodes A's buffer viewed as B's
 * elements (e.g. precision<float, fp16> then zvc<std::uint16_t>: zeros survive the conversion).
 */
#pragma once

#include <stash/codec/codec.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace stash {

/// @brief A, then B over A's bytes. Lossless iff both are. B's value_type must be a
/// codec_element; A's buffer is zero-padded to a multiple of its size.
/// @tparam A The first codec, over the elements.
/// @tparam B The second codec, over A's encoded bytes.
template <codec A, codec B>
class chain {
  using inner_type = typename B::value_type;

 public:
  /// @brief Uncompressed element type (A's).
  using value_type = typename A::value_type;
  /// @brief Lossless iff both stages are.
  static constexpr bool lossless = A::lossless && B::lossless;
  /// @brief Header codec id; the stages' ids are in the inner headers.
  static constexpr std::uint16_t id = codec_ids::chain;

  /// @brief Outer header + B's bound over A's bound.
  /// @param n Element count.
  /// @return The bound for n elements.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t n)
  {
    return detail::header_bytes +
           B::max_compressed_bytes(inner_elements(A::max_compressed_bytes(n)));
  }

  /// @brief Host reference encoder; returns bytes written.
  /// @param in The elements.
  /// @param out At least max_compressed_bytes(in.size()) bytes.
  /// @return Bytes written.
  /// @throws stash::logic_error When `out` is too small (or a stage's limit is exceeded).
  static std::size_t host_encode(std::span<value_type const> in, std::span<std::byte> out)
  {
    detail::expect_capacity(out.size(), max_compressed_bytes(in.size()), "chain");
    std::vector<inner_type> tmp(inner_elements(A::max_compressed_bytes(in.size())));
    auto const tmp_bytes = std::as_writable_bytes(std::span<inner_type>(tmp));
    std::size_t const a  = A::host_encode(in, tmp_bytes);
    std::memset(tmp_bytes.data() + a, 0, tmp_bytes.size() - a);
    std::size_t const k = inner_elements(a);
    std::size_t const b = B::host_encode(std::span<inner_type const>(tmp.data(), k),
                                         out.subspan(detail::header_bytes));
    detail::write_header(out.data(), id, static_cast<std::uint8_t>(element_type_of<value_type>()),
                         0, in.size(), b);
    return detail::header_bytes + b;
  }

  /// @brief Host reference decoder: B, then A; inner failures are reported at the inner
  /// buffer's offset within `src` where B found them, else at byte 32.
  /// @param src A chain buffer.
  /// @param dst At least the encoded element count.
  /// @return The element count.
  /// @throws stash::codec_error For a malformed outer or inner buffer, at its offset in `src`.
  static std::size_t host_decode(std::span<std::byte const> src, std::span<value_type> dst)
  {
    auto const h = detail::host_parse(
        src, id, static_cast<std::uint8_t>(element_type_of<value_type>()), 0, dst.size());
    auto const inner = src.subspan(detail::header_bytes, static_cast<std::size_t>(h.payload));
    std::size_t const cap =
        inner_elements(A::max_compressed_bytes(static_cast<std::size_t>(h.count)));
    std::vector<inner_type> tmp;
    try {
      auto const ih = read_header(inner);
      if (ih.element_count > cap) {
        throw codec_error(codec_errc::bad_inner_buffer, detail::header_bytes + detail::off_count,
                          "inner element count exceeds the bound of the outer count");
      }
      tmp.resize(static_cast<std::size_t>(ih.element_count));
      tmp.resize(B::host_decode(inner, tmp));
    } catch (codec_error const& e) {
      throw codec_error(e.code(), detail::header_bytes + e.offset(), "in chain's second stage");
    }
    std::size_t n = 0;
    try {
      n = A::host_decode(std::as_bytes(std::span<inner_type const>(tmp)), dst);
    } catch (codec_error const& e) {
      throw codec_error(codec_errc::bad_inner_buffer, detail::header_bytes,
                        std::string("first stage: ") + e.what());
    }
    if (n != h.count) {
      throw codec_error(codec_errc::bad_inner_buffer, detail::off_count,
                        "inner count " + std::to_string(n) + " != " + std::to_string(h.count));
    }
    return n;
  }

 private:
  static std::size_t inner_elements(std::size_t bytes)
  {
    return (bytes + sizeof(inner_type) - 1) / sizeof(inner_type);
  }
};

}  // namespace stash
