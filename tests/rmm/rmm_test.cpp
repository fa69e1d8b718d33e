// RMM on both sides of stash, on a CPU. Built only with RMM (cmake/stash_rmm.cmake), against the
// CCCL that RMM ships (3.5), so this unit also compiles stash's headers with CCCL >= 3.1's
// spelling of cuda::mr.
//
// Which RMM resources run without a GPU: every RMM 26.10 resource that hands out host memory
// (pinned_host_memory_resource, system_memory_resource, managed_memory_resource) calls the CUDA
// runtime and fails without a driver, and every synchronous allocation (allocate_sync) of RMM's
// adaptors synchronizes a stream. RMM's adaptors (statistics, limiting, aligned, tracking) do run
// on a CPU through their stream-ordered path over an upstream that needs no device. So here:
// - stash upstream <- RMM resource: a caching_pool over RMM's pinned host resource through
//   stash::mr_upstream, whose RMM failure on this machine must come out as a typed stash error
//   (the allocation itself runs under the gpu label, tests/rmm/rmm_gpu_test.cu);
// - RMM adaptor <- stash pool: rmm::mr::statistics_resource_adaptor over a stash caching_pool,
//   stream-ordered, run for real.
#include <stash/core/device.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/mr_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_ref.hpp>
#include <stash/pool/stream_order.hpp>

#include <rmm/mr/pinned_host_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#include <rmm/resource_ref.hpp>

#include <doctest/doctest.h>
#include <cuda/version>

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>

// One CCCL in this executable: RMM's (the include order of cmake/stash_rmm.cmake).
static_assert(CCCL_VERSION == STASH_RMM_CCCL_VERSION, "a CCCL other than RMM's was picked up");
#if !defined(STASH_HAS_CUDA_MR) || !defined(STASH_CUDA_MR_SYNC_NAMES)
#error "stash does not see RMM's CCCL >= 3.1 spelling of cuda::mr"
#endif

namespace {

using rmm_pinned = rmm::mr::pinned_host_memory_resource;

// stash's upstreams are synchronous resources in CCCL 3.5's spelling and go where RMM takes one.
static_assert(cuda::mr::synchronous_resource_with<stash::host_upstream, cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<rmm::host_resource_ref, stash::host_upstream&>);
// RMM's resources are stash upstreams through mr_upstream, accessibility from their properties.
static_assert(stash::upstream_resource<stash::mr_upstream<rmm_pinned>>);
static_assert(stash::mr_upstream<rmm_pinned>::is_host_accessible);
static_assert(stash::mr_upstream<rmm_pinned>::is_device_accessible);

// Host memory declared device-accessible as well (as pinned memory is): RMM's adaptors take
// device-accessible upstreams only, and a CPU has no other memory to give them. It stands in for
// device memory; nothing dereferences it on a device.
struct host_as_device_upstream {
  static constexpr bool is_host_accessible   = true;
  static constexpr bool is_device_accessible = true;
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    return ::operator new (bytes, std::align_val_t{alignment});
  }
  void deallocate(void* p, std::size_t, std::size_t alignment) noexcept
  {
    ::operator delete (p, std::align_val_t{alignment});
  }
  bool operator==(host_as_device_upstream const&) const { return true; }
  friend void get_property(host_as_device_upstream const&, cuda::mr::host_accessible) noexcept {}
  friend void get_property(host_as_device_upstream const&, cuda::mr::device_accessible) noexcept {}
};

// On a CPU no CUDA events: immediate_order.
using stand_in_pool = stash::caching_pool<host_as_device_upstream, stash::immediate_order>;
static_assert(cuda::mr::resource_with<stand_in_pool, cuda::mr::device_accessible>);
// CCCL 3.5's type-erased references (and RMM's adaptors) hold a copyable resource; a stash pool
// has identity, so RMM gets a stash::pool_ref to it.
static_assert(cuda::mr::resource_with<stash::pool_ref<stand_in_pool>, cuda::mr::device_accessible>);

}  // namespace

TEST_CASE("rmm: RMM's statistics_resource_adaptor over a stash caching_pool")
{
  stand_in_pool pool;
  stash::pool_ref<stand_in_pool> handle{pool};
  rmm::device_async_resource_ref ref{handle};
  rmm::mr::statistics_resource_adaptor stats{ref};
  cuda::stream_ref const stream{cudaStream_t{nullptr}};
  void* a = stats.allocate(stream, 1000, 256);
  void* b = stats.allocate(stream, 3000, 64);
  std::memset(a, 1, 1000);
  std::memset(b, 2, 3000);
  CHECK(stats.get_bytes_counter().value == 4000);
  CHECK(stats.get_allocations_counter().value == 2);
  CHECK(pool.stats().in_use_bytes >= 4000);
  stats.deallocate(stream, a, 1000, 256);
  stats.deallocate(stream, b, 3000, 64);
  CHECK(stats.get_bytes_counter().value == 0);
  CHECK(stats.get_bytes_counter().peak == 4000);
  CHECK(pool.stats().in_use_bytes == 0);
  // Through the reference alone, as code written against RMM takes a resource.
  void* c = ref.allocate(stream, 512, 256);
  CHECK(pool.stats().in_use_bytes >= 512);
  ref.deallocate(stream, c, 512, 256);
}

TEST_CASE("rmm: a stash upstream serves RMM through rmm::host_resource_ref")
{
  stash::host_upstream host;
  rmm::host_resource_ref ref{host};
  void* p = ref.allocate_sync(4096, 256);
  std::memset(p, 7, 4096);
  ref.deallocate_sync(p, 4096, 256);
}

TEST_CASE("rmm: caching_pool over RMM's pinned host resource reports RMM's failure typed")
{
  if (stash::gpu_available()) { return; }  // allocates for real under gpu.rmm
  stash::mr_upstream<rmm_pinned> upstream;
  try {
    (void)upstream.allocate(1 << 20);
    FAIL("RMM's pinned host resource allocated without a usable device");
  } catch (stash::cuda_error const& e) {
    // RMM was reached (its message is kept) and the cause is the missing device, not exhaustion.
    CHECK(std::string(e.what()).find("pinned_host_memory_resource") != std::string::npos);
    CHECK(e.code() != cudaSuccess);
  }
  // The pool passes the typed error on and holds nothing (immediate_order: no CUDA events, so the
  // request reaches RMM on a CPU).
  stash::caching_pool<stash::mr_upstream<rmm_pinned>, stash::immediate_order> pool;
  CHECK_THROWS_AS((void)stash::pool_allocate(pool, stash::stream_ref{}, 1000), stash::cuda_error);
  CHECK(pool.stats().reserved_bytes == 0);
}
