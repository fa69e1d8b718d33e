// Gist's 4-bit max-pool argmax: backward from the encoding equals backward from the full input,
// and max-pool indices come back exact from their encoding.
#include "codec_test_support.hpp"
#include "support/pool_indices.hpp"

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/pool_argmax.hpp>
#include <stash/testing/codec_conformance.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

/// Reference max-pool backward computed from the input itself.
std::vector<float> reference_backward(std::vector<float> const& in, stash::pool_geometry const& g,
                                      std::vector<float> const& grad_out)
{
  std::vector<float> grad_in(in.size(), 0.0f);
  std::size_t o = 0;
  for (std::size_t p = 0; p < g.planes; ++p) {
    for (std::size_t oy = 0; oy < g.out_h(); ++oy) {
      for (std::size_t ox = 0; ox < g.out_w(); ++ox, ++o) {
        std::size_t best_at = (p * g.height + oy * g.stride_h) * g.width + ox * g.stride_w;
        for (std::size_t ky = 0; ky < g.window_h; ++ky) {
          for (std::size_t kx = 0; kx < g.window_w; ++kx) {
            std::size_t const at =
                (p * g.height + oy * g.stride_h + ky) * g.width + ox * g.stride_w + kx;
            if (in[at] > in[best_at]) { best_at = at; }
          }
        }
        grad_in[best_at] += grad_out[o];
      }
    }
  }
  return grad_in;
}

}  // namespace

TEST_CASE("pool_argmax backward matches backward from the full input on real activations")
{
  auto const in = stash::test::load_activation("netA_final_relu2.f32");  // 8x32x28x28
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto const& ks : {std::pair<std::size_t, std::size_t>{2, 2}, {3, 2}, {4, 4}, {3, 1}}) {
    std::size_t const k = ks.first, s = ks.second;
    CAPTURE(k);
    CAPTURE(s);
    stash::pool_geometry const g{std::size_t{8} * 32, 28, 28, k, k, s, s};
    std::vector<std::byte> buf(stash::pool_argmax::max_compressed_bytes(g.outputs()));
    std::size_t const bytes = stash::pool_argmax::host_encode(in, g, buf);
    CHECK(bytes == 32 + 4 * ((g.outputs() + 7) / 8));
    std::vector<float> grad_out(g.outputs());
    for (auto& x : grad_out) { x = dist(rng); }
    std::vector<float> grad_in(in.size(), 123.0f);
    stash::pool_argmax::host_backward(buf, g, grad_out, grad_in);
    auto const ref = reference_backward(in, g, grad_out);
    CHECK(stash::test::bitwise_equal(grad_in, ref));
  }
  // 2x2/2: half a byte per pool output, 8x less than the float32 pool output map (Gist).
  stash::pool_geometry const g{std::size_t{8} * 32, 28, 28, 2, 2, 2, 2};
  CHECK(stash::pool_argmax::max_compressed_bytes(g.outputs()) - 32 == g.outputs() * 4 / 8);
}

TEST_CASE("pool_argmax rejects bad geometry and corrupted buffers")
{
  std::vector<float> in(std::size_t{2} * 4 * 4);
  for (std::size_t i = 0; i < in.size(); ++i) { in[i] = static_cast<float>((i * 7) % 11); }
  stash::pool_geometry const g{2, 4, 4, 3, 3, 1, 1};  // 2x2 outputs per plane, 9-entry windows
  std::vector<std::byte> buf(stash::pool_argmax::max_compressed_bytes(g.outputs()));
  (void)stash::pool_argmax::host_encode(in, g, buf);
  std::vector<float> grad_out(g.outputs(), 1.0f), grad_in(in.size());
  stash::pool_argmax::host_backward(buf, g, grad_out, grad_in);
  auto bad = buf;
  bad[32]  = std::byte{0x0f};  // argmax 15 in a 9-entry window
  CHECK_THROWS_AS(stash::pool_argmax::host_backward(bad, g, grad_out, grad_in), stash::codec_error);
  stash::pool_geometry other = g;
  other.stride_w             = 2;  // another geometry: param mismatch
  other.width                = 5;
  std::vector<float> grad_in2(std::size_t{2} * 4 * 5), grad_out2(other.outputs(), 1.0f);
  CHECK_THROWS_AS(stash::pool_argmax::host_backward(buf, other, grad_out2, grad_in2),
                  stash::codec_error);
  stash::pool_geometry too_big = g;
  too_big.window_h             = 5;
  CHECK_THROWS_AS((void)stash::pool_argmax::host_encode(in, too_big, buf), stash::logic_error);
  std::vector<std::byte> truncated(buf.begin(), buf.begin() + 33);
  CHECK_THROWS_AS(stash::pool_argmax::host_backward(truncated, g, grad_out, grad_in),
                  stash::codec_error);
}

namespace {

/// pool_argmax over indices as a stash::codec, for the conformance kit: n outputs are n planes of
/// a 2x1 map pooled by a 2x1 window (each index 0 or 1), so any n has a geometry.
struct argmax_indices_codec {
  using value_type                  = std::int64_t;
  static constexpr bool lossless    = true;
  static constexpr std::uint16_t id = stash::pool_argmax::id;
  static stash::pool_geometry geometry(std::size_t n) { return {n, 2, 1, 2, 1, 1, 1}; }
  static std::size_t max_compressed_bytes(std::size_t n)
  {
    return stash::pool_argmax::max_compressed_bytes(n);
  }
  static std::size_t host_encode(std::span<std::int64_t const> in, std::span<std::byte> out)
  {
    return stash::pool_argmax::host_encode_indices(in, geometry(in.size()), out);
  }
  static std::size_t host_decode(std::span<std::byte const> src, std::span<std::int64_t> dst)
  {
    // The count comes from the header, as a decoder without the geometry at hand would take it.
    auto const n = stash::read_header(src).element_count;
    if (n > dst.size()) { throw stash::codec_error(stash::codec_errc::destination_too_small, 16); }
    return stash::pool_argmax::host_decode_indices(src, geometry(static_cast<std::size_t>(n)), dst);
  }
};
static_assert(stash::codec<argmax_indices_codec>);

}  // namespace

TEST_CASE("pool_argmax from max-pool indices: argmax exact on real activations, 1/16 of int64")
{
  auto const in = stash::test::load_activation("netA_final_relu2.f32");  // 8x32x28x28
  for (auto const& ks : {std::pair<std::size_t, std::size_t>{2, 2}, {3, 2}, {4, 4}, {3, 1}}) {
    std::size_t const k = ks.first, s = ks.second;
    CAPTURE(k);
    CAPTURE(s);
    stash::pool_geometry const g{std::size_t{8} * 32, 28, 28, k, k, s, s};
    auto const indices = stash::test::max_pool_indices(in, g);
    std::vector<std::byte> buf(stash::pool_argmax::max_compressed_bytes(g.outputs()));
    std::size_t const bytes = stash::pool_argmax::host_encode_indices(indices, g, buf);
    CHECK(bytes == 32 + 4 * ((g.outputs() + 7) / 8));
    CHECK(bytes - 32 == (indices.size() * sizeof(std::int64_t) + 15) / 16);  // 4 of 64 bits
    std::vector<std::int64_t> back(g.outputs(), -1);
    CHECK(stash::pool_argmax::host_decode_indices(buf, g, back) == g.outputs());
    CHECK(back == indices);
    // The same nibbles as the encoding from the input map (same tie rule): one format, and the
    // backward runs from either buffer.
    std::vector<std::byte> from_map(buf.size());
    (void)stash::pool_argmax::host_encode(in, g, from_map);
    CHECK(std::equal(buf.begin() + 32, buf.end(), from_map.begin() + 32));
    std::vector<float> grad_out(g.outputs(), 1.0f), grad_a(in.size()), grad_b(in.size());
    stash::pool_argmax::host_backward(buf, g, grad_out, grad_a);
    stash::pool_argmax::host_backward(from_map, g, grad_out, grad_b);
    CHECK(stash::test::bitwise_equal(grad_a, grad_b));
  }
}

TEST_CASE("pool_argmax from indices refuses what it cannot encode exactly")
{
  stash::pool_geometry const g{2, 5, 5, 2, 2, 2, 2};  // 2x2 outputs per plane
  std::vector<float> in(std::size_t{2} * 5 * 5);
  for (std::size_t i = 0; i < in.size(); ++i) { in[i] = static_cast<float>((i * 7) % 13); }
  auto indices = stash::test::max_pool_indices(in, g);
  std::vector<std::byte> buf(stash::pool_argmax::max_compressed_bytes(g.outputs()));
  // An index outside its window (the pool was not `g`): codec_error naming the output.
  for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{24}, std::int64_t{25}, std::int64_t{2}}) {
    CAPTURE(bad);
    auto wrong = indices;
    wrong[0]   = bad;  // output 0's window is rows 0-1, columns 0-1 (indices 0, 1, 5, 6)
    try {
      (void)stash::pool_argmax::host_encode_indices(wrong, g, buf);
      FAIL("encoded an index outside its window");
    } catch (stash::codec_error const& e) {
      CHECK(e.code() == stash::codec_errc::bad_index);
      CHECK(e.offset() == 0);
    }
  }
  indices.pop_back();  // a count that is not the geometry's outputs
  CHECK_THROWS_AS((void)stash::pool_argmax::host_encode_indices(indices, g, buf),
                  stash::logic_error);
  stash::pool_geometry wide = g;
  wide.window_w             = 5;
  CHECK_THROWS_AS((void)stash::pool_argmax::host_encode_indices(indices, wide, buf),
                  stash::logic_error);
  // A buffer of the input map's encoding (f32) is not one of indices, nor for another geometry.
  std::vector<std::byte> from_map(buf.size());
  (void)stash::pool_argmax::host_encode(in, g, from_map);
  std::vector<std::int64_t> back(g.outputs());
  CHECK_THROWS_AS((void)stash::pool_argmax::host_decode_indices(from_map, g, back),
                  stash::codec_error);
  std::vector<std::int64_t> short_dst(g.outputs() - 1);
  indices = stash::test::max_pool_indices(in, g);
  (void)stash::pool_argmax::host_encode_indices(indices, g, buf);
  CHECK_THROWS_AS((void)stash::pool_argmax::host_decode_indices(buf, g, short_dst),
                  stash::codec_error);
  auto corrupt = buf;
  corrupt[32]  = std::byte{0x0e};  // position 14 in a 4-entry window
  CHECK_THROWS_AS((void)stash::pool_argmax::host_decode_indices(corrupt, g, back),
                  stash::codec_error);
}

TEST_CASE("pool_argmax refuses a geometry whose sizes wrap 64 bits")
{
  // outputs() * 8 of this geometry wraps to 16: a 2-index tensor's size, which a wrapped check
  // would accept while the kernels walk 2^61 outputs.
  stash::pool_geometry wrapping{(std::size_t{1} << 61) + 2, 1, 1, 1, 1, 1, 1};
  REQUIRE(wrapping.outputs() * sizeof(std::int64_t) == 16);
  CHECK_THROWS_AS(wrapping.validate("test"), stash::logic_error);
  std::vector<std::int64_t> const two{0, 0};
  std::vector<std::byte> buf(64);
  CHECK_THROWS_AS((void)stash::pool_argmax::host_encode_indices(two, wrapping, buf),
                  stash::logic_error);
  // Height x width alone can wrap too (one plane).
  stash::pool_geometry const huge_map{1, std::size_t{1} << 32, std::size_t{1} << 32, 1, 1, 1, 1};
  CHECK_THROWS_AS(huge_map.validate("test"), stash::logic_error);
  // Large but representable: accepted (no tensor is needed to validate).
  stash::pool_geometry const large{std::size_t{1} << 20, 1024, 1024, 2, 2, 2, 2};
  CHECK_NOTHROW(large.validate("test"));
  wrapping.planes = 0;  // no outputs at all is not an overflow
  CHECK_NOTHROW(wrapping.validate("test"));
}

TEST_CASE("pool_argmax from indices passes the codec conformance kit")
{
  std::vector<std::int64_t> sample(1001);
  for (std::size_t i = 0; i < sample.size(); ++i) { sample[i] = (i * 2654435761u >> 7) % 2; }
  auto const r =
      stash::testing::check_codec<argmax_indices_codec>(std::span<std::int64_t const>(sample));
  CHECK_MESSAGE(r.ok(), r.summary());
}

}  // namespace STASH_UNITY_ID
