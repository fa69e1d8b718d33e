// device_pool_argmax against the host reference: byte-identical encodes for outputs that are not a
// multiple of 8 (the last word's unused nibbles), the identity<int64_t> fallback for an index
// outside its window, and every corrupted buffer reported through codec_status with the
// destination never read past. Runs only where a GPU is present (compiled everywhere).
#include "support/device_bytes.cuh"
#include "support/pool_indices.hpp"

#include <stash/codec/codec_status.hpp>
#include <stash/codec/device_pool_argmax.cuh>
#include <stash/codec/device_staging.cuh>
#include <stash/codec/identity.hpp>
#include <stash/codec/pool_argmax.hpp>
#include <stash/core/cuda_stream.hpp>
#include <stash/core/error.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using stash::test::device_bytes;

// The device encode of `indices` for `g`: the bytes up to the size the kernel reported.
std::vector<std::byte> device_encode(std::vector<std::int64_t> const& indices,
                                     stash::pool_geometry const& g, stash::cuda_stream const& s)
{
  std::size_t const n = indices.size();
  device_bytes d_in(n * sizeof(std::int64_t));
  device_bytes d_out(stash::identity<std::int64_t>::max_compressed_bytes(n));
  device_bytes d_size(sizeof(std::size_t));
  device_bytes scratch(stash::device_pool_argmax::encode_scratch_bytes());
  // Poison the output: a byte the encoder should have written but did not shows up.
  STASH_CUDA_TRY(cudaMemsetAsync(d_out.as<void>(), 0xa5, d_out.size(), s));
  STASH_CUDA_TRY(cudaMemcpyAsync(d_in.as<void>(), indices.data(), n * sizeof(std::int64_t),
                                 cudaMemcpyHostToDevice, s));
  stash::device_pool_argmax::encode_indices_async(d_in.as<std::int64_t>(), g, d_out.as<std::byte>(),
                                                  d_out.size(), d_size.as<std::size_t>(),
                                                  scratch.as<void>(), scratch.size(), s);
  std::size_t size = 0;
  STASH_CUDA_TRY(
      cudaMemcpyAsync(&size, d_size.as<void>(), sizeof(size), cudaMemcpyDeviceToHost, s));
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  REQUIRE(size <= d_out.size());
  std::vector<std::byte> out(size);
  STASH_CUDA_TRY(cudaMemcpy(out.data(), d_out.as<void>(), size, cudaMemcpyDeviceToHost));
  return out;
}

struct decoded {
  stash::codec_status status;
  std::vector<std::int64_t> indices;
};

// The device decode of `bytes` for `g` into a destination poisoned with -7, then zeroed on error.
decoded device_decode(std::vector<std::byte> const& bytes, stash::pool_geometry const& g,
                      stash::cuda_stream const& s)
{
  std::size_t const n = g.outputs();
  device_bytes d_src(bytes.size());
  device_bytes d_dst(n * sizeof(std::int64_t));
  device_bytes d_status(sizeof(stash::codec_status));
  std::vector<std::int64_t> poison(n, -7);
  STASH_CUDA_TRY(
      cudaMemcpyAsync(d_src.as<void>(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, s));
  STASH_CUDA_TRY(cudaMemcpyAsync(d_dst.as<void>(), poison.data(), n * sizeof(std::int64_t),
                                 cudaMemcpyHostToDevice, s));
  stash::device_pool_argmax::decode_indices_async(d_src.as<std::byte>(), bytes.size(), g,
                                                  d_dst.as<std::int64_t>(), n,
                                                  d_status.as<stash::codec_status>(), s);
  stash::zero_on_decode_error_async(d_dst.as<void>(), d_dst.size(),
                                    d_status.as<stash::codec_status>(), s);
  decoded r{{}, std::vector<std::int64_t>(n)};
  STASH_CUDA_TRY(
      cudaMemcpyAsync(&r.status, d_status.as<void>(), sizeof(r.status), cudaMemcpyDeviceToHost, s));
  STASH_CUDA_TRY(cudaMemcpyAsync(r.indices.data(), d_dst.as<void>(), n * sizeof(std::int64_t),
                                 cudaMemcpyDeviceToHost, s));
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  return r;
}

std::vector<float> ramp(std::size_t n)
{
  std::vector<float> in(n);
  for (std::size_t i = 0; i < n; ++i) { in[i] = static_cast<float>((i * 7919) % 1013); }
  return in;
}

}  // namespace

TEST_CASE("gpu: device_pool_argmax encodes max-pool indices byte for byte like the host")
{
  stash::cuda_stream const s;
  // Outputs 1, 3 (one partial word), 243 (243 % 8 == 3) and 162729 (many blocks, % 8 == 1).
  for (auto const& g :
       {stash::pool_geometry{1, 2, 2, 2, 2, 2, 2}, stash::pool_geometry{3, 3, 3, 3, 3, 1, 1},
        stash::pool_geometry{3, 19, 19, 3, 3, 2, 2},
        stash::pool_geometry{41, 127, 127, 2, 2, 2, 2}}) {
    CAPTURE(g.outputs());
    auto const indices = stash::test::max_pool_indices(ramp(g.planes * g.height * g.width), g);
    std::vector<std::byte> host(stash::pool_argmax::max_compressed_bytes(g.outputs()));
    host.resize(stash::pool_argmax::host_encode_indices(indices, g, host));
    auto const device = device_encode(indices, g, s);
    CHECK(device == host);
    auto const back = device_decode(device, g, s);
    CHECK(back.status.code == 0);
    CHECK(back.indices == indices);
  }
}

TEST_CASE("gpu: device_pool_argmax writes an index outside its window unchanged, as the host")
{
  stash::cuda_stream const s;
  stash::pool_geometry const g{5, 8, 9, 2, 2, 2, 2};  // 4x4 outputs per plane: 80 outputs
  auto indices   = stash::test::max_pool_indices(ramp(g.planes * g.height * g.width), g);
  indices.back() = 0;  // the last output's window does not hold input 0
  std::vector<std::byte> host(stash::identity<std::int64_t>::max_compressed_bytes(indices.size()));
  host.resize(stash::identity<std::int64_t>::host_encode(indices, host));
  auto const device = device_encode(indices, g, s);
  CHECK(device == host);  // size, header and every index: no packed word left behind
  auto const back = device_decode(device, g, s);
  CHECK(back.status.code == 0);
  CHECK(back.indices == indices);
}

TEST_CASE("gpu: device_pool_argmax reports every corrupted buffer and zeroes the indices")
{
  stash::cuda_stream const s;
  stash::pool_geometry const g{2, 5, 5, 2, 2, 2, 2};  // 8 outputs: exactly one word
  auto const indices = stash::test::max_pool_indices(ramp(g.planes * g.height * g.width), g);
  std::vector<std::byte> good(stash::pool_argmax::max_compressed_bytes(g.outputs()));
  (void)stash::pool_argmax::host_encode_indices(indices, g, good);
  std::vector<std::int64_t> const zeros(g.outputs(), 0);
  auto expect_error = [&](std::vector<std::byte> const& bytes, stash::codec_errc code) {
    auto const r = device_decode(bytes, g, s);
    CHECK(r.status.code == static_cast<std::uint32_t>(code));
    CHECK(r.indices == zeros);
  };
  auto bad_nibble = good;
  bad_nibble[32]  = std::byte{0x0e};  // position 14 in a 4-entry window
  expect_error(bad_nibble, stash::codec_errc::bad_index);
  expect_error(std::vector<std::byte>(good.begin(), good.begin() + 20),
               stash::codec_errc::truncated_header);
  expect_error(std::vector<std::byte>(good.begin(), good.end() - 1),
               stash::codec_errc::truncated_payload);
  stash::pool_geometry other = g;  // same outputs, another stride: another param
  other.stride_w             = 1;
  other.width                = 3;
  REQUIRE(other.outputs() == g.outputs());
  auto const r = device_decode(good, other, s);
  CHECK(r.status.code == static_cast<std::uint32_t>(stash::codec_errc::bad_param));
  // 7 outputs: the 8th nibble is padding and must be 0.
  stash::pool_geometry const seven{7, 2, 2, 2, 2, 2, 2};
  std::vector<std::int64_t> const idx7(7, 0);
  std::vector<std::byte> pad(stash::pool_argmax::max_compressed_bytes(7));
  (void)stash::pool_argmax::host_encode_indices(idx7, seven, pad);
  pad[35]      = std::byte{0x10};  // nibble 7
  auto const p = device_decode(pad, seven, s);
  CHECK(p.status.code == static_cast<std::uint32_t>(stash::codec_errc::bad_padding));
  CHECK(p.indices == std::vector<std::int64_t>(7, 0));
}

}  // namespace STASH_UNITY_ID
