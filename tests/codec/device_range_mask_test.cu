// device_range_mask against the host reference: byte-identical encodes (IEEE edge cases, every
// bounds case, tails past a multiple of 32, empty data), decodes to the host's values, the
// hardtanh-backward mask, and corrupted buffers reported through codec_status with the host's code
// and offset. Runs only where a GPU is present (compiled everywhere).
#include "codec/codec_test_support.hpp"
#include "support/device_bytes.cuh"

#include <stash/codec/codec_error.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/codec/device_range_mask.cuh>
#include <stash/codec/range_mask.hpp>
#include <stash/core/cuda_stream.hpp>
#include <stash/core/error.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using stash::range_bounds;
using stash::range_mask;
using stash::test::device_bytes;

// The edge cases of `b`, then random bit patterns, n in all.
std::vector<float> cases(std::size_t n, range_bounds b, unsigned seed)
{
  auto const specials = stash::test::range_mask_special_cases(b.lo, b.hi);
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = std::bit_cast<float>(i % 2 == 0 ? specials[(i / 2) % specials.size()]
                                           : static_cast<std::uint32_t>(rng()));
  }
  return v;
}

// The device encode of `in` into an output poisoned with 0xa5, up to the size it reported.
std::vector<std::byte> device_encode(std::vector<float> const& in, range_bounds b,
                                     stash::cuda_stream const& s)
{
  std::size_t const n   = in.size();
  std::size_t const cap = range_mask::max_compressed_bytes(n);
  device_bytes d_in(n * sizeof(float));
  device_bytes d_out(cap);
  device_bytes d_size(sizeof(std::size_t));
  STASH_CUDA_TRY(cudaMemsetAsync(d_out.as<void>(), 0xa5, cap, s));
  STASH_CUDA_TRY(cudaMemsetAsync(d_size.as<void>(), 0x5a, d_size.size(), s));
  if (n > 0) {
    STASH_CUDA_TRY(
        cudaMemcpyAsync(d_in.as<void>(), in.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
  }
  stash::device_range_mask::encode_async(d_in.as<float const>(), n, b, d_out.as<std::byte>(), cap,
                                         d_size.as<std::size_t>(), s);
  std::size_t size = 0;
  std::vector<std::byte> out(cap);
  STASH_CUDA_TRY(cudaMemcpyAsync(&size, d_size.as<void>(), sizeof size, cudaMemcpyDeviceToHost, s));
  STASH_CUDA_TRY(cudaMemcpyAsync(out.data(), d_out.as<void>(), cap, cudaMemcpyDeviceToHost, s));
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  REQUIRE(size <= cap);
  out.resize(size);
  return out;
}

// What a device decode (or, with `gradient`, the gradient mask over `grad`) made of `buf`.
struct decoded {
  std::vector<float> values;
  stash::codec_status status;
};

decoded device_decode(std::vector<std::byte> const& buf, std::size_t capacity, bool exact,
                      stash::cuda_stream const& s, std::vector<float> const* grad = nullptr)
{
  device_bytes d_src(buf.size());
  device_bytes d_out(capacity * sizeof(float));
  device_bytes d_status(sizeof(stash::codec_status));
  STASH_CUDA_TRY(
      cudaMemcpyAsync(d_src.as<void>(), buf.data(), buf.size(), cudaMemcpyHostToDevice, s));
  if (grad != nullptr) {
    STASH_CUDA_TRY(cudaMemcpyAsync(d_out.as<void>(), grad->data(), capacity * sizeof(float),
                                   cudaMemcpyHostToDevice, s));
    stash::device_range_mask::apply_mask_to_gradient_async(d_src.as<std::byte const>(), buf.size(),
                                                           d_out.as<float>(), capacity,
                                                           d_status.as<stash::codec_status>(), s);
  } else if (exact) {
    stash::device_range_mask::decode_exact_async(d_src.as<std::byte const>(), buf.size(),
                                                 d_out.as<float>(), capacity,
                                                 d_status.as<stash::codec_status>(), s);
  } else {
    stash::device_range_mask::decode_async(d_src.as<std::byte const>(), buf.size(),
                                           d_out.as<float>(), capacity,
                                           d_status.as<stash::codec_status>(), s);
  }
  decoded r{std::vector<float>(capacity), {}};
  STASH_CUDA_TRY(cudaMemcpyAsync(r.values.data(), d_out.as<void>(), capacity * sizeof(float),
                                 cudaMemcpyDeviceToHost, s));
  STASH_CUDA_TRY(
      cudaMemcpyAsync(&r.status, d_status.as<void>(), sizeof r.status, cudaMemcpyDeviceToHost, s));
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  return r;
}

std::vector<std::byte> host_encode(std::vector<float> const& in, range_bounds b)
{
  std::vector<std::byte> out(range_mask::max_compressed_bytes(in.size()));
  out.resize(range_mask::host_encode(in, out, b));
  return out;
}

}  // namespace

TEST_CASE("gpu: device_range_mask writes the host's bytes and decodes to the host's values")
{
  stash::cuda_stream s;
  for (auto const& [lo, hi] : stash::test::range_mask_bounds_cases()) {
    range_bounds const b{lo, hi};
    CAPTURE(b.describe());
    for (std::size_t const n : {0, 1, 31, 32, 33, 1000, (1 << 20) + 77}) {
      CAPTURE(n);
      auto const in   = cases(n, b, static_cast<unsigned>(n) + 3);
      auto const host = host_encode(in, b);
      CHECK(device_encode(in, b, s) == host);
      std::vector<float> want(n);
      (void)range_mask::host_decode(host, want);
      auto const got = device_decode(host, n, false, s);
      CHECK(got.status.code == 0);
      CHECK(stash::test::bitwise_equal(got.values, want));
      // The gradient mask: hardtanh's backward, as the host's.
      std::vector<float> const grad(n, 0.5f);
      auto const masked = device_decode(host, n, true, s, &grad);
      CHECK(masked.status.code == 0);
      CHECK(stash::test::bitwise_equal(masked.values,
                                       stash::test::hardtanh_backward(grad, in, lo, hi)));
    }
  }
}

TEST_CASE("gpu: device_range_mask reports corrupted buffers with the host's code and offset")
{
  stash::cuda_stream s;
  std::size_t const n = 45;
  auto const clean    = host_encode(cases(n, {0.0f, 6.0f}, 9), {0.0f, 6.0f});
  auto expect         = [&](std::vector<std::byte> const& buf, std::size_t capacity, bool exact) {
    stash::codec_errc code = stash::codec_errc::ok;
    std::uint64_t offset   = 0;
    std::vector<float> dst(capacity);
    try {
      std::size_t const got = range_mask::host_decode(buf, dst);
      if (exact && got != capacity) {
        code   = stash::codec_errc::payload_size_mismatch;
        offset = stash::detail::off_count;
      }
    } catch (stash::codec_error const& e) {
      code   = e.code();
      offset = e.offset();
    }
    auto const r = device_decode(buf, capacity, exact, s);
    CHECK(r.status.code == static_cast<std::uint32_t>(code));
    CHECK(r.status.offset == offset);
    return code;
  };
  CHECK(expect(clean, n, true) == stash::codec_errc::ok);
  auto bad_bounds = clean;
  stash::detail::store_u32(bad_bounds.data() + 36, 0u);  // hi = lo
  CHECK(expect(bad_bounds, n, false) == stash::codec_errc::bad_value);
  auto tail = clean;
  stash::detail::store_u32(tail.data() + 44,
                           stash::detail::load_u32(tail.data() + 44) | (1u << 13));
  CHECK(expect(tail, n, false) == stash::codec_errc::bad_mask_tail);
  auto truncated = clean;
  truncated.resize(clean.size() - 1);
  CHECK(expect(truncated, n, false) == stash::codec_errc::truncated_payload);
  CHECK(expect(clean, n - 1, false) == stash::codec_errc::destination_too_small);
  CHECK(expect(clean, n + 1, true) == stash::codec_errc::payload_size_mismatch);
  CHECK(expect(clean, n + 1, false) == stash::codec_errc::ok);
}

TEST_CASE("gpu: device_range_mask refuses unusable bounds before queueing anything")
{
  stash::cuda_stream s;
  device_bytes d_in(16);
  device_bytes d_out(range_mask::max_compressed_bytes(4));
  device_bytes d_size(sizeof(std::size_t));
  CHECK_THROWS_AS(stash::device_range_mask::encode_async(
                      d_in.as<float const>(), 4, range_bounds{6.0f, 0.0f}, d_out.as<std::byte>(),
                      d_out.size(), d_size.as<std::size_t>(), s),
                  stash::logic_error);
  CHECK_THROWS_AS(stash::device_range_mask::encode_async(
                      d_in.as<float const>(), 4, range_bounds{0.0f, 6.0f}, d_out.as<std::byte>(),
                      d_out.size() - 1, d_size.as<std::size_t>(), s),
                  stash::logic_error);
}

}  // namespace STASH_UNITY_ID
