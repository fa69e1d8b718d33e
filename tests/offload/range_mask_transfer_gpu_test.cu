// range_mask through the offload manager on the CUDA backend (the host-backend twin is
// range_mask_transfer_test.cpp): the host copy holds the host reference's bytes, and hardtanh's
// backward on what comes back gives the original's gradient bitwise; a corrupted copy is a decode
// failure with the tensor zeroed; a tensor without usable bounds is refused before anything is
// taken.
#include "codec/codec_test_support.hpp"

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/range_mask.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_range_mask_transfer.cuh>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using device_pool = stash::caching_pool<stash::device_upstream>;
using host_pool   = stash::pinned_host_pool<>;
using rm_manager =
    stash::offload_manager<stash::cuda_backend, device_pool, host_pool,
                           stash::transfer_set<stash::raw_transfer, stash::range_mask>>;

// One spelling on every backend: on cuda_backend the Codec slot runs the device twin.
static_assert(std::is_same_v<stash::transfer_for_t<stash::cuda_backend, stash::range_mask>,
                             stash::device_range_mask_transfer>);

constexpr stash::range_bounds relu6{0.0f, 6.0f};

struct fixture {
  stash::cuda_backend backend;
  device_pool device;
  host_pool host{stash::pinned_host_upstream{}, stash::pinned_host_pool_options(256 * stash::MiB)};
  rm_manager m{backend, device, host};
  cudaStream_t s{backend.create_stream().get()};

  stash::tensor_handle put(std::vector<float> const& values)
  {
    std::size_t const bytes = values.size() * sizeof(float);
    auto t                  = m.allocate_async(bytes, s);
    STASH_CUDA_TRY(
        cudaMemcpyAsync(m.acquire_async(t, s), values.data(), bytes, cudaMemcpyHostToDevice, s));
    return t;
  }
  std::vector<float> get(stash::tensor_handle t, std::size_t n)
  {
    std::vector<float> back(n);
    STASH_CUDA_TRY(cudaMemcpyAsync(back.data(), m.acquire_async(t, s), n * sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
    backend.synchronize(s);
    return back;
  }
};

}  // namespace

TEST_CASE("gpu: range_mask on cuda_backend: the host's bytes, hardtanh's gradient exact")
{
  fixture f;
  for (std::size_t const n : {1, 33, (1 << 20) + 77}) {
    CAPTURE(n);
    auto const x = stash::test::relu6_pre_activation(n);
    auto const t = f.put(x);
    f.m.offload_async(t, f.s, 1, relu6);
    auto const copy = f.m.host_copy(t);
    std::vector<std::byte> expected(stash::range_mask::max_compressed_bytes(n));
    expected.resize(stash::range_mask::host_encode(x, expected, relu6));
    REQUIRE(stash::read_header(copy).total_bytes() == expected.size());
    CHECK(std::vector<std::byte>(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(
                                                                  expected.size())) == expected);
    auto const back = f.get(t, n);
    f.m.synchronize();  // throws a decode failure, if any
    std::vector<float> const grad(n, 0.5f);
    CHECK(stash::test::bitwise_equal(stash::test::hardtanh_backward(grad, back, 0.0f, 6.0f),
                                     stash::test::hardtanh_backward(grad, x, 0.0f, 6.0f)));
    f.m.deallocate_async(t);
  }
}

TEST_CASE("gpu: range_mask on cuda_backend: a corrupted copy is a decode failure, zeros")
{
  fixture f;
  std::size_t const n = 1000;
  auto const t        = f.put(stash::test::relu6_pre_activation(n));
  f.m.offload_async(t, f.s, 1, relu6);
  auto const copy = f.m.host_copy(t);
  stash::detail::store_u32(const_cast<std::byte*>(copy.data()) + 36, 0xc0000000u);  // hi = -2
  auto const back = f.get(t, n);
  CHECK_THROWS_AS(f.m.synchronize(), stash::codec_error);
  CHECK(back == std::vector<float>(n, 0.0f));
  f.m.deallocate_async(t);
}

TEST_CASE("gpu: range_mask on cuda_backend refuses a tensor without usable bounds")
{
  fixture f;
  auto const x = stash::test::relu6_pre_activation(100);
  auto const t = f.put(x);
  CHECK_THROWS_AS(f.m.offload_async(t, f.s, 1), stash::logic_error);
  CHECK_THROWS_AS(f.m.offload_async(t, f.s, 1, stash::range_bounds{0.0f, -0.0f}),
                  stash::logic_error);
  CHECK(stash::test::bitwise_equal(f.get(t, x.size()), x));  // resident, untouched
  f.m.deallocate_async(t);
}

}  // namespace STASH_UNITY_ID
