// Gist's 4-bit max-pool argmax: backward from the encoding equals backward from the full input.
#include "codec_test_support.hpp"

#include <stash/codec/pool_argmax.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <random>

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
  for (auto [k, s] : {std::pair{2, 2}, std::pair{3, 2}, std::pair{4, 4}, std::pair{3, 1}}) {
    CAPTURE(k);
    CAPTURE(s);
    stash::pool_geometry const g{
        8 * 32, 28, 28, std::size_t(k), std::size_t(k), std::size_t(s), std::size_t(s)};
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
  stash::pool_geometry const g{8 * 32, 28, 28, 2, 2, 2, 2};
  CHECK(stash::pool_argmax::max_compressed_bytes(g.outputs()) - 32 == g.outputs() * 4 / 8);
}

TEST_CASE("pool_argmax rejects bad geometry and corrupted buffers")
{
  std::vector<float> in(2 * 4 * 4);
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
  std::vector<float> grad_in2(2 * 4 * 5), grad_out2(other.outputs(), 1.0f);
  CHECK_THROWS_AS(stash::pool_argmax::host_backward(buf, other, grad_out2, grad_in2),
                  stash::codec_error);
  stash::pool_geometry too_big = g;
  too_big.window_h             = 5;
  CHECK_THROWS_AS((void)stash::pool_argmax::host_encode(in, too_big, buf), stash::logic_error);
  std::vector<std::byte> truncated(buf.begin(), buf.begin() + 33);
  CHECK_THROWS_AS(stash::pool_argmax::host_backward(truncated, g, grad_out, grad_in),
                  stash::codec_error);
}
