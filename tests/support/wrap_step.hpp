// The wrap step of recompute_gpu_test.cu and its host twin in recompute_chain_test.cpp, written
// once over the chain's kernels (support/recompute_chain.hpp): persistent w and gw,
// y = relu(x * w) + 0.01, gw = 2 y - 0.005, then w += gw in place (the optimizer's last write).
// wrap_all_policy wraps both: each leaves the device at the step's end (end_iteration(), after
// the optimizer's kernel) and comes back at its first use of the next step. The weights must be
// bitwise those of keeping everything (review 2026-11-26 G6: no device code ran wrap entries).
#pragma once

#include "support/recompute_chain.hpp"

#include <stash/allocator.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stash::test {

/// Wraps every storage that may wrap: offloaded after its last use, prefetched at its first.
struct wrap_all_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "wrap_all"; }
  [[nodiscard]] schedule plan(trace_analysis const& a, std::uint64_t budget) const
  {
    std::vector<swap_entry> entries;
    for (auto const& s : a.lifetimes().storages) {
      if (!may_wrap(a, s.id)) { continue; }
      auto const first = s.accesses.front().op, last = s.accesses.back().op;
      entries.push_back(
          swap_entry{s.id, last, first, last + 1, first, s.bytes, swap_encoding::configured, true});
    }
    return make_schedule(a, std::string(name()), budget, std::move(entries));
  }
};

/// What run_wrap_step ends with.
struct wrap_step_result {
  std::vector<float> w, gw;  ///< after the last step
  allocator_stats stats;     ///< before w and gw were read back
  int away_at_end{0};        ///< w or gw not resident after an end_iteration() (each counted)
};

/// Runs `steps` wrap steps through `alloc` on `s`. `Kernels` as run_recompute_chain's.
template <class Allocator, class Kernels>
wrap_step_result run_wrap_step(Allocator& alloc, typename Allocator::stream_type s,
                               Kernels const& k, int steps = 4)
{
  auto const bytes = chain_elements * sizeof(float);
  auto const act   = storage_kind::act;
  auto w           = alloc.allocate_async(bytes, storage_kind::param, "w", s);
  auto gw          = alloc.allocate_async(bytes, storage_kind::grad, "gw", s);
  k.fill(static_cast<float*>(alloc.acquire_async(w, s)), 0.5f, s);
  k.fill(static_cast<float*>(alloc.acquire_async(gw, s)), 0.0f, s);
  wrap_step_result r;
  for (int step = 0; step < steps; ++step) {
    alloc.begin_iteration();
    auto x = alloc.allocate_async(bytes, act, "x", s);
    auto y = alloc.allocate_async(bytes, act, "y", s);
    auto p = alloc.op("load_batch", {}, std::vector{x}, s);
    k.fill(chain_arg(p, 0), -1.0f + float(step), s);
    p = alloc.op("aten::addmm", std::vector{x, w}, std::vector{y}, s);
    k.relu_mul(chain_arg(p, 0), chain_arg(p, 1), chain_arg(p, 2), s);
    p = alloc.op("aten::mul.Tensor", std::vector{y}, std::vector{gw}, s);
    k.twice(chain_arg(p, 0), chain_arg(p, 1), s);
    p = alloc.op("aten::add_.Tensor", std::vector{w, gw}, std::vector{w}, s);
    k.sum(chain_arg(p, 0), chain_arg(p, 1), chain_arg(p, 2), s);  // w += gw, element by element
    alloc.deallocate_async(x);
    alloc.deallocate_async(y);
    alloc.end_iteration();
    for (auto h : {w, gw}) { r.away_at_end += alloc.where(h) == tensor_state::resident ? 0 : 1; }
  }
  r.stats = alloc.stats();
  r.w.resize(chain_elements);
  r.gw.resize(chain_elements);
  k.download(r.w, static_cast<float const*>(alloc.acquire_async(w, s)), s);
  k.download(r.gw, static_cast<float const*>(alloc.acquire_async(gw, s)), s);
  alloc.synchronize();
  return r;
}

}  // namespace stash::test
