// The offload manager on the CUDA backend: the host backend's rules, on real streams and copy
// engines, with every tensor's bytes checked by a kernel after every acquire.
#include "offload_stress.hpp"

#include <stash/codec/device_zvc.cuh>
#include <stash/codec/zvc.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace {

using device_pool = stash::caching_pool<stash::device_upstream>;
using host_pool   = stash::pinned_host_pool<>;
using manager     = stash::offload_manager<stash::cuda_backend, device_pool, host_pool>;

__host__ __device__ std::uint8_t pattern(std::uint64_t id, std::uint32_t version, std::size_t i)
{
  return static_cast<std::uint8_t>(id * 131 + version * 17 + i * 7 + (i >> 9));
}

__global__ void fill_kernel(std::uint8_t* p, std::size_t n, std::uint64_t id, std::uint32_t version)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = pattern(id, version, i);
  }
}

__global__ void check_kernel(std::uint8_t const* p, std::size_t n, std::uint64_t id,
                             std::uint32_t version, unsigned long long* bad)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    if (p[i] != pattern(id, version, i)) { atomicAdd(bad, 1ull); }
  }
}

}  // namespace

TEST_CASE("gpu: offload manager stress on the CUDA backend keeps every tensor's bytes")
{
  stash::cuda_backend backend;
  device_pool device(stash::device_upstream{}, [] {
    stash::caching_pool_options o;
    o.budget = 256 * stash::MiB;
    return o;
  }());
  host_pool host(stash::pinned_host_upstream{}, stash::pinned_host_pool_options(256 * stash::MiB));
  manager m(backend, device, host);
  std::vector<cudaStream_t> streams = {backend.create_stream(), backend.create_stream(),
                                       backend.create_stream()};
  unsigned long long* bad = nullptr;
  STASH_CUDA_TRY(cudaMallocManaged(&bad, sizeof(*bad)));
  *bad = 0;
  auto fill = [](cudaStream_t s, void* p, std::size_t n, std::uint64_t id, std::uint32_t v) {
    fill_kernel<<<64, 256, 0, s>>>(static_cast<std::uint8_t*>(p), n, id, v);
    STASH_CUDA_TRY(cudaGetLastError());
  };
  auto check = [bad](cudaStream_t s, void const* p, std::size_t n, std::uint64_t id, std::uint32_t v) {
    check_kernel<<<64, 256, 0, s>>>(static_cast<std::uint8_t const*>(p), n, id, v, bad);
    STASH_CUDA_TRY(cudaGetLastError());
  };
  auto const c = stash::test::run_offload_stress(m, backend, streams, 99, 4000, 4 * stash::MiB,
                                                 fill, check);
  MESSAGE("gpu stress: " << c.tensors << " tensors, " << c.acquires << " acquires, "
                         << m.stats().offloads << " offloads, " << m.stats().prefetches
                         << " prefetches");
  CHECK(*bad == 0);
  CHECK(m.stats().offloads > 100);
  STASH_CUDA_TRY(cudaFree(bad));
}

TEST_CASE("gpu: zvc transfer through mapped pinned memory round-trips ReLU-like data")
{
  using zvc_manager = stash::offload_manager<stash::cuda_backend, device_pool, host_pool,
                                             stash::device_codec_transfer<stash::device_zvc<float>>>;
  stash::cuda_backend backend;
  device_pool device;
  host_pool host(stash::pinned_host_upstream{}, stash::pinned_host_pool_options(256 * stash::MiB));
  zvc_manager m(backend, device, host);
  cudaStream_t const s = backend.create_stream();
  std::size_t const n  = (1 << 20) + 77;
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i) { h[i] = (i * 2654435761u) % 3 == 0 ? float(i % 1000) : 0.0f; }
  auto t  = m.create(n * sizeof(float), s);
  void* p = m.acquire(t, s);
  STASH_CUDA_TRY(cudaMemcpyAsync(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
  m.offload_async(t, s);
  auto const copy = m.host_copy(t);
  std::vector<float> decoded(n);
  CHECK(stash::zvc<float>::host_decode(copy, std::span<float>(decoded)) == n);
  CHECK(std::memcmp(decoded.data(), h.data(), n * sizeof(float)) == 0);
  void* q = m.acquire(t, s);
  std::vector<float> back(n);
  STASH_CUDA_TRY(cudaMemcpyAsync(back.data(), q, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  backend.synchronize(s);
  m.synchronize();
  CHECK(std::memcmp(back.data(), h.data(), n * sizeof(float)) == 0);
  m.release(t);
}
