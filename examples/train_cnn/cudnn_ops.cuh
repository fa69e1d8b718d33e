// train_cnn's layer calls on CUDA, the `Ops` of the shared network
// (stash_tools/train_cnn/cnn.hpp; dnnl_ops.hpp is the CPU's): cuDNN for convolution, ReLU and
// batch normalization, cuBLAS for the fully connected layers, and small kernels for what neither
// offers in the network's form: bias sums, max pooling with PyTorch's int64 indices (cuDNN's
// pooling keeps no indices: its backward re-reads x and y, while the network keeps only the
// indices, which stash may send as Gist's 4-bit argmax), the add, the input normalisation, the
// loss and SGD.
//
// Every call is queued on the one stream given at construction (the memory's: cuDNN and cuBLAS
// are bound to it), in the order the network calls them, and none blocks the host except
// upload(), download() and stage() (each says why). A re-run stash makes to rematerialise a
// dropped tensor is queued on the same stream (stash::allocator re-runs an op on the stream of
// the op that needs it, here always the memory's).
//
// Deterministic: implicit-GEMM forward, ALGO_1 backward data and filter, FMA math without TF32,
// cuBLAS in pedantic math, and every reduction of the kernels below in a fixed order (integer
// atomics only), so two vgg runs with the same seed compute bitwise the same weights whatever the
// memory does. Batch normalization (resnet) runs cuDNN's spatial, non-persistent mode, which its
// reproducibility notes do not list as non-deterministic; not checked on a GPU here.
#pragma once

#include <stash_tools/train_cnn/idx_reader.hpp>
#include <stash_tools/train_cnn/layer_shapes.hpp>
#include <stash_tools/train_cnn/max_pool.hpp>

#include <stash/core/error.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

namespace train_cnn {

// ---- error checks
inline void cudnn_check(cudnnStatus_t s, const char* call, const char* file, int line)
{
  if (s != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " +
                             cudnnGetErrorString(s));
  }
}
inline void cublas_check(cublasStatus_t s, const char* call, const char* file, int line)
{
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " +
                             cublasGetStatusString(s));
  }
}
#define TRAIN_CNN_CUDNN(call) ::train_cnn::cudnn_check((call), #call, __FILE__, __LINE__)
#define TRAIN_CNN_CUBLAS(call) ::train_cnn::cublas_check((call), #call, __FILE__, __LINE__)

namespace kernels {
// Kernels in a header are templates launched as `kernel<><<<...>>>` (as stash's own headers do):
// `__global__ inline` draws nvcc warning #20050. Grid-stride loops: any grid covers any size.

template <int Unused = 0>
__global__ void normalize(std::uint8_t const* in, float* out, std::size_t n)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    out[i] = (float(in[i]) / 255.0f - pixel_mean) / pixel_std;
  }
}

// y[n, c] += b[c] for an N x C row-major matrix.
template <int Unused = 0>
__global__ void add_bias_rows(float* y, float const* b, int n, int c)
{
  std::size_t const total = std::size_t(n) * c;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total;
       i += std::size_t(gridDim.x) * blockDim.x) {
    y[i] += b[i % c];
  }
}

// db[c] = sum over n, hw of dy[(n*C + c)*HW + hw]: one block of 256 threads per channel, a fixed
// summation order.
template <int Unused = 0>
__global__ void bias_grad(float const* dy, float* db, int n, int c, int hw)
{
  __shared__ float partial[256];
  int const ch                  = blockIdx.x;
  float sum                     = 0.0f;
  std::size_t const per_channel = std::size_t(n) * hw;
  for (std::size_t i = threadIdx.x; i < per_channel; i += blockDim.x) {
    std::size_t const sample = i / hw, pos = i % hw;
    sum += dy[(sample * c + ch) * hw + pos];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) { partial[threadIdx.x] += partial[threadIdx.x + s]; }
    __syncthreads();
  }
  if (threadIdx.x == 0) { db[ch] = partial[0]; }
}

// 2x2 stride-2 max pooling of `planes` h x w planes (h, w even): y and PyTorch's index of each
// window's first maximum (max_pool_output, stash_tools/train_cnn/max_pool.hpp, which the CPU
// tests check against a reference).
template <int Unused = 0>
__global__ void max_pool_forward(float const* x, float* y, std::int64_t* index, std::size_t planes,
                                 int h, int w)
{
  std::size_t const total = planes * std::size_t(h / 2) * std::size_t(w / 2);
  for (std::size_t o = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; o < total;
       o += std::size_t(gridDim.x) * blockDim.x) {
    pooled const p = max_pool_output(x, h, w, o);
    y[o]           = p.value;
    index[o]       = p.index;
  }
}

// dx of max_pool_forward (max_pool_input_grad): each input takes its window's dy where the index
// names it, else 0 (windows do not overlap: every dx is written once, no atomics).
template <int Unused = 0>
__global__ void max_pool_backward(float const* dy, std::int64_t const* index, float* dx,
                                  std::size_t planes, int h, int w)
{
  std::size_t const total = planes * std::size_t(h) * std::size_t(w);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total;
       i += std::size_t(gridDim.x) * blockDim.x) {
    dx[i] = max_pool_input_grad(dy, index, h, w, i);
  }
}

// y = a + b (y may be a).
template <int Unused = 0>
__global__ void add(float const* a, float const* b, float* y, std::size_t n)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    y[i] = a[i] + b[i];
  }
}

template <int Unused = 0>
__global__ void fill(float* p, std::size_t n, float value)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = value;
  }
}

// running = 0.9 running + 0.1 batch; the batch variance from cuDNN's saved inverse standard
// deviation (1 / sqrt(var + eps), var biased): var = 1 / inv^2 - eps.
template <int Unused = 0>
__global__ void bn_running_update(int c, float const* mean, float const* inv_std, float eps,
                                  float* run_mean, float* run_var)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= c) { return; }
  float const var = 1.0f / (inv_std[i] * inv_std[i]) - eps;
  run_mean[i]     = 0.9f * run_mean[i] + 0.1f * mean[i];
  run_var[i]      = 0.9f * run_var[i] + 0.1f * var;
}

// Softmax cross-entropy of N x classes logits: per-sample loss, dlogits = (softmax - onehot) / N
// (when not null), and the number of correct argmax predictions added to *correct.
template <int Unused = 0>
__global__ void softmax_xent(float const* logits, std::uint8_t const* labels, float* dlogits,
                             float* loss, unsigned long long* correct, int n, int classes)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) { return; }
  float const* z = logits + std::size_t(i) * classes;
  float m        = z[0];
  int arg        = 0;
  for (int k = 1; k < classes; ++k) {
    if (z[k] > m) {
      m   = z[k];
      arg = k;
    }
  }
  float sum = 0.0f;
  for (int k = 0; k < classes; ++k) { sum += expf(z[k] - m); }
  int const y = labels[i];
  loss[i]     = logf(sum) - (z[y] - m);
  if (dlogits != nullptr) {
    for (int k = 0; k < classes; ++k) {
      float const p                         = expf(z[k] - m) / sum;
      dlogits[std::size_t(i) * classes + k] = (p - (k == y ? 1.0f : 0.0f)) / float(n);
    }
  }
  if (arg == y) { atomicAdd(correct, 1ull); }
}

// *acc += sum of loss[0..n) in a fixed order (one thread: n is a batch).
template <int Unused = 0>
__global__ void accumulate_loss(float const* loss, int n, double* acc)
{
  if (blockIdx.x != 0 || threadIdx.x != 0) { return; }
  double s = 0.0;
  for (int i = 0; i < n; ++i) { s += loss[i]; }
  *acc += s;
}

// v = momentum * v + g.
template <int Unused = 0>
__global__ void sgd_momentum(float* v, float const* g, std::size_t n, float momentum)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    v[i] = momentum * v[i] + g[i];
  }
}

// w -= lr * v.
template <int Unused = 0>
__global__ void sgd_step(float* w, float const* v, std::size_t n, float lr)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    w[i] -= lr * v[i];
  }
}

inline unsigned grid_for(std::size_t n)
{
  return unsigned(std::clamp<std::size_t>((n + 255) / 256, 1, 4096));
}

}  // namespace kernels

/// @brief A cuDNN NCHW float tensor descriptor (RAII).
class tensor_desc {
 public:
  tensor_desc(int n, int c, int h, int w)
  {
    TRAIN_CNN_CUDNN(cudnnCreateTensorDescriptor(&d_));
    try {
      TRAIN_CNN_CUDNN(
          cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    } catch (...) {
      cudnnDestroyTensorDescriptor(d_);
      throw;
    }
  }
  ~tensor_desc() { cudnnDestroyTensorDescriptor(d_); }
  tensor_desc(tensor_desc const&)            = delete;
  tensor_desc& operator=(tensor_desc const&) = delete;
  operator cudnnTensorDescriptor_t() const noexcept { return d_; }  // NOLINT: a handle

 private:
  cudnnTensorDescriptor_t d_{};
};

/// @brief A cuDNN float filter descriptor, cout x cin x 3 x 3 (RAII).
class filter_desc {
 public:
  filter_desc(int cout, int cin)
  {
    TRAIN_CNN_CUDNN(cudnnCreateFilterDescriptor(&d_));
    try {
      TRAIN_CNN_CUDNN(
          cudnnSetFilter4dDescriptor(d_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, cout, cin, 3, 3));
    } catch (...) {
      cudnnDestroyFilterDescriptor(d_);
      throw;
    }
  }
  ~filter_desc() { cudnnDestroyFilterDescriptor(d_); }
  filter_desc(filter_desc const&)            = delete;
  filter_desc& operator=(filter_desc const&) = delete;
  operator cudnnFilterDescriptor_t() const noexcept { return d_; }  // NOLINT: a handle

 private:
  cudnnFilterDescriptor_t d_{};
};

/// @brief cuDNN's and cuBLAS's layer calls on one stream (see the file comment).
class cudnn_ops {
 public:
  /// @brief Layer calls queued on `stream` (which must outlive this object).
  explicit cudnn_ops(cudaStream_t stream) : stream_(stream)
  {
    try {
      create();
    } catch (...) {
      release();  // what was created before the failing call
      throw;
    }
  }
  ~cudnn_ops()
  {
    // The staging buffer may still be read by a queued copy.
    cudaStreamSynchronize(stream_);
    release();
  }
  cudnn_ops(cudnn_ops const&)            = delete;
  cudnn_ops& operator=(cudnn_ops const&) = delete;

  // ---- convolution (3x3, stride 1, padding 1)
  /// @brief y = conv(x, w) + b.
  void conv_forward(conv_shape const& s, float const* x, float const* w, float const* b, float* y,
                    void* scratch)
  {
    auto const& d = conv(s);
    TRAIN_CNN_CUDNN(cudnnConvolutionForward(cudnn_, &k_one, d.in, x, d.filter, w, conv_, fwd_algo,
                                            scratch, d.fwd_ws, &k_zero, d.out, y));
    TRAIN_CNN_CUDNN(cudnnAddTensor(cudnn_, &k_one, d.bias, b, &k_one, d.out, y));
  }
  /// @brief dw, db from dy and x.
  void conv_backward_weights(conv_shape const& s, float const* dy, float const* x, float* dw,
                             float* db, void* scratch)
  {
    auto const& d = conv(s);
    TRAIN_CNN_CUDNN(cudnnConvolutionBackwardFilter(cudnn_, &k_one, d.in, x, d.out, dy, conv_,
                                                   bwd_filter_algo, scratch, d.filter_ws, &k_zero,
                                                   d.filter, dw));
    kernels::bias_grad<><<<s.cout, 256, 0, stream_>>>(dy, db, s.n, s.cout, s.h * s.w);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  /// @brief dx from dy and w.
  void conv_backward_data(conv_shape const& s, float const* dy, float const* w, float* dx,
                          void* scratch)
  {
    auto const& d = conv(s);
    TRAIN_CNN_CUDNN(cudnnConvolutionBackwardData(cudnn_, &k_one, d.filter, w, d.out, dy, conv_,
                                                 bwd_data_algo, scratch, d.data_ws, &k_zero, d.in,
                                                 dx));
  }
  /// @brief Workspace bytes of one pass of a convolution (cuDNN's, for the algorithms above).
  std::size_t conv_scratch(conv_shape const& s, layer_pass pass)
  {
    auto const& d = conv(s);
    return pass == layer_pass::forward         ? d.fwd_ws
           : pass == layer_pass::backward_data ? d.data_ws
                                               : d.filter_ws;
  }

  // ---- 2x2 max pooling with PyTorch's indices (kernels: see the file comment)
  void pool_forward(pool_shape const& s, float const* x, float* y, std::int64_t* index,
                    void* /*scratch*/)
  {
    std::size_t const planes = std::size_t(s.n) * s.c;
    kernels::max_pool_forward<>
        <<<kernels::grid_for(planes * (s.h / 2) * (s.w / 2)), 256, 0, stream_>>>(x, y, index,
                                                                                 planes, s.h, s.w);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  void pool_backward(pool_shape const& s, float const* dy, std::int64_t const* index, float* dx,
                     void* /*scratch*/)
  {
    std::size_t const planes = std::size_t(s.n) * s.c;
    kernels::max_pool_backward<><<<kernels::grid_for(planes * s.h * s.w), 256, 0, stream_>>>(
        dy, index, dx, planes, s.h, s.w);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  static std::size_t pool_scratch(pool_shape const& /*s*/, layer_pass /*pass*/) { return 0; }

  // ---- ReLU (its backward reads the output for x and y: y > 0 exactly where x > 0)
  void relu_forward(std::size_t count, float const* x, float* y)
  {
    auto const& d = flat(count);
    TRAIN_CNN_CUDNN(cudnnActivationForward(cudnn_, relu_, &k_one, d, x, &k_zero, d, y));
  }
  void relu_backward(std::size_t count, float const* dy, float const* y, float* dx)
  {
    auto const& d = flat(count);
    TRAIN_CNN_CUDNN(
        cudnnActivationBackward(cudnn_, relu_, &k_one, d, y, d, dy, d, y, &k_zero, d, dx));
  }
  /// @brief y = a + b (y may be a).
  void add(std::size_t count, float const* a, float const* b, float* y)
  {
    kernels::add<><<<kernels::grid_for(count), 256, 0, stream_>>>(a, b, y, count);
    STASH_CUDA_TRY(cudaGetLastError());
  }

  // ---- batch normalization, spatial (per channel over N, H, W): cuDNN 9's legacy calls (kept,
  // and deprecated only under CUDNN_WARN_DEPRECATED; its graph API is the replacement).
  /// @brief Training: y, the batch mean and cuDNN's saved inverse standard deviation in `stat`;
  /// inference: y from the running mean and variance given in `mean`, `stat`.
  void bn_forward(pool_shape const& s, bool training, float const* x, float const* scale,
                  float const* shift, float* y, float* mean, float* stat, void* /*scratch*/)
  {
    auto const& d = bn(s);
    if (training) {
      // No running statistics here (null, as cuDNN allows): bn_running_update does that, so
      // this call is pure and may be re-run.
      TRAIN_CNN_CUDNN(cudnnBatchNormalizationForwardTraining(
          cudnn_, CUDNN_BATCHNORM_SPATIAL, &k_one, &k_zero, d.x, x, d.x, y, d.channel, scale, shift,
          0.0, nullptr, nullptr, bn_epsilon, mean, stat));
    } else {
      TRAIN_CNN_CUDNN(cudnnBatchNormalizationForwardInference(
          cudnn_, CUDNN_BATCHNORM_SPATIAL, &k_one, &k_zero, d.x, x, d.x, y, d.channel, scale, shift,
          mean, stat, bn_epsilon));
    }
  }
  void bn_backward(pool_shape const& s, float const* dy, float const* x, float const* mean,
                   float const* stat, float const* scale, float const* /*shift*/, float* dx,
                   float* dscale, float* dshift, void* /*scratch*/)
  {
    auto const& d = bn(s);
    TRAIN_CNN_CUDNN(cudnnBatchNormalizationBackward(
        cudnn_, CUDNN_BATCHNORM_SPATIAL, &k_one, &k_zero, &k_one, &k_zero, d.x, x, d.x, dy, d.x, dx,
        d.channel, scale, dscale, dshift, bn_epsilon, mean, stat));
  }
  static std::size_t bn_scratch(pool_shape const& /*s*/, layer_pass /*pass*/) { return 0; }
  /// @brief running = 0.9 running + 0.1 batch (see kernels::bn_running_update).
  void bn_running_update(int c, float const* mean, float const* stat, float* run_mean,
                         float* run_var)
  {
    kernels::bn_running_update<>
        <<<(c + 127) / 128, 128, 0, stream_>>>(c, mean, stat, float(bn_epsilon), run_mean, run_var);
    STASH_CUDA_TRY(cudaGetLastError());
  }

  // ---- fully connected: y (n x out) = x (n x in) w^T + b, w row-major out x in. cuBLAS is
  // column-major: a row-major matrix is its transpose.
  void linear_forward(linear_shape const& s, float const* x, float const* w, float const* b,
                      float* y, void* /*scratch*/)
  {
    // Column-major Y^T (out x n) = W (w^T as stored: in x out, transposed) * X^T (in x n).
    TRAIN_CNN_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, s.out, s.n, s.in, &k_one, w,
                                 s.in, x, s.in, &k_zero, y, s.out));
    kernels::add_bias_rows<>
        <<<kernels::grid_for(std::size_t(s.n) * s.out), 256, 0, stream_>>>(y, b, s.n, s.out);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  /// @brief dW = dY^T X, db = column sums of dY.
  void linear_backward_weights(linear_shape const& s, float const* dy, float const* x, float* dw,
                               float* db, void* /*scratch*/)
  {
    // Column-major dW^T (in x out) = X^T (in x n) * dY (n x out).
    TRAIN_CNN_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, s.in, s.out, s.n, &k_one, x,
                                 s.in, dy, s.out, &k_zero, dw, s.in));
    kernels::bias_grad<><<<s.out, 256, 0, stream_>>>(dy, db, s.n, s.out, 1);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  /// @brief dX = dY W.
  void linear_backward_data(linear_shape const& s, float const* dy, float const* w, float* dx,
                            void* /*scratch*/)
  {
    // Column-major dX^T (in x n) = W^T (in x out) * dY^T (out x n).
    TRAIN_CNN_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, s.in, s.n, s.out, &k_one, w,
                                 s.in, dy, s.out, &k_zero, dx, s.in));
  }
  static std::size_t linear_scratch(linear_shape const& /*s*/, layer_pass /*pass*/) { return 0; }

  // ---- the loop's own arithmetic and copies
  void normalize(std::size_t count, std::uint8_t const* in, float* out)
  {
    kernels::normalize<><<<kernels::grid_for(count), 256, 0, stream_>>>(in, out, count);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  /// @brief Adds the batch's loss to *loss_sum (in sample order) and its correct predictions to
  /// *correct; dlogits (when not null) = (softmax - onehot) / n. `scratch`: n floats.
  void cross_entropy(int n, int classes, float const* logits, std::uint8_t const* labels,
                     float* dlogits, double* loss_sum, unsigned long long* correct, void* scratch)
  {
    auto* loss = static_cast<float*>(scratch);
    kernels::softmax_xent<>
        <<<(n + 127) / 128, 128, 0, stream_>>>(logits, labels, dlogits, loss, correct, n, classes);
    STASH_CUDA_TRY(cudaGetLastError());
    kernels::accumulate_loss<><<<1, 1, 0, stream_>>>(loss, n, loss_sum);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  static std::size_t cross_entropy_scratch(int n) { return std::size_t(n) * sizeof(float); }
  void sgd_momentum(std::size_t count, float momentum, float* v, float const* g)
  {
    kernels::sgd_momentum<><<<kernels::grid_for(count), 256, 0, stream_>>>(v, g, count, momentum);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  void sgd_step(std::size_t count, float lr, float* w, float const* v)
  {
    kernels::sgd_step<><<<kernels::grid_for(count), 256, 0, stream_>>>(w, v, count, lr);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  void zero(void* p, std::size_t bytes) { STASH_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, stream_)); }
  void fill(float* p, std::size_t count, float value)
  {
    kernels::fill<><<<kernels::grid_for(count), 256, 0, stream_>>>(p, count, value);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  void copy(void* dst, void const* src, std::size_t bytes)
  {
    STASH_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  /// @brief Device `dst` = host `host`; waits for the stream, so `host` may go at return.
  void upload(void* dst, void const* host, std::size_t bytes)
  {
    STASH_CUDA_TRY(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
    STASH_CUDA_TRY(cudaStreamSynchronize(stream_));
  }
  /// @brief Host `host` = device `src`; waits for the stream, so `host` is filled at return.
  void download(void* host, void const* src, std::size_t bytes)
  {
    STASH_CUDA_TRY(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_));
    STASH_CUDA_TRY(cudaStreamSynchronize(stream_));
  }
  /// @brief Gathers samples `index` of `set` into pinned memory and queues their copy to
  /// `images` and `labels`. Waits only for the previous batch's copy to have left the buffer.
  void stage(labelled_images const& set, std::span<std::size_t const> index, std::uint8_t* images,
             std::uint8_t* labels)
  {
    std::size_t const pixels = set.rows * set.cols;
    std::size_t const bytes  = index.size() * (pixels + 1);
    STASH_CUDA_TRY(cudaEventSynchronize(staged_));
    if (bytes > host_bytes_) {
      STASH_CUDA_TRY(cudaFreeHost(host_batch_));
      host_batch_ = nullptr;
      host_bytes_ = 0;
      STASH_CUDA_TRY(cudaMallocHost(&host_batch_, bytes));
      host_bytes_ = bytes;
    }
    std::uint8_t* const host_labels = host_batch_ + index.size() * pixels;
    for (std::size_t i = 0; i < index.size(); ++i) {
      std::copy_n(set.pixels.data() + index[i] * pixels, pixels, host_batch_ + i * pixels);
      host_labels[i] = set.labels[index[i]];
    }
    STASH_CUDA_TRY(cudaMemcpyAsync(images, host_batch_, index.size() * pixels,
                                   cudaMemcpyHostToDevice, stream_));
    STASH_CUDA_TRY(
        cudaMemcpyAsync(labels, host_labels, index.size(), cudaMemcpyHostToDevice, stream_));
    STASH_CUDA_TRY(cudaEventRecord(staged_, stream_));
  }

 private:
  void create()
  {
    TRAIN_CNN_CUDNN(cudnnCreate(&cudnn_));
    TRAIN_CNN_CUDNN(cudnnSetStream(cudnn_, stream_));
    TRAIN_CNN_CUBLAS(cublasCreate(&cublas_));
    TRAIN_CNN_CUBLAS(cublasSetStream(cublas_, stream_));
    // No TF32, no reduced precision.
    TRAIN_CNN_CUBLAS(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH));
    TRAIN_CNN_CUDNN(cudnnCreateActivationDescriptor(&relu_));
    TRAIN_CNN_CUDNN(
        cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    TRAIN_CNN_CUDNN(cudnnCreateConvolutionDescriptor(&conv_));
    TRAIN_CNN_CUDNN(cudnnSetConvolution2dDescriptor(conv_, 1, 1, 1, 1, 1, 1,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    TRAIN_CNN_CUDNN(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH));
    STASH_CUDA_TRY(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
  }
  // Every handle created so far (the others are still null).
  void release() noexcept
  {
    if (staged_ != nullptr) { cudaEventDestroy(staged_); }
    cudaFreeHost(host_batch_);  // null: nothing to free
    if (conv_ != nullptr) { cudnnDestroyConvolutionDescriptor(conv_); }
    if (relu_ != nullptr) { cudnnDestroyActivationDescriptor(relu_); }
    if (cublas_ != nullptr) { cublasDestroy(cublas_); }
    if (cudnn_ != nullptr) { cudnnDestroy(cudnn_); }
  }

  struct conv_descs {
    conv_descs(conv_shape const& s)
        : in(s.n, s.cin, s.h, s.w),
          out(s.n, s.cout, s.h, s.w),
          bias(1, s.cout, 1, 1),
          filter(s.cout, s.cin)
    {
    }
    tensor_desc in, out, bias;
    filter_desc filter;
    std::size_t fwd_ws{0}, data_ws{0}, filter_ws{0};
  };
  struct bn_descs {
    bn_descs(pool_shape const& s) : x(s.n, s.c, s.h, s.w), channel(1, s.c, 1, 1) {}
    tensor_desc x;
    tensor_desc channel;  // 1 x C x 1 x 1: what cudnnDeriveBNTensorDescriptor gives for spatial
  };

  conv_descs const& conv(conv_shape const& s)
  {
    auto it = convs_.find(s);
    if (it != convs_.end()) { return *it->second; }
    auto d = std::make_unique<conv_descs>(s);
    TRAIN_CNN_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(cudnn_, d->in, d->filter, conv_, d->out,
                                                            fwd_algo, &d->fwd_ws));
    TRAIN_CNN_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(
        cudnn_, d->filter, d->out, conv_, d->in, bwd_data_algo, &d->data_ws));
    TRAIN_CNN_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        cudnn_, d->in, d->out, conv_, d->filter, bwd_filter_algo, &d->filter_ws));
    return *convs_.emplace(s, std::move(d)).first->second;
  }
  bn_descs const& bn(pool_shape const& s)
  {
    auto it = bns_.find(s);
    if (it != bns_.end()) { return *it->second; }
    return *bns_.emplace(s, std::make_unique<bn_descs>(s)).first->second;
  }
  tensor_desc const& flat(std::size_t count)
  {
    auto it = flats_.find(count);
    if (it != flats_.end()) { return *it->second; }
    if (count > std::size_t(INT32_MAX)) {
      throw std::runtime_error("train_cnn: a ReLU of " + std::to_string(count) +
                               " elements is larger than a cuDNN descriptor holds");
    }
    return *flats_.emplace(count, std::make_unique<tensor_desc>(1, int(count), 1, 1)).first->second;
  }

  static constexpr float k_one       = 1.0f;  // cuDNN and cuBLAS take alpha and beta by pointer
  static constexpr float k_zero      = 0.0f;
  static constexpr double bn_epsilon = 1e-5;  // the CPU build's; >= CUDNN_BN_MIN_EPSILON
  static constexpr cudnnConvolutionFwdAlgo_t fwd_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  static constexpr cudnnConvolutionBwdDataAlgo_t bwd_data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  static constexpr cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo =
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;

  cudaStream_t stream_;
  cudnnHandle_t cudnn_{};
  cublasHandle_t cublas_{};
  cudnnActivationDescriptor_t relu_{};
  cudnnConvolutionDescriptor_t conv_{};
  std::map<conv_shape, std::unique_ptr<conv_descs>> convs_;
  std::map<pool_shape, std::unique_ptr<bn_descs>> bns_;
  std::map<std::size_t, std::unique_ptr<tensor_desc>> flats_;
  cudaEvent_t staged_{};
  std::uint8_t* host_batch_{nullptr};  // pinned: a batch's pixels, then its labels
  std::size_t host_bytes_{0};
};

}  // namespace train_cnn
