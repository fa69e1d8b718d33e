// A small training step with real float kernels on the host backend, run through a
// stash::allocator: layer i computes y_i = relu(x_i * w_i) and z_i = 2 y_i (x_{i+1} = z_i), the
// loss reads the last z, backward reads y_i and z_i (and x_i, w_i) and writes the weight
// gradients, SGD updates the weights. Every op is given its kernel as its recompute callable, so
// the allocator can re-run it; the weights and gradients after each step are the checked result.
#pragma once

#include <stash/allocator.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/pool.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace stash::test {

/// The step's shape and what the loop gives the allocator.
struct mlp_options {
  int layers              = 6;
  std::size_t n           = 64;  ///< floats per weight
  std::size_t batch       = 4;   ///< an activation holds batch x n floats
  bool give_callables     = true;
  std::string no_callable = {};  ///< ops of this name get no callable (misuse)
  /// Called before every re-run (not the first run) of an op; may throw.
  std::function<void(std::string const&)> on_rerun = {};
};

/// The weights and gradients, as bytes, after a step.
using mlp_state = std::vector<float>;

/// Runs a step's ops through `alloc`; the persistent tensors are created by make().
template <class Allocator>
class mlp {
 public:
  using stream = host_backend::stream;
  struct dims {
    std::size_t n, batch;
  };
  using kernel = void (*)(std::span<void* const>, dims);

  mlp(Allocator& alloc, host_backend& backend, stream s, mlp_options o)
      : alloc_(alloc), backend_(backend), s_(s), o_(std::move(o))
  {
    for (int i = 0; i < o_.layers; ++i) {
      w_.push_back(make("w" + std::to_string(i), storage_kind::param, 1.0f + 0.01f * float(i)));
      gw_.push_back(make("gw" + std::to_string(i), storage_kind::grad, 0.0f));
    }
  }

  /// One training step (an iteration of the allocator).
  void step(int iteration)
  {
    alloc_.begin_iteration();
    alloc_.phase(phase::forward);
    std::vector<tensor_handle> x{act("x0")}, y, z;
    run("load_batch", {}, {x[0]}, iteration == 0 ? &load0 : &load1);
    for (int i = 0; i < o_.layers; ++i) {
      y.push_back(act("y"));
      run("aten::addmm", {x[i], w_[i]}, {y[i]}, &relu_mul);
      z.push_back(act("z"));
      run("aten::mul.Tensor", {y[i]}, {z[i]}, &twice);
      x.push_back(z[i]);
    }
    tensor_handle g = act("loss");
    run("aten::sum.dim_IntList", {z.back()}, {g}, &loss);
    alloc_.phase(phase::backward);
    backward(x, y, z, g);
    alloc_.phase(phase::optimizer);
    for (int i = 0; i < o_.layers; ++i) {
      run("aten::add_.Tensor", {w_[i], gw_[i]}, {w_[i]}, &sgd);
    }
    alloc_.end_iteration();
  }

  /// The weights then the gradients.
  mlp_state state()
  {
    backend_.synchronize(s_);
    mlp_state out;
    for (auto const& v : {w_, gw_}) {
      for (auto h : v) {
        auto const* p = static_cast<float const*>(alloc_.acquire_async(h, s_));
        backend_.synchronize(s_);
        out.insert(out.end(), p, p + o_.n);
      }
    }
    return out;
  }

  /// The persistent tensors: the weights, then their gradients.
  [[nodiscard]] std::vector<tensor_handle> persistent() const
  {
    std::vector<tensor_handle> out(w_);
    out.insert(out.end(), gw_.begin(), gw_.end());
    return out;
  }

  /// The most bytes the device pool `stats` reported after any call of a replayed step.
  std::size_t sampled_peak{0};
  /// Samples the pool's in-use bytes after each allocate and op (set by the test).
  std::function<std::size_t()> in_use = {};
  /// Tensors of the step alive now (for a loop that abandons a step).
  std::vector<tensor_handle> alive;
  /// When set, an op() refused with stash::logic_error is reported here and called again.
  std::function<void(std::string const&)> on_refusal = {};

  /// Abandons a step that threw: frees its tensors and ends the iteration.
  void abandon()
  {
    for (auto h : alive) { alloc_.deallocate_async(h); }
    alive.clear();
    alloc_.end_iteration();
  }

 private:
  void sample()
  {
    if (in_use && alloc_.state() == allocator_state::replaying) {
      sampled_peak = std::max(sampled_peak, in_use());
    }
  }

  tensor_handle make(std::string label, storage_kind kind, float value)
  {
    auto h  = alloc_.allocate_async(o_.n * sizeof(float), kind, std::move(label), s_);
    auto* p = static_cast<float*>(alloc_.acquire_async(h, s_));
    for (std::size_t k = 0; k < o_.n; ++k) { p[k] = value + 0.001f * float(k % 7); }
    return h;
  }
  tensor_handle act(std::string label)
  {
    auto h = alloc_.allocate_async(o_.n * o_.batch * sizeof(float), storage_kind::act,
                                   std::move(label), s_);
    alive.push_back(h);
    sample();
    return h;
  }
  void free(tensor_handle h)
  {
    alloc_.deallocate_async(h);
    std::erase(alive, h);
  }

  void backward(std::vector<tensor_handle> const& x, std::vector<tensor_handle> const& y,
                std::vector<tensor_handle> const& z, tensor_handle g)
  {
    for (int i = o_.layers - 1; i >= 0; --i) {
      auto gy = act("gy");
      run("aten::threshold_backward", {g, y[i], z[i]}, {gy}, &relu_back);
      run("aten::mul.Tensor", {gy, x[i]}, {gw_[i]}, &grad_w);
      free(g);
      if (i > 0) {
        g = act("gx");
        run("aten::mul.Tensor", {gy, w_[i]}, {g}, &grad_x);
      }
      free(gy);
      free(y[i]);
      free(z[i]);
    }
    free(x[0]);
  }

  void run(std::string const& name, std::vector<tensor_handle> reads,
           std::vector<tensor_handle> writes, kernel k)
  {
    dims const d{o_.n, o_.batch};
    auto launch = [this, k, d](std::span<void* const> p, stream s) {
      std::vector<void*> copy(p.begin(), p.end());
      backend_.launch(s, [k, d, copy] { k(copy, d); });
    };
    typename Allocator::recompute_fn rerun{};
    if (o_.give_callables && name != o_.no_callable) {
      rerun = [this, name, launch](std::span<void* const> p, stream s) {
        if (o_.on_rerun) { o_.on_rerun(name); }
        launch(p, s);
      };
    }
    std::vector<void*> p;
    for (int tries = 0;; ++tries) {
      try {
        p = alloc_.op(name, reads, writes, s_, rerun);
        break;
      } catch (logic_error const& e) {
        if (!on_refusal || tries > 16) { throw; }
        on_refusal(e.what());
      }
    }
    sample();
    launch(p, s_);
  }

  static float* f(std::span<void* const> p, std::size_t i) { return static_cast<float*>(p[i]); }
  static void load0(std::span<void* const> p, dims d)
  {
    for (std::size_t k = 0; k < d.n * d.batch; ++k) { f(p, 0)[k] = float(int(k % 11) - 4) * 0.25f; }
  }
  static void load1(std::span<void* const> p, dims d)
  {
    for (std::size_t k = 0; k < d.n * d.batch; ++k) {
      f(p, 0)[k] = float(int(k % 13) - 5) * 0.125f;
    }
  }
  static void relu_mul(std::span<void* const> p, dims d)
  {
    for (std::size_t k = 0; k < d.n * d.batch; ++k) {
      f(p, 2)[k] = std::max(0.0f, f(p, 0)[k] * f(p, 1)[k % d.n]) + 0.01f;
    }
  }
  static void twice(std::span<void* const> p, dims d)
  {
    for (std::size_t k = 0; k < d.n * d.batch; ++k) { f(p, 1)[k] = 2.0f * f(p, 0)[k] - 0.005f; }
  }
  static void loss(std::span<void* const> p, dims d)
  {
    for (std::size_t k = 0; k < d.n * d.batch; ++k) { f(p, 1)[k] = f(p, 0)[k] * 0.001f - 0.5f; }
  }
  static void relu_back(std::span<void* const> p, dims d)
  {
    for (std::size_t k = 0; k < d.n * d.batch; ++k) {
      f(p, 3)[k] = f(p, 1)[k] > 0.01f ? 2.0f * f(p, 0)[k] + 0.001f * f(p, 2)[k] : 0.0f;
    }
  }
  static void grad_w(std::span<void* const> p, dims d)
  {
    for (std::size_t c = 0; c < d.n; ++c) {
      float sum = 0.0f;
      for (std::size_t b = 0; b < d.batch; ++b) {
        sum += f(p, 0)[b * d.n + c] * f(p, 1)[b * d.n + c];
      }
      f(p, 2)[c] = sum;
    }
  }
  static void grad_x(std::span<void* const> p, dims d)
  {
    for (std::size_t k = 0; k < d.n * d.batch; ++k) { f(p, 2)[k] = f(p, 0)[k] * f(p, 1)[k % d.n]; }
  }
  static void sgd(std::span<void* const> p, dims d)
  {
    for (std::size_t k = 0; k < d.n; ++k) { f(p, 2)[k] = f(p, 0)[k] - 0.01f * f(p, 1)[k]; }
  }

  Allocator& alloc_;
  host_backend& backend_;
  stream s_;
  mlp_options o_;
  std::vector<tensor_handle> w_, gw_;
};

}  // namespace stash::test
