// The recompute step with a rebuilt input (recompute_chain::transients) of
// recompute_transient_test.cpp and its GPU twin in recompute_gpu_test.cu, written once:
// a = x * w, b = clone(a), relu_(a) in place, a gap op reading x, then out = a + b.
// drop_clone_policy drops b after the clone and rematerialises it before the add; relu_ has
// overwritten a in between, so the chain re-runs a's producer (mul) into a transient buffer and
// clones that. Each backend supplies the kernels; the host twin runs this exact trace and schedule
// on the CPU, so the GPU run checks the same transient path on cuda_backend's streams.
#pragma once

#include <stash/allocator.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stash::test {

/// Elements of each tensor of the transient step.
inline constexpr std::size_t transient_elements = 1024;

/// Drops the storage labelled b after the clone and rematerialises it before the add.
struct drop_clone_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "drop_clone"; }
  [[nodiscard]] schedule plan(trace_analysis const& a, std::uint64_t budget) const
  {
    auto const& t = a.trace();
    std::vector<recompute_entry> rs;
    for (storage_id id = 0; id < t.storages().size(); ++id) {
      if (t.storages()[id].label != "b") { continue; }
      auto const& acc = a.lifetimes().storages[id].accesses;
      rs.push_back(
          {id, acc[acc.size() - 2].op, acc.back().op, acc.back().op, t.storages()[id].bytes});
    }
    return make_schedule(a, std::string(name()), budget, {}, std::move(rs));
  }
};

inline float* transient_arg(std::span<void* const> p, std::size_t i)
{
  return static_cast<float*>(p[i]);
}

/// Drops a after relu_ and b after the clone, both rematerialised before the add, b's entry first,
/// with shared re-runs (schedule::shared_reruns): b's chain rebuilds a's value before relu_ into
/// a's own bytes (its transient input), then a re-runs relu_ only.
struct drop_both_shared_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "drop_both_shared"; }
  [[nodiscard]] schedule plan(trace_analysis const& a, std::uint64_t budget) const
  {
    auto const& t = a.trace();
    std::vector<recompute_entry> rs;
    for (std::string_view const label : {"b", "a"}) {
      for (storage_id id = 0; id < t.storages().size(); ++id) {
        if (t.storages()[id].label != label) { continue; }
        auto const& acc = a.lifetimes().storages[id].accesses;
        rs.push_back(
            {id, acc[acc.size() - 2].op, acc.back().op, acc.back().op, t.storages()[id].bytes});
      }
    }
    auto s          = make_schedule(a, std::string(name()), budget, {}, std::move(rs));
    s.shared_reruns = true;
    return s;
  }
};

/// Runs `steps` transient steps through `alloc` on `s` and returns the last step's output.
/// `Kernels` queues on a stream: weights(w, s) (w[i] = 0.5 where i % 3 == 0, else -0.5),
/// input(x, step, s) (x[i] = step + 0.25 (i % 7)), mul(x, w, y, s), clone(x, y, s), relu_(y, s),
/// twice(x, y, s), add(a, b, y, s), and download(out_vector, device_src, s), which copies and
/// waits.
template <class Allocator, class Kernels>
std::vector<float> run_recompute_transient(Allocator& alloc, typename Allocator::stream_type s,
                                           Kernels const& k, int steps = 3)
{
  using stream                               = typename Allocator::stream_type;
  auto const bytes                           = transient_elements * sizeof(float);
  auto const act                             = storage_kind::act;
  typename Allocator::recompute_fn const mul = [&k](std::span<void* const> q, stream st) {
    k.mul(transient_arg(q, 0), transient_arg(q, 1), transient_arg(q, 2), st);
  };
  typename Allocator::recompute_fn const clone = [&k](std::span<void* const> q, stream st) {
    k.clone(transient_arg(q, 0), transient_arg(q, 1), st);
  };
  typename Allocator::recompute_fn const relu_ = [&k](std::span<void* const> q, stream st) {
    k.relu_(transient_arg(q, 0), st);
  };
  auto w = alloc.allocate_async(bytes, storage_kind::param, "w", s);
  k.weights(static_cast<float*>(alloc.acquire_async(w, s)), s);
  std::vector<float> out(transient_elements);
  for (int step = 0; step < steps; ++step) {
    alloc.begin_iteration();
    auto x = alloc.allocate_async(bytes, act, "x", s);
    auto a = alloc.allocate_async(bytes, act, "a", s);
    auto b = alloc.allocate_async(bytes, act, "b", s);
    auto g = alloc.allocate_async(bytes, act, "gap", s);
    auto o = alloc.allocate_async(bytes, act, "out", s);
    k.input(transient_arg(alloc.op("load_batch", {}, std::vector{x}, s), 0), step, s);
    mul(alloc.op("aten::mul.Tensor", std::vector{x, w}, std::vector{a}, s, mul), s);
    clone(alloc.op("aten::clone", std::vector{a}, std::vector{b}, s, clone), s);
    relu_(alloc.op("aten::relu_", std::vector{a}, std::vector{a}, s, relu_), s);
    auto p = alloc.op("aten::mul.Tensor", std::vector{x}, std::vector{g}, s);  // the gap
    k.twice(transient_arg(p, 0), transient_arg(p, 1), s);
    p = alloc.op("aten::add.Tensor", std::vector{a, b}, std::vector{o}, s);
    k.add(transient_arg(p, 0), transient_arg(p, 1), transient_arg(p, 2), s);
    k.download(out, transient_arg(p, 2), s);
    for (auto h : {x, a, b, g, o}) { alloc.deallocate_async(h); }
    alloc.end_iteration();
  }
  alloc.synchronize();
  return out;
}

}  // namespace stash::test
