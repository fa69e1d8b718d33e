// train_cnn's network and training step, over a memory (stash tensors: ids, op() pointers) and a
// layer-ops backend (dnnl_ops on the CPU). The description (layers, shapes, parameter order and
// initialisation, which tensors are kept for backward and when each is freed) and the step
// (forward, backward over a tape, SGD with momentum) live here once; the backend only computes.
//
// Architectures (NCHW float32, width w: channels c1 = 32w, c2 = 64w, units u = 256w):
//   vgg:    [conv-ReLU-conv-ReLU-maxpool](c1) [conv-ReLU-conv-ReLU-maxpool](c2) fc(u)-ReLU-fc(10)
//   resnet: conv-BN-ReLU(c1) [conv-BN-ReLU-conv-BN + skip, ReLU] maxpool
//           conv-BN-ReLU(c2) [conv-BN-ReLU-conv-BN + skip, ReLU] maxpool  fc(u)-ReLU-fc(10)
// Max pools keep their indices (int64, PyTorch's layout; the op is aten::max_pool2d_with_indices)
// and their backward reads only those, so the ReLU output before a pool is read after the forward
// pass only by threshold_backward: stash's planner may send it as Gist's 1-bit mask and the
// indices as Gist's 4-bit argmax, both exact for these readers.
//
// Recompute: every layer op runs through run(), which hands the memory the op's kernel as a
// function of the op's pointers (reads, then writes): the first run and any re-run stash makes to
// rematerialise a dropped output (policies search, checkpoint, dtr) are the same call, so the
// re-run writes bitwise the same bytes. The ops carry their aten names, whose entries in stash's
// default recompute table (trace/recompute_semantics.hpp) are right for these kernels: the
// forward layers (convolution, native_batch_norm, relu, add.Tensor, max_pool2d_with_indices,
// addmm) and threshold_backward and clone are pure; batch norm's running statistics are updated
// by a separate op (running_stats_update, never re-run), so its re-run changes no state; ops that
// write the gradients or parameters, or accumulate in place, are refused by the write rules.
#pragma once

#include <stash_tools/train_cnn/dnnl_ops.hpp>
#include <stash_tools/train_cnn/idx_reader.hpp>
#include <stash_tools/train_cnn/options.hpp>

#include <stash/codec/pool_argmax.hpp>
#include <stash/offload/tensor_handle.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace train_cnn {

/// @brief The network's hyper-parameters.
struct cnn_config {
  cnn_arch arch      = cnn_arch::vgg;
  int width          = 1;
  int rows           = 28;
  int cols           = 28;
  int classes        = 10;
  float lr           = 0.02f;
  float momentum     = 0.9f;
  std::uint64_t seed = 1;
};

/// @brief Orders tensor ids for std::map: stash's tensor handles by (owner, slot, generation),
/// plain_memory's integers as they are.
struct id_less {
  template <class Id>
  bool operator()(Id const& a, Id const& b) const noexcept
  {
    return key(a) < key(b);
  }
  static std::uint64_t key(std::uint64_t v) noexcept { return v; }
  static std::tuple<std::uint64_t, std::uint32_t, std::uint32_t> key(
      stash::tensor_handle h) noexcept
  {
    return {h.owner(), h.index(), h.generation()};
  }
};

/// @brief Fashion-MNIST's training-set mean and standard deviation of pixel/255.
inline constexpr float pixel_mean = 0.2860f;
inline constexpr float pixel_std  = 0.3530f;

/// @brief The network over a memory `Mem` (host_memory) and layer calls `Ops` (dnnl_ops).
template <class Mem, class Ops>
class cnn {
 public:
  using id = typename Mem::id;

  cnn(Mem& mem, Ops& ops, cnn_config cfg, int max_batch) : mem_(mem), ops_(ops), cfg_(cfg)
  {
    if (cfg_.rows % 4 != 0 || cfg_.cols % 4 != 0) {
      throw std::runtime_error(
          "train_cnn: images must be a multiple of 4 pixels high and wide "
          "(two 2x2 poolings); got " +
          std::to_string(cfg_.rows) + "x" + std::to_string(cfg_.cols));
    }
    build_layers();
    grads_ =
        mem_.allocate(grad_floats_ * sizeof(float), stash::storage_kind::grad, "gradients.flat");
    auto p = mem_.op("init_gradients", {}, ids{grads_});
    std::memset(p[0], 0, grad_floats_ * sizeof(float));
    images_ =
        mem_.allocate(std::size_t(max_batch) * pixels(), stash::storage_kind::input, "images_u8");
    labels_ = mem_.allocate(std::size_t(max_batch), stash::storage_kind::input, "labels_u8");
  }
  cnn(cnn const&)            = delete;
  cnn& operator=(cnn const&) = delete;

  /// @brief One training step (forward, backward, SGD) on samples `index` of `set`, as one stash
  /// iteration.
  void train_step(labelled_images const& set, std::span<std::size_t const> index)
  {
    int const n = static_cast<int>(index.size());
    mem_.begin_iteration();
    mem_.phase(stash::phase::forward);
    stage(set, index);
    id const logits  = forward(n, true);
    id const dlogits = loss(n, logits, true);
    mem_.phase(stash::phase::backward);
    backward(n, logits, dlogits);
    mem_.phase(stash::phase::optimizer);
    for (auto* p : params()) { sgd(*p); }
    mem_.end_iteration();
  }

  /// @brief Forward only, counting correct predictions (not a stash iteration).
  void evaluate_batch(labelled_images const& set, std::span<std::size_t const> index)
  {
    int const n = static_cast<int>(index.size());
    stage(set, index);
    id const logits = forward(n, false);
    (void)loss(n, logits, false);
  }

  /// @brief Zeroes the loss and accuracy counters.
  void reset_counters()
  {
    loss_sum_ = 0;
    correct_  = 0;
  }
  /// @brief Loss sum and correct predictions since reset_counters().
  [[nodiscard]] std::pair<double, unsigned long long> counters() const
  {
    return {loss_sum_, correct_};
  }

  /// @brief Every weight and bias (and batch-norm running statistic) in a fixed order.
  std::vector<float> weights()
  {
    std::vector<float> out;
    auto take = [&](id t, std::size_t count) {
      auto p        = mem_.op("read_weights", ids{t}, {});
      auto const* f = static_cast<float const*>(p[0]);
      out.insert(out.end(), f, f + count);
    };
    for (auto* p : params()) {
      take(p->w, p->w_count);
      take(p->b, p->b_count);
    }
    for (auto const& b : bns_) {
      take(b.run_mean, std::size_t(b.c));
      take(b.run_var, std::size_t(b.c));
    }
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
  using ids  = std::vector<id>;
  using ptrs = std::span<void* const>;

  // Runs `kernel` on the op's pointers, and hands it to the memory to re-run the op (recompute).
  template <class Kernel>
  void run(std::string name, ids const& reads, ids const& writes, Kernel kernel)
  {
    auto const p = mem_.op(std::move(name), reads, writes, kernel);
    kernel(ptrs(p));
  }
  struct param {
    id w{}, b{}, vw{}, vb{};
    std::size_t w_count{0}, b_count{0};
    std::size_t dw_at{0}, db_at{0};  // offsets (floats) of the gradients in grads_
  };
  struct conv_layer {
    std::string name;
    int cin{}, cout{}, h{}, w{};
    param p;
  };
  struct bn_layer {  // p.w is the scale, p.b the shift
    std::string name;
    int c{}, h{}, w{};
    param p;
    id run_mean{}, run_var{};
  };
  struct fc_layer {
    std::string name;
    int in{}, out{};
    param p;
  };
  enum class node_kind : std::uint8_t { conv, bn, relu, pool, add, linear };
  // What backward needs of one forward op (the tape).
  struct node {
    node_kind kind{};
    int layer{-1};
    id x{}, y{}, a{}, b{};  // input, output; bn: mean, var; add: the two inputs; pool: indices
    int c{}, h{}, w{};      // relu / add: element count in c; pool: input shape
  };

  [[nodiscard]] std::size_t pixels() const { return std::size_t(cfg_.rows) * cfg_.cols; }

  // ---- description
  void build_layers()
  {
    std::mt19937_64 rng(cfg_.seed);
    int const c1 = 32 * cfg_.width, c2 = 64 * cfg_.width, u = 256 * cfg_.width;
    int h = cfg_.rows, w = cfg_.cols, cin = 1;
    auto conv = [&](std::string name, int cout) {
      conv_layer l{std::move(name), cin, cout, h, w, {}};
      l.p = make_param(l.name, std::size_t(cout) * cin * 9, std::sqrt(2.0f / float(cin * 9)),
                       std::size_t(cout), rng, false);
      convs_.push_back(std::move(l));
      cin = cout;
    };
    auto bn = [&](std::string name) {
      bn_layer l{std::move(name), cin, h, w, {}, {}, {}};
      l.p        = make_param(l.name, std::size_t(cin), 0.0f, std::size_t(cin), rng, true);
      l.run_mean = mem_.allocate(std::size_t(cin) * 4, stash::storage_kind::optstate,
                                 l.name + ".running_mean");
      l.run_var  = mem_.allocate(std::size_t(cin) * 4, stash::storage_kind::optstate,
                                 l.name + ".running_var");
      auto p     = mem_.op("init_" + l.name + ".running", {}, ids{l.run_mean, l.run_var});
      std::fill_n(static_cast<float*>(p[0]), cin, 0.0f);
      std::fill_n(static_cast<float*>(p[1]), cin, 1.0f);
      bns_.push_back(std::move(l));
    };
    if (cfg_.arch == cnn_arch::vgg) {
      for (int block = 0; block < 2; ++block) {
        std::string const b = "conv" + std::to_string(block + 1) + "_";
        conv(b + "1", block == 0 ? c1 : c2);
        conv(b + "2", block == 0 ? c1 : c2);
        h /= 2;
        w /= 2;
      }
    } else {
      for (int block = 0; block < 2; ++block) {
        std::string const b = "stage" + std::to_string(block + 1);
        conv(b + ".conv0", block == 0 ? c1 : c2);
        bn(b + ".bn0");
        conv(b + ".conv1", cin);
        bn(b + ".bn1");
        conv(b + ".conv2", cin);
        bn(b + ".bn2");
        h /= 2;
        w /= 2;
      }
    }
    flat_ = cin * h * w;
    fc_.push_back(fc_layer{"fc1", flat_, u, {}});
    fc_.back().p = make_param("fc1", std::size_t(u) * flat_, std::sqrt(2.0f / float(flat_)),
                              std::size_t(u), rng, false);
    fc_.push_back(fc_layer{"fc2", u, cfg_.classes, {}});
    fc_.back().p = make_param("fc2", std::size_t(cfg_.classes) * u, std::sqrt(1.0f / float(u)),
                              std::size_t(cfg_.classes), rng, false);
  }

  std::vector<param*> params()
  {
    std::vector<param*> v;
    for (auto& l : convs_) { v.push_back(&l.p); }
    for (auto& l : bns_) { v.push_back(&l.p); }
    for (auto& l : fc_) { v.push_back(&l.p); }
    return v;
  }

  // Weights normal(0, stddev) (a batch norm's scale: ones), biases and momentum zero.
  param make_param(std::string const& name, std::size_t w_count, float stddev, std::size_t b_count,
                   std::mt19937_64& rng, bool ones)
  {
    using stash::storage_kind;
    param p;
    p.w_count = w_count;
    p.b_count = b_count;
    p.w       = mem_.allocate(w_count * sizeof(float), storage_kind::param, name + ".weight");
    p.b       = mem_.allocate(b_count * sizeof(float), storage_kind::param, name + ".bias");
    auto const padded = [](std::size_t k) { return (k + 63) / 64 * 64; };
    p.dw_at           = grad_floats_;
    grad_floats_ += padded(w_count);
    p.db_at = grad_floats_;
    grad_floats_ += padded(b_count);
    p.vw =
        mem_.allocate(w_count * sizeof(float), storage_kind::optstate, name + ".weight.momentum");
    p.vb = mem_.allocate(b_count * sizeof(float), storage_kind::optstate, name + ".bias.momentum");
    auto ptr = mem_.op("init_" + name, {}, ids{p.w, p.b, p.vw, p.vb});
    auto* w  = static_cast<float*>(ptr[0]);
    if (ones) {
      std::fill_n(w, w_count, 1.0f);
    } else {
      std::normal_distribution<float> normal(0.0f, stddev);
      for (std::size_t i = 0; i < w_count; ++i) { w[i] = normal(rng); }
    }
    std::fill_n(static_cast<float*>(ptr[1]), b_count, 0.0f);
    std::fill_n(static_cast<float*>(ptr[2]), w_count, 0.0f);
    std::fill_n(static_cast<float*>(ptr[3]), b_count, 0.0f);
    return p;
  }

  // ---- tensors
  id act(std::size_t floats, std::string label, stash::storage_kind kind = stash::storage_kind::act)
  {
    return mem_.allocate(floats * sizeof(float), kind, std::move(label));
  }
  // A workspace tensor of `bytes` for one op (none when 0).
  std::optional<id> workspace(std::size_t bytes, std::string const& label)
  {
    if (bytes == 0) { return std::nullopt; }
    return mem_.allocate(bytes, stash::storage_kind::temp, label + ".workspace");
  }
  static ids with(ids v, std::optional<id> extra)
  {
    if (extra) { v.push_back(*extra); }
    return v;
  }
  void free_if(std::optional<id> t)
  {
    if (t) { mem_.deallocate(*t); }
  }
  // Backward keeps what its nodes saved; anything else is freed after its last forward use.
  void keep(id t) { ++saved_[t]; }
  void drop(id t)
  {
    if (auto it = saved_.find(t); it != saved_.end() && it->second > 0) { return; }
    mem_.deallocate(t);
  }
  void unkeep(id t)
  {
    if (--saved_[t] == 0) {
      saved_.erase(t);
      mem_.deallocate(t);
    }
  }

  // ---- forward
  void stage(labelled_images const& set, std::span<std::size_t const> index)
  {
    auto p      = mem_.op("stage_batch", {}, ids{images_, labels_});
    auto* img   = static_cast<std::uint8_t*>(p[0]);
    auto* label = static_cast<std::uint8_t*>(p[1]);
    for (std::size_t i = 0; i < index.size(); ++i) {
      std::copy_n(set.pixels.data() + index[i] * pixels(), pixels(), img + i * pixels());
      label[i] = set.labels[index[i]];
    }
  }

  id forward(int n, bool training)
  {
    training_ = training;
    tape_.clear();
    x0_ = act(std::size_t(n) * pixels(), "input", stash::storage_kind::input);
    {
      auto p        = mem_.op("aten::_to_copy", ids{images_}, ids{x0_});
      auto const* u = static_cast<std::uint8_t const*>(p[0]);
      auto* f       = static_cast<float*>(p[1]);
      for (std::size_t i = 0; i < std::size_t(n) * pixels(); ++i) {
        f[i] = (float(u[i]) / 255.0f - pixel_mean) / pixel_std;
      }
    }
    id x       = cfg_.arch == cnn_arch::vgg ? vgg_features(n, x0_) : resnet_features(n, x0_);
    id const h = linear(n, 0, x);
    drop(x);
    id const r = relu(h, std::size_t(n) * fc_[0].out, "fc1.relu");
    drop(h);
    id const logits = linear(n, 1, r);
    drop(r);
    return logits;
  }

  id vgg_features(int n, id x)
  {
    for (std::size_t i = 0; i < convs_.size(); ++i) {
      auto const& l = convs_[i];
      id const z    = conv(n, int(i), x);
      drop(x);
      id const a = relu(z, std::size_t(n) * l.cout * l.h * l.w, l.name + ".relu");
      drop(z);
      x = a;
      if (i % 2 == 1) {
        x = pool(n, a, l.cout, l.h, l.w, "pool" + std::to_string(i / 2 + 1));
        drop(a);
      }
    }
    return x;
  }

  // conv -> bn -> (relu)
  id conv_bn(int n, int i, id x, bool with_relu)
  {
    auto const& l = convs_[std::size_t(i)];
    id const z    = conv(n, i, x);
    id const y    = bn(n, i, z);
    drop(z);
    if (!with_relu) { return y; }
    id const a = relu(y, std::size_t(n) * l.cout * l.h * l.w, l.name + ".relu");
    drop(y);
    return a;
  }

  id resnet_features(int n, id x)
  {
    for (int stage = 0; stage < 2; ++stage) {
      int const i             = 3 * stage;
      auto const& l           = convs_[std::size_t(i)];
      std::size_t const count = std::size_t(n) * l.cout * l.h * l.w;
      id const a0             = conv_bn(n, i, x, true);
      drop(x);
      id const a1 = conv_bn(n, i + 1, a0, true);
      id const b2 = conv_bn(n, i + 2, a1, false);
      drop(a1);
      id const s = add(b2, a0, count, "stage" + std::to_string(stage + 1) + ".add");
      drop(b2);
      drop(a0);
      id const r = relu(s, count, "stage" + std::to_string(stage + 1) + ".relu");
      drop(s);
      x = pool(n, r, l.cout, l.h, l.w, "pool" + std::to_string(stage + 1));
      drop(r);
    }
    return x;
  }

  id conv(int n, int i, id x)
  {
    auto const& l = convs_[std::size_t(i)];
    conv_shape const s{n, l.cin, l.cout, l.h, l.w};
    id const y = act(std::size_t(n) * l.cout * l.h * l.w, l.name + ".out");
    auto ws    = workspace(ops_.conv_scratch(s, false), l.name);
    run("aten::convolution", ids{x, l.p.w, l.p.b}, with({y}, ws),
        [this, s, has_ws = ws.has_value()](ptrs p) {
          ops_.conv_forward(s, f(p[0]), f(p[1]), f(p[2]), f(p[3]), has_ws ? p[4] : nullptr);
        });
    free_if(ws);
    if (training_) {
      tape_.push_back({node_kind::conv, i, x, y, {}, {}, 0, 0, 0});
      keep(x);
    }
    return y;
  }

  id bn(int n, int i, id x)
  {
    // Batch norm i follows conv i (resnet only): bns_[i] has conv i's output shape.
    auto& l = bns_[std::size_t(i)];
    pool_shape const s{n, l.c, l.h, l.w};
    id const y    = act(std::size_t(n) * l.c * l.h * l.w, l.name + ".out");
    auto const ws = workspace(ops_.bn_scratch(s, false), l.name);
    if (!training_) {
      run("aten::native_batch_norm", ids{x, l.p.w, l.p.b, l.run_mean, l.run_var}, with({y}, ws),
          [this, s, has_ws = ws.has_value()](ptrs p) {
            ops_.bn_forward(s, false, f(p[0]), f(p[1]), f(p[2]), f(p[5]), f(p[3]), f(p[4]),
                            has_ws ? p[6] : nullptr);
          });
      free_if(ws);
      return y;
    }
    id const mean = act(std::size_t(l.c), l.name + ".mean", stash::storage_kind::temp);
    id const var  = act(std::size_t(l.c), l.name + ".var", stash::storage_kind::temp);
    // Training: batch statistics only (the running ones are updated below, by an op of their own,
    // so a re-run of this one is pure).
    run("aten::native_batch_norm", ids{x, l.p.w, l.p.b}, with({y, mean, var}, ws),
        [this, s, has_ws = ws.has_value()](ptrs p) {
          ops_.bn_forward(s, true, f(p[0]), f(p[1]), f(p[2]), f(p[3]), f(p[4]), f(p[5]),
                          has_ws ? p[6] : nullptr);
        });
    free_if(ws);
    {
      // running = 0.9 running + 0.1 batch (the batch variance as oneDNN computes it, biased)
      auto p = mem_.op("running_stats_update", ids{mean, var}, ids{l.run_mean, l.run_var});
      for (int c = 0; c < l.c; ++c) {
        f(p[2])[c] = 0.9f * f(p[2])[c] + 0.1f * f(p[0])[c];
        f(p[3])[c] = 0.9f * f(p[3])[c] + 0.1f * f(p[1])[c];
      }
    }
    tape_.push_back({node_kind::bn, i, x, y, mean, var, 0, 0, 0});
    keep(x);
    keep(mean);
    keep(var);
    drop(mean);
    drop(var);
    return y;
  }

  id relu(id x, std::size_t count, std::string const& label)
  {
    id const y = act(count, label);
    run("aten::relu", ids{x}, ids{y},
        [this, count](ptrs p) { ops_.relu_forward(count, f(p[0]), f(p[1])); });
    if (training_) {
      tape_.push_back({node_kind::relu, -1, x, y, {}, {}, int(count), 0, 0});
      keep(y);
    }
    return y;
  }

  id add(id a, id b, std::size_t count, std::string const& label)
  {
    id const y = act(count, label);
    run("aten::add.Tensor", ids{a, b}, ids{y},
        [this, count](ptrs p) { ops_.add(count, f(p[0]), f(p[1]), f(p[2])); });
    if (training_) { tape_.push_back({node_kind::add, -1, {}, y, a, b, int(count), 0, 0}); }
    return y;
  }

  id pool(int n, id x, int c, int h, int w, std::string const& label)
  {
    pool_shape const s{n, c, h, w};
    std::size_t const outputs = std::size_t(n) * c * (h / 2) * (w / 2);
    id const y                = act(outputs, label + ".out");
    stash::pool_geometry const geometry{
        std::size_t(n) * c, std::size_t(h), std::size_t(w), 2, 2, 2, 2};
    id const index = mem_.allocate(outputs * sizeof(std::int64_t), stash::storage_kind::act,
                                   label + ".indices", geometry);
    auto const ws  = workspace(ops_.pool(s).ws_bytes, label + ".dnnl");
    auto const sc  = workspace(ops_.pool_scratch(s, false), label);
    run("aten::max_pool2d_with_indices", ids{x}, with(with({y, index}, ws), sc),
        [this, s, has_sc = sc.has_value()](ptrs p) {
          ops_.pool_forward(s, f(p[0]), f(p[1]), p[3], has_sc ? p[4] : nullptr);
          Ops::indices_from_workspace(s, static_cast<std::uint8_t const*>(p[3]),
                                      static_cast<std::int64_t*>(p[2]));
        });
    free_if(sc);
    free_if(ws);
    if (training_) {
      tape_.push_back({node_kind::pool, -1, x, y, index, {}, c, h, w});
      keep(index);
    }
    drop(index);
    return y;
  }

  id linear(int n, int i, id x)
  {
    auto const& l = fc_[std::size_t(i)];
    linear_shape const s{n, l.in, l.out};
    id const y = act(std::size_t(n) * l.out, l.name + ".out");
    auto ws    = workspace(ops_.linear_scratch(s, false), l.name);
    run("aten::addmm", ids{x, l.p.w, l.p.b}, with({y}, ws),
        [this, s, has_ws = ws.has_value()](ptrs p) {
          ops_.linear_forward(s, f(p[0]), f(p[1]), f(p[2]), f(p[3]), has_ws ? p[4] : nullptr);
        });
    free_if(ws);
    if (training_) {
      tape_.push_back({node_kind::linear, i, x, y, {}, {}, 0, 0, 0});
      keep(x);
    }
    return y;
  }

  // Softmax cross-entropy: the loss and accuracy counters, and (training) dlogits = (softmax -
  // onehot) / n.
  id loss(int n, id logits, bool training)
  {
    int const k = cfg_.classes;
    std::optional<id> d;
    if (training) { d = act(std::size_t(n) * k, "fc2.out.grad", stash::storage_kind::temp); }
    {
      auto p        = mem_.op("aten::cross_entropy_loss", ids{logits, labels_}, with({}, d));
      auto const* z = f(p[0]);
      auto const* y = static_cast<std::uint8_t const*>(p[1]);
      for (int i = 0; i < n; ++i) {
        float const* zi = z + std::size_t(i) * k;
        int const arg   = int(std::max_element(zi, zi + k) - zi);
        float const m   = zi[arg];
        float sum       = 0.0f;
        for (int j = 0; j < k; ++j) { sum += std::exp(zi[j] - m); }
        loss_sum_ += double(std::log(sum) - (zi[y[i]] - m));
        correct_ += arg == y[i] ? 1u : 0u;
        if (d) {
          for (int j = 0; j < k; ++j) {
            f(p[2])[std::size_t(i) * k + j] =
                (std::exp(zi[j] - m) / sum - (j == y[i] ? 1.0f : 0.0f)) / float(n);
          }
        }
      }
    }
    mem_.deallocate(
        logits);  // backward needs only dlogits (its id stays the key of their gradient)
    return d.value_or(id{});
  }

  // ---- backward
  void backward(int n, id logits, id dlogits)
  {
    std::map<id, id, id_less> grad{{logits, dlogits}};
    for (std::size_t k = tape_.size(); k-- > 0;) {
      node const& e = tape_[k];
      auto const it = grad.find(e.y);
      if (it == grad.end()) {
        throw std::logic_error("train_cnn: a node's output has no gradient");
      }
      id const dy = it->second;
      grad.erase(it);
      switch (e.kind) {
        case node_kind::conv:
          conv_backward(n, e, dy, grad);
          break;
        case node_kind::bn:
          bn_backward(n, e, dy, grad);
          break;
        case node_kind::relu:
          relu_backward(e, dy, grad);
          break;
        case node_kind::pool:
          pool_backward(n, e, dy, grad);
          break;
        case node_kind::linear:
          linear_backward(n, e, dy, grad);
          break;
        case node_kind::add: {
          id const copy = act(std::size_t(e.c), "add.grad", stash::storage_kind::temp);
          run("aten::clone", ids{dy}, ids{copy},
              [bytes = std::size_t(e.c) * sizeof(float)](ptrs p) {
                std::memcpy(p[1], p[0], bytes);
              });
          accumulate(grad, e.a, dy, e.c);
          accumulate(grad, e.b, copy, e.c);
          continue;  // dy lives on as a's gradient
        }
      }
      mem_.deallocate(dy);
    }
    for (auto [t, g] : grad) { mem_.deallocate(g); }  // the input's: never computed, none left
  }

  // grad[x] += dx (or = dx, taking it over).
  void accumulate(std::map<id, id, id_less>& grad, id x, id dx, int count)
  {
    auto [it, fresh] = grad.try_emplace(x, dx);
    if (fresh) { return; }
    {
      auto p = mem_.op("aten::add_.Tensor", ids{it->second, dx}, ids{it->second});
      ops_.add(std::size_t(count), f(p[0]), f(p[1]), f(p[2]));
    }
    mem_.deallocate(dx);
  }

  void conv_backward(int n, node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    auto const& l = convs_[std::size_t(e.layer)];
    conv_shape const s{n, l.cin, l.cout, l.h, l.w};
    std::size_t const count = std::size_t(n) * l.cin * l.h * l.w;
    std::optional<id> dx;
    if (e.x != x0_) { dx = act(count, l.name + ".in.grad", stash::storage_kind::temp); }
    auto ws = workspace(ops_.conv_scratch(s, true), l.name + ".backward");
    {
      auto p =
          mem_.op("aten::convolution_backward", ids{dy, e.x, l.p.w}, with(with({grads_}, dx), ws));
      float* g = f(p[3]);
      ops_.conv_backward(s, f(p[0]), f(p[1]), f(p[2]), g + l.p.dw_at, g + l.p.db_at,
                         dx ? f(p[4]) : nullptr, ws ? p[dx ? 5 : 4] : nullptr);
    }
    free_if(ws);
    unkeep(e.x);
    if (dx) { accumulate(grad, e.x, *dx, int(count)); }
  }

  void bn_backward(int n, node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    auto const& l = bns_[std::size_t(e.layer)];
    pool_shape const s{n, l.c, l.h, l.w};
    std::size_t const count = std::size_t(n) * l.c * l.h * l.w;
    id const dx             = act(count, l.name + ".in.grad", stash::storage_kind::temp);
    auto const ws           = workspace(ops_.bn_scratch(s, true), l.name + ".backward");
    {
      auto p   = mem_.op("aten::native_batch_norm_backward", ids{dy, e.x, e.a, e.b, l.p.w, l.p.b},
                         with({grads_, dx}, ws));
      float* g = f(p[6]);
      ops_.bn_backward(s, f(p[0]), f(p[1]), f(p[2]), f(p[3]), f(p[4]), f(p[5]), f(p[7]),
                       g + l.p.dw_at, g + l.p.db_at, ws ? p[8] : nullptr);
    }
    free_if(ws);
    unkeep(e.x);
    unkeep(e.a);
    unkeep(e.b);
    accumulate(grad, e.x, dx, int(count));
  }

  void relu_backward(node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    id const dx = act(std::size_t(e.c), "relu.in.grad", stash::storage_kind::temp);
    // Reads {dy, y}: y is threshold_backward's `self`, whose sign is all it needs.
    run("aten::threshold_backward", ids{dy, e.y}, ids{dx},
        [this, count = std::size_t(e.c)](ptrs p) {
          ops_.relu_backward(count, f(p[0]), f(p[1]), f(p[2]));
        });
    unkeep(e.y);
    accumulate(grad, e.x, dx, e.c);
  }

  void pool_backward(int n, node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    pool_shape const s{n, e.c, e.h, e.w};
    std::size_t const count = std::size_t(n) * e.c * e.h * e.w;
    id const dx             = act(count, "pool.in.grad", stash::storage_kind::temp);
    auto const ws           = workspace(ops_.pool(s).ws_bytes, "pool.backward.dnnl");
    auto const sc           = workspace(ops_.pool_scratch(s, true), "pool.backward");
    {
      auto p =
          mem_.op("aten::max_pool2d_with_indices_backward", ids{dy, e.a}, with(with({dx}, ws), sc));
      Ops::workspace_from_indices(s, static_cast<std::int64_t const*>(p[1]),
                                  static_cast<std::uint8_t*>(p[3]));
      ops_.pool_backward(s, f(p[0]), p[3], f(p[2]), sc ? p[4] : nullptr);
    }
    free_if(sc);
    free_if(ws);
    unkeep(e.a);
    accumulate(grad, e.x, dx, int(count));
  }

  void linear_backward(int n, node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    auto const& l = fc_[std::size_t(e.layer)];
    linear_shape const s{n, l.in, l.out};
    id const dx = act(std::size_t(n) * l.in, l.name + ".in.grad", stash::storage_kind::temp);
    auto ws     = workspace(ops_.linear_scratch(s, true), l.name + ".backward");
    {
      auto p   = mem_.op("aten::addmm_backward", ids{dy, e.x, l.p.w}, with({grads_, dx}, ws));
      float* g = f(p[3]);
      ops_.linear_backward(s, f(p[0]), f(p[1]), f(p[2]), g + l.p.dw_at, g + l.p.db_at, f(p[4]),
                           ws ? p[5] : nullptr);
    }
    free_if(ws);
    unkeep(e.x);
    accumulate(grad, e.x, dx, n * l.in);
  }

  // ---- optimizer: v = momentum v + g; w -= lr v
  void sgd(param& p)
  {
    auto ptr      = mem_.op("aten::_foreach_sgd_momentum", ids{grads_}, ids{p.w, p.vw, p.b, p.vb});
    auto const* g = f(ptr[0]);
    auto step     = [&](float* w, float* v, float const* gr, std::size_t count) {
      for (std::size_t i = 0; i < count; ++i) {
        v[i] = cfg_.momentum * v[i] + gr[i];
        w[i] -= cfg_.lr * v[i];
      }
    };
    step(f(ptr[1]), f(ptr[2]), g + p.dw_at, p.w_count);
    step(f(ptr[3]), f(ptr[4]), g + p.db_at, p.b_count);
  }

  static float* f(void* p) { return static_cast<float*>(p); }

  Mem& mem_;
  Ops& ops_;
  cnn_config cfg_;
  std::vector<conv_layer> convs_;
  std::vector<bn_layer> bns_;
  std::vector<fc_layer> fc_;
  int flat_{0};
  id grads_{}, images_{}, labels_{}, x0_{};
  std::size_t grad_floats_{0};
  bool training_{false};
  std::vector<node> tape_;
  std::map<id, int, id_less> saved_;
  double loss_sum_{0};
  unsigned long long correct_{0};
};

}  // namespace train_cnn
