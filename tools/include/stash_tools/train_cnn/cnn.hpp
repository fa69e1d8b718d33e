// train_cnn's network and training step, shared by the CPU build (train_cnn_cpu: dnnl_ops, over
// host_memory or plain_memory) and the CUDA build (train_cnn: cudnn_ops, over activation_memory,
// examples/train_cnn/). The description (layers, shapes, parameter order and initialisation,
// which tensors are kept for backward and when each is freed) and the step (forward, backward over
// a tape, SGD with momentum) live here once; only the layer calls differ (`Ops`).
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
// Gradients and SGD with momentum (v = momentum v + g; w -= lr v): one gradient tensor per
// parameter (weight and bias each), allocated for the backward op that writes it, folded into the
// momentum at once (v = momentum v + g, an op of its own) and freed, so no op holds the gradients
// of layers it does not touch; the step (w -= lr v) runs after backward, once per tensor. So the
// momentum is read inside the step too, and stash may move it out between its two uses, across the
// backward pass. The values are those of a plain SGD step after backward, bit for bit. The
// backward of a convolution or a fully connected layer is two ops, to the parameters first (reads
// dy and x) and then to the input (reads dy and w): x may go before dx is allocated, and each
// op's working set is the smaller one.
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
//
// Ops, the layer calls (every pointer is a tensor's, valid for the op that handed it out; every
// call is ordered on the memory's stream, the CPU's being the calling thread):
//   conv_forward(s, x, w, b, y, scratch), conv_backward_weights(s, dy, x, dw, db, scratch),
//   conv_backward_data(s, dy, w, dx, scratch), conv_scratch(s, pass);
//   pool_forward(s, x, y, index, scratch), pool_backward(s, dy, index, dx, scratch),
//   pool_scratch(s, pass): 2x2 max pooling with PyTorch's int64 indices;
//   relu_forward(count, x, y), relu_backward(count, dy, y, dx), add(count, a, b, y) (y may
//   be a);
//   bn_forward(s, training, x, scale, shift, y, mean, stat, scratch) (training: writes the batch
//   mean and the backend's statistic; inference: reads the running mean and variance),
//   bn_backward(s, dy, x, mean, stat, scale, shift, dx, dscale, dshift, scratch), bn_scratch(s,
//   pass), bn_running_update(c, mean, stat, run_mean, run_var) (0.9 running + 0.1 batch);
//   linear_forward(s, x, w, b, y, scratch), linear_backward_weights(s, dy, x, dw, db, scratch),
//   linear_backward_data(s, dy, w, dx, scratch), linear_scratch(s, pass);
//   normalize(count, u8 in, out); cross_entropy(n, classes, logits, labels, dlogits or null,
//   loss_sum, correct, scratch) (adds the batch's loss and correct count),
//   cross_entropy_scratch(n); sgd_momentum(count, momentum, v, g) (v = momentum v + g),
//   sgd_step(count, lr, w, v) (w -= lr v); zero(p, bytes), fill(p, count, value), copy(dst, src,
//   bytes); upload(dst, host, bytes) and download(host, src, bytes) (the host buffer is free or
//   filled at return); stage(set, index, images, labels) (the batch's pixels and labels).
#pragma once

#include <stash_tools/train_cnn/idx_reader.hpp>
#include <stash_tools/train_cnn/layer_shapes.hpp>
#include <stash_tools/train_cnn/options.hpp>
#include <stash_tools/train_cnn/tensor_data.hpp>

#include <stash/codec/pool_argmax.hpp>
#include <stash/offload/tensor_handle.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/trace/trace.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
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

/// @brief The network a command line asks for, on images of `data`'s size.
[[nodiscard]] inline cnn_config config_of(options const& o, dataset const& data)
{
  cnn_config c;
  c.arch     = o.arch;
  c.width    = o.width;
  c.rows     = int(data.train.rows);
  c.cols     = int(data.train.cols);
  c.classes  = int(dataset::classes);
  c.lr       = float(o.lr);
  c.momentum = float(o.momentum);
  c.seed     = o.seed;
  return c;
}

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

/// @brief One parameter's gradients of one step (weight, bias) and their element counts: what a
/// data-parallel run averages over its ranks, as soon as backward has written them.
using gradient_hook =
    std::function<void(std::span<void* const> grads, std::span<std::size_t const> counts)>;

/// @brief The network over a memory `Mem` (host_memory, plain_memory, activation_memory) and
/// layer calls `Ops` (dnnl_ops, cudnn_ops): see the file comment.
/// @tparam Mem allocate(bytes, kind, label[, tensor_data]), op(name, reads, writes[, kernel]),
/// deallocate, begin_iteration, end_iteration, phase; `id` its tensor type.
/// @tparam Ops the layer calls listed in the file comment.
template <class Mem, class Ops>
class cnn {
 public:
  using id = typename Mem::id;

  /// @brief Builds the network over `mem` for batches of up to `max_batch`; with `on_gradients`,
  /// each step hands every parameter's gradients to it (data parallelism) in an op that writes
  /// them, between the backward op that computes them and the momentum update that reads them.
  cnn(Mem& mem, Ops& ops, cnn_config cfg, int max_batch, gradient_hook on_gradients = {})
      : mem_(mem), ops_(ops), cfg_(cfg), on_gradients_(std::move(on_gradients))
  {
    if (cfg_.rows % 4 != 0 || cfg_.cols % 4 != 0) {
      throw std::runtime_error(
          "train_cnn: images must be a multiple of 4 pixels high and wide "
          "(two 2x2 poolings); got " +
          std::to_string(cfg_.rows) + "x" + std::to_string(cfg_.cols));
    }
    build_layers();
    // Not floats: a lossy codec must not read them (see tensor_data.hpp).
    using stash::element_type;
    images_   = mem_.allocate(std::size_t(max_batch) * pixels(), stash::storage_kind::input,
                              "images_u8", tensor_data{element_type::u8});
    labels_   = mem_.allocate(std::size_t(max_batch), stash::storage_kind::input, "labels_u8",
                              tensor_data{element_type::u8});
    loss_sum_ = mem_.allocate(sizeof(double), stash::storage_kind::temp, "loss_sum",
                              tensor_data{element_type::f64});
    correct_  = mem_.allocate(sizeof(unsigned long long), stash::storage_kind::temp, "correct",
                              tensor_data{element_type::u64});
    reset_counters();
  }
  cnn(cnn const&)            = delete;
  cnn& operator=(cnn const&) = delete;

  /// @brief One training step (forward, backward, SGD) on samples `index` of `set`, as one stash
  /// iteration. The batches of one run must all have the same size (a new size re-records).
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
    for (auto* p : params()) { sgd_step(*p); }
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
    auto p = mem_.op("zero_counters", {}, ids{loss_sum_, correct_});
    ops_.zero(p[0], sizeof(double));
    ops_.zero(p[1], sizeof(unsigned long long));
  }
  /// @brief Loss sum and correct predictions since reset_counters() (waits for them). With
  /// `combine`, that runs first on the counters' pointers, in an op of its own (a data-parallel
  /// run sums them over its ranks there).
  [[nodiscard]] std::pair<double, unsigned long long> counters(
      std::function<void(double*, unsigned long long*)> const& combine = {})
  {
    if (combine) {
      auto p = mem_.op("combine_counters", {}, ids{loss_sum_, correct_});
      combine(static_cast<double*>(p[0]), static_cast<unsigned long long*>(p[1]));
    }
    double loss             = 0;
    unsigned long long good = 0;
    auto p                  = mem_.op("read_counters", ids{loss_sum_, correct_}, {});
    ops_.download(&loss, p[0], sizeof loss);
    ops_.download(&good, p[1], sizeof good);
    return {loss, good};
  }

  /// @brief Every weight and bias (and batch-norm running statistic) in a fixed order, copied
  /// to the host.
  std::vector<float> weights()
  {
    std::vector<float> out;
    auto take = [&](id t, std::size_t count) {
      std::size_t const at = out.size();
      out.resize(at + count);
      auto p = mem_.op("read_weights", ids{t}, {});
      ops_.download(out.data() + at, p[0], count * sizeof(float));
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
    std::string name;
    id w{}, b{}, vw{}, vb{};
    id dw{}, db{};  // this step's gradients: from the backward op to fold_gradients()
    std::size_t w_count{0}, b_count{0};
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
    id x{}, y{}, a{}, b{};  // input, output; bn: mean, stat; add: the two inputs; pool: indices
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
      ops_.fill(f(p[0]), std::size_t(cin), 0.0f);
      ops_.fill(f(p[1]), std::size_t(cin), 1.0f);
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
    p.name    = name;
    p.w_count = w_count;
    p.b_count = b_count;
    p.w       = mem_.allocate(w_count * sizeof(float), storage_kind::param, name + ".weight");
    p.b       = mem_.allocate(b_count * sizeof(float), storage_kind::param, name + ".bias");
    p.vw =
        mem_.allocate(w_count * sizeof(float), storage_kind::optstate, name + ".weight.momentum");
    p.vb = mem_.allocate(b_count * sizeof(float), storage_kind::optstate, name + ".bias.momentum");
    std::vector<float> host(w_count, 1.0f);
    if (!ones) {
      std::normal_distribution<float> normal(0.0f, stddev);
      for (auto& x : host) { x = normal(rng); }
    }
    auto ptr = mem_.op("init_" + name, {}, ids{p.w, p.b, p.vw, p.vb});
    ops_.upload(ptr[0], host.data(), w_count * sizeof(float));
    ops_.zero(ptr[1], b_count * sizeof(float));
    ops_.zero(ptr[2], w_count * sizeof(float));
    ops_.zero(ptr[3], b_count * sizeof(float));
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
    // Opaque bytes of the library's own: no codec may read them as floats.
    return mem_.allocate(bytes, stash::storage_kind::temp, label + ".workspace",
                         tensor_data{stash::element_type::u8});
  }
  static ids with(ids v, std::optional<id> extra)
  {
    if (extra) { v.push_back(*extra); }
    return v;
  }
  // The pointer of an optional tensor that follows `at` others in an op's pointers.
  static void* opt(ptrs p, std::optional<id> const& t, std::size_t at)
  {
    return t ? p[at] : nullptr;
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
  // This step's gradient tensors of `p` (freed by sgd()).
  void allocate_gradients(param& p)
  {
    p.dw = mem_.allocate(p.w_count * sizeof(float), stash::storage_kind::grad,
                         p.name + ".weight.grad");
    p.db =
        mem_.allocate(p.b_count * sizeof(float), stash::storage_kind::grad, p.name + ".bias.grad");
  }

  // ---- forward
  void stage(labelled_images const& set, std::span<std::size_t const> index)
  {
    auto p = mem_.op("stage_batch", {}, ids{images_, labels_});
    ops_.stage(set, index, static_cast<std::uint8_t*>(p[0]), static_cast<std::uint8_t*>(p[1]));
  }

  id forward(int n, bool training)
  {
    training_ = training;
    tape_.clear();
    x0_ = act(std::size_t(n) * pixels(), "input", stash::storage_kind::input);
    {
      auto p = mem_.op("aten::_to_copy", ids{images_}, ids{x0_});
      ops_.normalize(std::size_t(n) * pixels(), static_cast<std::uint8_t const*>(p[0]), f(p[1]));
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
    id const y    = act(std::size_t(n) * l.cout * l.h * l.w, l.name + ".out");
    auto const ws = workspace(ops_.conv_scratch(s, layer_pass::forward), l.name);
    run("aten::convolution", ids{x, l.p.w, l.p.b}, with({y}, ws), [this, s, ws](ptrs p) {
      ops_.conv_forward(s, f(p[0]), f(p[1]), f(p[2]), f(p[3]), opt(p, ws, 4));
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
    auto const ws = workspace(ops_.bn_scratch(s, layer_pass::forward), l.name);
    if (!training_) {
      run("aten::native_batch_norm", ids{x, l.p.w, l.p.b, l.run_mean, l.run_var}, with({y}, ws),
          [this, s, ws](ptrs p) {
            ops_.bn_forward(s, false, f(p[0]), f(p[1]), f(p[2]), f(p[5]), f(p[3]), f(p[4]),
                            opt(p, ws, 6));
          });
      free_if(ws);
      return y;
    }
    id const mean = act(std::size_t(l.c), l.name + ".mean", stash::storage_kind::temp);
    id const stat = act(std::size_t(l.c), l.name + ".var", stash::storage_kind::temp);
    // Training: batch statistics only (the running ones are updated below, by an op of their own,
    // so a re-run of this one is pure).
    run("aten::native_batch_norm", ids{x, l.p.w, l.p.b}, with({y, mean, stat}, ws),
        [this, s, ws](ptrs p) {
          ops_.bn_forward(s, true, f(p[0]), f(p[1]), f(p[2]), f(p[3]), f(p[4]), f(p[5]),
                          opt(p, ws, 6));
        });
    free_if(ws);
    {
      auto p = mem_.op("running_stats_update", ids{mean, stat}, ids{l.run_mean, l.run_var});
      ops_.bn_running_update(l.c, f(p[0]), f(p[1]), f(p[2]), f(p[3]));
    }
    tape_.push_back({node_kind::bn, i, x, y, mean, stat, 0, 0, 0});
    keep(x);
    keep(mean);
    keep(stat);
    drop(mean);
    drop(stat);
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
                                   label + ".indices", pool_indices(geometry));
    auto const ws  = workspace(ops_.pool_scratch(s, layer_pass::forward), label);
    run("aten::max_pool2d_with_indices", ids{x}, with({y, index}, ws), [this, s, ws](ptrs p) {
      ops_.pool_forward(s, f(p[0]), f(p[1]), static_cast<std::int64_t*>(p[2]), opt(p, ws, 3));
    });
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
    id const y    = act(std::size_t(n) * l.out, l.name + ".out");
    auto const ws = workspace(ops_.linear_scratch(s, layer_pass::forward), l.name);
    run("aten::addmm", ids{x, l.p.w, l.p.b}, with({y}, ws), [this, s, ws](ptrs p) {
      ops_.linear_forward(s, f(p[0]), f(p[1]), f(p[2]), f(p[3]), opt(p, ws, 4));
    });
    free_if(ws);
    if (training_) {
      tape_.push_back({node_kind::linear, i, x, y, {}, {}, 0, 0, 0});
      keep(x);
    }
    return y;
  }

  // Softmax cross-entropy: adds to the loss and accuracy counters, and (training) dlogits =
  // (softmax - onehot) / n.
  id loss(int n, id logits, bool training)
  {
    int const k = cfg_.classes;
    std::optional<id> d;
    if (training) { d = act(std::size_t(n) * k, "fc2.out.grad", stash::storage_kind::temp); }
    auto const ws = workspace(ops_.cross_entropy_scratch(n), "cross_entropy");
    {
      auto p = mem_.op("aten::cross_entropy_loss", ids{logits, labels_},
                       with(with({loss_sum_, correct_}, d), ws));
      ops_.cross_entropy(n, k, f(p[0]), static_cast<std::uint8_t const*>(p[1]),
                         d ? f(p[4]) : nullptr, static_cast<double*>(p[2]),
                         static_cast<unsigned long long*>(p[3]), opt(p, ws, d ? 5 : 4));
    }
    free_if(ws);
    // Backward needs only dlogits (the logits' id stays the key of their gradient).
    mem_.deallocate(logits);
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
          continue;  // relu_backward freed dy
        case node_kind::pool:
          pool_backward(n, e, dy, grad);
          break;
        case node_kind::linear:
          linear_backward(n, e, dy, grad);
          break;
        case node_kind::add: {
          id const copy = act(std::size_t(e.c), "add.grad", stash::storage_kind::temp);
          run("aten::clone", ids{dy}, ids{copy},
              [this, bytes = std::size_t(e.c) * sizeof(float)](ptrs p) {
                ops_.copy(p[1], p[0], bytes);
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

  // To the parameters (reads dy, x), x released, then to the input (reads dy, w) unless x is the
  // network's input.
  void conv_backward(int n, node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    auto& l = convs_[std::size_t(e.layer)];
    conv_shape const s{n, l.cin, l.cout, l.h, l.w};
    allocate_gradients(l.p);
    auto const wws =
        workspace(ops_.conv_scratch(s, layer_pass::backward_weights), l.name + ".backward_weights");
    // aten::convolution_backward is pure in the recompute table, and these gradients are not
    // persistent: the op may be re-run, so it is given its kernel.
    run("aten::convolution_backward", ids{dy, e.x}, with({l.p.dw, l.p.db}, wws),
        [this, s, wws](ptrs p) {
          ops_.conv_backward_weights(s, f(p[0]), f(p[1]), f(p[2]), f(p[3]), opt(p, wws, 4));
        });
    free_if(wws);
    fold_gradients(l.p);
    bool const wants_dx = e.x != x0_;
    unkeep(e.x);
    if (!wants_dx) { return; }
    std::size_t const count = std::size_t(n) * l.cin * l.h * l.w;
    id const dx             = act(count, l.name + ".in.grad", stash::storage_kind::temp);
    auto const dws =
        workspace(ops_.conv_scratch(s, layer_pass::backward_data), l.name + ".backward_data");
    run("aten::convolution_backward", ids{dy, l.p.w}, with({dx}, dws), [this, s, dws](ptrs p) {
      ops_.conv_backward_data(s, f(p[0]), f(p[1]), f(p[2]), opt(p, dws, 3));
    });
    free_if(dws);
    accumulate(grad, e.x, dx, int(count));
  }

  void bn_backward(int n, node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    auto& l = bns_[std::size_t(e.layer)];
    pool_shape const s{n, l.c, l.h, l.w};
    std::size_t const count = std::size_t(n) * l.c * l.h * l.w;
    allocate_gradients(l.p);
    id const dx   = act(count, l.name + ".in.grad", stash::storage_kind::temp);
    auto const ws = workspace(ops_.bn_scratch(s, layer_pass::backward_data), l.name + ".backward");
    {
      auto p = mem_.op("aten::native_batch_norm_backward", ids{dy, e.x, e.a, e.b, l.p.w, l.p.b},
                       with({dx, l.p.dw, l.p.db}, ws));
      ops_.bn_backward(s, f(p[0]), f(p[1]), f(p[2]), f(p[3]), f(p[4]), f(p[5]), f(p[6]), f(p[7]),
                       f(p[8]), opt(p, ws, 9));
    }
    free_if(ws);
    fold_gradients(l.p);
    unkeep(e.x);
    unkeep(e.a);
    unkeep(e.b);
    accumulate(grad, e.x, dx, int(count));
  }

  // Reads {dy, y}: y is threshold_backward's `self`, whose sign is all it needs (stash may send y
  // as Gist's 1-bit mask). Not in place over dy: that hides dy's gap from the planner.
  void relu_backward(node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    id const dx = act(std::size_t(e.c), "relu.in.grad", stash::storage_kind::temp);
    run("aten::threshold_backward", ids{dy, e.y}, ids{dx},
        [this, count = std::size_t(e.c)](ptrs p) {
          ops_.relu_backward(count, f(p[0]), f(p[1]), f(p[2]));
        });
    unkeep(e.y);
    mem_.deallocate(dy);
    accumulate(grad, e.x, dx, e.c);
  }

  void pool_backward(int n, node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    pool_shape const s{n, e.c, e.h, e.w};
    std::size_t const count = std::size_t(n) * e.c * e.h * e.w;
    id const dx             = act(count, "pool.in.grad", stash::storage_kind::temp);
    auto const ws = workspace(ops_.pool_scratch(s, layer_pass::backward_data), "pool.backward");
    {
      auto p = mem_.op("aten::max_pool2d_with_indices_backward", ids{dy, e.a}, with({dx}, ws));
      ops_.pool_backward(s, f(p[0]), static_cast<std::int64_t const*>(p[1]), f(p[2]),
                         opt(p, ws, 3));
    }
    free_if(ws);
    unkeep(e.a);
    accumulate(grad, e.x, dx, int(count));
  }

  // As conv_backward: to the parameters, x released, then to the input.
  void linear_backward(int n, node const& e, id dy, std::map<id, id, id_less>& grad)
  {
    auto& l = fc_[std::size_t(e.layer)];
    linear_shape const s{n, l.in, l.out};
    allocate_gradients(l.p);
    auto const wws = workspace(ops_.linear_scratch(s, layer_pass::backward_weights),
                               l.name + ".backward_weights");
    {
      auto p = mem_.op("aten::addmm_backward", ids{dy, e.x}, with({l.p.dw, l.p.db}, wws));
      ops_.linear_backward_weights(s, f(p[0]), f(p[1]), f(p[2]), f(p[3]), opt(p, wws, 4));
    }
    free_if(wws);
    fold_gradients(l.p);
    unkeep(e.x);
    id const dx = act(std::size_t(n) * l.in, l.name + ".in.grad", stash::storage_kind::temp);
    auto const dws =
        workspace(ops_.linear_scratch(s, layer_pass::backward_data), l.name + ".backward_data");
    {
      auto p = mem_.op("aten::addmm_backward", ids{dy, l.p.w}, with({dx}, dws));
      ops_.linear_backward_data(s, f(p[0]), f(p[1]), f(p[2]), opt(p, dws, 3));
    }
    free_if(dws);
    accumulate(grad, e.x, dx, n * l.in);
  }

  // This step's gradients of `p`, just written: through on_gradients_ (when set), into the
  // momentum (v = momentum v + g), then freed.
  void fold_gradients(param& p)
  {
    if (on_gradients_) {
      std::size_t const counts[] = {p.w_count, p.b_count};
      auto const ptr             = mem_.op("all_reduce_gradients", {}, ids{p.dw, p.db});
      on_gradients_(ptrs(ptr), counts);
    }
    auto fold = [&](id v, id g, std::size_t count) {
      {
        auto ptr = mem_.op("aten::_foreach_sgd_momentum", ids{g}, ids{v});
        ops_.sgd_momentum(count, cfg_.momentum, f(ptr[1]), f(ptr[0]));
      }
      mem_.deallocate(g);
    };
    fold(p.vw, p.dw, p.w_count);
    fold(p.vb, p.db, p.b_count);
  }

  // ---- optimizer: w -= lr v, one op per tensor (the momentum is up to date: fold_gradients).
  void sgd_step(param& p)
  {
    auto step = [&](id w, id v, std::size_t count) {
      auto ptr = mem_.op("aten::_foreach_sgd_step", ids{v}, ids{w});
      ops_.sgd_step(count, cfg_.lr, f(ptr[1]), f(ptr[0]));
    };
    step(p.w, p.vw, p.w_count);
    step(p.b, p.vb, p.b_count);
  }

  static float* f(void* p) { return static_cast<float*>(p); }

  Mem& mem_;
  Ops& ops_;
  cnn_config cfg_;
  gradient_hook on_gradients_;
  std::vector<conv_layer> convs_;
  std::vector<bn_layer> bns_;
  std::vector<fc_layer> fc_;
  int flat_{0};
  id images_{}, labels_{}, loss_sum_{}, correct_{}, x0_{};
  bool training_{false};
  std::vector<node> tape_;
  std::map<id, int, id_less> saved_;
};

}  // namespace train_cnn
