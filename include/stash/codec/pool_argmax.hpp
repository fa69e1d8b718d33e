/**
 * @file pool_argmax.hpp
 * @brief Gist's encoding for ReLU feeding max-pool: a 4-bit argmax per pool output (windows up to
 * 4x4) replaces the pool's input for the backward pass, 8x smaller than the float32 output map.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/element_type.hpp>

#include <cstdint>
#include <string>

namespace stash {

/// @brief Shape of a 2-D max pool over `planes` (N*C) maps of height x width, no padding.
struct pool_geometry {
  std::size_t planes;    ///< N * C
  std::size_t height;    ///< input rows
  std::size_t width;     ///< input columns
  std::size_t window_h;  ///< 1..4
  std::size_t window_w;  ///< 1..4
  std::size_t stride_h;  ///< 1..4
  std::size_t stride_w;  ///< 1..4

  /// @brief Output rows.
  [[nodiscard]] std::size_t out_h() const { return (height - window_h) / stride_h + 1; }
  /// @brief Output columns.
  [[nodiscard]] std::size_t out_w() const { return (width - window_w) / stride_w + 1; }
  /// @brief Pool outputs (= encoded elements).
  [[nodiscard]] std::size_t outputs() const { return planes * out_h() * out_w(); }
  /// @brief Header param: window and stride, 2 bits each (value - 1).
  [[nodiscard]] std::uint16_t param() const
  {
    return static_cast<std::uint16_t>((window_h - 1) | (window_w - 1) << 2 | (stride_h - 1) << 4 |
                                      (stride_w - 1) << 6);
  }
  /// @brief Throws stash::logic_error unless every field is in range.
  void validate(const char* who) const
  {
    auto in = [](std::size_t v) { return v >= 1 && v <= 4; };
    STASH_EXPECTS(in(window_h) && in(window_w) && in(stride_h) && in(stride_w),
                  std::string(who) + ": window and stride must be 1..4");
    STASH_EXPECTS(height >= window_h && width >= window_w,
                  std::string(who) + ": window larger than the input map");
  }
};

/// @brief 4-bit argmax per max-pool output, 8 per u32 word (see docs/codec_format.md).
class pool_argmax {
 public:
  /// @brief Header codec id.
  static constexpr std::uint16_t id = codec_ids::pool_argmax;

  /// @brief Exactly header + 4 ceil(outputs / 8).
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t outputs)
  {
    return detail::header_bytes + 4 * ((outputs + 7) / 8);
  }

  /// @brief Encodes the argmax of every window of `input` (planes x height x width, row-major);
  /// the first maximum in row-major window order wins and NaN never wins. Returns bytes written.
  static std::size_t host_encode(std::span<float const> input, pool_geometry const& g,
                                 std::span<std::byte> out)
  {
    g.validate("pool_argmax::host_encode");
    STASH_EXPECTS(input.size() == g.planes * g.height * g.width,
                  "pool_argmax::host_encode: input size " + std::to_string(input.size()) +
                      " != planes*height*width");
    std::size_t const n     = g.outputs();
    std::size_t const total = max_compressed_bytes(n);
    detail::expect_capacity(out.size(), total, "pool_argmax");
    std::byte* const words = out.data() + detail::header_bytes;
    std::uint32_t word     = 0;
    std::size_t o          = 0;
    for (std::size_t p = 0; p < g.planes; ++p) {
      for (std::size_t oy = 0; oy < g.out_h(); ++oy) {
        for (std::size_t ox = 0; ox < g.out_w(); ++ox, ++o) {
          std::uint32_t best_k = 0;
          float best           = 0.0f;
          bool have            = false;
          for (std::size_t ky = 0; ky < g.window_h; ++ky) {
            for (std::size_t kx = 0; kx < g.window_w; ++kx) {
              float const v =
                  input[(p * g.height + oy * g.stride_h + ky) * g.width + ox * g.stride_w + kx];
              if (v == v && (!have || v > best)) {
                best   = v;
                best_k = static_cast<std::uint32_t>(ky * g.window_w + kx);
                have   = true;
              }
            }
          }
          word |= best_k << (4 * (o % 8));
          if (o % 8 == 7) {
            detail::store_u32(words + 4 * (o / 8), word);
            word = 0;
          }
        }
      }
    }
    if (n % 8 != 0) { detail::store_u32(words + 4 * (n / 8), word); }
    detail::write_header(out.data(), id, static_cast<std::uint8_t>(element_type::f32), g.param(), n,
                         total - detail::header_bytes);
    return total;
  }

  /// @brief Max-pool backward from the argmax: grad_in = 0, then each output's gradient is added
  /// at its window's argmax. Throws codec_error for a buffer that does not match `g`.
  static void host_backward(std::span<std::byte const> src, pool_geometry const& g,
                            std::span<float const> grad_out, std::span<float> grad_in)
  {
    g.validate("pool_argmax::host_backward");
    std::size_t const n = g.outputs();
    STASH_EXPECTS(grad_out.size() == n && grad_in.size() == g.planes * g.height * g.width,
                  "pool_argmax::host_backward: gradient sizes do not match the geometry");
    auto const h =
        detail::host_parse(src, id, static_cast<std::uint8_t>(element_type::f32), g.param(), n);
    if (h.count != n) { throw codec_error(codec_errc::payload_size_mismatch, detail::off_count); }
    if (h.payload != 4 * ((n + 7) / 8)) {
      throw codec_error(codec_errc::payload_size_mismatch, detail::off_payload);
    }
    std::byte const* const words = src.data() + detail::header_bytes;
    std::uint32_t const window   = static_cast<std::uint32_t>(g.window_h * g.window_w);
    for (std::size_t i = 0; i < (n + 7) / 8; ++i) {
      std::uint32_t const w = detail::load_u32(words + 4 * i);
      for (std::size_t j = 0; j < 8; ++j) {
        std::uint32_t const k = (w >> (4 * j)) & 0xfu;
        if (8 * i + j >= n ? k != 0 : k >= window) {
          throw codec_error(8 * i + j >= n ? codec_errc::bad_padding : codec_errc::bad_index,
                            detail::header_bytes + 4 * i);
        }
      }
    }
    for (float& x : grad_in) { x = 0.0f; }
    std::size_t o = 0;
    for (std::size_t p = 0; p < g.planes; ++p) {
      for (std::size_t oy = 0; oy < g.out_h(); ++oy) {
        for (std::size_t ox = 0; ox < g.out_w(); ++ox, ++o) {
          std::uint32_t const k = (detail::load_u32(words + 4 * (o / 8)) >> (4 * (o % 8))) & 0xfu;
          std::size_t const iy  = oy * g.stride_h + k / g.window_w;
          std::size_t const ix  = ox * g.stride_w + k % g.window_w;
          grad_in[(p * g.height + iy) * g.width + ix] += grad_out[o];
        }
      }
    }
  }
};

}  // namespace stash
