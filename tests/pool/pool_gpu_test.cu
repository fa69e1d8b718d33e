// The pool conformance suite on a device: every pool over real device memory.

#include <stash/core/cuda_stream.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/pool/async_pool.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/testing/pool_conformance.hpp>

#include <doctest/doctest.h>

namespace STASH_UNITY_ID {

namespace {
using device_caching_pool = stash::caching_pool<stash::device_upstream>;
static_assert(stash::pool<device_caching_pool>);
}  // namespace

TEST_CASE("gpu: pool conformance: caching_pool over device memory")
{
  stash::cuda_stream stream;
  auto const report = stash::testing::check_pool<device_caching_pool>(
      [](std::size_t budget) {
        stash::caching_pool_options o;
        o.budget = budget;
        return std::make_unique<device_caching_pool>(stash::device_upstream{}, o);
      },
      stream);
  CHECK_MESSAGE(report.ok(), report.summary());
  stream.synchronize();
}

TEST_CASE("gpu: pool conformance: lifetime_arena over device memory")
{
  using device_arena = stash::lifetime_arena<stash::device_upstream>;
  static_assert(stash::pool<device_arena>);
  stash::cuda_stream stream;
  auto const report = stash::testing::check_pool<device_arena>(
      [](std::size_t budget) {
        stash::lifetime_arena_options o;
        o.budget = budget;
        return std::make_unique<device_arena>(stash::device_upstream{}, o);
      },
      stream);
  CHECK_MESSAGE(report.ok(), report.summary());
  stream.synchronize();
}

TEST_CASE("gpu: pool conformance: async_pool (cudaMallocFromPoolAsync)")
{
  stash::cuda_stream stream;
  auto const report = stash::testing::check_pool<stash::async_pool>(
      [](std::size_t budget) { return std::make_unique<stash::async_pool>(budget); }, stream);
  CHECK_MESSAGE(report.ok(), report.summary());
  stream.synchronize();
}

TEST_CASE("gpu: caching_pool hands a block to another stream only after its event completed")
{
  stash::cuda_stream a;
  stash::cuda_stream b;
  device_caching_pool pool;
  void* p = pool.allocate_async(4096, a);
  pool.deallocate_async(p, 4096, a);
  a.synchronize();  // the free's event has completed
  void* q = pool.allocate_async(4096, b);
  CHECK(q == p);
  pool.deallocate_async(q, 4096, b);
  b.synchronize();
}

TEST_CASE("gpu: async_pool's destructor waits on the pool's device and keeps the current one")
{
  int count = 0;
  int home  = 0;
  STASH_CUDA_TRY(cudaGetDeviceCount(&count));
  STASH_CUDA_TRY(cudaGetDevice(&home));
  int const other = count > 1 ? (home + 1) % count : home;  // another device where there is one
  {
    stash::cuda_stream s;
    stash::async_pool pool;
    CHECK(pool.device() == home);
    void* p = pool.allocate_async(1 << 20, s);
    pool.deallocate_async(p, 1 << 20, s);  // a free still queued on the pool's device
    STASH_CUDA_TRY(cudaSetDevice(other));
  }  // the pool dies while `other` is current
  int current = -1;
  STASH_CUDA_TRY(cudaGetDevice(&current));
  CHECK(current == other);
  STASH_CUDA_TRY(cudaSetDevice(home));
  if (count < 2) { MESSAGE("one device: the switch of devices was not exercised"); }
}

}  // namespace STASH_UNITY_ID
