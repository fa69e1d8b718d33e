/**
 * @file range_mask.hpp
 * @brief Gist's Binarize for a clamp's backward: one bit per element, whether it lies inside the
 * clamp's open range (lo, hi). Enough for hardtanh's backward (ReLU6 is hardtanh(x, 0, 6)):
 * PyTorch keeps the pre-activation x for `aten::hardtanh_backward(grad, x, lo, hi)`, which
 * computes `grad_in = (x <= lo || x >= hi) ? 0 : grad` and so reads only that bit (a NaN x passes
 * the gradient). 32x smaller than float32.
 *
 * Decoding writes lo for an element outside and one fixed value strictly inside (lo, hi) for an
 * element inside (range_bounds::inside_value: 2.0f for ReLU6's {0, 6}), so hardtanh_backward with
 * the same bounds gives, on the decoded tensor, bitwise the gradient it gives on the original, for
 * every input: NaN, +-inf, +-0, denormals, values at lo or hi, when the reader compares in IEEE
 * mode. A reader that flushes denormals (DAZ, torch.set_flush_denormal(True) on the CPU) takes a
 * positive denormal as 0, outside {0, 6}, where the mask says inside: there the gradients differ.
 * Exact for that reader only (a lossy codec of values). The inside bit is decided on the bit
 * patterns, as bitmask decides its sign, so host and device bytes agree in any floating-point
 * mode.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/detail/range_mask_format.hpp>
#include <stash/codec/element_type.hpp>
#include <stash/core/error.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace stash {

/// @brief The clamp whose backward reads a range_mask tensor: its float32 bounds, as
/// hardtanh(x, lo, hi) takes them (ReLU6: {0.0f, 6.0f}), and what the tensor holds. Usable when
/// neither bound is NaN and some float lies strictly between them (then lo < hi). range_mask
/// reads float32: a tensor described as holding anything else (u16: fp16 or bf16 bits) is
/// refused by the transfers and travels raw, never read as pairs of halves.
struct range_bounds {
  float lo;                               ///< the lower bound (min_val)
  float hi;                               ///< the upper bound (max_val)
  element_type type = element_type::f32;  ///< what the tensor holds (f32 only is encoded)

  /// @brief Whether the bounds are usable (see the struct docs).
  /// @return Neither NaN, some float strictly between them.
  [[nodiscard]] bool valid() const noexcept
  {
    return detail::range_mask_bounds_ok(detail::f32_bits(lo), detail::f32_bits(hi));
  }
  /// @brief Throws stash::logic_error unless valid().
  /// @param who The caller, named in the message.
  /// @throws stash::logic_error For a NaN bound, lo >= hi, or no float strictly between them.
  void validate(const char* who) const
  {
    STASH_EXPECTS(valid(), std::string(who) + ": range bounds " + describe() +
                               " are not usable: neither may be NaN and some float must lie "
                               "strictly between lo and hi");
  }
  /// @brief What an element inside (lo, hi) decodes to: the float strictly between them with the
  /// fewest significant bits (+0.0f when 0 is inside; 2.0f for {0, 6}).
  /// @return The inside value.
  /// @throws stash::logic_error Unless valid().
  [[nodiscard]] float inside_value() const
  {
    validate("range_bounds::inside_value");
    return detail::f32_from_bits(
        detail::range_mask_inside_bits(detail::f32_bits(lo), detail::f32_bits(hi)));
  }
  /// @brief The bounds for messages, each with its bit pattern ("[0 (0x00000000), 6 (...)]").
  /// @return The text.
  [[nodiscard]] std::string describe() const
  {
    std::array<char, 96> text{};
    (void)std::snprintf(text.data(), text.size(), "[%.9g (0x%08x), %.9g (0x%08x)]",
                        static_cast<double>(lo), static_cast<unsigned>(detail::f32_bits(lo)),
                        static_cast<double>(hi), static_cast<unsigned>(detail::f32_bits(hi)));
    return text.data();
  }
};

/// @brief 1 bit per float element: inside the bounds' (lo, hi) or NaN (see the file docs). Not a
/// stash::codec (the encoder takes the bounds), as pool_argmax takes its geometry.
class range_mask {
 public:
  /// @brief Uncompressed element type.
  using value_type = float;
  /// @brief Decoding yields lo or the inside value, not the original values.
  static constexpr bool lossless = false;
  /// @brief Header codec id.
  static constexpr std::uint16_t id = codec_ids::range_mask;

  /// @brief Exactly header + 8 (the bounds) + 4 ceil(n/32).
  /// @param n Element count.
  /// @return The buffer size for n elements.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t n)
  {
    return detail::header_bytes + static_cast<std::size_t>(detail::range_mask_payload_bytes(n));
  }

  /// @brief Host reference encoder; returns bytes written.
  /// @param in The float32 elements (the clamp's input).
  /// @param out At least max_compressed_bytes(in.size()) bytes.
  /// @param bounds The clamp's bounds.
  /// @return Bytes written.
  /// @throws stash::logic_error For unusable bounds or an `out` smaller than
  ///   max_compressed_bytes(in.size()) (nothing written).
  static std::size_t host_encode(std::span<float const> in, std::span<std::byte> out,
                                 range_bounds const& bounds)
  {
    bounds.validate("range_mask::host_encode");
    std::size_t const total = max_compressed_bytes(in.size());
    detail::expect_capacity(out.size(), total, "range_mask");
    std::uint32_t const lo = detail::f32_bits(bounds.lo);
    std::uint32_t const hi = detail::f32_bits(bounds.hi);
    std::byte* const o     = out.data();
    detail::store_u32(o + detail::range_mask_lo_off, lo);
    detail::store_u32(o + detail::range_mask_hi_off, hi);
    auto const lo_key = detail::range_mask_key(lo);
    auto const hi_key = detail::range_mask_key(hi);
    auto const words  = detail::words_for_bits(in.size());
    for (std::uint64_t w = 0; w < words; ++w) {
      detail::store_u32(o + detail::range_mask_words_off + 4 * w,
                        detail::range_mask_word(in.data(), in.size(), w, lo_key, hi_key));
    }
    detail::write_header(o, id, static_cast<std::uint8_t>(element_type::f32), 0, in.size(),
                         total - detail::header_bytes);
    return total;
  }

  /// @brief Host reference decoder: the inside value where the bit is set, else lo.
  /// @param src A range_mask buffer.
  /// @param dst At least the encoded element count.
  /// @return The element count.
  /// @throws stash::codec_error For a malformed buffer or a destination too small.
  static std::size_t host_decode(std::span<std::byte const> src, std::span<float> dst)
  {
    auto const n           = parse(src, dst.size());
    std::uint32_t const lo = detail::load_u32(src.data() + detail::range_mask_lo_off);
    std::uint32_t const hi = detail::load_u32(src.data() + detail::range_mask_hi_off);
    float const outside    = detail::f32_from_bits(lo);
    float const inside     = detail::f32_from_bits(detail::range_mask_inside_bits(lo, hi));
    for (std::size_t i = 0; i < n; ++i) {
      dst[i] = detail::range_mask_bit(src.data(), i) ? inside : outside;
    }
    return n;
  }

  /// @brief The bounds a buffer was encoded with.
  /// @param src A range_mask buffer.
  /// @return Its bounds.
  /// @throws stash::codec_error For a malformed buffer.
  [[nodiscard]] static range_bounds bounds_of(std::span<std::byte const> src)
  {
    (void)parse(src, ~std::size_t{0});
    return {detail::f32_from_bits(detail::load_u32(src.data() + detail::range_mask_lo_off)),
            detail::f32_from_bits(detail::load_u32(src.data() + detail::range_mask_hi_off))};
  }

  /// @brief hardtanh backward from the mask: zeroes grad[i] where element i was not inside the
  /// bounds it was encoded with. `grad` must have exactly the encoded element count.
  /// @param src A range_mask buffer.
  /// @param grad The gradient, updated in place.
  /// @throws stash::codec_error For a malformed buffer or more elements than `grad`.
  /// @throws stash::logic_error For fewer elements than `grad`.
  static void apply_mask_to_gradient(std::span<std::byte const> src, std::span<float> grad)
  {
    auto const n = parse(src, grad.size());
    STASH_EXPECTS(n == grad.size(), "range_mask::apply_mask_to_gradient: mask has " +
                                        std::to_string(n) + " elements, gradient " +
                                        std::to_string(grad.size()));
    for (std::size_t i = 0; i < n; ++i) {
      if (!detail::range_mask_bit(src.data(), i)) { grad[i] = 0.0f; }
    }
  }

 private:
  static std::size_t parse(std::span<std::byte const> src, std::size_t capacity)
  {
    auto const h =
        detail::host_parse(src, id, static_cast<std::uint8_t>(element_type::f32), 0, capacity);
    detail::throw_if(detail::range_mask_check_body(src.data(), h.count, h.payload));
    return static_cast<std::size_t>(h.count);
  }
};

}  // namespace stash
