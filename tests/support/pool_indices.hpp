// Max-pool indices as aten::max_pool2d_with_indices returns them, computed on the host: the
// inputs of pool_argmax's index encoding in the codec and allocator tests.
#pragma once

#include <stash/codec/pool_argmax.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stash::test {

/// Each output's argmax as iy * width + ix within its plane (the first maximum in row-major window
/// order wins) of `in` (planes x height x width) under `g`.
inline std::vector<std::int64_t> max_pool_indices(std::vector<float> const& in,
                                                  pool_geometry const& g)
{
  std::vector<std::int64_t> indices;
  indices.reserve(g.outputs());
  for (std::size_t p = 0; p < g.planes; ++p) {
    float const* const plane = in.data() + p * g.height * g.width;
    for (std::size_t oy = 0; oy < g.out_h(); ++oy) {
      for (std::size_t ox = 0; ox < g.out_w(); ++ox) {
        std::size_t best = oy * g.stride_h * g.width + ox * g.stride_w;
        for (std::size_t ky = 0; ky < g.window_h; ++ky) {
          for (std::size_t kx = 0; kx < g.window_w; ++kx) {
            std::size_t const at = (oy * g.stride_h + ky) * g.width + ox * g.stride_w + kx;
            if (plane[at] > plane[best]) { best = at; }
          }
        }
        indices.push_back(static_cast<std::int64_t>(best));
      }
    }
  }
  return indices;
}

/// A deterministic input map with few ties.
inline std::vector<float> pool_input(std::size_t n, unsigned seed)
{
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>((i * 2654435761u + std::size_t{seed} * 40503u) % 10007);
  }
  return v;
}

}  // namespace stash::test
