// range_mask: one bit per element for hardtanh's (ReLU6's) backward. The backward on the decoded
// tensor gives bitwise the original's gradient over IEEE edge cases, random data and every tail
// size; the documented bytes; unusable bounds refused; malformed buffers refused with codec_error;
// the conformance kit through a ReLU6 adapter.
#include "codec_test_support.hpp"

#include <stash/codec/range_mask.hpp>
#include <stash/core/error.hpp>
#include <stash/testing/codec_conformance.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace STASH_UNITY_ID {

namespace {

using stash::range_bounds;
using stash::range_mask;

// range_mask with ReLU6's bounds as a stash::codec, for the conformance kit.
struct relu6_mask : range_mask {
  static std::size_t host_encode(std::span<float const> in, std::span<std::byte> out)
  {
    return range_mask::host_encode(in, out, range_bounds{0.0f, 6.0f});
  }
};
static_assert(stash::codec<relu6_mask> && !stash::codec<range_mask>);

std::vector<std::byte> encode(std::vector<float> const& in, range_bounds b)
{
  std::vector<std::byte> out(range_mask::max_compressed_bytes(in.size()));
  CHECK(range_mask::host_encode(in, out, b) == out.size());
  return out;
}

std::vector<float> decode(std::vector<std::byte> const& buf, std::size_t n)
{
  std::vector<float> out(n);
  CHECK(range_mask::host_decode(buf, out) == n);
  return out;
}

// Specials, then random values around and beyond the bounds, then random bit patterns.
std::vector<float> mixed(std::size_t n, float lo, float hi, unsigned seed)
{
  auto const specials = stash::test::range_mask_special_cases(lo, hi);
  std::mt19937 rng(seed);
  float const span = std::isfinite(hi - lo) ? hi - lo : 8.0f;
  std::uniform_real_distribution<float> near(-span, 2 * span);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0:
        v[i] = std::bit_cast<float>(specials[(i / 4) % specials.size()]);
        break;
      case 3:
        v[i] = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
        break;
      default:
        v[i] = (std::isfinite(lo) ? lo : -span) + near(rng);
        break;
    }
  }
  return v;
}

std::vector<float> gradient(std::size_t n, unsigned seed)
{
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) { x = g(rng); }
  return v;
}

stash::codec_error decode_error(std::vector<std::byte> const& buf, std::size_t n)
{
  std::vector<float> out(n);
  try {
    (void)range_mask::host_decode(buf, out);
  } catch (stash::codec_error const& e) {
    return e;
  }
  return stash::codec_error(stash::codec_errc::ok, 0);
}

}  // namespace

TEST_CASE("range_mask: hardtanh_backward on the decoded tensor is the original's, bitwise")
{
  for (auto const& [lo, hi] : stash::test::range_mask_bounds_cases()) {
    range_bounds const b{lo, hi};
    REQUIRE(b.valid());
    float const inside = b.inside_value();
    CAPTURE(b.describe());
    CHECK((lo < inside && inside < hi));
    for (std::size_t const n : {0, 1, 31, 32, 33, 64, 1000, 100'003}) {
      CAPTURE(n);
      auto const x       = mixed(n, lo, hi, static_cast<unsigned>(n) + 1);
      auto const buf     = encode(x, b);
      auto const decoded = decode(buf, n);
      CHECK(buf.size() == 32 + 8 + 4 * ((n + 31) / 32));
      auto const grad     = gradient(n, static_cast<unsigned>(n) + 2);
      auto const original = stash::test::hardtanh_backward(grad, x, lo, hi);
      CHECK(stash::test::bitwise_equal(stash::test::hardtanh_backward(grad, decoded, lo, hi),
                                       original));
      // The mask's own backward gives the same gradient.
      auto masked = grad;
      range_mask::apply_mask_to_gradient(buf, masked);
      CHECK(stash::test::bitwise_equal(masked, original));
      // Decoded values are lo or the inside value, nothing else.
      std::size_t others = 0;
      for (float const v : decoded) {
        others += !(stash::detail::bits_equal(v, lo) || stash::detail::bits_equal(v, inside));
      }
      CHECK(others == 0);
    }
  }
}

TEST_CASE("range_mask: the inside bit is decided on the bits, in any FP mode")
{
  // ReLU6 over its edge cases: inside iff NaN or 0 < x < 6 as IEEE compares (denormals count).
  auto const bits = stash::test::range_mask_special_cases(0.0f, 6.0f);
  std::vector<float> x;
  for (auto const u : bits) { x.push_back(std::bit_cast<float>(u)); }
  auto const plain   = encode(x, {0.0f, 6.0f});
  auto const decoded = decode(plain, x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    bool const expected = std::isnan(x[i]) || (x[i] > 0.0f && x[i] < 6.0f);
    CHECK(stash::detail::bits_equal(decoded[i], expected ? 2.0f : 0.0f));
  }
  static_assert(stash::detail::range_mask_key(0x80000000u) == stash::detail::range_mask_key(0u));
  static_assert(stash::detail::range_mask_inside(0x7fc00000u, 0, 1));
  static_assert(!stash::detail::range_mask_inside(0x80000001u, 0, 0x40c00000));
#if defined(__x86_64__) || defined(__i386__)
  // Flush-to-zero and denormals-are-zero on (MXCSR bits 15 and 6): a float comparison would now
  // call a positive denormal not > 0, but the bytes are those of the plain run.
  struct csr_guard {  // restores the mode even when encode throws
    unsigned saved = _mm_getcsr();
    ~csr_guard() { _mm_setcsr(saved); }
  };
  std::vector<std::byte> flushed;
  {
    csr_guard const guard;
    _mm_setcsr(guard.saved | 0x8040u);
    flushed = encode(x, {0.0f, 6.0f});
  }
  CHECK(flushed == plain);
#endif
}

TEST_CASE("range_mask writes the documented bytes")
{
  // ReLU6: elements 0..34; inside are 1 (3.0), 2 (NaN), 31 (a denormal) and 34 (nextafter(6, 0)).
  std::vector<float> in(35, 7.0f);
  in[0]  = 6.0f;
  in[1]  = 3.0f;
  in[2]  = std::numeric_limits<float>::quiet_NaN();
  in[3]  = -0.0f;
  in[31] = std::numeric_limits<float>::denorm_min();
  in[34] = std::nextafter(6.0f, 0.0f);

  auto const buf = encode(in, {0.0f, 6.0f});
  auto const h   = stash::read_header(buf);
  CHECK(h.codec_id == stash::codec_ids::range_mask);
  CHECK(h.type == static_cast<std::uint8_t>(stash::element_type::f32));
  CHECK(h.param == 0);
  CHECK(h.element_count == 35);
  CHECK(h.payload_bytes == 8 + 2 * 4);
  CHECK(stash::detail::load_u32(buf.data() + 32) == 0x00000000u);  // lo
  CHECK(stash::detail::load_u32(buf.data() + 36) == 0x40c00000u);  // hi
  CHECK(stash::detail::load_u32(buf.data() + 40) == 0x80000006u);
  CHECK(stash::detail::load_u32(buf.data() + 44) == 0x4u);
  CHECK(range_mask::bounds_of(buf).hi == 6.0f);
  // The inside values: the float between the bounds with the fewest significant bits.
  CHECK(range_bounds{0.0f, 6.0f}.inside_value() == 2.0f);
  CHECK(std::bit_cast<std::uint32_t>(range_bounds{-1.0f, 1.0f}.inside_value()) == 0u);
  CHECK(range_bounds{-6.0f, -0.0f}.inside_value() == -2.0f);
  CHECK(range_bounds{5.9f, 6.0f}.inside_value() == 5.9375f);
}

TEST_CASE("range_mask refuses unusable bounds before writing anything")
{
  float const nan  = std::numeric_limits<float>::quiet_NaN();
  float const tiny = std::numeric_limits<float>::denorm_min();
  std::vector<range_bounds> const bad{
      {nan, 6.0f},  {0.0f, nan},   {6.0f, 0.0f},  {1.0f, 1.0f},
      {0.0f, tiny}, {-0.0f, 0.0f}, {0.0f, -0.0f}, {1.0f, std::nextafter(1.0f, 2.0f)}};
  std::vector<float> const in{1.0f, 2.0f};
  for (auto const& b : bad) {
    CAPTURE(b.describe());
    CHECK_FALSE(b.valid());
    std::vector<std::byte> out(range_mask::max_compressed_bytes(in.size()), std::byte{0xab});
    try {
      (void)range_mask::host_encode(in, out, b);
      FAIL("bounds " << b.describe() << " were taken");
    } catch (stash::logic_error const& e) {
      // The message names the bounds with their bit patterns.
      CHECK(std::string(e.what()).find(b.describe()) != std::string::npos);
    }
    for (auto const x : out) { CHECK(x == std::byte{0xab}); }
    CHECK_THROWS_AS((void)b.inside_value(), stash::logic_error);
  }
  // Two floats apart is enough: the one between them is the inside value.
  range_bounds const narrow{1.0f, std::nextafter(std::nextafter(1.0f, 2.0f), 2.0f)};
  CHECK(narrow.valid());
  CHECK(narrow.inside_value() == std::nextafter(1.0f, 2.0f));
  std::vector<std::byte> small(range_mask::max_compressed_bytes(in.size()) - 1);
  CHECK_THROWS_AS((void)range_mask::host_encode(in, small, {0.0f, 6.0f}), stash::logic_error);
}

TEST_CASE("range_mask decoders refuse malformed buffers with codec_error and an offset")
{
  std::vector<float> const in(45, 3.0f);
  auto const clean = encode(in, {0.0f, 6.0f});
  CHECK(decode_error(clean, 45).code() == stash::codec_errc::ok);
  auto with_bounds = [&](std::uint32_t lo, std::uint32_t hi) {
    auto b = clean;
    stash::detail::store_u32(b.data() + 32, lo);
    stash::detail::store_u32(b.data() + 36, hi);
    return b;
  };
  for (auto const& [lo, hi] :
       {std::pair{0x7fc00000u, 0x40c00000u}, std::pair{0u, 0xffc00001u}, std::pair{0x40c00000u, 0u},
        std::pair{0x80000000u, 0u}, std::pair{0u, 1u}}) {
    CAPTURE(lo);
    CAPTURE(hi);
    auto const e = decode_error(with_bounds(lo, hi), 45);
    CHECK(e.code() == stash::codec_errc::bad_value);
    CHECK(e.offset() == 32);
  }
  // Bounds that are usable decode (with them): the buffer names its own clamp.
  CHECK(decode_error(with_bounds(0xbf800000u, 0x3f800000u), 45).code() == stash::codec_errc::ok);
  // A bit past n, the first and the last of the tail.
  for (std::uint32_t const bit : {13u, 31u}) {
    auto stray = clean;
    stash::detail::store_u32(stray.data() + 44,
                             stash::detail::load_u32(stray.data() + 44) | (1u << bit));
    auto const e = decode_error(stray, 45);
    CHECK(e.code() == stash::codec_errc::bad_mask_tail);
    CHECK(e.offset() == 44);
  }
  auto shorter = clean;
  stash::detail::store_u64(shorter.data() + stash::detail::off_payload, 8 + 4 * 2 - 4);
  CHECK(decode_error(shorter, 45).code() == stash::codec_errc::payload_size_mismatch);
  auto truncated = clean;
  truncated.resize(clean.size() - 1);
  CHECK(decode_error(truncated, 45).code() == stash::codec_errc::truncated_payload);
  CHECK(decode_error(clean, 44).code() == stash::codec_errc::destination_too_small);
  auto other                         = clean;
  other[stash::detail::off_codec_id] = std::byte{0x03};
  CHECK(decode_error(other, 45).code() == stash::codec_errc::wrong_codec);
  // The gradient helper: a mask for fewer elements than the gradient is a misuse.
  std::vector<float> grad(46, 1.0f);
  CHECK_THROWS_AS(range_mask::apply_mask_to_gradient(clean, grad), stash::logic_error);
  grad.resize(44);
  CHECK_THROWS_AS(range_mask::apply_mask_to_gradient(clean, grad), stash::codec_error);
}

TEST_CASE("range_mask passes the conformance kit (ReLU6's bounds)")
{
  auto const x = mixed(20'013, 0.0f, 6.0f, 5);
  auto const r = stash::testing::check_codec<relu6_mask>(std::span<float const>(x));
  CHECK_MESSAGE(r.ok(), r.summary());
  CHECK(r.checks > 10);
}

}  // namespace STASH_UNITY_ID
