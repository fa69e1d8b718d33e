// train_cnn's layer calls on the CPU, the `Ops` of the shared network (cnn.hpp): oneDNN primitives
// (convolution, max pooling with its workspace, ReLU, batch normalization, binary add, inner
// product; forward and backward) over plain NCHW float32 buffers that the caller owns (stash
// tensors). Softmax cross-entropy, SGD, the input normalisation and the copies are plain loops.
// Every primitive runs with a user scratchpad, so its scratch memory is a buffer the caller
// provides (a stash workspace tensor too); a max pool's oneDNN workspace travels in that buffer
// too, converted to and from PyTorch's int64 indices, which are the tensor the network keeps.
// Deterministic: primitives are created once per shape and run on one thread (the program fixes
// OpenMP's thread count, see cpu_run.hpp), and oneDNN computes the same bits for the same
// primitive, shapes, ISA and thread count.
#pragma once

#include <stash_tools/train_cnn/idx_reader.hpp>
#include <stash_tools/train_cnn/layer_shapes.hpp>

#include <dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

namespace train_cnn {

/// @brief oneDNN's layer calls (see the file comment).
class dnnl_ops {
 public:
  using tag = dnnl::memory::format_tag;
  using dt  = dnnl::memory::data_type;
  using md  = dnnl::memory::desc;

  /// @brief One cached primitive and the scratch bytes it wants.
  struct prim {
    dnnl::primitive p;
    std::size_t scratch{0};
    md scratch_md;
  };
  /// @brief Forward and backward of one layer shape.
  struct layer_prims {
    prim fwd, bwd_data, bwd_weights;
    md ws_md;                 ///< pooling: the workspace oneDNN writes
    std::size_t ws_bytes{0};  ///< pooling: its size
  };

  dnnl_ops() : eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {}

  // ---- convolution
  /// @brief Primitives of a 3x3 convolution of `s` (created on first use).
  layer_prims const& conv(conv_shape const& s)
  {
    auto [it, fresh] = convs_.try_emplace(s);
    if (!fresh) { return it->second; }
    md const src = md({s.n, s.cin, s.h, s.w}, dt::f32, tag::nchw);
    md const dst = md({s.n, s.cout, s.h, s.w}, dt::f32, tag::nchw);
    md const wei = md({s.cout, s.cin, 3, 3}, dt::f32, tag::oihw);
    md const bia = md({s.cout}, dt::f32, tag::x);
    dnnl::memory::dims const st{1, 1}, pad{1, 1};
    auto const alg = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::primitive_desc const fpd(
        {dnnl::prop_kind::forward_training, alg, src, wei, bia, dst, st, pad, pad}, attr(), eng_);
    dnnl::convolution_backward_data::primitive_desc const dpd({alg, src, wei, dst, st, pad, pad},
                                                              attr(), eng_, fpd);
    dnnl::convolution_backward_weights::primitive_desc const wpd(
        {alg, src, wei, bia, dst, st, pad, pad}, attr(), eng_, fpd);
    it->second.fwd         = make(dnnl::convolution_forward(fpd), fpd);
    it->second.bwd_data    = make(dnnl::convolution_backward_data(dpd), dpd);
    it->second.bwd_weights = make(dnnl::convolution_backward_weights(wpd), wpd);
    return it->second;
  }
  /// @brief y = conv(x, w) + b.
  void conv_forward(conv_shape const& s, float const* x, float const* w, float const* b, float* y,
                    void* scratch)
  {
    auto const& l = conv(s);
    run(l.fwd,
        {{DNNL_ARG_SRC, mem(src_md(s), x)},
         {DNNL_ARG_WEIGHTS, mem(wei_md(s), w)},
         {DNNL_ARG_BIAS, mem(md({s.cout}, dt::f32, tag::x), b)},
         {DNNL_ARG_DST, mem(dst_md(s), y)}},
        scratch);
  }
  /// @brief dw, db from dy and x.
  void conv_backward_weights(conv_shape const& s, float const* dy, float const* x, float* dw,
                             float* db, void* scratch)
  {
    run(conv(s).bwd_weights,
        {{DNNL_ARG_SRC, mem(src_md(s), x)},
         {DNNL_ARG_DIFF_DST, mem(dst_md(s), dy)},
         {DNNL_ARG_DIFF_WEIGHTS, mem(wei_md(s), dw)},
         {DNNL_ARG_DIFF_BIAS, mem(md({s.cout}, dt::f32, tag::x), db)}},
        scratch);
  }
  /// @brief dx from dy and w.
  void conv_backward_data(conv_shape const& s, float const* dy, float const* w, float* dx,
                          void* scratch)
  {
    run(conv(s).bwd_data,
        {{DNNL_ARG_DIFF_DST, mem(dst_md(s), dy)},
         {DNNL_ARG_WEIGHTS, mem(wei_md(s), w)},
         {DNNL_ARG_DIFF_SRC, mem(src_md(s), dx)}},
        scratch);
  }
  /// @brief Scratch bytes of one pass of a convolution.
  std::size_t conv_scratch(conv_shape const& s, layer_pass pass)
  {
    return pick(conv(s), pass).scratch;
  }

  // ---- max pooling, 2x2 stride 2, with oneDNN's workspace
  /// @brief Primitives of a max pool over `s`.
  layer_prims const& pool(pool_shape const& s)
  {
    auto [it, fresh] = pools_.try_emplace(s);
    if (!fresh) { return it->second; }
    md const src = md({s.n, s.c, s.h, s.w}, dt::f32, tag::nchw);
    md const dst = md({s.n, s.c, s.h / 2, s.w / 2}, dt::f32, tag::nchw);
    dnnl::memory::dims const st{2, 2}, k{2, 2}, pad{0, 0};
    auto const alg = dnnl::algorithm::pooling_max;
    dnnl::pooling_forward::primitive_desc const fpd(
        {dnnl::prop_kind::forward_training, alg, src, dst, st, k, pad, pad}, attr(), eng_);
    dnnl::pooling_backward::primitive_desc const bpd({alg, src, dst, st, k, pad, pad}, attr(), eng_,
                                                     fpd);
    it->second.fwd      = make(dnnl::pooling_forward(fpd), fpd);
    it->second.bwd_data = make(dnnl::pooling_backward(bpd), bpd);
    it->second.ws_md    = fpd.workspace_desc();
    it->second.ws_bytes = it->second.ws_md.get_size();
    // index_of_window reads the workspace as one byte per output, in the outputs' order.
    if (it->second.ws_md != md({s.n, s.c, s.h / 2, s.w / 2}, dt::u8, tag::nchw)) {
      throw std::runtime_error(
          "train_cnn: oneDNN's max-pool workspace is not one u8 per output in NCHW order; "
          "this oneDNN build is not supported");
    }
    return it->second;
  }
  /// @brief y = maxpool(x) and PyTorch's indices of each window's maximum; `scratch` holds
  /// oneDNN's workspace, then the primitive's scratchpad (pool_scratch()).
  void pool_forward(pool_shape const& s, float const* x, float* y, std::int64_t* index,
                    void* scratch)
  {
    auto const& l = pool(s);
    auto* ws      = static_cast<std::uint8_t*>(scratch);
    run(l.fwd,
        {{DNNL_ARG_SRC, mem(md({s.n, s.c, s.h, s.w}, dt::f32, tag::nchw), x)},
         {DNNL_ARG_DST, mem(pooled_md(s), y)},
         {DNNL_ARG_WORKSPACE, mem(l.ws_md, ws)}},
        ws + padded(l.ws_bytes));
    indices_from_workspace(s, ws, index);
  }
  /// @brief dx from dy and the indices (scratch as pool_forward's).
  void pool_backward(pool_shape const& s, float const* dy, std::int64_t const* index, float* dx,
                     void* scratch)
  {
    auto const& l = pool(s);
    auto* ws      = static_cast<std::uint8_t*>(scratch);
    workspace_from_indices(s, index, ws);
    run(l.bwd_data,
        {{DNNL_ARG_DIFF_DST, mem(pooled_md(s), dy)},
         {DNNL_ARG_WORKSPACE, mem(l.ws_md, ws)},
         {DNNL_ARG_DIFF_SRC, mem(md({s.n, s.c, s.h, s.w}, dt::f32, tag::nchw), dx)}},
        ws + padded(l.ws_bytes));
  }
  /// @brief Scratch bytes pool_forward / pool_backward need: the workspace (padded to 64) and
  /// the pass's scratchpad.
  std::size_t pool_scratch(pool_shape const& s, layer_pass pass)
  {
    auto const& l = pool(s);
    return padded(l.ws_bytes) + pick(l, pass).scratch;
  }
  /// @brief PyTorch's max-pool indices (iy * w + ix in the plane) from oneDNN's workspace (the
  /// window position ky * 2 + kx of each output).
  static void indices_from_workspace(pool_shape const& s, std::uint8_t const* ws,
                                     std::int64_t* index)
  {
    int const oh = s.h / 2, ow = s.w / 2;
    std::size_t o = 0;
    for (std::size_t plane = 0; plane < std::size_t(s.n) * s.c; ++plane) {
      for (int y = 0; y < oh; ++y) {
        for (int x = 0; x < ow; ++x, ++o) {
          int const k = ws[o];
          index[o]    = std::int64_t(2 * y + k / 2) * s.w + (2 * x + k % 2);
        }
      }
    }
  }
  /// @brief oneDNN's workspace from PyTorch's max-pool indices (the inverse of the above).
  static void workspace_from_indices(pool_shape const& s, std::int64_t const* index,
                                     std::uint8_t* ws)
  {
    int const oh = s.h / 2, ow = s.w / 2;
    std::size_t o = 0;
    for (std::size_t plane = 0; plane < std::size_t(s.n) * s.c; ++plane) {
      for (int y = 0; y < oh; ++y) {
        for (int x = 0; x < ow; ++x, ++o) {
          std::int64_t const iy = index[o] / s.w, ix = index[o] % s.w;
          ws[o] = static_cast<std::uint8_t>((iy - 2 * y) * 2 + (ix - 2 * x));
        }
      }
    }
  }

  // ---- ReLU (its backward reads the output: only its sign matters)
  void relu_forward(std::size_t count, float const* x, float* y)
  {
    auto const& p = eltwise(count);
    md const d    = flat(count);
    run(p.fwd, {{DNNL_ARG_SRC, mem(d, x)}, {DNNL_ARG_DST, mem(d, y)}}, nullptr);
  }
  void relu_backward(std::size_t count, float const* dy, float const* y, float* dx)
  {
    auto const& p = eltwise(count);
    md const d    = flat(count);
    run(p.bwd_data,
        {{DNNL_ARG_DST, mem(d, y)},
         {DNNL_ARG_DIFF_DST, mem(d, dy)},
         {DNNL_ARG_DIFF_SRC, mem(d, dx)}},
        nullptr);
  }

  // ---- y = a + b
  void add(std::size_t count, float const* a, float const* b, float* y)
  {
    auto [it, fresh] = adds_.try_emplace(count);
    if (fresh) {
      md const d = flat(count);
      dnnl::binary::primitive_desc const pd({dnnl::algorithm::binary_add, d, d, d}, attr(), eng_);
      it->second = make(dnnl::binary(pd), pd);
    }
    md const d = flat(count);
    run(it->second,
        {{DNNL_ARG_SRC_0, mem(d, a)}, {DNNL_ARG_SRC_1, mem(d, b)}, {DNNL_ARG_DST, mem(d, y)}},
        nullptr);
  }

  // ---- batch normalization over N, H, W per channel (scale and shift)
  /// @brief Training: y, the batch mean and variance; inference (`training` false): y from the
  /// given mean and variance.
  void bn_forward(pool_shape const& s, bool training, float const* x, float const* scale,
                  float const* shift, float* y, float* mean, float* var, void* scratch)
  {
    auto const& p = bn(s);
    md const d    = md({s.n, s.c, s.h, s.w}, dt::f32, tag::nchw);
    md const c    = md({s.c}, dt::f32, tag::x);
    run(training ? p.fwd : p.bwd_weights,  // bwd_weights holds the inference primitive
        {{DNNL_ARG_SRC, mem(d, x)},
         {DNNL_ARG_DST, mem(d, y)},
         {DNNL_ARG_SCALE, mem(c, scale)},
         {DNNL_ARG_SHIFT, mem(c, shift)},
         {DNNL_ARG_MEAN, mem(c, mean)},
         {DNNL_ARG_VARIANCE, mem(c, var)}},
        scratch);
  }
  void bn_backward(pool_shape const& s, float const* dy, float const* x, float const* mean,
                   float const* var, float const* scale, float const* shift, float* dx,
                   float* dscale, float* dshift, void* scratch)
  {
    auto const& p = bn(s);
    md const d    = md({s.n, s.c, s.h, s.w}, dt::f32, tag::nchw);
    md const c    = md({s.c}, dt::f32, tag::x);
    run(p.bwd_data,
        {{DNNL_ARG_SRC, mem(d, x)},
         {DNNL_ARG_DIFF_DST, mem(d, dy)},
         {DNNL_ARG_MEAN, mem(c, mean)},
         {DNNL_ARG_VARIANCE, mem(c, var)},
         {DNNL_ARG_SCALE, mem(c, scale)},
         {DNNL_ARG_SHIFT, mem(c, shift)},  // oneDNN 2.6 asks for it with use_shift
         {DNNL_ARG_DIFF_SRC, mem(d, dx)},
         {DNNL_ARG_DIFF_SCALE, mem(c, dscale)},
         {DNNL_ARG_DIFF_SHIFT, mem(c, dshift)}},
        scratch);
  }
  /// @brief Scratch bytes bn_forward (training or not) / bn_backward need.
  std::size_t bn_scratch(pool_shape const& s, layer_pass pass)
  {
    auto const& p = bn(s);
    return pass == layer_pass::forward ? std::max(p.fwd.scratch, p.bwd_weights.scratch)
                                       : p.bwd_data.scratch;
  }
  /// @brief running = 0.9 running + 0.1 batch (`var`: the batch variance as bn_forward wrote it,
  /// biased).
  static void bn_running_update(int c, float const* mean, float const* var, float* run_mean,
                                float* run_var)
  {
    for (int i = 0; i < c; ++i) {
      run_mean[i] = 0.9f * run_mean[i] + 0.1f * mean[i];
      run_var[i]  = 0.9f * run_var[i] + 0.1f * var[i];
    }
  }

  // ---- fully connected: y (n x out) = x (n x in) w^T + b, w row-major out x in
  layer_prims const& linear(linear_shape const& s)
  {
    auto [it, fresh] = linears_.try_emplace(s);
    if (!fresh) { return it->second; }
    md const src = md({s.n, s.in}, dt::f32, tag::nc);
    md const dst = md({s.n, s.out}, dt::f32, tag::nc);
    md const wei = md({s.out, s.in}, dt::f32, tag::oi);
    md const bia = md({s.out}, dt::f32, tag::x);
    dnnl::inner_product_forward::primitive_desc const fpd(
        {dnnl::prop_kind::forward_training, src, wei, bia, dst}, attr(), eng_);
    dnnl::inner_product_backward_data::primitive_desc const dpd({src, wei, dst}, attr(), eng_, fpd);
    dnnl::inner_product_backward_weights::primitive_desc const wpd({src, wei, bia, dst}, attr(),
                                                                   eng_, fpd);
    it->second.fwd         = make(dnnl::inner_product_forward(fpd), fpd);
    it->second.bwd_data    = make(dnnl::inner_product_backward_data(dpd), dpd);
    it->second.bwd_weights = make(dnnl::inner_product_backward_weights(wpd), wpd);
    return it->second;
  }
  void linear_forward(linear_shape const& s, float const* x, float const* w, float const* b,
                      float* y, void* scratch)
  {
    auto const& l = linear(s);
    run(l.fwd,
        {{DNNL_ARG_SRC, mem(md({s.n, s.in}, dt::f32, tag::nc), x)},
         {DNNL_ARG_WEIGHTS, mem(md({s.out, s.in}, dt::f32, tag::oi), w)},
         {DNNL_ARG_BIAS, mem(md({s.out}, dt::f32, tag::x), b)},
         {DNNL_ARG_DST, mem(md({s.n, s.out}, dt::f32, tag::nc), y)}},
        scratch);
  }
  /// @brief dw, db from dy and x.
  void linear_backward_weights(linear_shape const& s, float const* dy, float const* x, float* dw,
                               float* db, void* scratch)
  {
    run(linear(s).bwd_weights,
        {{DNNL_ARG_SRC, mem(md({s.n, s.in}, dt::f32, tag::nc), x)},
         {DNNL_ARG_DIFF_DST, mem(md({s.n, s.out}, dt::f32, tag::nc), dy)},
         {DNNL_ARG_DIFF_WEIGHTS, mem(md({s.out, s.in}, dt::f32, tag::oi), dw)},
         {DNNL_ARG_DIFF_BIAS, mem(md({s.out}, dt::f32, tag::x), db)}},
        scratch);
  }
  /// @brief dx from dy and w.
  void linear_backward_data(linear_shape const& s, float const* dy, float const* w, float* dx,
                            void* scratch)
  {
    run(linear(s).bwd_data,
        {{DNNL_ARG_DIFF_DST, mem(md({s.n, s.out}, dt::f32, tag::nc), dy)},
         {DNNL_ARG_WEIGHTS, mem(md({s.out, s.in}, dt::f32, tag::oi), w)},
         {DNNL_ARG_DIFF_SRC, mem(md({s.n, s.in}, dt::f32, tag::nc), dx)}},
        scratch);
  }
  /// @brief Scratch bytes of one pass of a fully connected layer.
  std::size_t linear_scratch(linear_shape const& s, layer_pass pass)
  {
    return pick(linear(s), pass).scratch;
  }

  // ---- the loop's own arithmetic and copies (plain loops: the calling thread is the stream)
  /// @brief out = (in / 255 - mean) / std.
  static void normalize(std::size_t count, std::uint8_t const* in, float* out)
  {
    for (std::size_t i = 0; i < count; ++i) {
      out[i] = (float(in[i]) / 255.0f - pixel_mean) / pixel_std;
    }
  }
  /// @brief Softmax cross-entropy of n x classes logits: adds the batch's loss to *loss_sum and
  /// its correct predictions to *correct; dlogits (when not null) = (softmax - onehot) / n.
  static void cross_entropy(int n, int classes, float const* logits, std::uint8_t const* labels,
                            float* dlogits, double* loss_sum, unsigned long long* correct,
                            void* /*scratch*/)
  {
    for (int i = 0; i < n; ++i) {
      float const* z = logits + std::size_t(i) * classes;
      int const arg  = int(std::max_element(z, z + classes) - z);
      float const m  = z[arg];
      float sum      = 0.0f;
      for (int j = 0; j < classes; ++j) { sum += std::exp(z[j] - m); }
      *loss_sum += double(std::log(sum) - (z[labels[i]] - m));
      *correct += arg == labels[i] ? 1u : 0u;
      if (dlogits == nullptr) { continue; }
      for (int j = 0; j < classes; ++j) {
        dlogits[std::size_t(i) * classes + j] =
            (std::exp(z[j] - m) / sum - (j == labels[i] ? 1.0f : 0.0f)) / float(n);
      }
    }
  }
  /// @brief cross_entropy's scratch bytes: none on the CPU.
  static std::size_t cross_entropy_scratch(int /*n*/) { return 0; }
  /// @brief v = momentum v + g.
  static void sgd_momentum(std::size_t count, float momentum, float* v, float const* g)
  {
    for (std::size_t i = 0; i < count; ++i) { v[i] = momentum * v[i] + g[i]; }
  }
  /// @brief w -= lr v.
  static void sgd_step(std::size_t count, float lr, float* w, float const* v)
  {
    for (std::size_t i = 0; i < count; ++i) { w[i] -= lr * v[i]; }
  }
  static void zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }
  static void fill(float* p, std::size_t count, float value) { std::fill_n(p, count, value); }
  static void copy(void* dst, void const* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void upload(void* dst, void const* host, std::size_t bytes) { copy(dst, host, bytes); }
  static void download(void* host, void const* src, std::size_t bytes) { copy(host, src, bytes); }
  /// @brief The pixels and labels of samples `index` of `set`, in that order.
  static void stage(labelled_images const& set, std::span<std::size_t const> index,
                    std::uint8_t* images, std::uint8_t* labels)
  {
    std::size_t const pixels = set.rows * set.cols;
    for (std::size_t i = 0; i < index.size(); ++i) {
      std::copy_n(set.pixels.data() + index[i] * pixels, pixels, images + i * pixels);
      labels[i] = set.labels[index[i]];
    }
  }

 private:
  static dnnl::primitive_attr attr()
  {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }
  template <class P, class PD>
  static prim make(P p, PD const& pd)
  {
    return prim{std::move(p), pd.scratchpad_desc().get_size(), pd.scratchpad_desc()};
  }
  static std::size_t padded(std::size_t bytes) { return (bytes + 63) / 64 * 64; }
  static prim const& pick(layer_prims const& l, layer_pass pass)
  {
    return pass == layer_pass::forward         ? l.fwd
           : pass == layer_pass::backward_data ? l.bwd_data
                                               : l.bwd_weights;
  }
  static md flat(std::size_t count) { return md({dnnl::memory::dim(count)}, dt::f32, tag::x); }
  static md src_md(conv_shape const& s) { return md({s.n, s.cin, s.h, s.w}, dt::f32, tag::nchw); }
  static md dst_md(conv_shape const& s) { return md({s.n, s.cout, s.h, s.w}, dt::f32, tag::nchw); }
  static md wei_md(conv_shape const& s) { return md({s.cout, s.cin, 3, 3}, dt::f32, tag::oihw); }
  static md pooled_md(pool_shape const& s)
  {
    return md({s.n, s.c, s.h / 2, s.w / 2}, dt::f32, tag::nchw);
  }
  dnnl::memory mem(md const& d, void const* p) const
  {
    return dnnl::memory(d, eng_, const_cast<void*>(p));  // NOLINT: oneDNN takes void*
  }
  void run(prim const& p, std::unordered_map<int, dnnl::memory> args, void* scratch)
  {
    if (p.scratch != 0) {
      if (scratch == nullptr) {
        throw std::logic_error("train_cnn: a oneDNN primitive needs " + std::to_string(p.scratch) +
                               " scratch bytes and was given none");
      }
      args.emplace(DNNL_ARG_SCRATCHPAD, mem(p.scratch_md, scratch));
    }
    p.p.execute(strm_, args);
    strm_.wait();
  }
  layer_prims const& eltwise(std::size_t count)
  {
    auto [it, fresh] = relus_.try_emplace(count);
    if (!fresh) { return it->second; }
    md const d     = flat(count);
    auto const alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::primitive_desc const fpd(
        {dnnl::prop_kind::forward_training, alg, d, 0.0f, 0.0f}, attr(), eng_);
    dnnl::eltwise_backward::primitive_desc const bpd({alg, d, d, 0.0f, 0.0f}, attr(), eng_, fpd);
    it->second.fwd      = make(dnnl::eltwise_forward(fpd), fpd);
    it->second.bwd_data = make(dnnl::eltwise_backward(bpd), bpd);
    return it->second;
  }
  layer_prims const& bn(pool_shape const& s)
  {
    auto [it, fresh] = bns_.try_emplace(s);
    if (!fresh) { return it->second; }
    md const d       = md({s.n, s.c, s.h, s.w}, dt::f32, tag::nchw);
    auto const flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    dnnl::batch_normalization_forward::primitive_desc const fpd(
        {dnnl::prop_kind::forward_training, d, bn_epsilon, flags}, attr(), eng_);
    dnnl::batch_normalization_forward::primitive_desc const ipd(
        {dnnl::prop_kind::forward_inference, d, bn_epsilon,
         flags | dnnl::normalization_flags::use_global_stats},
        attr(), eng_);
    dnnl::batch_normalization_backward::primitive_desc const bpd(
        {dnnl::prop_kind::backward, d, d, bn_epsilon, flags}, attr(), eng_, fpd);
    it->second.fwd         = make(dnnl::batch_normalization_forward(fpd), fpd);
    it->second.bwd_weights = make(dnnl::batch_normalization_forward(ipd), ipd);
    it->second.bwd_data    = make(dnnl::batch_normalization_backward(bpd), bpd);
    return it->second;
  }

  static constexpr float bn_epsilon = 1e-5f;
  dnnl::engine eng_;
  dnnl::stream strm_;
  std::map<conv_shape, layer_prims> convs_;
  std::map<pool_shape, layer_prims> pools_;
  std::map<pool_shape, layer_prims> bns_;
  std::map<linear_shape, layer_prims> linears_;
  std::map<std::size_t, layer_prims> relus_;
  std::map<std::size_t, prim> adds_;
};

}  // namespace train_cnn
