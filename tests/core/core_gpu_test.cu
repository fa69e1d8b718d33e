// Core pieces on a real device: RAII streams/events/pinned buffers and the device-side upstreams.
#include <stash/core/cuda_event.hpp>
#include <stash/core/cuda_stream.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/pinned_host_buffer.hpp>
#include <stash/core/pinned_host_upstream.hpp>
#include <stash/core/units.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {
__global__ void fill_kernel(std::uint32_t* data, std::size_t n, std::uint32_t value)
{
  auto const i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) { data[i] = value + static_cast<std::uint32_t>(i); }
}

// Holds a stream for about `cycles` clocks, so that a query meanwhile answers "not ready".
__global__ void spin_kernel(long long cycles)
{
  long long const start = clock64();
  while (clock64() - start < cycles) {}
}
}  // namespace

TEST_CASE("gpu: stream, event and pinned buffer carry a round trip device <-> pinned host")
{
  constexpr std::size_t n = 1 << 20;
  stash::cuda_stream stream;
  stash::cuda_event done;
  stash::device_upstream device;
  stash::pinned_host_buffer host(n * sizeof(std::uint32_t));
  REQUIRE(host.size() == n * sizeof(std::uint32_t));

  auto* d = static_cast<std::uint32_t*>(device.allocate(n * sizeof(std::uint32_t)));
  CHECK(reinterpret_cast<std::uintptr_t>(d) % stash::cuda_allocation_alignment == 0);
  fill_kernel<<<(n + 255) / 256, 256, 0, stream.value()>>>(d, n, 7);
  STASH_CUDA_TRY(cudaGetLastError());
  STASH_CUDA_TRY(cudaMemcpyAsync(host.data(), d, host.size(), cudaMemcpyDeviceToHost, stream));
  done.record(stream);
  done.synchronize();
  CHECK(done.ready());
  CHECK(stream.is_idle());
  auto const* h  = static_cast<std::uint32_t const*>(host.data());
  bool all_match = true;
  for (std::size_t i = 0; i < n; ++i) { all_match = all_match && h[i] == 7 + i; }
  CHECK(all_match);
  device.deallocate(d, n * sizeof(std::uint32_t));
}

TEST_CASE("gpu: one stream waits on another's event without a host sync")
{
  stash::cuda_stream producer;
  stash::cuda_stream consumer(/*priority=*/-1);
  stash::cuda_event produced;
  stash::device_upstream device;
  constexpr std::size_t n = 4096;
  auto* d                 = static_cast<std::uint32_t*>(device.allocate(n * sizeof(std::uint32_t)));
  std::vector<std::uint32_t> h(n, 0);
  fill_kernel<<<n / 256, 256, 0, producer.value()>>>(d, n, 100);
  STASH_CUDA_TRY(cudaGetLastError());
  produced.record(producer);
  produced.wait_on(consumer);
  STASH_CUDA_TRY(
      cudaMemcpyAsync(h.data(), d, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, consumer));
  consumer.synchronize();
  CHECK(h[0] == 100);
  CHECK(h[n - 1] == 100 + n - 1);
  device.deallocate(d, n * sizeof(std::uint32_t));
}

TEST_CASE("gpu: RAII wrappers move and release")
{
  stash::cuda_stream a;
  cudaStream_t const raw = a.value();
  stash::cuda_stream b(std::move(a));
  CHECK(a.value() == nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  CHECK(b.value() == raw);
  stash::cuda_event e1;
  stash::cuda_event e2(std::move(e1));
  CHECK(e1.value() == nullptr);  // NOLINT(bugprone-use-after-move)
  stash::pinned_host_buffer p1(64);
  stash::pinned_host_buffer p2(std::move(p1));
  CHECK(p1.empty());  // NOLINT(bugprone-use-after-move)
  CHECK(p2.size() == 64);
}

// A cudaMalloc that fails on purpose: compute-sanitizer reports every failing API call, so this
// case is in the `cuda_api_errors` suite, which scripts/gpu-check.sh runs under memcheck with
// --report-api-errors no and excludes from the other sanitizer runs.
TEST_CASE("gpu: device_upstream reports exhaustion as out_of_memory with the device's figures" *
          doctest::test_suite("cuda_api_errors"))
{
  stash::device_upstream device;
  std::size_t free_bytes = 0, total_bytes = 0;
  STASH_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  try {
    (void)device.allocate(total_bytes * 4);
    FAIL("allocating 4x the device's memory succeeded");
  } catch (stash::out_of_memory const& e) {
    CHECK(e.requested_bytes() == total_bytes * 4);
    CHECK(e.budget_bytes() == total_bytes);
    CHECK(e.in_use_bytes().has_value());
  }
  // The failure left no sticky error behind: the device is still usable.
  void* p = device.allocate(1024);
  CHECK(p != nullptr);
  device.deallocate(p, 1024);
}

TEST_CASE("gpu: pinned_host_upstream gives host- and device-accessible memory")
{
  stash::pinned_host_upstream pinned;
  auto* p = static_cast<std::uint32_t*>(pinned.allocate(4096 * sizeof(std::uint32_t)));
  std::memset(p, 0, 4096 * sizeof(std::uint32_t));
  fill_kernel<<<16, 256>>>(p, 4096, 5);  // the kernel writes host memory directly (UVA)
  STASH_CUDA_TRY(cudaGetLastError());
  STASH_CUDA_TRY(cudaDeviceSynchronize());
  CHECK(p[0] == 5);
  CHECK(p[4095] == 5 + 4095);
  pinned.deallocate(p, 4096 * sizeof(std::uint32_t));
}

// Provokes a launch error on purpose: in the `cuda_api_errors` suite (see above).
TEST_CASE("gpu: queries and handled failures leave the caller's pending launch error in place" *
          doctest::test_suite("cuda_api_errors"))
{
  stash::cuda_stream busy;
  stash::cuda_event spun;
  // A launch error nobody has read yet: 2048 threads per block is beyond every device's limit.
  fill_kernel<<<1, 2048, 0, busy.value()>>>(nullptr, 0, 0);
  REQUIRE(cudaPeekAtLastError() == cudaErrorInvalidConfiguration);
  spin_kernel<<<1, 1, 0, busy.value()>>>(200'000'000);
  REQUIRE(cudaPeekAtLastError() == cudaErrorInvalidConfiguration);  // a good launch keeps it
  spun.record(busy);
  // "Not ready" (almost surely, while the kernel spins) is not the caller's error to clear.
  bool const idle  = busy.is_idle();
  bool const ready = spun.ready();
  CHECK(cudaPeekAtLastError() == cudaErrorInvalidConfiguration);
  // Nor is a failure stash handles: the error it throws is not the pending one.
  CHECK_THROWS_AS([] { STASH_CUDA_TRY(cudaErrorInvalidValue); }(), stash::cuda_error);
  STASH_CUDA_CHECK_NOTHROW(cudaErrorInvalidValue);
  CHECK(cudaPeekAtLastError() == cudaErrorInvalidConfiguration);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);  // read, and reset, by its owner
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  busy.synchronize();
  MESSAGE("queried while spinning: stream idle " << idle << ", event ready " << ready);
}

}  // namespace STASH_UNITY_ID
