// The public codec conformance kit (stash/testing/) run against every codec on a slice of real
// ReLU activations and on special values, and shown to catch a codec that breaks its contract.
#include "codec_test_support.hpp"

#include <stash/codec/bitmask.hpp>
#include <stash/codec/chain.hpp>
#include <stash/codec/csr.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/rle.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/testing/codec_conformance.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// 20,000 real activations (a third of them zeros or more) followed by special values.
std::vector<float> sample()
{
  auto v = stash::test::load_activation("netA_final_relu4.f32");
  v.resize(20'000);
  float const specials[] = {-0.0f, std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(), -3.5f};
  for (int i = 0; i < 61; ++i) { v.push_back(specials[i % 5]); }
  return v;
}

// zvc, except that its decoder reports a short buffer with std::runtime_error.
struct careless_codec : stash::zvc<float> {
  static std::size_t host_decode(std::span<std::byte const> src, std::span<float> dst)
  {
    if (src.size() < stash::zvc<float>::max_compressed_bytes(0)) {
      throw std::runtime_error("short");
    }
    return stash::zvc<float>::host_decode(src, dst);
  }
};

}  // namespace

TEST_CASE_TEMPLATE("every float codec passes the conformance kit", C, stash::identity<float>,
                   stash::zvc<float>, stash::csr<float>, stash::rle<float>,
                   stash::chain<stash::rle<float>, stash::zvc<std::uint32_t>>, stash::bitmask,
                   stash::precision<float, stash::fp16>, stash::precision<float, stash::bf16>,
                   stash::precision<float, stash::fp8_e4m3>,
                   stash::precision<float, stash::fp8_e5m2>, stash::precision<float, stash::fp10>)
{
  auto const in = sample();
  auto const r  = stash::testing::check_codec<C>(std::span<float const>(in));
  CHECK_MESSAGE(r.ok(), r.summary());
  CHECK(r.checks > 10);
}

TEST_CASE("the codec kit catches a decoder that throws something other than codec_error")
{
  auto const in = sample();
  auto const r  = stash::testing::check_codec<careless_codec>(std::span<float const>(in));
  CHECK_FALSE(r.ok());
  CHECK(r.summary().find("other than codec_error") != std::string::npos);
}

}  // namespace STASH_UNITY_ID
