// two_value: the lossless codec of {0, c} data (dropout masks scaled by 1/(1-p)): conformance,
// exact round trips at every tail size, the documented bytes, refusal of anything with a third
// bit pattern, and rejection of malformed value slots and masks.
#include "codec_test_support.hpp"

#include <stash/codec/two_value.hpp>
#include <stash/core/error.hpp>
#include <stash/testing/codec_conformance.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using tv = stash::two_value<float>;

// The scale a dropout with p = 0.1 writes: 1/(1-p) in float32, not a round number.
float const dropout_scale = 1.0f / (1.0f - 0.1f);

// n elements: c with probability 0.9, else +0.0 (a seeded Bernoulli draw).
template <class T>
std::vector<T> dropout_like(std::size_t n, T c, unsigned seed)
{
  std::mt19937 rng(seed);
  std::bernoulli_distribution keep(0.9);
  std::vector<T> v(n);
  for (auto& x : v) { x = keep(rng) ? c : T{}; }
  return v;
}

std::vector<float> round_trip(std::vector<float> const& in)
{
  auto const buf = stash::host_encode_vector<tv>(std::span<float const>(in));
  CHECK(buf.size() == 40 + 4 * ((in.size() + 31) / 32));
  return stash::host_decode_vector<tv>(buf);
}

bool same_bits(std::vector<float> const& a, std::vector<float> const& b)
{
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

stash::codec_errc decode_error(std::vector<std::byte> const& buf, std::size_t n)
{
  std::vector<float> out(n);
  try {
    (void)tv::host_decode(buf, out);
  } catch (stash::codec_error const& e) {
    return e.code();
  }
  return stash::codec_errc::ok;
}

}  // namespace

TEST_CASE_TEMPLATE("two_value passes the conformance kit", T, float, double, std::uint8_t,
                   std::int16_t)
{
  // 20,013 elements: not a multiple of 32, so the last mask word has a tail.
  auto const in = dropout_like<T>(20'013, static_cast<T>(3), 7);
  auto const r  = stash::testing::check_codec<stash::two_value<T>>(std::span<T const>(in));
  CHECK_MESSAGE(r.ok(), r.summary());
  CHECK(r.checks > 10);
}

TEST_CASE("two_value round-trips dropout masks bit-exactly at every tail size")
{
  for (std::size_t n : {0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 1000, 1024, 1025, 4099}) {
    CAPTURE(n);
    auto const in = dropout_like(n, dropout_scale, static_cast<unsigned>(n));
    CHECK(same_bits(round_trip(in), in));
  }
}

TEST_CASE("two_value writes the documented bytes")
{
  SUBCASE("a mask with a tail")
  {
    std::vector<float> in(35, 0.0f);
    in[0] = in[2] = in[31] = in[34] = dropout_scale;
    auto const buf                  = stash::host_encode_vector<tv>(std::span<float const>(in));
    auto const h                    = stash::read_header(buf);
    CHECK(h.codec_id == stash::codec_ids::two_value);
    CHECK(h.param == 0);
    CHECK(h.element_count == 35);
    CHECK(h.payload_bytes == 8 + 2 * 4);
    std::uint32_t c_bits = 0;
    std::memcpy(&c_bits, &dropout_scale, 4);
    CHECK(stash::detail::load_u64(buf.data() + 32) == c_bits);
    CHECK(stash::detail::load_u32(buf.data() + 40) == 0x80000005u);
    CHECK(stash::detail::load_u32(buf.data() + 44) == 0x4u);
  }
  SUBCASE("all zero: value slot 0, mask 0")
  {
    std::vector<float> const in(100, 0.0f);
    auto const buf = stash::host_encode_vector<tv>(std::span<float const>(in));
    for (std::size_t i = 32; i < buf.size(); ++i) { CHECK(buf[i] == std::byte{0}); }
    CHECK(same_bits(stash::host_decode_vector<tv>(buf), in));
  }
  SUBCASE("all c: every bit up to n")
  {
    std::vector<float> const in(40, dropout_scale);
    auto const buf = stash::host_encode_vector<tv>(std::span<float const>(in));
    CHECK(stash::detail::load_u32(buf.data() + 40) == 0xffffffffu);
    CHECK(stash::detail::load_u32(buf.data() + 44) == 0xffu);
    CHECK(same_bits(stash::host_decode_vector<tv>(buf), in));
  }
}

TEST_CASE("two_value compares bit patterns: -0.0 and NaN are values, kept or refused exactly")
{
  float const nan_a              = std::numeric_limits<float>::quiet_NaN();
  float nan_b                    = 0.0f;
  std::uint32_t const nan_b_bits = 0x7fc00001u;  // another payload
  std::memcpy(&nan_b, &nan_b_bits, 4);

  SUBCASE("{+0, -0} encodes with c = -0.0")
  {
    std::vector<float> const in{0.0f, -0.0f, -0.0f, 0.0f};
    REQUIRE(tv::two_value_of(in) == std::uint64_t{0x80000000u});
    CHECK(same_bits(round_trip(in), in));
  }
  SUBCASE("one NaN payload round-trips")
  {
    std::vector<float> const in{nan_b, 0.0f, nan_b};
    CHECK(same_bits(round_trip(in), in));
  }
  std::vector<std::vector<float>> const refused{
      {0.0f, dropout_scale, 1.0f},    // three values
      {dropout_scale, 2.0f},          // two nonzero values, no zero
      {0.0f, -0.0f, dropout_scale},   // -0.0 is not zero
      {nan_a, 0.0f, nan_b},           // two NaN payloads
      {dropout_scale, nan_a, 0.0f}};  // a NaN among c's
  for (auto const& in : refused) {
    CAPTURE(in.size());
    CHECK_FALSE(tv::two_value_of(in).has_value());
    std::vector<std::byte> out(tv::max_compressed_bytes(in.size()), std::byte{0xab});
    CHECK_THROWS_AS((void)tv::host_encode(in, out), stash::logic_error);
    // Refused before anything is written: the caller's buffer is untouched.
    for (auto const b : out) { CHECK(b == std::byte{0xab}); }
  }
}

TEST_CASE("two_value rejects malformed value slots and masks")
{
  std::vector<float> in(40, 0.0f);
  in[3]           = dropout_scale;
  auto const good = stash::host_encode_vector<tv>(std::span<float const>(in));
  REQUIRE(decode_error(good, 40) == stash::codec_errc::ok);

  auto bad = good;
  bad[36]  = std::byte{1};  // beyond float's 4 bytes in the value slot
  CHECK(decode_error(bad, 40) == stash::codec_errc::bad_padding);

  bad     = good;
  bad[47] = std::byte{0x01};  // word 1 bit 24: element 56 of 40
  CHECK(decode_error(bad, 40) == stash::codec_errc::bad_mask_tail);

  bad = good;
  stash::detail::store_u32(bad.data() + 40, 0);  // a value but no bit set
  CHECK(decode_error(bad, 40) == stash::codec_errc::bad_value);

  bad = good;
  stash::detail::store_u64(bad.data() + 32, 0);  // bits set but value 0
  CHECK(decode_error(bad, 40) == stash::codec_errc::bad_value);

  bad = good;
  stash::detail::store_u64(bad.data() + 16, 70);  // 70 elements need 3 words, not 2
  CHECK(decode_error(bad, 70) == stash::codec_errc::payload_size_mismatch);
}

}  // namespace STASH_UNITY_ID
