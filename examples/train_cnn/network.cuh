// A VGG-style CNN for Fashion-MNIST on cuDNN (convolution, bias, ReLU, max pooling) and cuBLAS
// (fully connected layers), trained with SGD-momentum. Every activation, activation gradient and
// workspace is a stash tensor: allocated, used through op() (which hands out resident pointers on
// the compute stream) and freed by the network, so the swap policy can offload it. Parameters,
// their gradients and momentum are allocated before the first iteration (persistent).
//
// Layout: NCHW float32. Network of width w (channels c = 32w, 64w; units u = 256w):
//   [conv3x3(c1)-ReLU-conv3x3(c1)-ReLU-maxpool2] [conv3x3(c2)-ReLU-conv3x3(c2)-ReLU-maxpool2]
//   fc(u)-ReLU fc(10), softmax cross-entropy.
// Only deterministic algorithms are used (implicit-GEMM forward, ALGO_1 backward data and filter,
// deterministic max pooling, FMA math without TF32, reductions in a fixed order), so two runs with
// the same seed compute bitwise the same weights whatever the memory does.
// All parameter gradients live in one flat stash tensor, so that data parallelism averages them
// across ranks with a single all-reduce (see collective, and nccl_comm.cuh for the NCCL one).
#pragma once

#include "memory.cuh"

#include <stash_tools/train_cnn/idx_reader.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace train_cnn {

// ---- error checks
// --------------------------------------------------------------------------------

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

// ---- kernels
// ---------------------------------------------------------------------------------------

namespace kernels {
// Kernels in a header are templates launched as `kernel<><<<...>>>` (as stash's own headers do):
// `__global__ inline` draws nvcc warning #20050.

// Fashion-MNIST's training-set mean and standard deviation of pixel/255.
inline constexpr float pixel_mean = 0.2860f;
inline constexpr float pixel_std  = 0.3530f;

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

// db[c] = sum over n, hw of dy[(n*C + c)*HW + hw]: one block per channel, a fixed summation order.
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

// Softmax cross-entropy of N x 10 logits: per-sample loss, dlogits = (softmax - onehot) / N, and
// the number of correct argmax predictions added to *correct.
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
  if (loss != nullptr) { loss[i] = logf(sum) - (z[y] - m); }
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

// v = momentum * v + g; w -= lr * v.
template <int Unused = 0>
__global__ void sgd_momentum(float* w, float const* g, float* v, std::size_t n, float lr,
                             float momentum)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    float const vi = momentum * v[i] + g[i];
    v[i]           = vi;
    w[i] -= lr * vi;
  }
}

inline unsigned grid_for(std::size_t n)
{
  return unsigned(std::min<std::size_t>((n + 255) / 256, 4096));
}

}  // namespace kernels

// ---- cuDNN descriptors
// -----------------------------------------------------------------------------

class tensor_desc {
 public:
  tensor_desc(int n, int c, int h, int w)
  {
    TRAIN_CNN_CUDNN(cudnnCreateTensorDescriptor(&d_));
    TRAIN_CNN_CUDNN(
        cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  }
  ~tensor_desc() { cudnnDestroyTensorDescriptor(d_); }
  tensor_desc(tensor_desc const&)            = delete;
  tensor_desc& operator=(tensor_desc const&) = delete;
  operator cudnnTensorDescriptor_t() const noexcept { return d_; }  // NOLINT: a handle

 private:
  cudnnTensorDescriptor_t d_{};
};

/// @brief What data parallelism needs from the ranks' communicator, kept free of NCCL types so the
/// network compiles without NCCL. Device calls are stream-ordered and never block the host: their
/// work starts after everything already queued on `stream` and everything queued on `stream`
/// afterwards starts after it.
class collective {
 public:
  virtual ~collective() = default;
  /// @brief data[0..count) = the mean over ranks of every rank's data, in place.
  virtual void average(float* data, std::size_t count, cudaStream_t stream) = 0;
  /// @brief *loss and *correct = their sums over ranks, in place.
  virtual void sum(double* loss, unsigned long long* correct, cudaStream_t stream) = 0;
  /// @brief The smallest and largest `value` over ranks (synchronizes; for checks between epochs).
  [[nodiscard]] virtual std::pair<std::uint64_t, std::uint64_t> min_max(std::uint64_t value) = 0;
  /// @brief Number of ranks.
  [[nodiscard]] virtual int world_size() const = 0;
};

/// @brief The network's hyper-parameters.
struct network_config {
  int width          = 1;
  int rows           = 28;
  int cols           = 28;
  int classes        = 10;
  float lr           = 0.02f;
  float momentum     = 0.9f;
  std::uint64_t seed = 1;
};

/// @brief The VGG-style network over one activation_memory (see the file docs).
class network {
 public:
  using id = activation_memory::id;

  /// @brief Builds the network over `mem`; with `dp`, each step averages the gradients over its
  /// ranks before the optimizer (dp must outlive the network).
  network(activation_memory& mem, network_config cfg, int max_batch, collective* dp = nullptr)
      : mem_(mem), cfg_(cfg), max_batch_(max_batch), dp_(dp)
  {
    if (cfg_.rows % 4 != 0 || cfg_.cols % 4 != 0) {
      throw std::runtime_error(
          "train_cnn: images must be a multiple of 4 pixels high and wide (two 2x2 poolings); "
          "got " +
          std::to_string(cfg_.rows) + "x" + std::to_string(cfg_.cols));
    }
    TRAIN_CNN_CUDNN(cudnnCreate(&cudnn_));
    TRAIN_CNN_CUDNN(cudnnSetStream(cudnn_, mem_.stream()));
    TRAIN_CNN_CUBLAS(cublasCreate(&cublas_));
    TRAIN_CNN_CUBLAS(cublasSetStream(cublas_, mem_.stream()));
    TRAIN_CNN_CUBLAS(
        cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH));  // no TF32, no reduced precision
    TRAIN_CNN_CUDNN(cudnnCreateActivationDescriptor(&relu_));
    TRAIN_CNN_CUDNN(
        cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    TRAIN_CNN_CUDNN(cudnnCreatePoolingDescriptor(&pool_));
    TRAIN_CNN_CUDNN(cudnnSetPooling2dDescriptor(pool_, CUDNN_POOLING_MAX_DETERMINISTIC,
                                                CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2));
    TRAIN_CNN_CUDNN(cudnnCreateConvolutionDescriptor(&conv_));
    TRAIN_CNN_CUDNN(cudnnSetConvolution2dDescriptor(conv_, 1, 1, 1, 1, 1, 1,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    TRAIN_CNN_CUDNN(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH));

    std::mt19937_64 rng(cfg_.seed);
    int const c1 = 32 * cfg_.width, c2 = 64 * cfg_.width, u = 256 * cfg_.width;
    int cin = 1, h = cfg_.rows, w = cfg_.cols;
    for (int block = 0; block < 2; ++block) {
      int const c = block == 0 ? c1 : c2;
      for (int k = 0; k < 2; ++k) {
        conv_layer l;
        l.cin           = cin;
        l.cout          = c;
        l.h             = h;
        l.w             = w;
        l.block         = block;
        l.last_in_block = k == 1;
        TRAIN_CNN_CUDNN(cudnnCreateFilterDescriptor(&l.filter));
        TRAIN_CNN_CUDNN(cudnnSetFilter4dDescriptor(l.filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, c,
                                                   cin, 3, 3));
        std::string const name = "conv" + std::to_string(block + 1) + "_" + std::to_string(k + 1);
        l.p = make_param(name, std::size_t(c) * cin * 9, std::sqrt(2.0f / float(cin * 9)),
                         std::size_t(c), rng);
        convs_.push_back(l);
        cin = c;
      }
      h /= 2;
      w /= 2;
    }
    flat_ = cin * h * w;
    fc1_  = fc_layer{flat_, u,
                    make_param("fc1", std::size_t(u) * flat_, std::sqrt(2.0f / float(flat_)),
                                std::size_t(u), rng)};
    fc2_  = fc_layer{u, cfg_.classes,
                    make_param("fc2", std::size_t(cfg_.classes) * u, std::sqrt(1.0f / float(u)),
                                std::size_t(cfg_.classes), rng)};
    grads_ =
        mem_.allocate(grad_floats_ * sizeof(float), stash::storage_kind::grad, "gradients.flat");
    {
      // The padding between gradients is never written by backward: zero, so all-reducing it is
      // harmless.
      auto p = mem_.op("init_gradients", {}, std::vector<id>{grads_});
      STASH_CUDA_TRY(cudaMemsetAsync(p[0], 0, grad_floats_ * sizeof(float), mem_.stream()));
    }

    images_   = mem_.allocate(std::size_t(max_batch) * cfg_.rows * cfg_.cols,
                              stash::storage_kind::input, "images_u8");
    labels_   = mem_.allocate(std::size_t(max_batch), stash::storage_kind::input, "labels_u8");
    loss_acc_ = mem_.allocate(sizeof(double), stash::storage_kind::temp, "loss_sum");
    correct_  = mem_.allocate(sizeof(unsigned long long), stash::storage_kind::temp, "correct");
    STASH_CUDA_TRY(cudaMallocHost(&host_images_, std::size_t(max_batch) * cfg_.rows * cfg_.cols));
    STASH_CUDA_TRY(cudaMallocHost(&host_labels_, std::size_t(max_batch)));
    STASH_CUDA_TRY(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
    reset_counters();
  }

  ~network()
  {
    try {
      STASH_CUDA_TRY(cudaStreamSynchronize(mem_.stream()));
    } catch (...) {  // NOLINT(bugprone-empty-catch): destructors never throw
    }
    cudaEventDestroy(staged_);
    cudaFreeHost(host_images_);
    cudaFreeHost(host_labels_);
    for (auto& l : convs_) { cudnnDestroyFilterDescriptor(l.filter); }
    cudnnDestroyConvolutionDescriptor(conv_);
    cudnnDestroyPoolingDescriptor(pool_);
    cudnnDestroyActivationDescriptor(relu_);
    cublasDestroy(cublas_);
    cudnnDestroy(cudnn_);
  }
  network(network const&)            = delete;
  network& operator=(network const&) = delete;

  /// @brief Zeroes the loss and accuracy counters.
  void reset_counters()
  {
    auto p = mem_.op("zero_counters", {}, std::vector<id>{loss_acc_, correct_});
    STASH_CUDA_TRY(cudaMemsetAsync(p[0], 0, sizeof(double), mem_.stream()));
    STASH_CUDA_TRY(cudaMemsetAsync(p[1], 0, sizeof(unsigned long long), mem_.stream()));
  }
  /// @brief Loss sum and correct predictions since reset_counters() (synchronizes); with
  /// `all_ranks` and a collective, summed over the ranks (every rank must call it then).
  std::pair<double, unsigned long long> counters(bool all_ranks = false)
  {
    double loss           = 0;
    unsigned long long ok = 0;
    if (all_ranks && dp_ != nullptr) {
      auto p = mem_.op("nccl::all_reduce_counters", {}, std::vector<id>{loss_acc_, correct_});
      dp_->sum(static_cast<double*>(p[0]), static_cast<unsigned long long*>(p[1]), mem_.stream());
    }
    auto p = mem_.op("read_counters", std::vector<id>{loss_acc_, correct_}, {});
    STASH_CUDA_TRY(
        cudaMemcpyAsync(&loss, p[0], sizeof loss, cudaMemcpyDeviceToHost, mem_.stream()));
    STASH_CUDA_TRY(cudaMemcpyAsync(&ok, p[1], sizeof ok, cudaMemcpyDeviceToHost, mem_.stream()));
    STASH_CUDA_TRY(cudaStreamSynchronize(mem_.stream()));
    return {loss, ok};
  }

  /// @brief One training step (forward, backward, SGD) on samples `index[0..n)` of `set`, as one
  /// stash iteration. Batches of one run must all have the same size (a new size re-records).
  void train_step(labelled_images const& set, std::span<std::size_t const> index)
  {
    int const n = static_cast<int>(index.size());
    mem_.begin_iteration();
    mem_.phase(stash::phase::forward);
    stage(set, index);
    forward_result f = forward(n, true);
    mem_.phase(stash::phase::backward);
    backward(n, f);
    if (dp_ != nullptr) {
      // Each rank's gradient is the mean over its own slice (the loss gradient is divided by the
      // slice size), so the mean over ranks is the gradient of the global batch's mean loss. The
      // all-reduce runs on the collective's stream, ordered after backward and before the optimizer
      // by events: no host synchronisation.
      auto p = mem_.op("nccl::all_reduce_gradients", {}, std::vector<id>{grads_});
      dp_->average(static_cast<float*>(p[0]), grad_floats_, mem_.stream());
    }
    mem_.phase(stash::phase::optimizer);
    for (auto* p : params()) { sgd(*p); }
    mem_.end_iteration();
  }

  /// @brief Forward only on samples `index` of `set`, counting correct predictions (not a stash
  /// iteration: its tensors are not matched against the recorded step).
  void evaluate_batch(labelled_images const& set, std::span<std::size_t const> index)
  {
    int const n = static_cast<int>(index.size());
    stage(set, index);
    forward_result f = forward(n, false);
    (void)f;
  }

  /// @brief Every weight and bias, copied to the host in a fixed order (synchronizes).
  std::vector<float> weights()
  {
    std::vector<float> out;
    for (auto* p : params()) {
      for (auto [t, count] : {std::pair{p->w, p->w_count}, std::pair{p->b, p->b_count}}) {
        std::size_t const at = out.size();
        out.resize(at + count);
        auto ptr = mem_.op("read_weights", std::vector<id>{t}, {});
        STASH_CUDA_TRY(cudaMemcpyAsync(out.data() + at, ptr[0], count * sizeof(float),
                                       cudaMemcpyDeviceToHost, mem_.stream()));
      }
    }
    STASH_CUDA_TRY(cudaStreamSynchronize(mem_.stream()));
    return out;
  }

  /// @brief Number of trainable parameters.
  [[nodiscard]] std::size_t parameter_count()
  {
    std::size_t n = 0;
    for (auto* p : params()) { n += p->w_count + p->b_count; }
    return n;
  }

 private:
  struct param {
    id w{}, b{}, vw{}, vb{};
    std::size_t w_count{0}, b_count{0};
    std::size_t dw_at{0}, db_at{0};  // offsets (floats) of the gradients in grads_
  };
  struct conv_layer {
    int cin{}, cout{}, h{}, w{}, block{};
    bool last_in_block{};
    cudnnFilterDescriptor_t filter{};
    param p;
  };
  struct fc_layer {
    int in{}, out{};
    param p;
  };
  struct forward_result {
    std::vector<id> conv_in;   // input of each conv (x0, a1_1, p1, a2_1)
    std::vector<id> relu_out;  // output of each conv's ReLU
    std::vector<id> pool_out;  // output of each block's pooling
    id fc1_out{}, logits_grad{};
    id x0{};
  };

  std::vector<param*> params()
  {
    std::vector<param*> v;
    for (auto& l : convs_) { v.push_back(&l.p); }
    v.push_back(&fc1_.p);
    v.push_back(&fc2_.p);
    return v;
  }

  param make_param(std::string const& name, std::size_t w_count, float stddev, std::size_t b_count,
                   std::mt19937_64& rng)
  {
    param p;
    p.w_count = w_count;
    p.b_count = b_count;
    using stash::storage_kind;
    p.w = mem_.allocate(w_count * sizeof(float), storage_kind::param, name + ".weight");
    p.b = mem_.allocate(b_count * sizeof(float), storage_kind::param, name + ".bias");
    // 64 floats: every gradient starts 256-byte aligned, as cudaMalloc'd ones would.
    auto const padded = [](std::size_t n) { return (n + 63) / 64 * 64; };
    p.dw_at           = grad_floats_;
    grad_floats_ += padded(w_count);
    p.db_at = grad_floats_;
    grad_floats_ += padded(b_count);
    p.vw =
        mem_.allocate(w_count * sizeof(float), storage_kind::optstate, name + ".weight.momentum");
    p.vb = mem_.allocate(b_count * sizeof(float), storage_kind::optstate, name + ".bias.momentum");
    std::normal_distribution<float> normal(0.0f, stddev);
    std::vector<float> host(w_count);
    for (auto& x : host) { x = normal(rng); }
    auto ptr     = mem_.op("init_" + name, {}, std::vector<id>{p.w, p.b, p.vw, p.vb});
    auto const s = mem_.stream();
    STASH_CUDA_TRY(
        cudaMemcpyAsync(ptr[0], host.data(), w_count * sizeof(float), cudaMemcpyHostToDevice, s));
    STASH_CUDA_TRY(cudaMemsetAsync(ptr[1], 0, b_count * sizeof(float), s));
    STASH_CUDA_TRY(cudaMemsetAsync(ptr[2], 0, w_count * sizeof(float), s));
    STASH_CUDA_TRY(cudaMemsetAsync(ptr[3], 0, b_count * sizeof(float), s));
    STASH_CUDA_TRY(cudaStreamSynchronize(s));  // `host` goes out of scope
    return p;
  }

  // Gathers the batch into pinned memory and copies it to the persistent staging tensors.
  void stage(labelled_images const& set, std::span<std::size_t const> index)
  {
    STASH_CUDA_TRY(cudaEventSynchronize(staged_));  // the previous batch's copy has left the buffer
    std::size_t const pixels = set.rows * set.cols;
    for (std::size_t i = 0; i < index.size(); ++i) {
      std::copy_n(set.pixels.data() + index[i] * pixels, pixels, host_images_ + i * pixels);
      host_labels_[i] = set.labels[index[i]];
    }
    auto p       = mem_.op("stage_batch", {}, std::vector<id>{images_, labels_});
    auto const s = mem_.stream();
    STASH_CUDA_TRY(
        cudaMemcpyAsync(p[0], host_images_, index.size() * pixels, cudaMemcpyHostToDevice, s));
    STASH_CUDA_TRY(cudaMemcpyAsync(p[1], host_labels_, index.size(), cudaMemcpyHostToDevice, s));
    STASH_CUDA_TRY(cudaEventRecord(staged_, s));
  }

  static constexpr float one  = 1.0f;
  static constexpr float zero = 0.0f;

  id act(std::size_t floats, std::string label, stash::storage_kind kind = stash::storage_kind::act)
  {
    return mem_.allocate(floats * sizeof(float), kind, std::move(label));
  }

  // A workspace tensor of `bytes` (none when 0) and its pointer after the op that uses it.
  std::optional<id> workspace(std::size_t bytes, std::string const& label)
  {
    if (bytes == 0) { return std::nullopt; }
    return mem_.allocate(bytes, stash::storage_kind::temp, label + ".workspace");
  }
  static std::vector<id> with(std::vector<id> ids, std::optional<id> extra)
  {
    if (extra) { ids.push_back(*extra); }
    return ids;
  }

  forward_result forward(int n, bool training)
  {
    auto const s = mem_.stream();
    forward_result f;
    std::size_t const pixels = std::size_t(cfg_.rows) * cfg_.cols;
    f.x0                     = act(std::size_t(n) * pixels, "input", stash::storage_kind::input);
    {
      auto p = mem_.op("aten::_to_copy", std::vector<id>{images_}, std::vector<id>{f.x0});
      kernels::normalize<><<<kernels::grid_for(n * pixels), 256, 0, s>>>(
          static_cast<std::uint8_t const*>(p[0]), static_cast<float*>(p[1]), n * pixels);
      STASH_CUDA_TRY(cudaGetLastError());
    }
    id x = f.x0;
    for (std::size_t i = 0; i < convs_.size(); ++i) {
      auto& l = convs_[i];
      std::string const name =
          "conv" + std::to_string(l.block + 1) + "_" + std::to_string(i % 2 + 1);
      tensor_desc in_d(n, l.cin, l.h, l.w), out_d(n, l.cout, l.h, l.w), bias_d(1, l.cout, 1, 1);
      std::size_t ws_bytes = 0;
      TRAIN_CNN_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(cudnn_, in_d, l.filter, conv_, out_d,
                                                              fwd_algo, &ws_bytes));
      id const z = act(std::size_t(n) * l.cout * l.h * l.w, name + ".out");
      auto ws    = workspace(ws_bytes, name);
      {
        auto p = mem_.op("aten::convolution", std::vector<id>{x, l.p.w, l.p.b}, with({z}, ws));
        TRAIN_CNN_CUDNN(cudnnConvolutionForward(cudnn_, &one, in_d, p[0], l.filter, p[1], conv_,
                                                fwd_algo, ws ? p[4] : nullptr, ws_bytes, &zero,
                                                out_d, p[3]));
        TRAIN_CNN_CUDNN(cudnnAddTensor(cudnn_, &one, bias_d, p[2], &one, out_d, p[3]));
      }
      if (ws) { mem_.deallocate(*ws); }
      id const a = act(std::size_t(n) * l.cout * l.h * l.w, name + ".relu");
      {
        auto p = mem_.op("aten::relu", std::vector<id>{z}, std::vector<id>{a});
        TRAIN_CNN_CUDNN(
            cudnnActivationForward(cudnn_, relu_, &one, out_d, p[0], &zero, out_d, p[1]));
      }
      mem_.deallocate(z);  // ReLU's backward needs only its output (a > 0 exactly where z > 0)
      if (training) {
        f.conv_in.push_back(x);
        f.relu_out.push_back(a);
      } else {
        mem_.deallocate(x);  // evaluation keeps nothing it has used
      }
      x = a;
      if (l.last_in_block) {
        tensor_desc pooled_d(n, l.cout, l.h / 2, l.w / 2);
        id const pooled = act(std::size_t(n) * l.cout * (l.h / 2) * (l.w / 2),
                              "pool" + std::to_string(l.block + 1) + ".out");
        {
          auto p = mem_.op("aten::max_pool2d", std::vector<id>{a}, std::vector<id>{pooled});
          TRAIN_CNN_CUDNN(
              cudnnPoolingForward(cudnn_, pool_, &one, out_d, p[0], &zero, pooled_d, p[1]));
        }
        if (training) {
          f.pool_out.push_back(pooled);
        } else {
          mem_.deallocate(a);
        }
        x = pooled;
      }
    }
    // Fully connected layers: x is N x flat_ row-major.
    id const h = act(std::size_t(n) * fc1_.out, "fc1.out");
    linear_forward(fc1_, x, h, n);
    if (!training) { mem_.deallocate(x); }
    id const r = act(std::size_t(n) * fc1_.out, "fc1.relu");
    {
      tensor_desc d(n, fc1_.out, 1, 1);
      auto p = mem_.op("aten::relu", std::vector<id>{h}, std::vector<id>{r});
      TRAIN_CNN_CUDNN(cudnnActivationForward(cudnn_, relu_, &one, d, p[0], &zero, d, p[1]));
    }
    mem_.deallocate(h);
    id const logits = act(std::size_t(n) * cfg_.classes, "fc2.out");
    linear_forward(fc2_, r, logits, n);
    if (training) {
      f.fc1_out = r;
    } else {
      mem_.deallocate(r);
    }
    // Loss and its gradient.
    id const loss = act(std::size_t(n), "loss", stash::storage_kind::temp);
    std::optional<id> dlogits;
    if (training) {
      dlogits = act(std::size_t(n) * cfg_.classes, "fc2.out.grad", stash::storage_kind::temp);
    }
    {
      auto p = mem_.op("aten::cross_entropy_loss", std::vector<id>{logits, labels_},
                       with({loss, correct_, loss_acc_}, dlogits));
      kernels::softmax_xent<><<<(n + 127) / 128, 128, 0, s>>>(
          static_cast<float const*>(p[0]), static_cast<std::uint8_t const*>(p[1]),
          dlogits ? static_cast<float*>(p[5]) : nullptr, static_cast<float*>(p[2]),
          static_cast<unsigned long long*>(p[3]), n, cfg_.classes);
      STASH_CUDA_TRY(cudaGetLastError());
      if (training) {
        kernels::accumulate_loss<>
            <<<1, 1, 0, s>>>(static_cast<float const*>(p[2]), n, static_cast<double*>(p[4]));
        STASH_CUDA_TRY(cudaGetLastError());
      }
    }
    mem_.deallocate(loss);
    mem_.deallocate(logits);
    if (dlogits) { f.logits_grad = *dlogits; }
    return f;
  }

  void linear_forward(fc_layer const& l, id x, id y, int n)
  {
    auto p = mem_.op("aten::addmm", std::vector<id>{x, l.p.w, l.p.b}, std::vector<id>{y});
    // Row-major Y (N x out) = X (N x in) W^T: column-major Y^T = W^T' X^T with W^T' = op_T(W as in
    // x out).
    TRAIN_CNN_CUBLAS(cublasSgemm(
        cublas_, CUBLAS_OP_T, CUBLAS_OP_N, l.out, n, l.in, &one, static_cast<float const*>(p[1]),
        l.in, static_cast<float const*>(p[0]), l.in, &zero, static_cast<float*>(p[3]), l.out));
    std::size_t const total = std::size_t(n) * l.out;
    kernels::add_bias_rows<><<<kernels::grid_for(total), 256, 0, mem_.stream()>>>(
        static_cast<float*>(p[3]), static_cast<float const*>(p[2]), n, l.out);
    STASH_CUDA_TRY(cudaGetLastError());
  }

  // dY given: dW = dY^T X, db = column sums of dY, dX = dY W (when wanted).
  void linear_backward(fc_layer const& l, id x, id dy, std::optional<id> dx, int n)
  {
    auto p = mem_.op("aten::addmm_backward", std::vector<id>{dy, x, l.p.w}, with({grads_}, dx));
    auto const* dyp = static_cast<float const*>(p[0]);
    auto const* xp  = static_cast<float const*>(p[1]);
    auto const* wp  = static_cast<float const*>(p[2]);
    auto* const g   = static_cast<float*>(p[3]);
    // Column-major dW^T (in x out) = X^T (in x N) * dY (N x out).
    TRAIN_CNN_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, l.in, l.out, n, &one, xp, l.in,
                                 dyp, l.out, &zero, g + l.p.dw_at, l.in));
    kernels::bias_grad<><<<l.out, 256, 0, mem_.stream()>>>(dyp, g + l.p.db_at, n, l.out, 1);
    STASH_CUDA_TRY(cudaGetLastError());
    if (dx) {
      // Column-major dX^T (in x N) = W^T (in x out) * dY^T (out x N).
      TRAIN_CNN_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, l.in, n, l.out, &one, wp,
                                   l.in, dyp, l.out, &zero, static_cast<float*>(p[4]), l.in));
    }
  }

  void backward(int n, forward_result& f)
  {
    // fc2
    id const dr = act(std::size_t(n) * fc2_.in, "fc1.relu.grad", stash::storage_kind::temp);
    linear_backward(fc2_, f.fc1_out, f.logits_grad, dr, n);
    mem_.deallocate(f.logits_grad);
    // ReLU of fc1
    id const dh = act(std::size_t(n) * fc1_.out, "fc1.out.grad", stash::storage_kind::temp);
    {
      tensor_desc d(n, fc1_.out, 1, 1);
      auto p =
          mem_.op("aten::threshold_backward", std::vector<id>{dr, f.fc1_out}, std::vector<id>{dh});
      TRAIN_CNN_CUDNN(
          cudnnActivationBackward(cudnn_, relu_, &one, d, p[1], d, p[0], d, p[1], &zero, d, p[2]));
    }
    mem_.deallocate(dr);
    mem_.deallocate(f.fc1_out);
    // fc1: its input is the last pooling's output.
    id dx = act(std::size_t(n) * flat_, "pool2.out.grad", stash::storage_kind::temp);
    linear_backward(fc1_, f.pool_out.back(), dh, dx, n);
    mem_.deallocate(dh);

    for (std::size_t i = convs_.size(); i-- > 0;) {
      auto& l = convs_[i];
      std::string const name =
          "conv" + std::to_string(l.block + 1) + "_" + std::to_string(i % 2 + 1);
      tensor_desc in_d(n, l.cin, l.h, l.w), out_d(n, l.cout, l.h, l.w), bias_d(1, l.cout, 1, 1);
      id const a = f.relu_out[i];
      if (l.last_in_block) {
        id const pooled = f.pool_out[std::size_t(l.block)];
        tensor_desc pooled_d(n, l.cout, l.h / 2, l.w / 2);
        id const da = act(std::size_t(n) * l.cout * l.h * l.w, name + ".relu.grad",
                          stash::storage_kind::temp);
        {
          auto p = mem_.op("aten::max_pool2d_backward", std::vector<id>{dx, pooled, a},
                           std::vector<id>{da});
          TRAIN_CNN_CUDNN(cudnnPoolingBackward(cudnn_, pool_, &one, pooled_d, p[1], pooled_d, p[0],
                                               out_d, p[2], &zero, out_d, p[3]));
        }
        mem_.deallocate(dx);
        mem_.deallocate(pooled);
        dx = da;
      }
      // ReLU backward (output a for both x and y: a > 0 exactly where its input was).
      id const dz =
          act(std::size_t(n) * l.cout * l.h * l.w, name + ".out.grad", stash::storage_kind::temp);
      {
        auto p = mem_.op("aten::threshold_backward", std::vector<id>{dx, a}, std::vector<id>{dz});
        TRAIN_CNN_CUDNN(cudnnActivationBackward(cudnn_, relu_, &one, out_d, p[1], out_d, p[0],
                                                out_d, p[1], &zero, out_d, p[2]));
      }
      mem_.deallocate(dx);
      mem_.deallocate(a);
      // Convolution backward: filter, bias and (but for the first layer) data.
      id const x            = f.conv_in[i];
      std::size_t filter_ws = 0, data_ws = 0;
      TRAIN_CNN_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(
          cudnn_, in_d, out_d, conv_, l.filter, bwd_filter_algo, &filter_ws));
      bool const wants_dx = i > 0;
      if (wants_dx) {
        TRAIN_CNN_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(
            cudnn_, l.filter, out_d, conv_, in_d, bwd_data_algo, &data_ws));
      }
      std::optional<id> dxin;
      if (wants_dx) {
        std::string const in_name = l.block == 1 && i % 2 == 0
                                        ? "pool1.out"
                                        : "conv" + std::to_string(l.block + 1) + "_1.relu";
        dxin =
            act(std::size_t(n) * l.cin * l.h * l.w, in_name + ".grad", stash::storage_kind::temp);
      }
      auto ws = workspace(std::max(filter_ws, data_ws), name + ".backward");
      {
        std::vector<id> writes{grads_};
        if (dxin) { writes.push_back(*dxin); }
        if (ws) { writes.push_back(*ws); }
        auto p = mem_.op("aten::convolution_backward", std::vector<id>{dz, x, l.p.w}, writes);
        auto* const g              = static_cast<float*>(p[3]);
        void* wsp                  = ws ? p[dxin ? 5 : 4] : nullptr;
        std::size_t const ws_bytes = std::max(filter_ws, data_ws);
        TRAIN_CNN_CUDNN(cudnnConvolutionBackwardFilter(cudnn_, &one, in_d, p[1], out_d, p[0], conv_,
                                                       bwd_filter_algo, wsp, ws_bytes, &zero,
                                                       l.filter, g + l.p.dw_at));
        kernels::bias_grad<><<<l.cout, 256, 0, mem_.stream()>>>(
            static_cast<float const*>(p[0]), g + l.p.db_at, n, l.cout, l.h * l.w);
        STASH_CUDA_TRY(cudaGetLastError());
        if (dxin) {
          TRAIN_CNN_CUDNN(cudnnConvolutionBackwardData(cudnn_, &one, l.filter, p[2], out_d, p[0],
                                                       conv_, bwd_data_algo, wsp, ws_bytes, &zero,
                                                       in_d, p[4]));
        }
      }
      if (ws) { mem_.deallocate(*ws); }
      mem_.deallocate(dz);
      if (x == f.x0) {
        mem_.deallocate(x);
      }  // pool and ReLU outputs are freed by their own backward
      if (dxin) { dx = *dxin; }
    }
  }

  void sgd(param& p)
  {
    auto const s  = mem_.stream();
    auto ptr      = mem_.op("aten::_foreach_sgd_momentum", std::vector<id>{grads_},
                            std::vector<id>{p.w, p.vw, p.b, p.vb});
    auto const* g = static_cast<float const*>(ptr[0]);
    kernels::sgd_momentum<><<<kernels::grid_for(p.w_count), 256, 0, s>>>(
        static_cast<float*>(ptr[1]), g + p.dw_at, static_cast<float*>(ptr[2]), p.w_count, cfg_.lr,
        cfg_.momentum);
    STASH_CUDA_TRY(cudaGetLastError());
    kernels::sgd_momentum<><<<kernels::grid_for(p.b_count), 256, 0, s>>>(
        static_cast<float*>(ptr[3]), g + p.db_at, static_cast<float*>(ptr[4]), p.b_count, cfg_.lr,
        cfg_.momentum);
    STASH_CUDA_TRY(cudaGetLastError());
  }

  static constexpr cudnnConvolutionFwdAlgo_t fwd_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  static constexpr cudnnConvolutionBwdDataAlgo_t bwd_data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  static constexpr cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo =
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;

  activation_memory& mem_;
  network_config cfg_;
  int max_batch_;
  collective* dp_;
  cudnnHandle_t cudnn_{};
  cublasHandle_t cublas_{};
  cudnnActivationDescriptor_t relu_{};
  cudnnPoolingDescriptor_t pool_{};
  cudnnConvolutionDescriptor_t conv_{};
  std::vector<conv_layer> convs_;
  int flat_{0};
  fc_layer fc1_, fc2_;
  id images_{}, labels_{}, loss_acc_{}, correct_{};
  id grads_{};  // every parameter's gradient, one flat tensor (see make_param)
  std::size_t grad_floats_{0};
  std::uint8_t* host_images_{nullptr};
  std::uint8_t* host_labels_{nullptr};
  cudaEvent_t staged_{};
};

}  // namespace train_cnn
