// The README's example, compiled and run by the tests: a toy training loop on stash::allocator.
//
// It runs on the host backend (worker threads stand in for CUDA streams), so it needs no GPU; on a
// GPU the same loop uses stash::cuda_backend, a device pool and a device codec transfer (see the
// README). Forward allocates activations, backward reads them in reverse: the swap policy offloads
// them in between, and every read is checked.
#include <stash/allocator.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/vdnn.hpp>

#include <cstdio>
#include <vector>

int main()
{
  using pool_type = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
  stash::host_backend backend;  // stash::cuda_backend on a GPU
  auto stream = backend.create_stream();
  pool_type pool;

  stash::allocator_options options;
  options.device_budget = 3 * stash::MiB;  // what the policy must fit the iteration into
  options.hardware      = "pcie4_x16";
  stash::allocator<pool_type, stash::vdnn_all, stash::zvc<float>, stash::host_backend> alloc(
      backend, pool, options);

  constexpr int layers        = 8;
  constexpr std::size_t bytes = 1 * stash::MiB;
  auto weights = alloc.allocate(bytes, stash::storage_kind::param, "w", stream);  // persistent

  for (int step = 0; step < 3; ++step) {
    alloc.begin_iteration();
    alloc.phase(stash::phase::forward);
    std::vector<stash::tensor_handle> acts;
    auto input = alloc.allocate(bytes, stash::storage_kind::input, "x", stream);
    (void)alloc.op("load", {}, std::vector{input}, stream);
    acts.push_back(input);
    for (int l = 0; l < layers; ++l) {
      auto out = alloc.allocate(bytes, stash::storage_kind::act, "act" + std::to_string(l), stream);
      // Pointers are resident for work queued on `stream` from here: launch the layer's kernel.
      auto ptrs = alloc.op("aten::convolution", std::vector{acts.back(), weights}, std::vector{out},
                           stream);
      (void)ptrs;
      acts.push_back(out);
    }
    alloc.phase(stash::phase::backward);
    for (int l = layers; l > 0; --l) {
      (void)alloc.op("aten::convolution_backward", std::vector{acts[l - 1], weights}, {}, stream);
      alloc.deallocate(acts[l]);
    }
    alloc.deallocate(acts[0]);
    alloc.end_iteration();
  }
  backend.synchronize(stream);
  alloc.synchronize();

  auto const& s = alloc.current_schedule();
  std::printf("stash quickstart: policy %s, %zu storages scheduled to leave the device\n",
              s.policy.c_str(), s.entries.size());
  std::printf("  planned device peak %s (no offload: %s, budget %s): %s\n",
              stash::format_bytes(s.device_peak).c_str(),
              stash::format_bytes(s.baseline_peak).c_str(), stash::format_bytes(s.budget).c_str(),
              s.fits() ? "fits" : "does not fit");
  std::printf("  iterations %llu, offloads %llu, prefetches %llu (on demand %llu)\n",
              static_cast<unsigned long long>(alloc.stats().iterations),
              static_cast<unsigned long long>(alloc.offload_statistics().offloads),
              static_cast<unsigned long long>(alloc.offload_statistics().prefetches),
              static_cast<unsigned long long>(alloc.offload_statistics().demand_prefetches));
  return alloc.offload_statistics().offloads > 0 ? 0 : 1;
}
