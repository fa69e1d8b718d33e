// two_value through the offload manager on the CUDA backend (the host-backend twin is
// two_value_transfer_test.cpp): the host copy holds the host reference's bytes, two_value's for a
// scaled dropout mask and identity's for data with a third value, and both come back bit-exact;
// in a captured CUDA graph the form is chosen by each launch's data, on the device.
#include <stash/codec/buffer_header.hpp>
#include <stash/codec/codec.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_two_value_transfer.cuh>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using device_pool = stash::caching_pool<stash::device_upstream>;
using host_pool   = stash::pinned_host_pool<>;
using tv_manager =
    stash::offload_manager<stash::cuda_backend, device_pool, host_pool, stash::two_value<float>>;

// One spelling on every backend: on cuda_backend the Codec slot runs the device twin.
static_assert(std::is_same_v<stash::transfer_for_t<stash::cuda_backend, stash::two_value<float>>,
                             stash::device_two_value_transfer<float>>);
static_assert(
    std::is_same_v<stash::transfer_for_t<stash::cuda_backend, stash::two_value<std::uint8_t>>,
                   stash::device_two_value_transfer<std::uint8_t>>);

bool same_bits(std::vector<float> const& a, std::vector<float> const& b)
{
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct fixture {
  stash::cuda_backend backend;
  device_pool device;
  host_pool host{stash::pinned_host_upstream{}, stash::pinned_host_pool_options(256 * stash::MiB)};
  tv_manager m{backend, device, host};
  cudaStream_t s{backend.create_stream().get()};

  // Offloads a tensor holding `values`, checks that its host copy is `expected` (up to the size
  // its header declares), brings it back and returns what the device then holds.
  std::vector<float> round_trip(std::vector<float> const& values,
                                std::vector<std::byte> const& expected)
  {
    std::size_t const bytes = values.size() * sizeof(float);
    auto t                  = m.allocate_async(bytes, s);
    void* p                 = m.acquire_async(t, s);
    STASH_CUDA_TRY(cudaMemcpyAsync(p, values.data(), bytes, cudaMemcpyHostToDevice, s));
    m.offload_async(t, s);
    auto const copy  = m.host_copy(t);
    auto const total = stash::read_header(copy).total_bytes();
    REQUIRE(total <= copy.size());
    CHECK(std::vector<std::byte>(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(total)) ==
          expected);
    void* q = m.acquire_async(t, s);
    std::vector<float> back(values.size());
    STASH_CUDA_TRY(cudaMemcpyAsync(back.data(), q, bytes, cudaMemcpyDeviceToHost, s));
    backend.synchronize(s);
    m.synchronize();  // throws a decode failure, if any
    m.deallocate_async(t);
    return back;
  }
};

std::vector<float> scaled_mask(std::size_t n)
{
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) { v[i] = (i * 7919 % 10) < 9 ? 1.0f / (1.0f - 0.1f) : 0.0f; }
  return v;
}

std::vector<std::byte> as_two_value(std::vector<float> const& v)
{
  return stash::host_encode_vector<stash::two_value<float>>(std::span<float const>(v));
}

std::vector<std::byte> as_identity(std::vector<float> const& v)
{
  return stash::host_encode_vector<stash::identity<float>>(std::span<float const>(v));
}

}  // namespace

TEST_CASE("gpu: two_value on cuda_backend: the host's bytes for a mask, other data unchanged")
{
  fixture f;
  auto const mask = scaled_mask((1 << 20) + 77);  // a tail word and a partial work item
  CHECK(same_bits(f.round_trip(mask, as_two_value(mask)), mask));
  auto const moved = f.m.stats();
  CHECK(moved.bytes_encoded == as_two_value(mask).size());

  // A third value at the last element: the device refuses, the fallback keeps the elements.
  auto three   = mask;
  three.back() = 2.5f;
  CHECK(same_bits(f.round_trip(three, as_identity(three)), three));

  std::vector<float> const zeros(1000, 0.0f);  // value 0, no bit set
  CHECK(same_bits(f.round_trip(zeros, as_two_value(zeros)), zeros));
  // Tiny tensors: the slot holds either form (two_value's 40-byte minimum above identity's).
  std::vector<float> const one{0.5f};
  CHECK(same_bits(f.round_trip(one, as_two_value(one)), one));
  std::vector<float> const two{0.5f, -1.0f};
  CHECK(same_bits(f.round_trip(two, as_identity(two)), two));
}

namespace {

// n floats: `version` (as a float) where i % 3 != 0, else 0; on even versions the last element
// is a third value. Read on the device, so each launch of one graph writes new data.
__global__ void fill_kernel(float* p, std::size_t n, std::uint32_t const* version)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    float const c = static_cast<float>(*version);
    p[i]          = i % 3 == 0 ? 0.0f : c;
    if (i == n - 1 && *version % 2 == 0) { p[i] = c + 0.5f; }
  }
}

__global__ void check_kernel(float const* p, std::size_t n, std::uint32_t const* version,
                             unsigned long long* bad)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    float const c = static_cast<float>(*version);
    float want    = i % 3 == 0 ? 0.0f : c;
    if (i == n - 1 && *version % 2 == 0) { want = c + 0.5f; }
    if (p[i] != want) { atomicAdd(bad, 1ull); }
  }
}

__global__ void scribble_kernel(float* p, std::size_t n)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = -1.0f;
  }
}

}  // namespace

TEST_CASE("gpu: a captured two_value offload takes the bits or the unchanged form per launch")
{
  stash::cuda_backend backend;
  device_pool device;  // the graph's own pools: the graph owns the blocks its capture took
  host_pool host(stash::pinned_host_upstream{}, stash::pinned_host_pool_options(64 * stash::MiB));
  tv_manager m(backend, device, host);
  cudaStream_t const s    = backend.create_stream().get();
  std::uint32_t* version  = nullptr;
  unsigned long long* bad = nullptr;
  STASH_CUDA_TRY(cudaMalloc(&version, sizeof(*version)));
  STASH_CUDA_TRY(cudaMallocManaged(&bad, sizeof(*bad)));
  *bad                = 0;
  std::size_t const n = 3 * 1024 * 1024 / 4 + 13;  // a tail past a multiple of 32 and 1024
  device.reserve(32 * stash::MiB);
  host.reserve(16 * stash::MiB);

  STASH_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  auto t    = m.allocate_async(n * sizeof(float), s);
  void* old = m.acquire_async(t, s);
  fill_kernel<<<64, 256, 0, s>>>(static_cast<float*>(old), n, version);
  STASH_CUDA_TRY(cudaGetLastError());
  m.offload_async(t, s);
  m.join_async(s);
  scribble_kernel<<<64, 256, 0, s>>>(static_cast<float*>(old), n);  // what returns came back
  STASH_CUDA_TRY(cudaGetLastError());
  m.prefetch_async(t, s);
  void* q = m.acquire_async(t, s);
  check_kernel<<<64, 256, 0, s>>>(static_cast<float const*>(q), n, version, bad);
  STASH_CUDA_TRY(cudaGetLastError());
  m.deallocate_async(t);
  m.join_async(s);
  cudaGraph_t graph = nullptr;
  STASH_CUDA_TRY(cudaStreamEndCapture(s, &graph));  // fails if the capture was invalidated
  cudaGraphExec_t exec = nullptr;
  STASH_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));

  for (std::uint32_t v = 1; v <= 4; ++v) {  // odd: two_value; even: the unchanged form
    STASH_CUDA_TRY(cudaMemcpyAsync(version, &v, sizeof(v), cudaMemcpyHostToDevice, s));
    STASH_CUDA_TRY(cudaGraphLaunch(exec, s));
    STASH_CUDA_TRY(cudaStreamSynchronize(s));  // `v` lives on this frame
    CHECK_MESSAGE(*bad == 0, "launch " << v);
  }
  m.synchronize();
  STASH_CUDA_TRY(cudaGraphExecDestroy(exec));
  STASH_CUDA_TRY(cudaGraphDestroy(graph));
  STASH_CUDA_TRY(cudaFree(version));
  STASH_CUDA_TRY(cudaFree(bad));
}

TEST_CASE("gpu: device_two_value_transfer refuses a misaligned scratch before queuing anything")
{
  using transfer          = stash::device_two_value_transfer<float>;
  std::size_t const n     = 100;
  std::size_t const bytes = n * sizeof(float);
  std::size_t const cap   = transfer::host_bytes(bytes);
  std::size_t const at    = (cap + 15) / 16 * 16;  // the status record after the slot
  std::size_t const total = at + sizeof(stash::transfer_status);
  stash::cuda_backend backend;
  cudaStream_t const s = backend.create_stream().get();
  void* device         = nullptr;
  void* scratch        = nullptr;
  void* host           = nullptr;
  STASH_CUDA_TRY(cudaMalloc(&device, bytes));
  STASH_CUDA_TRY(cudaMalloc(&scratch, transfer::scratch_bytes(bytes) + 16));
  STASH_CUDA_TRY(cudaMallocHost(&host, total));
  STASH_CUDA_TRY(cudaMemsetAsync(device, 0, bytes, s));
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  std::memset(host, 0x5a, total);
  auto* const status =
      reinterpret_cast<stash::transfer_status*>(static_cast<std::byte*>(host) + at);
  CHECK_THROWS_AS(transfer::encode(backend, s, device, bytes, host, cap,
                                   static_cast<std::byte*>(scratch) + 4, status),
                  stash::logic_error);
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  // Nothing ran: not even the status clear (which used to be queued before the scratch check).
  std::vector<std::byte> const poison(total, std::byte{0x5a});
  CHECK(std::memcmp(host, poison.data(), total) == 0);
  // The same call with the scratch aligned: all-zero data, value 0 and no bit set.
  transfer::encode(backend, s, device, bytes, host, cap, scratch, status);
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  CHECK(status->status.code == 0);
  CHECK(status->encoded_bytes == stash::two_value<float>::max_compressed_bytes(n));
  STASH_CUDA_TRY(cudaFreeHost(host));
  STASH_CUDA_TRY(cudaFree(scratch));
  STASH_CUDA_TRY(cudaFree(device));
}

}  // namespace STASH_UNITY_ID
