/**
 * @file bitmask.hpp
 * @brief Gist's Binarize: one bit per ReLU output (x > 0). Enough for ReLU's backward pass,
 * which only needs to know where the output was positive: 32x smaller than float32.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/detail/bitmask_format.hpp>
#include <stash/codec/element_type.hpp>

#include <string>

namespace stash {

/// @brief 1 bit per float element (x > 0), decoding to 1.0f / 0.0f. Not lossless as a codec of
/// values (it keeps only the sign), but exact for what ReLU's backward pass reads.
class bitmask {
 public:
  /// @brief Uncompressed element type.
  using value_type = float;
  /// @brief Decoding yields {0, 1}, not the original values.
  static constexpr bool lossless = false;
  /// @brief Header codec id.
  static constexpr std::uint16_t id = codec_ids::bitmask;

  /// @brief Exactly header + 4 ceil(n/32).
  /// @param n Element count.
  /// @return The buffer size for n elements.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t n)
  {
    return detail::header_bytes + 4 * static_cast<std::size_t>(detail::words_for_bits(n));
  }

  /// @brief Host reference encoder; returns bytes written.
  /// @param in The float32 elements.
  /// @param out At least max_compressed_bytes(in.size()) bytes.
  /// @return Bytes written.
  /// @throws stash::logic_error When `out` is smaller than max_compressed_bytes(in.size()).
  static std::size_t host_encode(std::span<float const> in, std::span<std::byte> out)
  {
    std::size_t const total = max_compressed_bytes(in.size());
    detail::expect_capacity(out.size(), total, "bitmask");
    auto const words = detail::words_for_bits(in.size());
    for (std::uint64_t w = 0; w < words; ++w) {
      detail::store_u32(out.data() + detail::header_bytes + 4 * w,
                        detail::bitmask_word(in.data(), in.size(), w));
    }
    detail::write_header(out.data(), id, static_cast<std::uint8_t>(element_type::f32), 0, in.size(),
                         total - detail::header_bytes);
    return total;
  }

  /// @brief Host reference decoder: 1.0f where the input was > 0, else 0.0f.
  /// @param src A bitmask buffer.
  /// @param dst At least the encoded element count.
  /// @return The element count.
  /// @throws stash::codec_error For a malformed buffer or a destination too small.
  static std::size_t host_decode(std::span<std::byte const> src, std::span<float> dst)
  {
    auto const n = parse(src, dst.size());
    for (std::size_t i = 0; i < n; ++i) {
      dst[i] = detail::bitmask_bit(src.data(), i) ? 1.0f : 0.0f;
    }
    return n;
  }

  /// @brief ReLU backward from the mask: zeroes grad[i] where the forward output was not > 0.
  /// `grad` must have exactly the encoded element count.
  /// @param src A bitmask buffer.
  /// @param grad The gradient, updated in place.
  /// @throws stash::codec_error For a malformed buffer or more elements than `grad`.
  /// @throws stash::logic_error For fewer elements than `grad`.
  static void apply_mask_to_gradient(std::span<std::byte const> src, std::span<float> grad)
  {
    auto const n = parse(src, grad.size());
    STASH_EXPECTS(n == grad.size(), "bitmask::apply_mask_to_gradient: mask has " +
                                        std::to_string(n) + " elements, gradient " +
                                        std::to_string(grad.size()));
    for (std::size_t i = 0; i < n; ++i) {
      if (!detail::bitmask_bit(src.data(), i)) { grad[i] = 0.0f; }
    }
  }

 private:
  static std::size_t parse(std::span<std::byte const> src, std::size_t capacity)
  {
    auto const h =
        detail::host_parse(src, id, static_cast<std::uint8_t>(element_type::f32), 0, capacity);
    detail::throw_if(detail::bitmask_check_body(src.data(), h.count, h.payload));
    return static_cast<std::size_t>(h.count);
  }
};

}  // namespace stash
