// Lossy codecs: precision (fp16 / bf16 / fp8 / fp10) error bounds and bit patterns, and the
// Binarize bitmask with its ReLU-backward helper.
#include "codec_test_support.hpp"

#include <stash/codec/bitmask.hpp>
#include <stash/codec/chain.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/zvc.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace STASH_UNITY_ID {

namespace {

template <class To>
using prec = stash::precision<float, To>;

static_assert(stash::codec<prec<stash::fp16>> && stash::codec<prec<stash::fp10>> &&
              stash::codec<stash::bitmask>);
static_assert(!prec<stash::fp16>::lossless && !stash::bitmask::lossless);
static_assert(!stash::chain<prec<stash::fp16>, stash::zvc<std::uint16_t>>::lossless);

/// Checks the documented bound for every element; returns the max abs error.
template <class To>
double check_bound(std::vector<float> const& in)
{
  using B        = stash::precision_bounds<To>;
  auto const buf = stash::host_encode_vector<prec<To>>(in);
  CHECK(buf.size() == prec<To>::max_compressed_bytes(in.size()));
  auto const out = stash::host_decode_vector<prec<To>>(buf);
  REQUIRE(out.size() == in.size());
  double worst         = 0.0;
  std::size_t failures = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    double const x = in[i], y = out[i];
    if (std::isnan(x)) {
      failures += std::isnan(y) ? 0 : 1;
      continue;
    }
    if (std::abs(x) > B::max_finite) {
      failures += (y == std::copysign(B::max_finite, x)) ? 0 : 1;
      continue;
    }
    double const err   = std::abs(y - x);
    double const bound = std::max(B::relative * std::abs(x), B::flush_below);
    worst              = std::max(worst, err);
    if (err > bound || std::signbit(x) != std::signbit(y)) {
      if (failures < 5) {
        MESSAGE("x=" << x << " y=" << y << " err=" << err << " bound=" << bound);
      }
      ++failures;
    }
  }
  CHECK(failures == 0);
  return worst;
}

std::vector<float> wide_range_values(std::size_t n)
{
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-40, 40);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = std::ldexp(mant(rng), expo(rng)) * ((i & 1) ? -1.0f : 1.0f);
  }
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(-std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(-0.0f);
  v.push_back(std::numeric_limits<float>::denorm_min());
  v.push_back(std::numeric_limits<float>::max());
  return v;
}

template <class To>
std::uint32_t code_of(float x)
{
  return stash::detail::minifloat_encode<To::exponent_bits, To::mantissa_bits, To::reserved_top>(x);
}

}  // namespace

TEST_CASE_TEMPLATE("precision meets its documented error bound", To, stash::fp16, stash::bf16,
                   stash::fp8_e4m3, stash::fp8_e5m2, stash::fp10)
{
  (void)check_bound<To>(wide_range_values(200003));
  for (auto const& file : stash::test::activation_files()) {
    CAPTURE(file);
    (void)check_bound<To>(stash::test::load_activation(file));
  }
}

TEST_CASE("precision bit patterns: round to nearest even, clamp, flush")
{
  using stash::fp16;
  CHECK(code_of<fp16>(1.0f) == 0x3c00u);
  CHECK(code_of<fp16>(65504.0f) == 0x7bffu);
  CHECK(code_of<fp16>(1e9f) == 0x7bffu);  // clamp
  CHECK(code_of<fp16>(-std::numeric_limits<float>::infinity()) == 0xfbffu);
  CHECK(code_of<fp16>(1e-5f) == 0x0000u);               // below 2^-14: flush
  CHECK(code_of<fp16>(-1e-5f) == 0x8000u);              // signed zero
  CHECK(code_of<fp16>(1.0f + 1.0f / 2048) == 0x3c00u);  // tie -> even
  CHECK(code_of<fp16>(1.0f + 3.0f / 2048) == 0x3c02u);  // tie -> even (up)
  CHECK(code_of<stash::fp8_e4m3>(448.0f) == 0x7eu);
  CHECK(code_of<stash::fp8_e4m3>(1000.0f) == 0x7eu);
  CHECK(code_of<stash::fp8_e4m3>(1.0f) == 0x38u);
  CHECK(code_of<stash::fp8_e4m3>(std::numeric_limits<float>::quiet_NaN()) == 0x7fu);
  CHECK(code_of<stash::fp8_e5m2>(57344.0f) == 0x7bu);
  CHECK(code_of<stash::fp10>(1.0f) == (15u << 4));
  CHECK(code_of<stash::bf16>(1.0f) == 0x3f80u);
  CHECK(stash::precision_bounds<stash::fp10>::max_finite == 63488.0);
  CHECK(stash::precision_bounds<stash::fp8_e4m3>::max_finite == 448.0);
  CHECK(stash::precision_bounds<stash::fp16>::max_finite == 65504.0);
}

#if defined(__FLT16_MAX__)
TEST_CASE("fp16 matches the compiler's IEEE conversion in the normal range")
{
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> bits(0, 0xffffffffu);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    float const x = stash::detail::f32_from_bits(bits(rng));
    if (!std::isfinite(x) || std::abs(x) < 6.2e-5f || std::abs(x) > 65504.0f) { continue; }
    auto const ref = static_cast<_Float16>(x);
    std::uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    if (std::abs(static_cast<float>(ref)) < 6.103515625e-05f) { continue; }  // ref is denormal
    CHECK_MESSAGE(code_of<stash::fp16>(x) == ref_bits, "x=" << x);
    ++checked;
  }
  CHECK(checked > 1000);
}
#endif

TEST_CASE("fp10 packs three codes per word and rejects nonzero padding bits")
{
  std::vector<float> in = {1.0f, -2.0f, 0.5f, 3.0f};
  auto buf              = stash::host_encode_vector<prec<stash::fp10>>(in);
  REQUIRE(buf.size() == 32 + 8);
  std::uint32_t const w0 = stash::detail::load_u32(buf.data() + 32);
  CHECK((w0 & 0x3ffu) == code_of<stash::fp10>(1.0f));
  CHECK(((w0 >> 10) & 0x3ffu) == code_of<stash::fp10>(-2.0f));
  CHECK(((w0 >> 20) & 0x3ffu) == code_of<stash::fp10>(0.5f));
  CHECK((w0 >> 30) == 0u);
  CHECK(stash::detail::load_u32(buf.data() + 36) == code_of<stash::fp10>(3.0f));
  buf[39] = std::byte{0x80};
  CHECK_THROWS_AS((void)stash::host_decode_vector<prec<stash::fp10>>(buf), stash::codec_error);
}

TEST_CASE("fp16 then zvc<u16> keeps zeros sparse and round-trips like fp16 alone")
{
  using C  = stash::chain<prec<stash::fp16>, stash::zvc<std::uint16_t>>;
  auto in  = stash::test::load_activation("netA_final_relu4.f32");
  auto buf = stash::host_encode_vector<C>(in);
  auto out = stash::host_decode_vector<C>(buf);
  auto ref = stash::host_decode_vector<prec<stash::fp16>>(
      stash::host_encode_vector<prec<stash::fp16>>(in));
  CHECK(stash::test::bitwise_equal(out, ref));
  CHECK(buf.size() < in.size() * 2 / 2);  // 72% zeros: well under half of fp16's size
}

TEST_CASE("bitmask keeps x > 0 and drives ReLU backward")
{
  for (auto const& file : stash::test::activation_files()) {
    CAPTURE(file);
    auto const in  = stash::test::load_activation(file);
    auto const buf = stash::host_encode_vector<stash::bitmask>(in);
    CHECK(buf.size() == 32 + 4 * ((in.size() + 31) / 32));
    auto const out = stash::host_decode_vector<stash::bitmask>(buf);
    REQUIRE(out.size() == in.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < in.size(); ++i) { wrong += out[i] != (in[i] > 0.0f ? 1.0f : 0.0f); }
    CHECK(wrong == 0);
    std::vector<float> grad(in.size());
    for (std::size_t i = 0; i < grad.size(); ++i) { grad[i] = static_cast<float>(i % 13) - 6.0f; }
    auto expected = grad;
    for (std::size_t i = 0; i < grad.size(); ++i) { expected[i] = in[i] > 0.0f ? grad[i] : 0.0f; }
    stash::bitmask::apply_mask_to_gradient(buf, grad);
    CHECK(stash::test::bitwise_equal(grad, expected));
  }
  std::vector<float> special = {-0.0f, std::numeric_limits<float>::quiet_NaN(), -1.0f, 1e-40f};
  auto const out =
      stash::host_decode_vector<stash::bitmask>(stash::host_encode_vector<stash::bitmask>(special));
  CHECK(out == std::vector<float>{0.0f, 0.0f, 0.0f, 1.0f});
  std::vector<float> wrong_size(5);  // larger than the mask: a caller bug
  CHECK_THROWS_AS(stash::bitmask::apply_mask_to_gradient(
                      stash::host_encode_vector<stash::bitmask>(special), wrong_size),
                  stash::logic_error);
}

TEST_CASE("bitmask drives LeakyReLU's backward exactly (self > 0 ? grad : grad * slope)")
{
  // encoding_choice gives bitmask to a storage only leaky_relu_backward reads as `self`: on the
  // decoded 1.0f / 0.0f that backward takes each element's branch as on the original.
  auto leaky_backward = [](std::vector<float> const& grad, std::vector<float> const& self) {
    std::vector<float> out(grad.size());
    for (std::size_t i = 0; i < grad.size(); ++i) {
      out[i] = self[i] > 0.0f ? grad[i] : grad[i] * 0.01f;
    }
    return out;
  };
  std::vector<float> in = {-0.0f,
                           0.0f,
                           std::numeric_limits<float>::quiet_NaN(),
                           -1.0f,
                           1e-40f,
                           -1e-40f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           3.5f,
                           -2.25f};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int i = 0; i < 1000; ++i) { in.push_back(normal(rng)); }
  std::vector<float> grad(in.size());
  for (std::size_t i = 0; i < grad.size(); ++i) { grad[i] = normal(rng); }
  auto const decoded =
      stash::host_decode_vector<stash::bitmask>(stash::host_encode_vector<stash::bitmask>(in));
  CHECK(stash::test::bitwise_equal(leaky_backward(grad, decoded), leaky_backward(grad, in)));
}

namespace {

// The host's flush-to-zero and denormals-are-zero modes (x86 MXCSR bits 15 and 6), as -ffast-math
// sets them at startup and as nvcc -ftz=true makes the device behave, for one scope.
struct flush_denormals_scope {
#if defined(__x86_64__) || defined(__i386__)
  static constexpr bool available = true;
  unsigned const saved            = _mm_getcsr();
  flush_denormals_scope() { _mm_setcsr(saved | 0x8040u); }
  ~flush_denormals_scope() { _mm_setcsr(saved); }
#else
  static constexpr bool available = false;
#endif
  flush_denormals_scope(flush_denormals_scope const&)            = delete;
  flush_denormals_scope& operator=(flush_denormals_scope const&) = delete;
};

std::vector<std::byte> bitmask_bytes(std::vector<std::uint32_t> const& bits)
{
  std::vector<float> in;
  for (auto b : bits) { in.push_back(std::bit_cast<float>(b)); }
  return stash::host_encode_vector<stash::bitmask>(in);
}

}  // namespace

TEST_CASE("bitmask's byte format decides x > 0 on the bits: denormals, +-0, NaN, inf, any FP mode")
{
  // Bit i set iff sign clear and 0 < magnitude <= +inf (docs/codec_format.md, "bitmask").
  auto const bits  = stash::test::bitmask_sign_cases();
  auto const& mask = stash::test::bitmask_sign_mask;
  auto const plain = bitmask_bytes(bits);
  REQUIRE(plain.size() == 32 + 4);
  CHECK(stash::detail::load_u64(plain.data() + stash::detail::off_count) == bits.size());
  CHECK(std::equal(mask.begin(), mask.end(), plain.begin() + 32));
  static_assert(stash::detail::bitmask_positive(0x00000001u) &&
                !stash::detail::bitmask_positive(0x80000000u) &&
                !stash::detail::bitmask_positive(0x7f800001u) &&
                stash::detail::bitmask_positive(0x7f800000u));

  if constexpr (flush_denormals_scope::available) {
    flush_denormals_scope const ftz;
    // The mode is on: a float comparison now calls a positive denormal not > 0 ...
    volatile float const denormal = std::bit_cast<float>(0x00000001u);
    CHECK_FALSE(denormal > 0.0f);
    // ... and the bytes are those of the plain run.
    CHECK(bitmask_bytes(bits) == plain);
  } else {
    MESSAGE("no host flush-to-zero control on this architecture: the FP-mode half is skipped");
  }
}

TEST_CASE("bitmask decoders reject any bit set past n in the last mask word, the first one too")
{
  // docs/codec_format.md: bits past n are 0 and a decoder rejects them, so every mask has one
  // encoding. Bit n % 32 is the first past the end: the one an off-by-one check would let by.
  for (std::size_t const n : {1, 31, 33, 45}) {
    CAPTURE(n);
    std::vector<float> const ones(n, 1.0f);
    auto const buf = stash::host_encode_vector<stash::bitmask>(ones);
    REQUIRE(stash::host_decode_vector<stash::bitmask>(buf) == ones);
    std::size_t const last = 32 + 4 * ((n - 1) / 32);  // the last word's offset
    for (std::uint32_t const bit : {static_cast<std::uint32_t>(n % 32), 31u}) {
      CAPTURE(bit);
      auto stray = buf;
      stash::detail::store_u32(stray.data() + last, stash::detail::load_u32(stray.data() + last) |
                                                        (std::uint32_t{1} << bit));
      try {
        (void)stash::host_decode_vector<stash::bitmask>(stray);
        FAIL("a mask with bit " << bit << " set past n = " << n << " was decoded");
      } catch (stash::codec_error const& e) {
        CHECK(e.code() == stash::codec_errc::bad_mask_tail);
        CHECK(e.offset() == last);
      }
    }
  }
}

}  // namespace STASH_UNITY_ID
