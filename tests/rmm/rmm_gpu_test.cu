// RMM on both sides of stash on a device (label gpu; skipped without one). Built against RMM's
// CCCL like tests/rmm/rmm_test.cpp, by nvcc.
// - stash pools over RMM's device and pinned resources through stash::mr_upstream;
// - RMM's statistics_resource_adaptor over a stash caching_pool of device memory.
#include <stash/core/cuda_stream.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/mr_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_ref.hpp>

#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pinned_host_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/resource_ref.hpp>

#include <doctest/doctest.h>
#include <cuda/version>

#include <cstdint>
#include <cstring>
#include <vector>

static_assert(CCCL_VERSION == STASH_RMM_CCCL_VERSION, "a CCCL other than RMM's was picked up");

namespace {

__global__ void iota_kernel(std::uint32_t* data, std::size_t n)
{
  auto const i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) { data[i] = static_cast<std::uint32_t>(i); }
}

// A device pool from `Upstream`: a kernel fills a block on a stream and the host reads it back.
template <class Upstream>
void check_device_pool_over(Upstream upstream)
{
  static_assert(Upstream::is_device_accessible);
  constexpr std::size_t n = 1 << 16;
  stash::cuda_stream stream;
  stash::caching_pool<Upstream> pool(std::move(upstream));
  auto* d = static_cast<std::uint32_t*>(
      stash::pool_allocate(pool, stash::stream_ref{stream.value()}, n * sizeof(std::uint32_t)));
  iota_kernel<<<n / 256, 256, 0, stream.value()>>>(d, n);
  STASH_CUDA_TRY(cudaGetLastError());
  std::vector<std::uint32_t> h(n);
  STASH_CUDA_TRY(cudaMemcpyAsync(h.data(), d, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost,
                                 stream.value()));
  STASH_CUDA_TRY(cudaStreamSynchronize(stream.value()));
  CHECK(h[n - 1] == n - 1);
  stash::pool_deallocate(pool, stash::stream_ref{stream.value()}, d, n * sizeof(std::uint32_t));
  STASH_CUDA_TRY(cudaStreamSynchronize(stream.value()));
}

}  // namespace

TEST_CASE("gpu: caching_pool over RMM's cuda_async and pool resources")
{
  check_device_pool_over(stash::mr_upstream<rmm::mr::cuda_async_memory_resource>{});
  rmm::mr::cuda_memory_resource cuda_mr;
  rmm::mr::pool_memory_resource rmm_pool{cuda_mr, 64 << 20};
  check_device_pool_over(stash::mr_upstream<rmm::mr::pool_memory_resource>{rmm_pool});
}

TEST_CASE("gpu: caching_pool over RMM's pinned host resource")
{
  stash::caching_pool<stash::mr_upstream<rmm::mr::pinned_host_memory_resource>> pool;
  void* p = stash::pool_allocate(pool, stash::stream_ref{}, 4096);
  std::memset(p, 3, 4096);  // pinned memory: the host may touch it
  stash::pool_deallocate(pool, stash::stream_ref{}, p, 4096);
  STASH_CUDA_TRY(cudaDeviceSynchronize());
}

TEST_CASE("gpu: RMM's statistics_resource_adaptor over a stash caching_pool of device memory")
{
  stash::caching_pool<stash::device_upstream> pool;
  stash::pool_ref<stash::caching_pool<stash::device_upstream>> handle{pool};  // copyable
  rmm::mr::statistics_resource_adaptor stats{rmm::device_async_resource_ref{handle}};
  stash::cuda_stream stream;
  cuda::stream_ref const s{stream.value()};
  void* p = stats.allocate(s, 1 << 20, 256);
  CHECK(stats.get_bytes_counter().value == 1 << 20);
  CHECK(pool.stats().in_use_bytes >= 1 << 20);
  stats.deallocate(s, p, 1 << 20, 256);
  STASH_CUDA_TRY(cudaStreamSynchronize(stream.value()));
  CHECK(stats.get_bytes_counter().value == 0);
}
