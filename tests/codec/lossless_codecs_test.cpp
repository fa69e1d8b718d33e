// Lossless codecs (identity, zvc, csr, rle, chains of them): round trips on the real
// activations and on edge cases, bit-exact.
#include "codec_test_support.hpp"

#include <stash/codec/chain.hpp>
#include <stash/codec/csr.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/rle.hpp>
#include <stash/codec/zvc.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

namespace STASH_UNITY_ID {

namespace {

using zvc_f32      = stash::zvc<float>;
using csr_f32      = stash::csr<float>;
using rle_f32      = stash::rle<float>;
using identity_f32 = stash::identity<float>;
using rle_then_zvc = stash::chain<stash::rle<float>, stash::zvc<std::uint32_t>>;

static_assert(stash::codec<zvc_f32> && stash::codec<csr_f32> && stash::codec<rle_f32> &&
              stash::codec<identity_f32> && stash::codec<rle_then_zvc>);
static_assert(zvc_f32::lossless && csr_f32::lossless && rle_f32::lossless &&
              identity_f32::lossless && rle_then_zvc::lossless);

template <class C>
std::vector<float> round_trip(std::vector<float> const& in)
{
  auto const buf = stash::host_encode_vector<C>(std::span<float const>(in));
  CHECK(buf.size() <= C::max_compressed_bytes(in.size()));
  auto const h = stash::read_header(buf);
  CHECK(h.codec_id == C::id);
  CHECK(h.element_count == in.size());
  CHECK(h.total_bytes() == buf.size());
  return stash::host_decode_vector<C>(buf);
}

std::vector<float> special_values(std::size_t n)
{
  std::vector<float> v(n);
  float const specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max(),
                            1.0f,
                            0.0f};
  for (std::size_t i = 0; i < n; ++i) { v[i] = specials[(i * 7) % 10]; }
  // a NaN with a non-canonical payload
  std::uint32_t const nan_payload = 0x7fa12345u;
  if (n > 3) { std::memcpy(&v[3], &nan_payload, 4); }
  return v;
}

}  // namespace

TEST_CASE_TEMPLATE("lossless codecs round-trip the real activations bit-exactly", C, identity_f32,
                   zvc_f32, csr_f32, rle_f32, rle_then_zvc)
{
  for (auto const& file : stash::test::activation_files()) {
    CAPTURE(file);
    auto const in = stash::test::load_activation(file);
    REQUIRE(!in.empty());
    CHECK(stash::test::bitwise_equal(round_trip<C>(in), in));
  }
}

TEST_CASE_TEMPLATE("lossless codecs handle edge-case sizes and special values", C, identity_f32,
                   zvc_f32, csr_f32, rle_f32, rle_then_zvc)
{
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (std::size_t n :
       {0, 1, 2, 31, 32, 33, 255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097, 10007}) {
    CAPTURE(n);
    std::vector<float> zeros(n, 0.0f);
    CHECK(stash::test::bitwise_equal(round_trip<C>(zeros), zeros));
    std::vector<float> dense(n);
    for (auto& x : dense) { x = 1.5f + std::abs(dist(rng)); }  // no zero
    CHECK(stash::test::bitwise_equal(round_trip<C>(dense), dense));
    std::vector<float> relu(n);
    for (auto& x : relu) { x = std::max(0.0f, dist(rng)); }
    CHECK(stash::test::bitwise_equal(round_trip<C>(relu), relu));
    auto const specials = special_values(n);
    CHECK(stash::test::bitwise_equal(round_trip<C>(specials), specials));
  }
}

TEST_CASE("zvc size is within 2% of its ideal (4 B per nonzero + 1 bit per element)")
{
  for (auto const& file : stash::test::activation_files()) {
    CAPTURE(file);
    auto const in   = stash::test::load_activation(file);
    std::size_t nnz = 0;
    for (float x : in) { nnz += (x != 0.0f || std::signbit(x)) ? 1 : 0; }
    double const ideal = 4.0 * static_cast<double>(nnz) + static_cast<double>(in.size()) / 8.0;
    auto const buf     = stash::host_encode_vector<zvc_f32>(in);
    CAPTURE(buf.size());
    CAPTURE(ideal);
    CHECK(static_cast<double>(buf.size()) <= 1.02 * ideal);
    CHECK(static_cast<double>(buf.size()) >= ideal);
  }
}

TEST_CASE("zvc writes the documented layout")
{
  std::vector<float> in(40, 0.0f);
  in[1]          = 2.0f;
  in[33]         = -3.0f;
  auto const buf = stash::host_encode_vector<zvc_f32>(in);
  // header 32 + 2 mask words + 2 table entries = 48 (already 16-aligned) + 2 values
  REQUIRE(buf.size() == 56);
  CHECK(stash::detail::load_u32(buf.data() + 32) == 0x2u);
  CHECK(stash::detail::load_u32(buf.data() + 36) == 0x2u);
  CHECK(stash::detail::load_u32(buf.data() + 40) == 0u);
  CHECK(stash::detail::load_u32(buf.data() + 44) == 2u);
  float v[2];
  std::memcpy(v, buf.data() + 48, 8);
  CHECK(v[0] == 2.0f);
  CHECK(v[1] == -3.0f);
  auto const h = stash::read_header(buf);
  CHECK(h.payload_bytes == 24);
  CHECK(h.type == static_cast<std::uint8_t>(stash::element_type::f32));
}

TEST_CASE("csr pays from about 20% zeros and rle is tiny on constant data")
{
  std::vector<float> in(256 * 64, 1.0f);
  for (std::size_t i = 0; i < in.size(); i += 4) { in[i] = 0.0f; }  // 25% zeros
  auto const c = stash::host_encode_vector<csr_f32>(in);
  CHECK(c.size() < in.size() * sizeof(float));
  std::vector<float> constant(100000, 0.25f);
  auto const r = stash::host_encode_vector<rle_f32>(constant);
  CHECK(r.size() < 32 + 4 * 25 + 25 * 6 + 1);
}

TEST_CASE("zvc and csr also round-trip other element types")
{
  std::vector<std::uint16_t> h(3000);
  for (std::size_t i = 0; i < h.size(); ++i) {
    h[i] = static_cast<std::uint16_t>(i % 3 == 0 ? 0 : i);
  }
  auto const zb = stash::host_encode_vector<stash::zvc<std::uint16_t>>(h);
  CHECK(stash::host_decode_vector<stash::zvc<std::uint16_t>>(zb) == h);
  auto const cb = stash::host_encode_vector<stash::csr<std::uint16_t>>(h);
  CHECK(stash::host_decode_vector<stash::csr<std::uint16_t>>(cb) == h);
  std::vector<double> d(777, 0.0);
  d[5]          = -0.0;
  d[700]        = 3.25;
  auto const db = stash::host_encode_vector<stash::zvc<double>>(d);
  auto const dd = stash::host_decode_vector<stash::zvc<double>>(db);
  REQUIRE(dd.size() == d.size());
  CHECK(std::memcmp(dd.data(), d.data(), d.size() * sizeof(double)) == 0);
}

TEST_CASE("decoders reject buffers of another codec, type, or a too small destination")
{
  std::vector<float> in(100, 1.0f);
  auto const z = stash::host_encode_vector<zvc_f32>(in);
  std::vector<float> out(100);
  CHECK_THROWS_AS(csr_f32::host_decode(z, out), stash::codec_error);
  try {
    (void)rle_f32::host_decode(z, out);
    FAIL("rle decoded a zvc buffer");
  } catch (stash::codec_error const& e) {
    CHECK(e.code() == stash::codec_errc::wrong_codec);
    CHECK(e.offset() == 6);
    CHECK(std::string(e.what()).find("at byte 6") != std::string::npos);
  }
  std::vector<std::uint32_t> out_u(100);
  CHECK_THROWS_AS(stash::zvc<std::uint32_t>::host_decode(z, out_u), stash::codec_error);
  std::vector<float> small(99);
  try {
    (void)zvc_f32::host_decode(z, small);
    FAIL("decoded into a too small destination");
  } catch (stash::codec_error const& e) {
    CHECK(e.code() == stash::codec_errc::destination_too_small);
  }
  std::vector<std::byte> tiny(z.begin(), z.begin() + 20);
  CHECK_THROWS_AS(zvc_f32::host_decode(tiny, out), stash::codec_error);
}

TEST_CASE("encoders reject an output span smaller than max_compressed_bytes")
{
  std::vector<float> in(100, 1.0f);
  std::vector<std::byte> out(zvc_f32::max_compressed_bytes(100) - 1);
  CHECK_THROWS_AS(zvc_f32::host_encode(in, out), stash::logic_error);
}

TEST_CASE("a sealed checksum catches payload corruption the structure cannot")
{
  auto in  = stash::test::load_activation("netA_final_relu5.f32");
  auto buf = stash::host_encode_vector<zvc_f32>(in);
  stash::seal_checksum(buf);
  CHECK(stash::test::bitwise_equal(stash::host_decode_vector<zvc_f32>(buf), in));
  auto const h = stash::read_header(buf);
  CHECK((h.flags & 1) == 1);
  buf[buf.size() - 2] ^= std::byte{0x40};  // inside a packed value: structurally valid
  try {
    (void)stash::host_decode_vector<zvc_f32>(buf);
    FAIL("corruption not detected");
  } catch (stash::codec_error const& e) {
    CHECK(e.code() == stash::codec_errc::checksum_mismatch);
  }
}

}  // namespace STASH_UNITY_ID
