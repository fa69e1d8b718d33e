// Device codecs against the host reference: byte-identical encodes, cross decodes (device
// decodes host bytes and the host decodes device bytes), and corrupted input reported through
// codec_status. Runs only where a GPU is present.
#include "codec_test_support.hpp"

#include <stash/codec/device_bitmask.cuh>
#include <stash/codec/device_csr.cuh>
#include <stash/codec/device_precision.cuh>
#include <stash/codec/device_rle.cuh>
#include <stash/codec/device_zvc.cuh>
#include <stash/core/cuda_stream.hpp>

#include "support/device_bytes.cuh"

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace STASH_UNITY_ID {

namespace {

using stash::test::device_bytes;

template <class D>
using element_of = typename D::host_codec::value_type;

template <class T>
bool same_bits(std::vector<T> const& a, std::vector<T> const& b)
{
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class D>
std::vector<std::byte> device_encode(std::vector<element_of<D>> const& in,
                                     stash::cuda_stream const& s)
{
  using H = typename D::host_codec;
  using T = element_of<D>;
  device_bytes d_in(in.size() * sizeof(T));
  device_bytes d_out(H::max_compressed_bytes(in.size()));
  device_bytes d_size(sizeof(std::size_t));
  std::size_t const scratch_bytes = D::encode_scratch_bytes(in.size());
  device_bytes scratch(scratch_bytes);
  STASH_CUDA_TRY(cudaMemcpyAsync(d_in.as<void>(), in.data(), in.size() * sizeof(T),
                                 cudaMemcpyHostToDevice, s));
  D::encode_async(d_in.as<T>(), in.size(), d_out.as<std::byte>(), d_out.size(),
                  d_size.as<std::size_t>(), scratch.as<void>(), scratch_bytes, s);
  std::size_t size = 0;
  STASH_CUDA_TRY(
      cudaMemcpyAsync(&size, d_size.as<void>(), sizeof(size), cudaMemcpyDeviceToHost, s));
  s.synchronize();
  REQUIRE(size <= d_out.size());
  std::vector<std::byte> out(size);
  STASH_CUDA_TRY(cudaMemcpy(out.data(), d_out.as<void>(), size, cudaMemcpyDeviceToHost));
  return out;
}

/// Decodes on the device into `capacity` elements; returns the status and the elements.
template <class D>
stash::codec_status device_decode(std::vector<std::byte> const& buf, std::size_t capacity,
                                  std::vector<element_of<D>>& out, stash::cuda_stream const& s)
{
  using T = element_of<D>;
  device_bytes d_src(buf.size());
  device_bytes d_out(capacity * sizeof(T));
  device_bytes d_status(sizeof(stash::codec_status));
  STASH_CUDA_TRY(
      cudaMemcpyAsync(d_src.as<void>(), buf.data(), buf.size(), cudaMemcpyHostToDevice, s));
  D::decode_async(d_src.as<std::byte>(), buf.size(), d_out.as<T>(), capacity,
                  d_status.as<stash::codec_status>(), nullptr, 0, s);
  stash::codec_status status{};
  STASH_CUDA_TRY(
      cudaMemcpyAsync(&status, d_status.as<void>(), sizeof(status), cudaMemcpyDeviceToHost, s));
  s.synchronize();
  out.resize(capacity);
  if (status.code == 0 && capacity > 0) {
    STASH_CUDA_TRY(
        cudaMemcpy(out.data(), d_out.as<void>(), capacity * sizeof(T), cudaMemcpyDeviceToHost));
  }
  return status;
}

/// Encodes `in` on both sides and checks byte identity and both cross decodes.
template <class D>
void check_against_host(std::vector<element_of<D>> const& in, stash::cuda_stream const& s)
{
  using H = typename D::host_codec;
  CAPTURE(in.size());
  auto const host = stash::host_encode_vector<H>(std::span<element_of<D> const>(in));
  auto const dev  = device_encode<D>(in, s);
  CHECK(dev == host);
  // device decodes host bytes
  std::vector<element_of<D>> from_device;
  auto const status = device_decode<D>(host, in.size(), from_device, s);
  CHECK(status.code == 0);
  auto const ref = stash::host_decode_vector<H>(host);
  CHECK(same_bits(from_device, ref));
  // host decodes device bytes
  CHECK(same_bits(stash::host_decode_vector<H>(dev), ref));
}

float float_bits(std::uint32_t u)
{
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Inputs at the edges of the sparse codecs' rows (256) and chunks (1024, 4096): empty, one
/// element, all zero, no zero, -0.0 and NaN payloads, constant runs far beyond 65536.
std::vector<std::vector<float>> edge_inputs()
{
  std::vector<std::vector<float>> all;
  for (std::size_t n : {0, 1, 2, 255, 256, 257, 4095, 4096, 4097, 70001}) {
    all.emplace_back(n, 0.0f);
    all.emplace_back(n, -0.0f);
    std::vector<float> dense(n);
    for (std::size_t i = 0; i < n; ++i) { dense[i] = 1.0f + static_cast<float>(i % 1000); }
    all.push_back(std::move(dense));
    std::vector<float> specials(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t const pick = static_cast<std::uint32_t>((i / 3) % 6);
      specials[i]              = pick == 0   ? 0.0f
                                 : pick == 1 ? -0.0f
                                 : pick == 2 ? float_bits(0x7fa12345u)
                                 : pick == 3 ? std::numeric_limits<float>::quiet_NaN()
                                 : pick == 4 ? std::numeric_limits<float>::infinity()
                                             : 2.5f;
    }
    all.push_back(std::move(specials));
  }
  all.emplace_back(200000, 0.25f);  // runs split only by the 4096-element chunks
  std::vector<float> long_runs(300007);
  for (std::size_t i = 0; i < long_runs.size(); ++i) {
    long_runs[i] = static_cast<float>(i / 70000);  // runs of 70000 > 65536
  }
  all.push_back(std::move(long_runs));
  return all;
}

std::vector<std::vector<float>> inputs()
{
  std::vector<std::vector<float>> all;
  for (auto const& f : stash::test::activation_files()) {
    all.push_back(stash::test::load_activation(f));
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (std::size_t n : {0, 1, 31, 33, 1023, 1025, 4097, 100003}) {
    std::vector<float> v(n);
    for (auto& x : v) { x = std::max(0.0f, dist(rng)); }
    if (n > 3) { v[2] = -0.0f; }
    all.push_back(std::move(v));
  }
  return all;
}

}  // namespace

static_assert(stash::device_codec<stash::device_zvc<float>>);
static_assert(stash::device_codec<stash::device_bitmask>);
static_assert(stash::device_codec<stash::device_precision<stash::fp10>>);
static_assert(stash::device_codec<stash::device_csr<float>>);
static_assert(stash::device_codec<stash::device_rle<float>>);
static_assert(stash::device_codec<stash::device_rle<std::uint8_t>>);

TEST_CASE_TEMPLATE("device codecs match the host reference byte for byte", D,
                   stash::device_zvc<float>, stash::device_bitmask,
                   stash::device_precision<stash::fp16>, stash::device_precision<stash::fp10>,
                   stash::device_csr<float>, stash::device_rle<float>)
{
  stash::cuda_stream s;
  for (auto const& in : inputs()) { check_against_host<D>(in, s); }
}

TEST_CASE_TEMPLATE("lossless device codecs match the host on edge cases", D,
                   stash::device_zvc<float>, stash::device_csr<float>, stash::device_rle<float>)
{
  stash::cuda_stream s;
  for (auto const& in : edge_inputs()) { check_against_host<D>(in, s); }
}

// Review R3 (docs/reviews/gpu_review_2026-11-25.md): the device encoder gets the values the
// bitmask sign test is about (denormals, +-0, +-inf, NaNs), alone and at every lane of a warp,
// and must write the documented mask and the host's bytes (the host test pins the same cases,
// lossy_codecs_test.cpp, also under FTZ/DAZ).
TEST_CASE("device bitmask decides x > 0 on the bits like the host: denormals, +-0, inf, NaN")
{
  stash::cuda_stream s;
  auto const bits = stash::test::bitmask_sign_cases();
  std::vector<float> cases;
  for (auto b : bits) { cases.push_back(float_bits(b)); }
  auto const dev = device_encode<stash::device_bitmask>(cases, s);
  REQUIRE(dev.size() == 32 + 4);
  auto const& mask = stash::test::bitmask_sign_mask;
  CHECK(std::equal(mask.begin(), mask.end(), dev.begin() + 32));
  check_against_host<stash::device_bitmask>(cases, s);
  // 15 and 32 are coprime: case i % 15 lands on every lane within 480 elements; 1065 leaves a
  // partial last word and several warps.
  std::vector<float> tiled(15 * 71);
  for (std::size_t i = 0; i < tiled.size(); ++i) { tiled[i] = cases[i % cases.size()]; }
  check_against_host<stash::device_bitmask>(tiled, s);
}

// Review R2: scratch that is null or not 4-byte aligned is refused before anything is queued
// (stash::logic_error), as too small scratch always was; the rule itself is tested on the CPU
// (encode_scratch_test.cpp). Nothing is launched, so no sticky misaligned-address fault.
TEST_CASE_TEMPLATE("device encoders refuse null or misaligned scratch", D, stash::device_zvc<float>,
                   stash::device_csr<float>, stash::device_rle<float>)
{
  using H = typename D::host_codec;
  stash::cuda_stream s;
  std::size_t const n = 5000;
  device_bytes d_in(n * sizeof(float));
  device_bytes d_out(H::max_compressed_bytes(n));
  device_bytes d_size(sizeof(std::size_t));
  std::size_t const need = D::encode_scratch_bytes(n);
  device_bytes scratch(need + 8);
  // The accepted call below runs the kernels: their input is written (compute-sanitizer initcheck).
  STASH_CUDA_TRY(cudaMemsetAsync(d_in.as<void>(), 0, n * sizeof(float), s));
  auto encode = [&](void* p, std::size_t bytes) {
    D::encode_async(d_in.as<float>(), n, d_out.as<std::byte>(), d_out.size(),
                    d_size.as<std::size_t>(), p, bytes, s);
  };
  CHECK_THROWS_AS(encode(nullptr, need), stash::logic_error);
  CHECK_THROWS_AS(encode(scratch.as<std::byte>() + 2, need), stash::logic_error);
  CHECK_THROWS_AS(encode(scratch.as<void>(), need - 1), stash::logic_error);
  CHECK_NOTHROW(encode(scratch.as<std::byte>() + 4, need));  // 4-byte aligned is enough
  s.synchronize();
}

TEST_CASE("device csr and rle match the host for other element types")
{
  stash::cuda_stream s;
  for (std::size_t n : {0, 1, 300, 4097, 70001}) {
    std::vector<std::uint16_t> u16(n);
    for (std::size_t i = 0; i < n; ++i) { u16[i] = static_cast<std::uint16_t>(i % 3 == 0 ? 0 : i); }
    check_against_host<stash::device_csr<std::uint16_t>>(u16, s);
    check_against_host<stash::device_rle<std::uint16_t>>(u16, s);
    std::vector<double> f64(n, 0.0);
    for (std::size_t i = 0; i < n; i += 7) {
      f64[i] = i % 2 == 0 ? -0.0 : 0.5 * static_cast<double>(i);
    }
    check_against_host<stash::device_csr<double>>(f64, s);
    check_against_host<stash::device_rle<double>>(f64, s);
    std::vector<std::uint8_t> u8(n);
    for (std::size_t i = 0; i < n; ++i) { u8[i] = static_cast<std::uint8_t>((i / 50) % 3); }
    check_against_host<stash::device_csr<std::uint8_t>>(u8, s);
    check_against_host<stash::device_rle<std::uint8_t>>(u8, s);
  }
}

TEST_CASE_TEMPLATE("device decoders report corrupted input through codec_status", D,
                   stash::device_zvc<float>, stash::device_bitmask,
                   stash::device_precision<stash::fp10>, stash::device_csr<float>,
                   stash::device_rle<float>)
{
  using H = typename D::host_codec;
  stash::cuda_stream s;
  auto const in    = stash::test::load_activation("netA_final_relu4.f32");
  auto const clean = stash::host_encode_vector<H>(in);
  std::vector<float> out;
  // truncated
  std::vector<std::byte> truncated(clean.begin(), clean.begin() + clean.size() / 2);
  auto st = device_decode<D>(truncated, in.size(), out, s);
  CHECK(st.code == static_cast<std::uint32_t>(stash::codec_errc::truncated_payload));
  CHECK_THROWS_AS(stash::throw_if_error(st), stash::codec_error);
  // bad magic
  auto bad = clean;
  bad[0]   = std::byte{0};
  st       = device_decode<D>(bad, in.size(), out, s);
  CHECK(st.code == static_cast<std::uint32_t>(stash::codec_errc::bad_magic));
  CHECK(st.offset == 0);
  // too small a destination
  st = device_decode<D>(clean, in.size() - 1, out, s);
  CHECK(st.code == static_cast<std::uint32_t>(stash::codec_errc::destination_too_small));
  // seeded random mutations: the device verdict (ok or not) must equal the host's
  std::mt19937 rng(11);
  int agreements = 0;
  for (int it = 0; it < 200; ++it) {
    auto m = clean;
    m[32 + rng() % (m.size() - 32)] ^= static_cast<std::byte>(1u << (rng() % 8));
    std::vector<float> host_out(in.size());
    bool host_ok = true;
    try {
      (void)H::host_decode(m, host_out);
    } catch (stash::codec_error const&) {
      host_ok = false;
    }
    std::vector<float> dev_out;
    auto const ds = device_decode<D>(m, in.size(), dev_out, s);
    agreements += ((ds.code == 0) == host_ok) ? 1 : 0;
    if (host_ok && ds.code == 0) { CHECK(stash::test::bitwise_equal(dev_out, host_out)); }
  }
  CHECK(agreements == 200);
}

namespace {

/// The host decoder's verdict on `buf` as a codec_status (code 0 when it decodes).
template <class H>
stash::codec_status host_verdict(std::vector<std::byte> const& buf, std::size_t capacity)
{
  std::vector<typename H::value_type> out(capacity);
  try {
    (void)H::host_decode(buf, out);
  } catch (stash::codec_error const& e) {
    return {static_cast<std::uint32_t>(e.code()), 0, e.offset()};
  }
  return {};
}

/// A buffer with exactly one fault: device and host must name the same code and offset.
template <class D>
void check_same_fault(std::vector<std::byte> const& buf, std::size_t capacity,
                      stash::codec_errc expected, stash::cuda_stream const& s)
{
  auto const host = host_verdict<typename D::host_codec>(buf, capacity);
  CHECK(host.code == static_cast<std::uint32_t>(expected));
  std::vector<element_of<D>> out;
  auto const dev = device_decode<D>(buf, capacity, out, s);
  CHECK(dev.code == host.code);
  CHECK(dev.offset == host.offset);
}

}  // namespace

TEST_CASE("device csr and rle name the same fault and offset as the host")
{
  using stash::codec_errc;
  namespace d = stash::detail;
  stash::cuda_stream s;
  auto const in = stash::test::load_activation("netA_final_relu4.f32");
  {
    auto const clean         = stash::host_encode_vector<stash::csr<float>>(in);
    std::uint64_t const rows = d::make_csr_layout(in.size(), 0).rows;
    std::uint64_t const nnz  = d::load_u32(clean.data() + 32 + 4 * rows);
    auto const l             = d::make_csr_layout(in.size(), nnz);
    // A row in the middle with at least two entries: repeat its first column.
    std::uint64_t r = rows / 2;
    while (d::load_u32(clean.data() + l.row_ptr_off + 4 * (r + 1)) -
               d::load_u32(clean.data() + l.row_ptr_off + 4 * r) <
           2) {
      ++r;
    }
    std::uint64_t const k0        = d::load_u32(clean.data() + l.row_ptr_off + 4 * r);
    auto repeated                 = clean;
    repeated[l.cols_off + k0 + 1] = repeated[l.cols_off + k0];
    check_same_fault<stash::device_csr<float>>(repeated, in.size(), codec_errc::bad_column_index,
                                               s);
    // The total count disagreeing with the payload size.
    auto total = clean;
    d::store_u32(total.data() + 32 + 4 * rows, static_cast<std::uint32_t>(nnz - 1));
    check_same_fault<stash::device_csr<float>>(total, in.size(), codec_errc::payload_size_mismatch,
                                               s);
    if (l.values_off > l.cols_off + nnz) {
      auto padded              = clean;
      padded[l.values_off - 1] = std::byte{0x5a};
      check_same_fault<stash::device_csr<float>>(padded, in.size(), codec_errc::bad_padding, s);
    }
  }
  {
    auto const clean             = stash::host_encode_vector<stash::rle<float>>(in);
    std::uint64_t const chunks   = d::rle_chunks(in.size());
    std::uint64_t const runs_off = 32 + 4 * chunks;
    std::uint64_t const c        = chunks / 2;
    std::uint64_t const begin    = d::load_u32(clean.data() + 32 + 4 * (c - 1));
    std::uint64_t const end      = d::load_u32(clean.data() + 32 + 4 * c);
    REQUIRE(end - begin >= 12);  // at least two runs, so the first is shorter than the chunk
    // The first run one longer: the chunk's last record overruns it.
    auto longer = clean;
    d::store_u16(longer.data() + runs_off + begin,
                 static_cast<std::uint16_t>(d::load_u16(longer.data() + runs_off + begin) + 1));
    check_same_fault<stash::device_rle<float>>(longer, in.size(), codec_errc::bad_run, s);
    // The payload size disagreeing with the last table entry.
    auto grown = clean;
    grown.resize(clean.size() + 6);
    d::store_u64(grown.data() + 24, d::load_u64(clean.data() + 24) + 6);
    check_same_fault<stash::device_rle<float>>(grown, in.size(), codec_errc::payload_size_mismatch,
                                               s);
  }
}

TEST_CASE("device bitmask applies the mask to a gradient like the host")
{
  stash::cuda_stream s;
  auto const in  = stash::test::load_activation("netA_epoch1_relu2.f32");
  auto const buf = stash::host_encode_vector<stash::bitmask>(in);
  std::vector<float> grad(in.size());
  for (std::size_t i = 0; i < grad.size(); ++i) { grad[i] = static_cast<float>(i % 7) - 3.0f; }
  auto expected = grad;
  stash::bitmask::apply_mask_to_gradient(buf, expected);
  device_bytes d_src(buf.size()), d_grad(grad.size() * 4), d_status(sizeof(stash::codec_status));
  // On `s`, not cudaMemcpy: a pageable cudaMemcpy may return before its DMA has landed, and the
  // non-blocking stream `s` is not ordered after the legacy stream it runs on.
  STASH_CUDA_TRY(
      cudaMemcpyAsync(d_src.as<void>(), buf.data(), buf.size(), cudaMemcpyHostToDevice, s));
  STASH_CUDA_TRY(
      cudaMemcpyAsync(d_grad.as<void>(), grad.data(), grad.size() * 4, cudaMemcpyHostToDevice, s));
  stash::device_bitmask::apply_mask_to_gradient_async(d_src.as<std::byte>(), buf.size(),
                                                      d_grad.as<float>(), grad.size(),
                                                      d_status.as<stash::codec_status>(), s);
  s.synchronize();
  stash::codec_status st{};
  STASH_CUDA_TRY(cudaMemcpy(&st, d_status.as<void>(), sizeof(st), cudaMemcpyDeviceToHost));
  stash::throw_if_error(st);
  STASH_CUDA_TRY(
      cudaMemcpy(grad.data(), d_grad.as<void>(), grad.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(stash::test::bitwise_equal(grad, expected));
}

}  // namespace STASH_UNITY_ID
