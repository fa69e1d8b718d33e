// train_cnn's layer calls on the CPU: oneDNN primitives (convolution, max pooling with its
// workspace, ReLU, batch normalization, binary add, inner product; forward and backward) over
// plain NCHW float32 buffers that the caller owns (stash tensors). Softmax cross-entropy, SGD and
// the input normalisation are plain loops. Every primitive runs with a user scratchpad, so its
// scratch memory is a buffer the caller provides (a stash workspace tensor too).
// Deterministic: primitives are created once per shape and run on one thread (the program fixes
// OpenMP's thread count, see cpu_run.hpp), and oneDNN computes the same bits for the same
// primitive, shapes, ISA and thread count.
#pragma once

#include <dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

namespace train_cnn {

/// @brief A convolution's shape: 3x3, stride 1, padding 1 (the map keeps its size).
struct conv_shape {
  int n, cin, cout, h, w;
  auto operator<=>(conv_shape const&) const = default;
};
/// @brief A 2x2 stride-2 max pool's input shape.
struct pool_shape {
  int n, c, h, w;
  auto operator<=>(pool_shape const&) const = default;
};
/// @brief A fully connected layer's shape.
struct linear_shape {
  int n, in, out;
  auto operator<=>(linear_shape const&) const = default;
};

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
  /// @brief dw, db from dy and x; dx from dy and w when `dx` is not null.
  void conv_backward(conv_shape const& s, float const* dy, float const* x, float const* w,
                     float* dw, float* db, float* dx, void* scratch)
  {
    auto const& l = conv(s);
    run(l.bwd_weights,
        {{DNNL_ARG_SRC, mem(src_md(s), x)},
         {DNNL_ARG_DIFF_DST, mem(dst_md(s), dy)},
         {DNNL_ARG_DIFF_WEIGHTS, mem(wei_md(s), dw)},
         {DNNL_ARG_DIFF_BIAS, mem(md({s.cout}, dt::f32, tag::x), db)}},
        scratch);
    if (dx != nullptr) {
      run(l.bwd_data,
          {{DNNL_ARG_DIFF_DST, mem(dst_md(s), dy)},
           {DNNL_ARG_WEIGHTS, mem(wei_md(s), w)},
           {DNNL_ARG_DIFF_SRC, mem(src_md(s), dx)}},
          scratch);
    }
  }
  /// @brief Scratch bytes conv_forward / conv_backward need.
  std::size_t conv_scratch(conv_shape const& s, bool backward)
  {
    auto const& l = conv(s);
    return backward ? std::max(l.bwd_data.scratch, l.bwd_weights.scratch) : l.fwd.scratch;
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
  /// @brief y = maxpool(x); `ws` receives oneDNN's workspace (pool(s).ws_bytes bytes).
  void pool_forward(pool_shape const& s, float const* x, float* y, void* ws, void* scratch)
  {
    auto const& l = pool(s);
    run(l.fwd,
        {{DNNL_ARG_SRC, mem(md({s.n, s.c, s.h, s.w}, dt::f32, tag::nchw), x)},
         {DNNL_ARG_DST, mem(pooled_md(s), y)},
         {DNNL_ARG_WORKSPACE, mem(l.ws_md, ws)}},
        scratch);
  }
  /// @brief dx from dy and the workspace.
  void pool_backward(pool_shape const& s, float const* dy, void const* ws, float* dx, void* scratch)
  {
    auto const& l = pool(s);
    run(l.bwd_data,
        {{DNNL_ARG_DIFF_DST, mem(pooled_md(s), dy)},
         {DNNL_ARG_WORKSPACE, mem(l.ws_md, ws)},
         {DNNL_ARG_DIFF_SRC, mem(md({s.n, s.c, s.h, s.w}, dt::f32, tag::nchw), dx)}},
        scratch);
  }
  /// @brief Scratch bytes pool_forward / pool_backward need.
  std::size_t pool_scratch(pool_shape const& s, bool backward)
  {
    auto const& l = pool(s);
    return backward ? l.bwd_data.scratch : l.fwd.scratch;
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
  std::size_t bn_scratch(pool_shape const& s, bool backward)
  {
    auto const& p = bn(s);
    return backward ? p.bwd_data.scratch : std::max(p.fwd.scratch, p.bwd_weights.scratch);
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
  void linear_backward(linear_shape const& s, float const* dy, float const* x, float const* w,
                       float* dw, float* db, float* dx, void* scratch)
  {
    auto const& l = linear(s);
    md const src  = md({s.n, s.in}, dt::f32, tag::nc);
    md const dst  = md({s.n, s.out}, dt::f32, tag::nc);
    md const wei  = md({s.out, s.in}, dt::f32, tag::oi);
    run(l.bwd_weights,
        {{DNNL_ARG_SRC, mem(src, x)},
         {DNNL_ARG_DIFF_DST, mem(dst, dy)},
         {DNNL_ARG_DIFF_WEIGHTS, mem(wei, dw)},
         {DNNL_ARG_DIFF_BIAS, mem(md({s.out}, dt::f32, tag::x), db)}},
        scratch);
    if (dx != nullptr) {
      run(l.bwd_data,
          {{DNNL_ARG_DIFF_DST, mem(dst, dy)},
           {DNNL_ARG_WEIGHTS, mem(wei, w)},
           {DNNL_ARG_DIFF_SRC, mem(src, dx)}},
          scratch);
    }
  }
  std::size_t linear_scratch(linear_shape const& s, bool backward)
  {
    auto const& l = linear(s);
    return backward ? std::max(l.bwd_data.scratch, l.bwd_weights.scratch) : l.fwd.scratch;
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
