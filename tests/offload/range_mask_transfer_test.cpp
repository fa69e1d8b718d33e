// range_mask through the offload manager on the host backend: ReLU6's saved input crosses as one
// bit per element and comes back as 0 or 2, on which hardtanh's backward gives the original's
// gradient bitwise; a tensor without usable bounds or of a size that is not whole floats is
// refused before anything is taken; a corrupted copy is a decode failure with the tensor zeroed.
#include "codec/codec_test_support.hpp"

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/range_mask.hpp>
#include <stash/core/error.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/range_mask_transfer.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using rm_manager =
    stash::offload_manager<stash::host_backend, host_pool, host_pool,
                           stash::transfer_set<stash::raw_transfer, stash::range_mask>>;

static_assert(std::is_same_v<stash::transfer_for_t<stash::host_backend, stash::range_mask>,
                             stash::range_mask_transfer>,
              "range_mask in a Codec slot takes its transfer");
static_assert(std::is_constructible_v<rm_manager::descriptor_type, stash::range_bounds>,
              "a range_bounds describes a tensor for the set");

constexpr stash::range_bounds relu6{0.0f, 6.0f};

struct fixture {
  stash::host_backend backend;
  host_pool device;
  host_pool host;
  stash::host_backend::stream compute{backend.create_stream()};
  rm_manager m{backend, device, host};

  stash::tensor_handle put(std::vector<float> const& values)
  {
    std::size_t const bytes = values.size() * sizeof(float);
    auto h                  = m.allocate_async(bytes, compute);
    backend.copy_async(m.acquire_async(h, compute), values.data(), bytes, compute);
    return h;
  }
  std::vector<float> get(stash::tensor_handle h, std::size_t n)
  {
    std::vector<float> back(n);
    backend.copy_async(back.data(), m.acquire_async(h, compute), n * sizeof(float), compute);
    backend.synchronize(compute);
    return back;
  }
};

}  // namespace

TEST_CASE("range_mask_transfer: ReLU6's input crosses as bits, its backward's gradient exact")
{
  fixture f;
  for (std::size_t const n : {1, 33, 1000}) {
    CAPTURE(n);
    auto const x = stash::test::relu6_pre_activation(n);
    auto const h = f.put(x);
    f.m.offload_async(h, f.compute, 1, relu6);
    auto const copy   = f.m.host_copy(h);
    auto const header = stash::read_header(copy);
    CHECK(header.codec_id == stash::codec_ids::range_mask);
    CHECK(header.element_count == n);
    CHECK(copy.size() >= stash::range_mask::max_compressed_bytes(n));
    auto const back = f.get(h, n);
    f.m.synchronize();
    std::vector<float> const grad(n, 0.5f);
    CHECK(stash::test::bitwise_equal(stash::test::hardtanh_backward(grad, back, 0.0f, 6.0f),
                                     stash::test::hardtanh_backward(grad, x, 0.0f, 6.0f)));
    f.m.deallocate_async(h);
  }
  CHECK(f.m.stats().decode_failures == 0);
  CHECK(f.m.stats().bytes_encoded == (40 + 4) + (40 + 8) + (40 + 4 * 32));
}

TEST_CASE("range_mask_transfer refuses tensors it cannot encode before taking memory")
{
  using transfer  = stash::range_mask_transfer;
  float const nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(transfer::accepts(400, relu6));
  CHECK(transfer::host_bytes(400, relu6) == stash::range_mask::max_compressed_bytes(100));
  CHECK_FALSE(transfer::accepts(402, relu6));
  CHECK_THROWS_AS((void)transfer::host_bytes(402, relu6), stash::logic_error);
  for (auto const b : {stash::range_bounds{nan, 6.0f}, stash::range_bounds{6.0f, 0.0f},
                       stash::range_bounds{-0.0f, 0.0f}}) {
    CHECK_FALSE(transfer::accepts(400, b));
    CHECK_THROWS_AS((void)transfer::host_bytes(400, b), stash::logic_error);
    CHECK_FALSE(rm_manager::accepts(400, 1, b));
  }
  // The manager: no descriptor, another one, or bad bounds: refused, the tensor stays resident.
  CHECK_FALSE(rm_manager::accepts(400, 1));
  CHECK_FALSE(rm_manager::accepts(400, 1, stash::element_type::f32));
  CHECK(rm_manager::accepts(400, 1, relu6));
  // A clamp input that holds halves (ReLU6 under autocast): never read as pairs of halves.
  stash::range_bounds const half{0.0f, 6.0f, stash::element_type::u16};
  CHECK_FALSE(transfer::accepts(400, half));
  CHECK_THROWS_AS((void)transfer::host_bytes(400, half), stash::logic_error);
  CHECK_FALSE(rm_manager::accepts(400, 1, half));
  fixture f;
  auto const x = stash::test::relu6_pre_activation(100);
  auto const h = f.put(x);
  CHECK_THROWS_AS(f.m.offload_async(h, f.compute, 1), stash::logic_error);
  CHECK_THROWS_AS(f.m.offload_async(h, f.compute, 1, stash::range_bounds{1.0f, 1.0f}),
                  stash::logic_error);
  CHECK(stash::test::bitwise_equal(f.get(h, x.size()), x));  // resident, untouched
  f.m.deallocate_async(h);
}

TEST_CASE("range_mask_transfer: a corrupted host copy is a decode failure, the tensor zeroed")
{
  fixture f;
  std::size_t const n = 100;
  auto const x        = stash::test::relu6_pre_activation(n);
  auto const h        = f.put(x);
  f.m.offload_async(h, f.compute, 1, relu6);
  auto const copy = f.m.host_copy(h);
  // hi becomes -2.0: lo >= hi, not usable bounds.
  stash::detail::store_u32(const_cast<std::byte*>(copy.data()) + 36, 0xc0000000u);
  auto const back = f.get(h, n);
  try {
    f.m.synchronize();
    FAIL("the corrupted copy decoded");
  } catch (stash::codec_error const& e) {
    CHECK(e.code() == stash::codec_errc::bad_value);  // the bounds, not another corruption
  }
  CHECK(back == std::vector<float>(n, 0.0f));
  CHECK(f.m.stats().decode_failures == 1);
  f.m.deallocate_async(h);
}

}  // namespace STASH_UNITY_ID
