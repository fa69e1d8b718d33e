/**
 * @file pool_argmax.hpp
 * @brief Gist's encoding for max-pool: a 4-bit argmax per pool output (windows up to 4x4), either
 * computed from the pool's input map (replacing it for the backward pass, 8x smaller than the
 * float32 output map) or taken from the pool's int64 indices (the second result of
 * aten::max_pool2d_with_indices), which it replaces exactly at 1/16 of their size.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/detail/pool_argmax_format.hpp>
#include <stash/codec/element_type.hpp>

#include <cstdint>
#include <limits>
#include <span>
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
  /// @return (height - window_h) / stride_h + 1.
  [[nodiscard]] std::size_t out_h() const { return (height - window_h) / stride_h + 1; }
  /// @brief Output columns.
  /// @return (width - window_w) / stride_w + 1.
  [[nodiscard]] std::size_t out_w() const { return (width - window_w) / stride_w + 1; }
  /// @brief Pool outputs (= encoded elements).
  /// @return planes x out_h() x out_w().
  [[nodiscard]] std::size_t outputs() const { return planes * out_h() * out_w(); }
  /// @brief Header param: window and stride, 2 bits each (value - 1).
  /// @return The packed window and stride.
  [[nodiscard]] std::uint16_t param() const
  {
    return static_cast<std::uint16_t>((window_h - 1) | (window_w - 1) << 2 | (stride_h - 1) << 4 |
                                      (stride_w - 1) << 6);
  }
  /// @brief The dimensions as the shared host/device logic takes them.
  /// @return The dimensions.
  [[nodiscard]] detail::pool_dims dims() const
  {
    return {height, width, out_h(), out_w(), window_h, window_w, stride_h, stride_w};
  }
  /// @brief Throws stash::logic_error unless every field is in range.
  /// @param who The caller, named in the message.
  /// @throws stash::logic_error For a window or stride outside 1..4, a window larger than the map,
  ///  or sizes that would overflow.
  void validate(const char* who) const
  {
    auto in          = [](std::size_t v) { return v >= 1 && v <= 4; };
    auto const shape = [&] {
      return " (window " + std::to_string(window_h) + "x" + std::to_string(window_w) + ", stride " +
             std::to_string(stride_h) + "x" + std::to_string(stride_w) + ", input map " +
             std::to_string(height) + "x" + std::to_string(width) + ")";
    };
    STASH_EXPECTS(in(window_h) && in(window_w) && in(stride_h) && in(stride_w),
                  std::string(who) + ": window and stride must be 1..4" + shape());
    STASH_EXPECTS(height >= window_h && width >= window_w,
                  std::string(who) + ": window larger than the input map" + shape());
    // Every size derived from the geometry (input elements, outputs, their int64 bytes, the
    // encoders' worst cases) must not wrap: a wrapped outputs() * 8 could equal a small tensor's
    // bytes and pass pool_argmax_transfer's size check, and the kernels would then run over
    // outputs() indices past both buffers. outputs() <= planes * height * width, so bounding the
    // input map's int64 bytes (less room for a header) bounds them all. (height, width >= 1 here.)
    constexpr std::size_t max_elements = std::numeric_limits<std::size_t>::max() / 8 - 64;
    STASH_EXPECTS(
        width <= max_elements / height && (planes == 0 || height * width <= max_elements / planes),
        std::string(who) + ": " + std::to_string(planes) +
            " planes of the input map overflow a 64-bit byte count" + shape());
  }
};

/// @brief 4-bit argmax per max-pool output, 8 per u32 word (see docs/codec_format.md).
class pool_argmax {
 public:
  /// @brief Header codec id.
  static constexpr std::uint16_t id = codec_ids::pool_argmax;

  /// @brief Exactly header + 4 ceil(outputs / 8).
  /// @param outputs Pool outputs.
  /// @return The buffer size.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t outputs)
  {
    return detail::header_bytes + 4 * ((outputs + 7) / 8);
  }

  /// @brief Encodes the argmax of every window of `input` (planes x height x width, row-major);
  /// the first maximum in row-major window order wins and NaN never wins. Returns bytes written.
  /// @param input The pool's input.
  /// @param g Its geometry.
  /// @param out At least max_compressed_bytes(g.outputs()) bytes.
  /// @return Bytes written.
  /// @throws stash::logic_error For a bad geometry, an input of another size or an output too
  /// small.
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

  /// @brief Max-pool backward from the argmax (a host_encode or host_encode_indices buffer):
  /// grad_in = 0, then each output's gradient is added at its window's argmax. Throws codec_error
  /// for a buffer that does not match `g`.
  /// @param src The argmax buffer.
  /// @param g The geometry it was encoded with.
  /// @param grad_out The pool output's gradient (g.outputs() elements).
  /// @param grad_in The pool input's gradient, overwritten.
  /// @throws stash::codec_error For a buffer that does not match `g`.
  static void host_backward(std::span<std::byte const> src, pool_geometry const& g,
                            std::span<float const> grad_out, std::span<float> grad_in)
  {
    g.validate("pool_argmax::host_backward");
    std::size_t const n = g.outputs();
    STASH_EXPECTS(grad_out.size() == n && grad_in.size() == g.planes * g.height * g.width,
                  "pool_argmax::host_backward: gradient sizes do not match the geometry");
    // Written from the input map (f32) or from the indices (i64): the payload is the same.
    bool const from_indices = src.size() > detail::off_type &&
                              src[detail::off_type] == std::byte{element_type_code<std::int64_t>};
    std::byte const* const words =
        checked_words(src, g, from_indices ? element_type::i64 : element_type::f32);
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

  /// @brief Encodes max-pool indices (`g.outputs()` int64, each iy*width + ix within its plane,
  /// as aten::max_pool2d_with_indices returns them) as their window positions. Returns bytes
  /// written. Throws stash::logic_error for a bad geometry or count, and codec_error bad_index
  /// (offset: the output's element index) for an index outside its window: `g` is not the pool
  /// that made the indices (padding, dilation and ceil_mode are not described), and nothing is
  /// encoded that would not decode to the same indices.
  /// @param indices The pool's int64 indices.
  /// @param g Its geometry.
  /// @param out At least max_compressed_bytes(g.outputs()) bytes.
  /// @return Bytes written.
  static std::size_t host_encode_indices(std::span<std::int64_t const> indices,
                                         pool_geometry const& g, std::span<std::byte> out)
  {
    g.validate("pool_argmax::host_encode_indices");
    std::size_t const n = g.outputs();
    STASH_EXPECTS(indices.size() == n,
                  "pool_argmax::host_encode_indices: " + std::to_string(indices.size()) +
                      " indices != the geometry's " + std::to_string(n) + " outputs");
    std::size_t const total = max_compressed_bytes(n);
    detail::expect_capacity(out.size(), total, "pool_argmax");
    auto const d           = g.dims();
    std::byte* const words = out.data() + detail::header_bytes;
    for (std::size_t w = 0; w < (n + 7) / 8; ++w) {
      std::uint32_t word = 0;
      for (std::size_t o = 8 * w; o < n && o < 8 * w + 8; ++o) {
        std::uint32_t const k = detail::argmax_nibble(d, o, indices[o]);
        if (k == detail::outside_window) {
          throw codec_error(codec_errc::bad_index, o,
                            "max-pool index " + std::to_string(indices[o]) + " of output " +
                                std::to_string(o) + " is outside its window");
        }
        word |= k << (4 * (o - 8 * w));
      }
      detail::store_u32(words + 4 * w, word);
    }
    detail::write_header(out.data(), id, element_type_code<std::int64_t>, g.param(), n,
                         total - detail::header_bytes);
    return total;
  }

  /// @brief Decodes a host_encode_indices buffer into the exact int64 indices; returns
  /// `g.outputs()`. Throws codec_error for a buffer that does not match `g` or is malformed, and
  /// (destination_too_small) for a destination shorter than the outputs.
  /// @param src A host_encode_indices buffer.
  /// @param g The geometry it was encoded with.
  /// @param dst At least g.outputs() elements.
  /// @return g.outputs().
  static std::size_t host_decode_indices(std::span<std::byte const> src, pool_geometry const& g,
                                         std::span<std::int64_t> dst)
  {
    g.validate("pool_argmax::host_decode_indices");
    std::size_t const n = g.outputs();
    if (dst.size() < n) {
      throw codec_error(
          codec_errc::destination_too_small, detail::off_count,
          std::to_string(n) + " outputs, destination holds " + std::to_string(dst.size()));
    }
    std::byte const* const words = checked_words(src, g, element_type::i64);
    auto const d                 = g.dims();
    for (std::size_t o = 0; o < n; ++o) {
      std::uint32_t const k =
          detail::argmax_nibble_of_word(detail::load_u32(words + 4 * (o / 8)), o % 8);
      dst[o] = detail::argmax_index(d, o, k);
    }
    return n;
  }

 private:
  // The payload of a buffer for `g` written from `type` (f32: the input map, i64: indices), every
  // nibble checked; throws codec_error.
  static std::byte const* checked_words(std::span<std::byte const> src, pool_geometry const& g,
                                        element_type type)
  {
    std::size_t const n = g.outputs();
    auto const h = detail::host_parse(src, id, static_cast<std::uint8_t>(type), g.param(), n);
    if (h.count != n) { throw codec_error(codec_errc::payload_size_mismatch, detail::off_count); }
    if (h.payload != 4 * ((n + 7) / 8)) {
      throw codec_error(codec_errc::payload_size_mismatch, detail::off_payload);
    }
    std::byte const* const words = src.data() + detail::header_bytes;
    auto const window            = static_cast<std::uint32_t>(g.window_h * g.window_w);
    for (std::size_t w = 0; w < (n + 7) / 8; ++w) {
      detail::throw_if(detail::argmax_check_word(detail::load_u32(words + 4 * w), w, n, window));
    }
    return words;
  }
};

}  // namespace stash
