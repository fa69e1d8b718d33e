// train_cnn's layer shapes and passes: the vocabulary between the shared network (cnn.hpp) and
// its layer-call backends (dnnl_ops.hpp on the CPU, examples/train_cnn/cudnn_ops.cuh on CUDA).
// Kept free of oneDNN and CUDA so that both builds include it.
#pragma once

#include <cstdint>

namespace train_cnn {

/// @brief Fashion-MNIST's training-set mean and standard deviation of pixel/255 (the input
/// normalisation, `Ops::normalize`).
inline constexpr float pixel_mean = 0.2860f;
inline constexpr float pixel_std  = 0.3530f;

/// @brief A convolution's shape: 3x3, stride 1, padding 1 (the map keeps its size).
struct conv_shape {
  int n, cin, cout, h, w;
  auto operator<=>(conv_shape const&) const = default;
};
/// @brief A 2x2 stride-2 max pool's input shape (also a batch norm's: n, c, h, w).
struct pool_shape {
  int n, c, h, w;
  auto operator<=>(pool_shape const&) const = default;
};
/// @brief A fully connected layer's shape.
struct linear_shape {
  int n, in, out;
  auto operator<=>(linear_shape const&) const = default;
};

/// @brief Which call of a layer a scratch size is asked for: the forward, the backward to the
/// input (data), or the backward to the parameters (weights). A backward that computes both in one
/// call (batch norm, max pooling: no parameters) answers to backward_data.
enum class layer_pass : std::uint8_t { forward, backward_data, backward_weights };

}  // namespace train_cnn
