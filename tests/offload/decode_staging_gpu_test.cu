// Decode from device memory on a GPU: device_codec_transfer stages the host copy in device scratch
// (a copy-engine copy of the size the host read, or a kernel that reads the header's length when
// the offload was still in flight) and decodes there; decode_from::mapped decodes from the pinned
// slot. Every path must give the same bytes, and a corrupted host copy zeros and an error.
#include "support/device_bytes.cuh"

#include <stash/codec/detail/format.hpp>
#include <stash/codec/device_precision.cuh>
#include <stash/codec/device_rle.cuh>
#include <stash/codec/device_staging.cuh>
#include <stash/codec/device_zvc.cuh>
#include <stash/codec/precision.hpp>
#include <stash/core/cuda_stream.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using device_pool = stash::caching_pool<stash::device_upstream>;
using host_pool   = stash::pinned_host_pool<>;

// Holds a stream for about `cycles` clocks, so that an offload queued behind it is still in
// flight when the prefetch is queued.
__global__ void spin_kernel(long long cycles)
{
  long long const start = clock64();
  while (clock64() - start < cycles) {}
}

enum class when { after_offload, during_offload };

std::vector<float> relu_like(std::size_t n)
{
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i) {
    h[i] = (i * 2654435761u) % 3 == 0 ? float(i % 1000) * 0.25f : 0.0f;
  }
  return h;
}

// One offload and prefetch through Transfer; the bytes that came back.
template <class Transfer>
std::vector<float> round_trip(std::vector<float> const& h, when w, bool corrupt = false)
{
  using manager = stash::offload_manager<stash::cuda_backend, device_pool, host_pool, Transfer>;
  stash::cuda_backend backend;
  device_pool device;
  host_pool host(stash::pinned_host_upstream{}, stash::pinned_host_pool_options(256 * stash::MiB));
  manager m(backend, device, host);
  cudaStream_t const s = backend.create_stream().get();
  std::size_t const n  = h.size() * sizeof(float);
  auto t               = m.allocate_async(n, s);
  STASH_CUDA_TRY(cudaMemcpyAsync(m.acquire_async(t, s), h.data(), n, cudaMemcpyHostToDevice, s));
  STASH_CUDA_TRY(cudaStreamSynchronize(s));  // `h` is pageable: the copy has read it
  if (w == when::during_offload) {
    spin_kernel<<<1, 1, 0, s>>>(200'000'000);
    STASH_CUDA_TRY(cudaGetLastError());
  }
  m.offload_async(t, s);
  if (corrupt) {
    auto const copy = m.host_copy(t);  // waits for the copy: the size is known from here
    const_cast<std::byte&>(copy[0]) ^= std::byte{0x40};
  }
  if (w == when::during_offload) { CHECK(m.state(t) == stash::tensor_state::offloading); }
  m.prefetch_async(t);
  // A failed decode surfaces from the first manager call after it ran: acquire() when it finished
  // before acquire reaps (likely on a fast GPU), else synchronize(). Both calls count it; after it
  // the tensor is resident (zeros), so an acquire that threw is asked again.
  int decode_errors  = 0;
  auto const counted = [&decode_errors](auto&& call) {
    try {
      call();
    } catch (stash::codec_error const&) {
      ++decode_errors;
    }
  };
  void* d = nullptr;
  counted([&] { d = m.acquire_async(t, s); });
  if (d == nullptr) { d = m.acquire_async(t, s); }
  std::vector<float> back(h.size(), -1.0f);
  STASH_CUDA_TRY(cudaMemcpyAsync(back.data(), d, n, cudaMemcpyDeviceToHost, s));
  backend.synchronize(s);
  counted([&] { m.synchronize(); });
  CHECK(decode_errors == (corrupt ? 1 : 0));
  m.deallocate_async(t);
  m.synchronize();
  CHECK(host.stats().in_use_bytes == 0);
  CHECK(device.stats().in_use_bytes == 0);
  return back;
}

template <class D>
void every_path_round_trips(std::vector<float> const& h, std::vector<float> const& expected)
{
  using staged        = stash::device_codec_transfer<D>;
  using mapped        = stash::device_codec_transfer<D, stash::decode_from::mapped>;
  std::size_t const n = h.size() * sizeof(float);
  CHECK(std::memcmp(round_trip<staged>(h, when::after_offload).data(), expected.data(), n) == 0);
  CHECK(std::memcmp(round_trip<staged>(h, when::during_offload).data(), expected.data(), n) == 0);
  CHECK(std::memcmp(round_trip<mapped>(h, when::after_offload).data(), expected.data(), n) == 0);
}

}  // namespace

TEST_CASE("gpu: decode from a device copy, sized by the host or by the header, matches mapped")
{
  auto const h = relu_like((1 << 20) + 77);
  SUBCASE("zvc") { every_path_round_trips<stash::device_zvc<float>>(h, h); }
  SUBCASE("rle") { every_path_round_trips<stash::device_rle<float>>(h, h); }
  SUBCASE("fp16")
  {
    // Lossy: every path must give what the host reference gives.
    using codec = stash::precision<float, stash::fp16>;
    std::vector<std::byte> buffer(codec::max_compressed_bytes(h.size()));
    auto const used = codec::host_encode(std::span<float const>(h), std::span<std::byte>(buffer));
    std::vector<float> expected(h.size());
    (void)codec::host_decode(std::span<std::byte const>(buffer.data(), used),
                             std::span<float>(expected));
    every_path_round_trips<stash::device_precision<stash::fp16>>(h, expected);
  }
}

TEST_CASE("gpu: a corrupted host copy decoded from device memory is zeros and a codec_error")
{
  auto const h    = relu_like(100'000);
  auto const back = round_trip<stash::device_codec_transfer<stash::device_zvc<float>>>(
      h, when::after_offload, true);
  CHECK(std::all_of(back.begin(), back.end(), [](float x) { return x == 0.0f; }));
}

TEST_CASE("gpu: the header-sized copy takes header + declared payload, clamped to the capacity")
{
  // Each case: a slot of `capacity` bytes whose header declares `payload`; the copy must write
  // exactly align16(declared_prefix_bytes(capacity, payload)) bytes and nothing after them.
  struct sized_case {
    std::uint64_t capacity, payload;
  };
  sized_case const cases[] = {{1000, 100}, {1000, 968}, {1000, 969}, {1000, ~std::uint64_t{0}},
                              {1000, 0},   {20, 5},     {32, 0},     {4096 + 5, 4000}};
  std::size_t const room   = 8192;
  stash::test::device_bytes const src_bytes(room);
  stash::test::device_bytes const dst_bytes(room);
  auto* const src = src_bytes.as<std::byte>();
  auto* const dst = dst_bytes.as<std::byte>();
  stash::cuda_stream s;
  for (auto const [capacity, payload] : cases) {
    CAPTURE(capacity);
    CAPTURE(payload);
    std::vector<std::byte> slot(room);
    for (std::size_t i = 0; i < room; ++i) { slot[i] = static_cast<std::byte>(i * 131 + 7); }
    if (capacity >= stash::detail::header_bytes) {
      stash::detail::store_u64(slot.data() + stash::detail::off_payload, payload);
    }
    std::vector<std::byte> back(room);
    STASH_CUDA_TRY(cudaMemcpyAsync(src, slot.data(), room, cudaMemcpyHostToDevice, s.value()));
    STASH_CUDA_TRY(cudaMemsetAsync(dst, 0xab, room, s.value()));
    stash::copy_declared_prefix_async(src, capacity, dst, s.value());
    STASH_CUDA_TRY(cudaMemcpyAsync(back.data(), dst, room, cudaMemcpyDeviceToHost, s.value()));
    s.synchronize();
    std::size_t const copied =
        stash::detail::align16(stash::detail::declared_prefix_bytes(capacity, payload));
    CHECK(std::memcmp(back.data(), slot.data(), copied) == 0);
    CHECK(std::all_of(back.begin() + static_cast<std::ptrdiff_t>(copied), back.end(),
                      [](std::byte b) { return b == std::byte{0xab}; }));
  }
}

}  // namespace STASH_UNITY_ID
