// The recompute chain step of recompute_gpu_test.cu and its host twin recompute_chain_test.cpp,
// written once: a tiny kernel chain y = relu(x * w) + 0.01, z = 2 y - 0.005, a gap op that reads
// x, then out = y + z. chain_policy drops y and z after their last forward use and rematerialises
// both (y, then z from y: a chain) before the op reading them. Each backend supplies the kernels;
// the host twin runs this exact trace and schedule on the CPU, so a schedule the validator
// refuses (an input of a re-run overwritten in the gap) fails here, not first on a GPU.
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

/// Elements of each tensor of the chain step.
inline constexpr std::size_t chain_elements = 4096;

/// Drops the storages labelled y and z after their second-to-last access and rematerialises them
/// before their last (the add), y first: z's re-run reads y.
struct recompute_chain_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "chain_step"; }
  [[nodiscard]] schedule plan(trace_analysis const& a, std::uint64_t budget) const
  {
    auto const& t = a.trace();
    std::vector<recompute_entry> rs;
    for (std::string_view const label : {"y", "z"}) {
      for (storage_id id = 0; id < t.storages().size(); ++id) {
        if (t.storages()[id].label != label) { continue; }
        auto const& acc = a.lifetimes().storages[id].accesses;
        rs.push_back(
            {id, acc[acc.size() - 2].op, acc.back().op, acc.back().op, t.storages()[id].bytes});
      }
    }
    return make_schedule(a, std::string(name()), budget, {}, std::move(rs));
  }
};

inline float* chain_arg(std::span<void* const> p, std::size_t i)
{
  return static_cast<float*>(p[i]);
}

/// Runs `steps` chain steps through `alloc` on `s` and returns the last step's output. `Kernels`
/// queues on a stream: fill(x, v, s), relu_mul(x, w, y, s), twice(y, z, s), sum(y, z, out, s),
/// and download(out_vector, device_out, s), which copies and waits.
template <class Allocator, class Kernels>
std::vector<float> run_recompute_chain(Allocator& alloc, typename Allocator::stream_type s,
                                       Kernels const& k, int steps = 3)
{
  using stream     = typename Allocator::stream_type;
  auto const bytes = chain_elements * sizeof(float);
  auto const act   = storage_kind::act;
  auto w           = alloc.allocate_async(bytes, storage_kind::param, "w", s);
  k.fill(static_cast<float*>(alloc.acquire_async(w, s)), 0.5f, s);
  std::vector<float> out(chain_elements);
  typename Allocator::recompute_fn const relu_mul = [&k](std::span<void* const> q, stream st) {
    k.relu_mul(chain_arg(q, 0), chain_arg(q, 1), chain_arg(q, 2), st);
  };
  typename Allocator::recompute_fn const twice = [&k](std::span<void* const> q, stream st) {
    k.twice(chain_arg(q, 0), chain_arg(q, 1), st);
  };
  for (int step = 0; step < steps; ++step) {
    alloc.begin_iteration();
    auto x = alloc.allocate_async(bytes, act, "x", s);
    auto y = alloc.allocate_async(bytes, act, "y", s);
    auto z = alloc.allocate_async(bytes, act, "z", s);
    auto g = alloc.allocate_async(bytes, act, "gap", s);
    auto o = alloc.allocate_async(bytes, act, "out", s);
    auto p = alloc.op("load_batch", {}, std::vector{x}, s);
    k.fill(chain_arg(p, 0), -1.0f + float(step), s);
    relu_mul(alloc.op("aten::addmm", std::vector{x, w}, std::vector{y}, s, relu_mul), s);
    twice(alloc.op("aten::mul.Tensor", std::vector{y}, std::vector{z}, s, twice), s);
    // The gap: an op while y and z are away. It reads x into a fresh tensor; writing x itself
    // would change the value y's re-run reads, and the schedule would be refused.
    p = alloc.op("aten::mul.Tensor", std::vector{x}, std::vector{g}, s);
    k.twice(chain_arg(p, 0), chain_arg(p, 1), s);
    p = alloc.op("aten::add.Tensor", std::vector{y, z}, std::vector{o}, s);
    k.sum(chain_arg(p, 0), chain_arg(p, 1), chain_arg(p, 2), s);
    k.download(out, chain_arg(p, 2), s);
    for (auto h : {x, y, z, g, o}) { alloc.deallocate_async(h); }
    alloc.end_iteration();
  }
  alloc.synchronize();
  return out;
}

}  // namespace stash::test
