// The per-element max-pool logic the CUDA kernels run (stash_tools/train_cnn/max_pool.hpp, shared
// by examples/train_cnn/cudnn_ops.cuh), checked on the host: the forward's values and indices
// against an independent reference (PyTorch's layout, first maximum of the window), ties, several
// planes of non-square maps, and the backward routing each dy to the one input its index names.
#include "support/pool_indices.hpp"

#include <stash_tools/train_cnn/max_pool.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace STASH_UNITY_ID {

TEST_CASE("train_cnn max pool: indices and values match the reference, ties keep the first")
{
  struct shape {
    std::size_t planes;
    int h, w;
  };
  for (auto const s : {shape{1, 2, 2}, shape{3, 4, 6}, shape{5, 28, 28}, shape{2, 14, 8}}) {
    CAPTURE(s.h);
    CAPTURE(s.w);
    stash::pool_geometry const g{s.planes, std::size_t(s.h), std::size_t(s.w), 2, 2, 2, 2};
    auto x = stash::test::pool_input(s.planes * s.h * s.w, 7);
    // Ties: every fourth window flat (ReLU zeros), so its first element must win.
    for (std::size_t o = 0; o < g.outputs(); o += 4) {
      std::size_t const plane = o / (g.out_h() * g.out_w());
      std::size_t const r     = o % (g.out_h() * g.out_w());
      std::size_t const at    = plane * s.h * s.w + (r / g.out_w()) * 2 * s.w + (r % g.out_w()) * 2;
      x[at] = x[at + 1] = x[at + s.w] = x[at + s.w + 1] = 0.0f;
    }
    auto const want = stash::test::max_pool_indices(x, g);
    std::vector<float> y(g.outputs());
    std::vector<std::int64_t> index(g.outputs());
    train_cnn::max_pool_forward_host(x.data(), y.data(), index.data(), s.planes, s.h, s.w);
    CHECK(index == want);
    std::size_t wrong_values = 0;
    for (std::size_t o = 0; o < g.outputs(); ++o) {
      std::size_t const plane = o / (g.out_h() * g.out_w());
      wrong_values += y[o] != x[plane * s.h * s.w + std::size_t(want[o])] ? 1 : 0;
    }
    CHECK(wrong_values == 0);
  }
}

TEST_CASE("train_cnn max pool: backward sends each dy to the input its index names, zero elsewhere")
{
  std::size_t const planes = 3;
  int const h = 6, w = 4;
  stash::pool_geometry const g{planes, std::size_t(h), std::size_t(w), 2, 2, 2, 2};
  auto const x = stash::test::pool_input(planes * h * w, 11);
  std::vector<float> y(g.outputs());
  std::vector<std::int64_t> index(g.outputs());
  train_cnn::max_pool_forward_host(x.data(), y.data(), index.data(), planes, h, w);
  std::vector<float> dy(g.outputs());
  for (std::size_t o = 0; o < dy.size(); ++o) { dy[o] = 1.0f + float(o); }
  std::vector<float> dx(planes * h * w, -1.0f);
  train_cnn::max_pool_backward_host(dy.data(), index.data(), dx.data(), planes, h, w);
  // The reference: scatter each dy to its plane's indexed input.
  std::vector<float> want(dx.size(), 0.0f);
  for (std::size_t o = 0; o < dy.size(); ++o) {
    std::size_t const plane                     = o / (g.out_h() * g.out_w());
    want[plane * h * w + std::size_t(index[o])] = dy[o];
  }
  CHECK(dx == want);
  float sum = 0, dsum = 0;
  for (float v : dx) { sum += v; }
  for (float v : dy) { dsum += v; }
  CHECK(sum == dsum);  // every dy lands exactly once
}

}  // namespace STASH_UNITY_ID
