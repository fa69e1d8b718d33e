// train_cnn's 2x2 stride-2 max pooling with PyTorch's int64 indices, one output (forward) or one
// input (backward) at a time: the per-element logic of the CUDA kernels
// (examples/train_cnn/cudnn_ops.cuh, thin grid-stride shells around these) and of their host
// reference (max_pool_forward_host / max_pool_backward_host), so the CPU tests check what the GPU
// runs. Kept free of CUDA headers: STASH_HOST_DEVICE is __host__ __device__ under nvcc only.
#pragma once

#include <stash/core/config.hpp>

#include <cstddef>
#include <cstdint>

namespace train_cnn {

/// @brief One pooled output: its value and PyTorch's index of it (iy * w + ix within the plane).
struct pooled {
  float value;
  std::int64_t index;
};

/// @brief Output `o` of the 2x2 stride-2 max pool of `planes` h x w planes at `x` (h, w even;
/// outputs numbered plane by plane, row-major): the first maximum of its window in the order
/// (0,0) (0,1) (1,0) (1,1) under a strict `>` (ties keep the earlier; the dnnl build does the
/// same). A NaN is kept only as the window's first element (a comparison with NaN is false).
/// @param x The input planes.
/// @param h Plane height (even).
/// @param w Plane width (even).
/// @param o The output's number, below planes * (h/2) * (w/2).
/// @return The window's maximum and its index within the plane.
STASH_HOST_DEVICE inline pooled max_pool_output(float const* x, int h, int w, std::size_t o)
{
  int const oh = h / 2, ow = w / 2;
  std::size_t const per_plane = std::size_t(oh) * ow;
  std::size_t const plane     = o / per_plane;
  int const r                 = int(o % per_plane);
  int const oy = r / ow, ox = r % ow;
  float const* in = x + plane * std::size_t(h) * std::size_t(w);
  int best        = 2 * oy * w + 2 * ox;
  float m         = in[best];
  for (int k = 1; k < 4; ++k) {
    int const at = (2 * oy + k / 2) * w + 2 * ox + k % 2;
    if (in[at] > m) {
      m    = in[at];
      best = at;
    }
  }
  return pooled{m, best};
}

/// @brief Input `i`'s gradient from the pool's backward: its window's dy when the window's index
/// names it, else 0 (windows do not overlap, so every input is written once).
/// @param dy The outputs' gradient.
/// @param index The outputs' indices (max_pool_output's).
/// @param h Plane height (even).
/// @param w Plane width (even).
/// @param i The input's number, below planes * h * w.
/// @return dx[i].
STASH_HOST_DEVICE inline float max_pool_input_grad(float const* dy, std::int64_t const* index,
                                                   int h, int w, std::size_t i)
{
  int const oh = h / 2, ow = w / 2;
  std::size_t const per_plane = std::size_t(h) * std::size_t(w);
  std::size_t const plane     = i / per_plane;
  int const pos               = int(i % per_plane);
  int const iy = pos / w, ix = pos % w;
  std::size_t const o =
      plane * std::size_t(oh) * std::size_t(ow) + std::size_t(iy / 2) * ow + ix / 2;
  return index[o] == pos ? dy[o] : 0.0f;
}

/// @brief The forward on the host: max_pool_output for every output.
/// @param x The input planes.
/// @param y The outputs (planes * (h/2) * (w/2)).
/// @param index Their indices.
/// @param planes Number of planes.
/// @param h Plane height (even).
/// @param w Plane width (even).
inline void max_pool_forward_host(float const* x, float* y, std::int64_t* index, std::size_t planes,
                                  int h, int w)
{
  std::size_t const total = planes * std::size_t(h / 2) * std::size_t(w / 2);
  for (std::size_t o = 0; o < total; ++o) {
    pooled const p = max_pool_output(x, h, w, o);
    y[o]           = p.value;
    index[o]       = p.index;
  }
}

/// @brief The backward on the host: max_pool_input_grad for every input.
/// @param dy The outputs' gradient.
/// @param index The outputs' indices.
/// @param dx The inputs' gradient (planes * h * w).
/// @param planes Number of planes.
/// @param h Plane height (even).
/// @param w Plane width (even).
inline void max_pool_backward_host(float const* dy, std::int64_t const* index, float* dx,
                                   std::size_t planes, int h, int w)
{
  std::size_t const total = planes * std::size_t(h) * std::size_t(w);
  for (std::size_t i = 0; i < total; ++i) { dx[i] = max_pool_input_grad(dy, index, h, w, i); }
}

}  // namespace train_cnn
