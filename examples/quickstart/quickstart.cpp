// The README's example, compiled and run by the tests: a toy training loop on stash::allocator.
//
// It runs on the host backend (worker threads stand in for CUDA streams), so it needs no GPU; on a
// GPU the same loop uses stash::cuda_backend, a device pool and a device codec transfer (see the
// README). Forward allocates activations, backward reads them in reverse: the swap policy offloads
// them in between, and every read is checked.
#include <stash/allocator.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/swap/vdnn.hpp>

#include <cstdio>
#include <vector>

int main()
{
  stash::host_backend backend;  // stash::cuda_backend on a GPU
  auto stream = backend.create_stream();
  stash::default_pool_t<stash::host_backend> pool;  // a caching_pool of the backend's memory
  stash::host_allocator<stash::vdnn_all, stash::zvc<float>> alloc(
      backend, pool, {.device_budget = 3 * stash::MiB, .hardware = stash::presets::pcie4_x16});

  constexpr int layers        = 8;
  constexpr std::size_t bytes = 1 * stash::MiB;
  auto weights =
      alloc.allocate_async(bytes, stash::storage_kind::param, "w", stream);  // persistent

  for (int step = 0; step < 3; ++step) {
    alloc.begin_iteration();
    alloc.phase(stash::phase::forward);
    std::vector<stash::tensor_handle> acts;
    auto input = alloc.allocate_async(bytes, stash::storage_kind::input, "x", stream);
    (void)alloc.op("load", {}, std::vector{input}, stream);
    acts.push_back(input);
    for (int l = 0; l < layers; ++l) {
      auto out =
          alloc.allocate_async(bytes, stash::storage_kind::act, "act" + std::to_string(l), stream);
      // Pointers are resident for work queued on `stream` from here: launch the layer's kernel.
      auto ptrs = alloc.op("aten::convolution", std::vector{acts.back(), weights}, std::vector{out},
                           stream);
      (void)ptrs;
      acts.push_back(out);
    }
    alloc.phase(stash::phase::backward);
    for (int l = layers; l > 0; --l) {
      (void)alloc.op("aten::convolution_backward", std::vector{acts[l - 1], weights}, {}, stream);
      alloc.deallocate_async(acts[l]);
    }
    alloc.deallocate_async(acts[0]);
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
              static_cast<unsigned long long>(alloc.stats().offload.offloads),
              static_cast<unsigned long long>(alloc.stats().offload.prefetches),
              static_cast<unsigned long long>(alloc.stats().offload.demand_prefetches));
  return alloc.stats().offload.offloads > 0 ? 0 : 1;
}
