// Conformance of the upstream_resource concept on the host-side upstreams, and the cuda::mr
// interop of every upstream (a compile-time property, so it is checked here without a GPU).
#include <stash/core/device.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/limiting_upstream.hpp>
#include <stash/core/pinned_host_upstream.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace STASH_UNITY_ID {

static_assert(stash::upstream_resource<stash::host_upstream>);
static_assert(stash::upstream_resource<stash::device_upstream>);
static_assert(stash::upstream_resource<stash::pinned_host_upstream>);
static_assert(stash::upstream_resource<stash::limiting_upstream<stash::host_upstream>>);

#if defined(STASH_HAS_CUDA_MR)
// Synchronous cuda::mr resources in the spelling of the CCCL this unit is compiled with (the
// toolkit's 3.0 here; the RMM tests compile the same upstreams against RMM's CCCL 3.5).
static_assert(
    stash::cuda_mr_synchronous_resource_with<stash::host_upstream, cuda::mr::host_accessible>);
static_assert(!cuda::has_property<stash::host_upstream, cuda::mr::device_accessible>);
static_assert(
    stash::cuda_mr_synchronous_resource_with<stash::device_upstream, cuda::mr::device_accessible>);
static_assert(!cuda::has_property<stash::device_upstream, cuda::mr::host_accessible>);
static_assert(stash::cuda_mr_synchronous_resource_with<
              stash::pinned_host_upstream, cuda::mr::host_accessible, cuda::mr::device_accessible>);
static_assert(stash::cuda_mr_synchronous_resource_with<
              stash::limiting_upstream<stash::host_upstream>, cuda::mr::host_accessible>);
#endif

TEST_CASE("stash::stash turns on libcu++'s cuda::mr concepts")
{
#if defined(STASH_HAS_CUDA_MR)
  CHECK(true);
#else
  FAIL("LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE is not defined by the stash::stash target");
#endif
}

namespace {

template <class Upstream>
void check_host_upstream_conformance(Upstream& upstream)
{
  static_assert(Upstream::is_host_accessible);
  CHECK(upstream == upstream);
  for (std::size_t alignment :
       {std::size_t{8}, std::size_t{64}, std::size_t{256}, std::size_t{4096}}) {
    std::vector<void*> blocks;
    for (std::size_t bytes :
         {std::size_t{1}, std::size_t{7}, std::size_t{256}, std::size_t{100000}}) {
      void* p = upstream.allocate(bytes, alignment);
      REQUIRE(p != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(p) % alignment == 0);
      std::memset(p, 0xAB, bytes);  // the memory is really there and writable
      upstream.deallocate(p, bytes, alignment);
    }
  }
  // Distinct live blocks do not alias.
  void* a = upstream.allocate(128, 64);
  void* b = upstream.allocate(128, 64);
  CHECK(a != b);
  upstream.deallocate(a, 128, 64);
  upstream.deallocate(b, 128, 64);
}

}  // namespace

TEST_CASE("host_upstream conforms")
{
  stash::host_upstream upstream;
  check_host_upstream_conformance(upstream);
  CHECK(stash::host_upstream{} == stash::host_upstream{});
  CHECK_THROWS_AS((void)upstream.allocate(16, 3), stash::logic_error);
}

TEST_CASE("limiting_upstream conforms and enforces its budget without losing state")
{
  stash::limiting_upstream<stash::host_upstream> limited(1 << 20);
  check_host_upstream_conformance(limited);
  CHECK(limited.in_use_bytes() == 0);

  void* a = limited.allocate(600 * 1024, 256);
  CHECK(limited.in_use_bytes() == 600 * 1024);
  try {
    (void)limited.allocate(600 * 1024, 256);
    FAIL("allocation beyond the budget succeeded");
  } catch (stash::out_of_memory const& e) {
    CHECK(e.requested_bytes() == 600 * 1024);
    CHECK(e.budget_bytes() == std::size_t{1} << 20);
    CHECK(e.in_use_bytes() == 600 * 1024);
    CHECK(e.largest_free_bytes() == (std::size_t{1} << 20) - 600 * 1024);
  }
  // The failed call changed nothing: the budget's remainder is still usable.
  CHECK(limited.in_use_bytes() == 600 * 1024);
  void* b = limited.allocate(400 * 1024, 256);
  CHECK(limited.in_use_bytes() == 1000 * 1024);
  CHECK(limited.peak_bytes() == 1000 * 1024);
  limited.deallocate(a, 600 * 1024, 256);
  limited.deallocate(b, 400 * 1024, 256);
  CHECK(limited.in_use_bytes() == 0);
  CHECK(limited.peak_bytes() == 1000 * 1024);

  stash::limiting_upstream<stash::host_upstream> other(1 << 20);
  CHECK_FALSE(limited == other);  // counters are per adaptor (copies share them)
  CHECK(stash::limiting_upstream<stash::host_upstream>(limited) == limited);
}

TEST_CASE("device and pinned upstreams report a typed error when no device is usable")
{
  if (stash::gpu_available()) { return; }  // covered by gpu.core on a machine with a device
  stash::device_upstream device;
  stash::pinned_host_upstream pinned;
  // Without a driver/device these fail; stash must surface it as a typed error, not a nullptr.
  CHECK_THROWS_AS((void)device.allocate(1024), stash::cuda_error);
  CHECK_THROWS_AS((void)pinned.allocate(1024), stash::cuda_error);
}

}  // namespace STASH_UNITY_ID
