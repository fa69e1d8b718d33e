// The offload manager on the CUDA backend: the host backend's rules, on real streams and copy
// engines, with every tensor's bytes checked by a kernel after every acquire.
#include "offload_stress.hpp"

#include <stash/codec/device_rle.cuh>
#include <stash/codec/device_zvc.cuh>
#include <stash/codec/zvc.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/device_two_value_transfer.cuh>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using device_pool = stash::caching_pool<stash::device_upstream>;
using host_pool   = stash::pinned_host_pool<>;
using manager     = stash::offload_manager<stash::cuda_backend, device_pool, host_pool>;
using zvc_manager =
    stash::offload_manager<stash::cuda_backend, device_pool, host_pool, stash::zvc<float>>;

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
  std::vector<stash::cuda_backend::stream> streams = {
      backend.create_stream(), backend.create_stream(), backend.create_stream()};
  unsigned long long* bad = nullptr;
  STASH_CUDA_TRY(cudaMallocManaged(&bad, sizeof(*bad)));
  *bad      = 0;
  auto fill = [](cuda::stream_ref s, void* p, std::size_t n, std::uint64_t id, std::uint32_t v) {
    fill_kernel<<<64, 256, 0, s.get()>>>(static_cast<std::uint8_t*>(p), n, id, v);
    STASH_CUDA_TRY(cudaGetLastError());
  };
  auto check = [bad](cuda::stream_ref s, void const* p, std::size_t n, std::uint64_t id,
                     std::uint32_t v) {
    check_kernel<<<64, 256, 0, s.get()>>>(static_cast<std::uint8_t const*>(p), n, id, v, bad);
    STASH_CUDA_TRY(cudaGetLastError());
  };
  auto const c =
      stash::test::run_offload_stress(m, backend, streams, 99, 4000, 4 * stash::MiB, fill, check);
  MESSAGE("gpu stress: " << c.tensors << " tensors, " << c.acquires << " acquires, "
                         << m.stats().offloads << " offloads, " << m.stats().prefetches
                         << " prefetches");
  CHECK(*bad == 0);
  CHECK(m.stats().offloads > 100);
  STASH_CUDA_TRY(cudaFree(bad));
}

TEST_CASE("gpu: zvc transfer through mapped pinned memory round-trips ReLU-like data")
{
  stash::cuda_backend backend;
  device_pool device;
  host_pool host(stash::pinned_host_upstream{}, stash::pinned_host_pool_options(256 * stash::MiB));
  zvc_manager m(backend, device, host);
  cudaStream_t const s = backend.create_stream().get();
  std::size_t const n  = (1 << 20) + 77;
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i) {
    h[i] = (i * 2654435761u) % 3 == 0 ? float(i % 1000) : 0.0f;
  }
  auto t  = m.allocate_async(n * sizeof(float), s);
  void* p = m.acquire_async(t, s);
  STASH_CUDA_TRY(cudaMemcpyAsync(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
  m.offload_async(t, s);
  auto const copy = m.host_copy(t);
  std::vector<float> decoded(n);
  CHECK(stash::zvc<float>::host_decode(copy, std::span<float>(decoded)) == n);
  CHECK(std::memcmp(decoded.data(), h.data(), n * sizeof(float)) == 0);
  void* q = m.acquire_async(t, s);
  std::vector<float> back(n);
  STASH_CUDA_TRY(cudaMemcpyAsync(back.data(), q, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  backend.synchronize(s);
  m.synchronize();
  CHECK(std::memcmp(back.data(), h.data(), n * sizeof(float)) == 0);
  m.deallocate_async(t);
}

// ---------------------------------------------------------------------------------------------
// CUDA graph capture (the rules are in offload_manager.hpp's file docs).

namespace {

// As pattern(), with every third 4-byte word zero so that zvc has something to drop. The version
// is read on the device, so that each launch of one graph writes and expects new bytes.
__host__ __device__ std::uint8_t graph_pattern(std::uint64_t id, std::uint32_t version,
                                               std::size_t i)
{
  return (i / 4) % 3 == 0 ? std::uint8_t{0} : pattern(id, version, i);
}

__global__ void fill_versioned_kernel(std::uint8_t* p, std::size_t n, std::uint64_t id,
                                      std::uint32_t const* version)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = graph_pattern(id, *version, i);
  }
}

__global__ void check_versioned_kernel(std::uint8_t const* p, std::size_t n, std::uint64_t id,
                                       std::uint32_t const* version, unsigned long long* bad)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    if (p[i] != graph_pattern(id, *version, i)) { atomicAdd(bad, 1ull); }
  }
}

__global__ void scribble_kernel(std::uint8_t* p, std::size_t n)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = 0xA5;
  }
}

// Device memory the graph reads its version from and counts mismatches into.
struct graph_probe {
  std::uint32_t* version{nullptr};
  unsigned long long* bad{nullptr};

  graph_probe()
  {
    STASH_CUDA_TRY(cudaMalloc(&version, sizeof(*version)));
    STASH_CUDA_TRY(cudaMallocManaged(&bad, sizeof(*bad)));
    *bad = 0;
  }
  graph_probe(graph_probe const&)            = delete;
  graph_probe& operator=(graph_probe const&) = delete;
  ~graph_probe()
  {
    STASH_CUDA_CHECK_NOTHROW(cudaFree(version));
    STASH_CUDA_CHECK_NOTHROW(cudaFree(bad));
  }

  void set_version(std::uint32_t v, cudaStream_t s)
  {
    STASH_CUDA_TRY(cudaMemcpyAsync(version, &v, sizeof(v), cudaMemcpyHostToDevice, s));
    STASH_CUDA_TRY(cudaStreamSynchronize(s));  // `v` lives on this frame
  }
  void fill(cudaStream_t s, void* p, std::size_t n, std::uint64_t id) const
  {
    fill_versioned_kernel<<<64, 256, 0, s>>>(static_cast<std::uint8_t*>(p), n, id, version);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  void check(cudaStream_t s, void const* p, std::size_t n, std::uint64_t id) const
  {
    check_versioned_kernel<<<64, 256, 0, s>>>(static_cast<std::uint8_t const*>(p), n, id, version,
                                              bad);
    STASH_CUDA_TRY(cudaGetLastError());
  }
};

// An instantiated graph, destroyed with its source.
struct graph_exec {
  cudaGraph_t graph{nullptr};
  cudaGraphExec_t exec{nullptr};

  explicit graph_exec(cudaStream_t s)
  {
    STASH_CUDA_TRY(cudaStreamEndCapture(s, &graph));
    STASH_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
  }
  graph_exec(graph_exec const&)            = delete;
  graph_exec& operator=(graph_exec const&) = delete;
  ~graph_exec()
  {
    if (exec != nullptr) { STASH_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec)); }
    if (graph != nullptr) { STASH_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph)); }
  }
  void launch(cudaStream_t s) const { STASH_CUDA_TRY(cudaGraphLaunch(exec, s)); }
};

bool is_capturing(cudaStream_t s)
{
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  STASH_CUDA_TRY(cudaStreamIsCapturing(s, &status));
  return status == cudaStreamCaptureStatusActive;
}

// Captures create / fill / offload / (scribble over the old device bytes) / prefetch / acquire /
// check / release of several tensors, then launches the graph several times with new data.
template <class Transfer>
void capture_offload_round_trip()
{
  using graph_manager =
      stash::offload_manager<stash::cuda_backend, device_pool, host_pool, Transfer>;
  stash::cuda_backend backend;
  // Pools of the graph's own: the graph owns the blocks its capture took.
  device_pool device;
  host_pool host(stash::pinned_host_upstream{}, stash::pinned_host_pool_options(256 * stash::MiB));
  graph_manager m(backend, device, host);
  cudaStream_t const s = backend.create_stream().get();
  graph_probe probe;
  std::vector<std::size_t> const sizes = {1 * stash::MiB + 4, 3 * stash::MiB, 256 * 1024 + 12,
                                          5 * stash::MiB};
  device.reserve(96 * stash::MiB);
  host.reserve(64 * stash::MiB);
  auto const device_reserved = device.stats().reserved_bytes;
  auto const host_reserved   = host.stats().reserved_bytes;

  STASH_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  std::vector<stash::tensor_handle> ts;
  std::vector<void*> old;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    ts.push_back(m.allocate_async(sizes[k], s));
    old.push_back(m.acquire_async(ts[k], s));
    probe.fill(s, old[k], sizes[k], ts[k].index());
    m.offload_async(ts[k], s);
  }
  // After the copies, the bytes left on the device are garbage: what comes back came from the host.
  m.join_async(s);
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    scribble_kernel<<<64, 256, 0, s>>>(static_cast<std::uint8_t*>(old[k]), sizes[k]);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  for (auto t : ts) { m.prefetch_async(t, s); }
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    void* q = m.acquire_async(ts[k], s);
    CHECK(q != old[k]);
    probe.check(s, q, sizes[k], ts[k].index());
    m.deallocate_async(ts[k]);
  }
  m.join_async(s);
  graph_exec const g(s);  // cudaStreamEndCapture: fails if the capture was invalidated or unjoined

  CHECK(device.stats().reserved_bytes == device_reserved);
  CHECK(host.stats().reserved_bytes == host_reserved);
  for (std::uint32_t v = 1; v <= 4; ++v) {
    probe.set_version(v, s);
    g.launch(s);
    STASH_CUDA_TRY(cudaStreamSynchronize(s));
    CHECK_MESSAGE(*probe.bad == 0, "launch " << v);
  }
  m.synchronize();
  CHECK(m.stats().offloads == sizes.size());  // counted once, at capture
  CHECK(device.stats().in_use_bytes == 0);
  CHECK(host.stats().in_use_bytes == 0);
}

}  // namespace

TEST_CASE("gpu: a captured offload / prefetch / acquire region replays with new bytes each launch")
{
  SUBCASE("raw copies") { capture_offload_round_trip<stash::raw_transfer>(); }
  SUBCASE("zvc into mapped pinned memory, decoded from a device copy sized by its header")
  {
    // In a graph the host never knows the size: the staging kernel reads it at each launch.
    capture_offload_round_trip<stash::device_codec_transfer<stash::device_zvc<float>>>();
  }
  SUBCASE("zvc decoded from mapped memory")
  {
    capture_offload_round_trip<
        stash::device_codec_transfer<stash::device_zvc<float>, stash::decode_from::mapped>>();
  }
  SUBCASE("two_value on data that is not two-valued: the unchanged form, chosen on the device")
  {
    capture_offload_round_trip<stash::device_two_value_transfer<float>>();
  }
}

TEST_CASE("gpu: an allocation needed while capturing is refused; tensor, pools and capture intact")
{
  stash::cuda_backend backend;
  device_pool device;
  host_pool host(stash::pinned_host_upstream{}, stash::pinned_host_pool_options(256 * stash::MiB));
  manager m(backend, device, host);
  cudaStream_t const s = backend.create_stream().get();
  graph_probe probe;
  std::size_t const n = 2 * stash::MiB;
  device.reserve(8 * stash::MiB);  // the tensor fits; the host pool has nothing reserved

  STASH_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  auto t = m.allocate_async(n, s);
  probe.fill(s, m.acquire_async(t, s), n, t.index());
  auto const host_before   = host.stats();
  auto const device_before = device.stats();
  try {
    m.offload_async(t, s);
    FAIL("the pinned pool grew while capturing");
  } catch (stash::logic_error const& e) {
    CHECK(std::string(e.what()).find("captured into a CUDA graph") != std::string::npos);
  }
  CHECK(m.state(t) == stash::tensor_state::resident);
  CHECK(host.stats().reserved_bytes == host_before.reserved_bytes);
  CHECK(host.stats().in_use_bytes == host_before.in_use_bytes);
  CHECK(device.stats().in_use_bytes == device_before.in_use_bytes);
  CHECK(is_capturing(s));                           // not invalidated
  CHECK_FALSE(is_capturing(m.d2h_stream().get()));  // nothing was queued on the side stream
  probe.check(s, m.acquire_async(t, s), n, t.index());
  m.deallocate_async(t);
  m.join_async(s);
  graph_exec const g(s);
  probe.set_version(7, s);
  g.launch(s);
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  CHECK(*probe.bad == 0);
  CHECK(m.stats().offloads == 0);
}

TEST_CASE("gpu: polling tensors of a capture queries no captured event; the capture stays valid")
{
  // cudaEventQuery of an event recorded while capturing fails (cudaErrorCapturedEvent) and may
  // invalidate the capture; state(), the reaping of decodes and pool reuse must not ask.
  stash::cuda_backend backend;
  device_pool device;
  host_pool host(stash::pinned_host_upstream{}, stash::pinned_host_pool_options(256 * stash::MiB));
  zvc_manager m(backend, device, host);
  cudaStream_t const s     = backend.create_stream().get();
  cudaStream_t const other = backend.create_stream().get();
  graph_probe probe;
  std::size_t const n = 1 * stash::MiB;
  device.reserve(16 * stash::MiB);
  host.reserve(16 * stash::MiB);

  STASH_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  auto t = m.allocate_async(n, s);
  probe.fill(s, m.acquire_async(t, s), n, t.index());
  m.offload_async(t, s);
  CHECK(m.state(t) == stash::tensor_state::offloading);
  m.prefetch_async(t, s);  // leaves a decode status to reap
  probe.check(s, m.acquire_async(t, s), n, t.index());
  auto u = m.allocate_async(n, s);
  probe.fill(s, m.acquire_async(u, s), n,
             u.index());  // zvc's mask kernel reads every byte it offloads
  m.offload_async(u, s);  // reaps first
  m.deallocate_async(u);
  m.deallocate_async(t);
  m.join_async(s);
  CHECK(is_capturing(s));
  graph_exec const g(s);  // cudaStreamEndCapture fails on an invalidated capture

  // The blocks the capture freed are not queried either when another stream asks for memory.
  void* p = device.allocate_async(n, other);
  device.deallocate_async(p, n, other);
  m.synchronize();
  probe.set_version(3, s);
  g.launch(s);
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  CHECK(*probe.bad == 0);
}

TEST_CASE("gpu: a tensor past a device codec's size limit is refused before anything is taken")
{
  // device_codec_transfer::host_bytes is what the manager asks first (issue #15: the limits used
  // to fire inside encode, after the host slot and scratch were taken).
  using zvc_transfer          = stash::device_codec_transfer<stash::device_zvc<float>>;
  using rle_transfer          = stash::device_codec_transfer<stash::device_rle<float>>;
  std::size_t const zvc_limit = stash::zvc<float>::max_elements;
  CHECK_NOTHROW((void)zvc_transfer::host_bytes(zvc_limit * sizeof(float)));
  CHECK_THROWS_AS((void)zvc_transfer::host_bytes((zvc_limit + 1) * sizeof(float)),
                  stash::logic_error);
  // rle's worst case (6 B per float) must fit a u32 table: 2^30 floats do not.
  CHECK_THROWS_AS((void)rle_transfer::host_bytes(std::size_t{4} << 30), stash::logic_error);
  CHECK_THROWS_AS((void)zvc_manager::host_slot_bytes((zvc_limit + 1) * sizeof(float)),
                  stash::logic_error);
}

// A manager on CUDA streams with one tensor `t` of `n` bytes whose contents a kernel writes and
// checks, and a mismatch counter in managed memory (the redrop cases below).
template <class Manager>
struct redrop_fixture {
  stash::cuda_backend backend;
  device_pool device;
  host_pool host{stash::pinned_host_upstream{}, stash::pinned_host_pool_options(64 * stash::MiB)};
  Manager m{backend, device, host};
  stash::cuda_backend::stream s{backend.create_stream()};
  std::size_t n{4 * stash::MiB};
  unsigned long long* bad{nullptr};
  stash::tensor_handle t;

  redrop_fixture()
  {
    STASH_CUDA_TRY(cudaMallocManaged(&bad, sizeof(*bad)));
    *bad = 0;
    t    = m.allocate_async(n, s);
  }
  redrop_fixture(redrop_fixture const&)            = delete;
  redrop_fixture& operator=(redrop_fixture const&) = delete;
  ~redrop_fixture() { STASH_CUDA_CHECK_NOTHROW(cudaFree(bad)); }

  void fill(void* p, std::uint32_t version)
  {
    fill_kernel<<<64, 256, 0, s.get()>>>(static_cast<std::uint8_t*>(p), n, 7, version);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  void check(std::uint32_t version)  // acquires t on s (on demand when it is away)
  {
    check_kernel<<<64, 256, 0, s.get()>>>(static_cast<std::uint8_t const*>(m.acquire_async(t, s)),
                                          n, 7, version, bad);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  void scribble()  // another tensor, which may take t's device bytes in the order they went back
  {
    auto other = m.allocate_async(n, s);
    scribble_kernel<<<64, 256, 0, s.get()>>>(static_cast<std::uint8_t*>(m.acquire_async(other, s)),
                                             n);
    STASH_CUDA_TRY(cudaGetLastError());
    m.deallocate_async(other);
  }
};

// Issue 22, a second drop per gap on CUDA streams: a prefetch that keeps its host copy lets the
// tensor leave again with no second device -> host copy; its device bytes go back to the pool in
// the order of its last use (another tensor may take them at once: the scribble), the same pinned
// copy is decoded again, and it is freed once, after the last decode.
template <class Manager>
void check_gpu_redrops()
{
  redrop_fixture<Manager> f;
  auto& m = f.m;
  f.fill(m.acquire_async(f.t, f.s), 1);
  m.offload_async(f.t, f.s);
  for (int round = 0; round < 2; ++round) {
    m.prefetch_async(f.t, f.s, stash::host_copy_mode::keep);
    f.check(1);
    m.redrop_async(f.t);
    f.scribble();  // after the check
  }
  f.check(1);  // on demand: the last prefetch frees the pinned copy
  f.backend.synchronize(f.s);
  m.synchronize();
  CHECK(*f.bad == 0);
  CHECK(m.stats().offloads == 1);
  CHECK(m.stats().redrops == 2);
  CHECK(f.host.stats().in_use_bytes == 0);
  m.deallocate_async(f.t);
}

// GPU review 2026-11-26c, RD4 and a write after a keep (as check_redrop_in_flight_and_write in
// offload_manager_test.cpp): a redrop while the keep-prefetch is still in flight (nobody acquired:
// the device bytes go back on the H2D stream, after the copy or decode that writes them, and
// another tensor may take them at once), then a tensor written after a keep-prefetch, its copy
// given up by a discard or by the offload itself: the departure copies the new value.
template <class Manager>
void check_gpu_redrop_in_flight_and_write()
{
  redrop_fixture<Manager> f;
  auto& m = f.m;
  auto& t = f.t;
  f.fill(m.acquire_async(t, f.s), 0);
  m.offload_async(t, f.s);
  for (int round = 0; round < 2; ++round) {
    m.prefetch_async(t, f.s, stash::host_copy_mode::keep);
    CHECK(m.state(t) == stash::tensor_state::prefetching);
    m.redrop_async(t);  // no acquire in between: the H2D copy may still run
    f.scribble();
  }
  f.check(0);  // on demand, from the same pinned copy
  // Written after a keep-prefetch, the copy discarded first (as stash::allocator::acquire_async).
  m.offload_async(t, f.s);
  m.prefetch_async(t, f.s, stash::host_copy_mode::keep);
  void* p = m.acquire_async(t, f.s);
  m.discard_host_copy(t);
  CHECK_FALSE(m.holds_host_copy(t));
  CHECK_THROWS_AS(m.redrop_async(t), stash::logic_error);
  f.fill(p, 1);
  m.offload_async(t, f.s);
  f.scribble();
  f.check(1);
  // Written with the copy still kept: the offload replaces it.
  m.offload_async(t, f.s);
  m.prefetch_async(t, stash::host_copy_mode::keep);
  f.fill(m.acquire_async(t, f.s), 2);
  m.offload_async(t, f.s);
  f.scribble();
  f.check(2);
  f.backend.synchronize(f.s);
  m.synchronize();
  CHECK(*f.bad == 0);
  CHECK(m.stats().offloads == 5);
  CHECK(m.stats().redrops == 2);
  CHECK(m.stats().discarded_host_copies == 2);
  m.deallocate_async(t);
  m.synchronize();
  CHECK(f.host.stats().in_use_bytes == 0);
}

TEST_CASE("gpu: a redrop of a kept host copy copies nothing and brings back the same bytes")
{
  check_gpu_redrops<manager>();
  check_gpu_redrops<zvc_manager>();
}

TEST_CASE("gpu: a redrop with its prefetch in flight; a write after a keep-prefetch copies again")
{
  check_gpu_redrop_in_flight_and_write<manager>();
  check_gpu_redrop_in_flight_and_write<zvc_manager>();
}

}  // namespace STASH_UNITY_ID
