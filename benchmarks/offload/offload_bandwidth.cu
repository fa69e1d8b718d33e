// GPU benchmark of the offload manager (needs a CUDA device; prints why and exits 0 without one).
//
// 1. Effective offload / prefetch bandwidth: N tensors of S bytes offloaded (D2H) then prefetched
//    (H2D) through the manager, against plain cudaMemcpyAsync of the same bytes between the same
//    device memory and one pinned buffer, in the same run.
// 2. Overlap: a compute kernel of fixed work runs on the compute stream alone, then while the
//    manager offloads and prefetches; the compute stream's slowdown is reported.
//
// Usage: bench_offload [--tensor-mib S] [--count N] [--json]
#include <stash/core/cuda_event.hpp>
#include <stash/core/cuda_stream.hpp>
#include <stash/core/device.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/pinned_host_buffer.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using device_pool = stash::caching_pool<stash::device_upstream>;
using host_pool   = stash::pinned_host_pool<>;
using manager     = stash::offload_manager<stash::cuda_backend, device_pool, host_pool>;

__global__ void busy_kernel(float* x, int n, int iterations)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) { return; }
  float v = x[i];
  for (int k = 0; k < iterations; ++k) { v = v * 0.999f + 0.001f; }
  x[i] = v;
}

float elapsed_ms(stash::cuda_event const& a, stash::cuda_event const& b)
{
  float ms = 0;
  STASH_CUDA_TRY(cudaEventElapsedTime(&ms, a.value(), b.value()));
  return ms;
}

}  // namespace

int main(int argc, char** argv)
{
  std::size_t tensor_mib = 64;
  int count              = 16;
  bool json              = false;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--tensor-mib" && i + 1 < argc) {
      tensor_mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--count" && i + 1 < argc) {
      count = std::atoi(argv[++i]);
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "usage: bench_offload [--tensor-mib S] [--count N] [--json]\n");
      return 2;
    }
  }
  if (!stash::gpu_available()) {
    std::printf("bench_offload: no CUDA device (%s); nothing measured\n", stash::no_gpu_reason().c_str());
    return 0;
  }
  cudaDeviceProp prop{};
  STASH_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
  std::size_t const bytes = tensor_mib * stash::MiB;
  double const total_gb   = double(bytes) * count / 1e9;

  stash::cuda_backend backend;
  device_pool device;
  host_pool host(stash::pinned_host_upstream{},
                 stash::pinned_host_pool_options(std::size_t(count + 1) * bytes, 256 * stash::MiB));
  host.reserve(std::size_t(count) * bytes);  // pinning is not what we measure
  manager m(backend, device, host);
  stash::cuda_stream compute;
  stash::cuda_event t0(cudaEventDefault), t1(cudaEventDefault), t2(cudaEventDefault);

  // Baseline: raw cudaMemcpyAsync D2H then H2D of the same bytes, one stream each way.
  std::vector<void*> raw(count);
  for (auto& p : raw) { p = device.allocate(bytes, compute); }
  stash::pinned_host_buffer pinned(bytes * count);
  t0.record(compute);
  for (int i = 0; i < count; ++i) {
    STASH_CUDA_TRY(cudaMemcpyAsync(static_cast<char*>(pinned.data()) + i * bytes, raw[i], bytes,
                                   cudaMemcpyDeviceToHost, compute));
  }
  t1.record(compute);
  for (int i = 0; i < count; ++i) {
    STASH_CUDA_TRY(cudaMemcpyAsync(raw[i], static_cast<char*>(pinned.data()) + i * bytes, bytes,
                                   cudaMemcpyHostToDevice, compute));
  }
  t2.record(compute);
  t2.synchronize();
  double const raw_d2h = total_gb / (elapsed_ms(t0, t1) / 1e3);
  double const raw_h2d = total_gb / (elapsed_ms(t1, t2) / 1e3);
  for (auto p : raw) { device.deallocate(p, bytes, compute); }
  compute.synchronize();

  // Through the manager.
  std::vector<stash::tensor_handle> hs;
  for (int i = 0; i < count; ++i) { hs.push_back(m.create(bytes, compute)); }
  compute.synchronize();
  t0.record(compute);
  for (auto h : hs) { m.offload_async(h, compute); }
  stash::cuda_event offloaded;
  offloaded.record(m.d2h_stream());
  offloaded.wait_on(compute);
  t1.record(compute);
  for (auto h : hs) { m.prefetch_async(h); }
  for (auto h : hs) { (void)m.acquire(h, compute); }
  t2.record(compute);
  t2.synchronize();
  double const mgr_d2h = total_gb / (elapsed_ms(t0, t1) / 1e3);
  double const mgr_h2d = total_gb / (elapsed_ms(t1, t2) / 1e3);

  // Overlap: the compute kernel alone, then with the same offload + prefetch traffic beside it.
  int const n = 1 << 24;
  float* x    = static_cast<float*>(device.allocate(n * sizeof(float), compute));
  STASH_CUDA_TRY(cudaMemsetAsync(x, 0, n * sizeof(float), compute));
  int const iterations = 2000;
  t0.record(compute);
  busy_kernel<<<n / 256, 256, 0, compute>>>(x, n, iterations);
  t1.record(compute);
  t1.synchronize();
  double const alone_ms = elapsed_ms(t0, t1);
  t0.record(compute);
  for (auto h : hs) { m.offload_async(h, compute); }  // waits only for work queued before
  busy_kernel<<<n / 256, 256, 0, compute>>>(x, n, iterations);
  t1.record(compute);
  for (auto h : hs) { m.prefetch_async(h); }
  t1.synchronize();
  double const shared_ms = elapsed_ms(t0, t1);
  m.synchronize();
  device.deallocate(x, n * sizeof(float), compute);
  for (auto h : hs) { m.release(h); }
  compute.synchronize();

  double const slowdown = (shared_ms - alone_ms) / alone_ms * 100.0;
  if (json) {
    std::printf("{\"device\":\"%s\",\"tensor_bytes\":%zu,\"count\":%d,\"raw_d2h_gbps\":%.2f,"
                "\"raw_h2d_gbps\":%.2f,\"offload_gbps\":%.2f,\"prefetch_gbps\":%.2f,"
                "\"compute_alone_ms\":%.3f,\"compute_with_traffic_ms\":%.3f,\"slowdown_pct\":%.2f}\n",
                prop.name, bytes, count, raw_d2h, raw_h2d, mgr_d2h, mgr_h2d, alone_ms, shared_ms,
                slowdown);
  } else {
    std::printf("device: %s\n%d tensors x %zu MiB (identity codec)\n", prop.name, count, tensor_mib);
    std::printf("  cudaMemcpyAsync D2H %.2f GB/s, H2D %.2f GB/s\n", raw_d2h, raw_h2d);
    std::printf("  offload_manager offload %.2f GB/s, prefetch+acquire %.2f GB/s\n", mgr_d2h, mgr_h2d);
    std::printf("  compute kernel alone %.3f ms, beside the traffic %.3f ms: slowdown %.2f%%\n",
                alone_ms, shared_ms, slowdown);
  }
  return 0;
}
