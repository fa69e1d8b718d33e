// stash::mr_upstream: synchronous cuda::mr resources of either CCCL spelling as stash upstreams,
// under a caching_pool, with their accessibility read from cuda::mr properties and their failures
// turned into stash's typed errors. Compiled with the toolkit's CCCL (3.0); tests/rmm runs the
// adaptor over RMM's resources with RMM's CCCL (3.5).
#include <stash/core/device.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/limiting_upstream.hpp>
#include <stash/core/mr_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/pool.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace STASH_UNITY_ID {

namespace {

// Host memory in the CUDA 13.0 toolkit's spelling (allocate / deallocate), with a switch that
// makes the next allocation fail the way a foreign library reports it (std::bad_alloc).
struct toolkit_spelled_host_resource {
  int* live       = nullptr;  // outstanding allocations, shared by copies
  bool fail       = false;
  bool fail_other = false;
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    if (fail) { throw std::bad_alloc(); }
    if (fail_other) { throw std::runtime_error("foreign failure"); }
    ++*live;
    return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  }
  void deallocate(void* p, std::size_t, std::size_t) noexcept
  {
    --*live;
    std::free(p);
  }
  bool operator==(toolkit_spelled_host_resource const& o) const { return live == o.live; }
#if defined(STASH_HAS_CUDA_MR)
  friend void get_property(toolkit_spelled_host_resource const&, cuda::mr::host_accessible) noexcept
  {
  }
#endif
};

// The same memory in the spelling of CCCL >= 3.1 and RMM 26 (allocate_sync / deallocate_sync).
struct sync_named_host_resource {
  toolkit_spelled_host_resource inner;
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return inner.allocate(bytes, alignment);
  }
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    inner.deallocate(p, bytes, alignment);
  }
  bool operator==(sync_named_host_resource const& o) const { return inner == o.inner; }
#if defined(STASH_HAS_CUDA_MR)
  friend void get_property(sync_named_host_resource const&, cuda::mr::host_accessible) noexcept {}
#endif
};

// Says its memory is device memory and fails: stands in for RMM's device resources on a machine
// without a GPU, where every RMM allocation fails with std::bad_alloc.
struct failing_device_resource {
  void* allocate_sync(std::size_t, std::size_t) { throw std::bad_alloc(); }
  void deallocate_sync(void*, std::size_t, std::size_t) noexcept {}
  bool operator==(failing_device_resource const&) const { return true; }
#if defined(STASH_HAS_CUDA_MR)
  friend void get_property(failing_device_resource const&, cuda::mr::device_accessible) noexcept {}
#endif
};

// No properties at all: nobody stash knows of may touch the memory.
struct propertyless_resource {
  void* allocate_sync(std::size_t, std::size_t) { return nullptr; }
  void deallocate_sync(void*, std::size_t, std::size_t) noexcept {}
  bool operator==(propertyless_resource const&) const { return true; }
};

using toolkit_upstream = stash::mr_upstream<toolkit_spelled_host_resource>;
using sync_upstream    = stash::mr_upstream<sync_named_host_resource>;

static_assert(stash::synchronous_mr_resource<toolkit_spelled_host_resource>);
static_assert(stash::synchronous_mr_resource<sync_named_host_resource>);
static_assert(stash::synchronous_mr_resource<stash::host_upstream>);
static_assert(stash::upstream_resource<toolkit_upstream>);
static_assert(stash::upstream_resource<sync_upstream>);
static_assert(stash::upstream_resource<stash::mr_upstream<failing_device_resource>>);
static_assert(stash::upstream_resource<stash::mr_upstream<stash::host_upstream>>);
static_assert(!stash::mr_upstream<propertyless_resource>::is_host_accessible);
static_assert(!stash::mr_upstream<propertyless_resource>::is_device_accessible);
#if defined(STASH_HAS_CUDA_MR)
static_assert(toolkit_upstream::is_host_accessible && !toolkit_upstream::is_device_accessible);
static_assert(sync_upstream::is_host_accessible && !sync_upstream::is_device_accessible);
static_assert(stash::mr_upstream<failing_device_resource>::is_device_accessible);
static_assert(!stash::mr_upstream<failing_device_resource>::is_host_accessible);
// The adaptor is itself a cuda::mr resource with the adapted resource's properties.
static_assert(stash::cuda_mr_synchronous_resource_with<sync_upstream, cuda::mr::host_accessible>);
static_assert(!cuda::has_property<sync_upstream, cuda::mr::device_accessible>);
#endif

// `live`: the resource's count of outstanding allocations (nullptr: it keeps none).
template <class Upstream>
void check_pool_over(Upstream upstream, int const* live)
{
  stash::caching_pool<Upstream> pool(std::move(upstream));
  void* p = stash::pool_allocate(pool, stash::stream_ref{}, 1000);
  REQUIRE(p != nullptr);
  std::memset(p, 0x5A, 1000);  // host memory, as the properties say
  if (live != nullptr) { CHECK(*live == 1); }
  void* q = stash::pool_allocate(pool, stash::stream_ref{}, 3000);
  if (live != nullptr) { CHECK(*live == 1); }  // served from the same segment
  stash::pool_deallocate(pool, stash::stream_ref{}, p, 1000);
  stash::pool_deallocate(pool, stash::stream_ref{}, q, 3000);
  CHECK(pool.stats().in_use_bytes == 0);
}

}  // namespace

TEST_CASE("mr_upstream: a caching_pool over a cuda::mr resource of either spelling")
{
  int live = 0;
  check_pool_over(toolkit_upstream{toolkit_spelled_host_resource{&live}}, &live);
  CHECK(live == 0);  // the pool gave its segment back
  check_pool_over(sync_upstream{sync_named_host_resource{{&live}}}, &live);
  CHECK(live == 0);
  check_pool_over(stash::mr_upstream<stash::host_upstream>{}, nullptr);
}

TEST_CASE("mr_upstream: a foreign std::bad_alloc is a stash::out_of_memory, the pool unchanged")
{
  int live = 0;
  stash::caching_pool<toolkit_upstream> pool(
      toolkit_upstream{toolkit_spelled_host_resource{&live}});
  void* p                                  = stash::pool_allocate(pool, stash::stream_ref{}, 1000);
  auto const before                        = pool.stats();
  pool.upstream().upstream_resource().fail = true;
  CHECK_THROWS_AS((void)stash::pool_allocate(pool, stash::stream_ref{}, 64 << 20),
                  stash::out_of_memory);
  CHECK(pool.stats().reserved_bytes == before.reserved_bytes);
  CHECK(pool.stats().in_use_bytes == before.in_use_bytes);
  pool.upstream().upstream_resource().fail = false;
  stash::pool_deallocate(pool, stash::stream_ref{}, p, 1000);

  toolkit_upstream other{toolkit_spelled_host_resource{&live}};
  other.upstream_resource().fail_other = true;
  // Not an allocation failure stash knows a type for: the library's own exception passes through.
  CHECK_THROWS_AS((void)other.allocate(64), std::runtime_error);
}

TEST_CASE("mr_upstream: a device resource failing without a usable device is a stash::cuda_error")
{
  stash::mr_upstream<failing_device_resource> upstream;
  if (stash::gpu_available()) {
    CHECK_THROWS_AS((void)upstream.allocate(64), stash::out_of_memory);
  } else {
    CHECK_THROWS_AS((void)upstream.allocate(64), stash::cuda_error);
  }
  // A precondition failure stays one, device or not.
  stash::mr_upstream<stash::device_upstream> device;
  CHECK_THROWS_AS((void)device.allocate(64, 3), stash::logic_error);
}

TEST_CASE("mr_upstream: a non-copyable resource by reference")
{
  using limited_type = stash::limiting_upstream<stash::host_upstream>;
  limited_type limited(1 << 20);
  stash::mr_upstream<limited_type&> upstream{limited};
  static_assert(stash::upstream_resource<stash::mr_upstream<limited_type&>>);
#if defined(STASH_HAS_CUDA_MR)
  static_assert(stash::mr_upstream<limited_type&>::is_host_accessible);
#endif
  void* p = upstream.allocate(4096, 256);
  CHECK(limited.in_use_bytes() == 4096);
  upstream.deallocate(p, 4096, 256);
  CHECK(limited.in_use_bytes() == 0);
  CHECK_THROWS_AS((void)upstream.allocate(2 << 20, 256), stash::out_of_memory);
  CHECK(upstream == stash::mr_upstream<limited_type&>{limited});
}

#if defined(STASH_HAS_CUDA_MR)
TEST_CASE("mr_upstream: a type-erased cuda::mr resource reference")
{
#if defined(STASH_CUDA_MR_SYNC_NAMES)
  using host_ref = cuda::mr::synchronous_resource_ref<cuda::mr::host_accessible>;
#else
  using host_ref = cuda::mr::resource_ref<cuda::mr::host_accessible>;
#endif
  stash::host_upstream host;
  stash::mr_upstream<host_ref> upstream{host_ref{host}};
  static_assert(stash::mr_upstream<host_ref>::is_host_accessible);
  stash::caching_pool<stash::mr_upstream<host_ref>> pool(upstream);
  void* p = stash::pool_allocate(pool, stash::stream_ref{}, 512);
  std::memset(p, 1, 512);
  stash::pool_deallocate(pool, stash::stream_ref{}, p, 512);
}
#endif

}  // namespace STASH_UNITY_ID
