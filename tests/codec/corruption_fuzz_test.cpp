// Decoders against corrupted and truncated input: thousands of seeded random mutations per codec.
// Every decode must either succeed or throw stash::codec_error — never crash, never read or
// write out of bounds (run once under -fsanitize=address to check the latter).
#include "codec_test_support.hpp"

#include <stash/codec/bitmask.hpp>
#include <stash/codec/chain.hpp>
#include <stash/codec/csr.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/range_mask.hpp>
#include <stash/codec/rle.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/codec/zvc.hpp>

#include <doctest/doctest.h>

#include <random>
#include <span>

namespace STASH_UNITY_ID {

namespace {

using fp16_then_zvc = stash::chain<stash::precision<float, stash::fp16>, stash::zvc<std::uint16_t>>;

// range_mask with ReLU6's bounds as a stash::codec (its encoder takes the bounds).
struct relu6_mask : stash::range_mask {
  static std::size_t host_encode(std::span<float const> in, std::span<std::byte> out)
  {
    return stash::range_mask::host_encode(in, out, stash::range_bounds{0.0f, 6.0f});
  }
};

struct fuzz_counts {
  int ok       = 0;
  int rejected = 0;
};

template <class C>
fuzz_counts fuzz(std::vector<float> const& in, int iterations, std::uint32_t seed)
{
  auto const clean = stash::host_encode_vector<C>(std::span<float const>(in));
  std::mt19937 rng(seed);
  fuzz_counts counts;
  for (int it = 0; it < iterations; ++it) {
    std::vector<std::byte> buf = clean;
    switch (it % 4) {
      case 0: {  // flip a few random bits
        int const flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) {
          buf[rng() % buf.size()] ^= static_cast<std::byte>(1u << (rng() % 8));
        }
        break;
      }
      case 1: {  // random bytes in the first 96 bytes (header and tables)
        std::size_t const limit = std::min<std::size_t>(buf.size(), 96);
        buf[rng() % limit]      = static_cast<std::byte>(rng());
        break;
      }
      case 2:  // truncation
        buf.resize(rng() % buf.size());
        break;
      default: {  // overwrite a random u32 with a random or extreme value
        if (buf.size() >= 4) {
          std::size_t const at  = (rng() % (buf.size() / 4)) * 4;
          std::uint32_t const v = (rng() & 1) ? rng() : 0xffffffffu;
          stash::detail::store_u32(buf.data() + at, v);
        }
        break;
      }
    }
    // Decode into an exact-size copy (so ASan sees any write past the end).
    std::vector<float> dst(in.size());
    try {
      (void)C::host_decode(std::span<std::byte const>(buf.data(), buf.size()), dst);
      ++counts.ok;
    } catch (stash::codec_error const&) {
      ++counts.rejected;
    }
  }
  return counts;
}

}  // namespace

TEST_CASE_TEMPLATE("decoders survive corrupted and truncated buffers", C, stash::identity<float>,
                   stash::zvc<float>, stash::csr<float>, stash::rle<float>, stash::bitmask,
                   stash::precision<float, stash::fp16>, stash::precision<float, stash::fp10>,
                   fp16_then_zvc, relu6_mask)
{
  // 5000 real activations (a slice of relu4 at its final state: 72% zeros), sizes not a multiple
  // of any chunk, plus a small input so the tables are a large share of the bytes.
  auto const all = stash::test::load_activation("netA_final_relu4.f32");
  std::vector<float> const slice(all.begin() + 1000, all.begin() + 6003);
  std::vector<float> const small(all.begin() + 20000, all.begin() + 20037);
  auto const a = fuzz<C>(slice, 3000, 1234);
  auto const b = fuzz<C>(small, 2000, 99);
  MESSAGE("accepted " << a.ok + b.ok << ", rejected " << a.rejected + b.rejected);
  CHECK(a.ok + a.rejected == 3000);
  CHECK(b.ok + b.rejected == 2000);
  // Truncations and header damage must be caught: at least a quarter of mutations are rejected.
  CHECK(a.rejected >= 750);
}

TEST_CASE("two_value's decoder survives corrupted and truncated buffers")
{
  // Its encoder takes only {0, c} data: the activations' positive positions scaled like a dropout
  // mask (c = 1/(1-0.1)), same slices as above.
  auto all = stash::test::load_activation("netA_final_relu4.f32");
  for (auto& x : all) { x = x > 0.0f ? 1.0f / (1.0f - 0.1f) : 0.0f; }
  std::vector<float> const slice(all.begin() + 1000, all.begin() + 6003);
  std::vector<float> const small(all.begin() + 20000, all.begin() + 20037);
  auto const a = fuzz<stash::two_value<float>>(slice, 3000, 1234);
  auto const b = fuzz<stash::two_value<float>>(small, 2000, 99);
  MESSAGE("accepted " << a.ok + b.ok << ", rejected " << a.rejected + b.rejected);
  CHECK(a.ok + a.rejected == 3000);
  CHECK(b.ok + b.rejected == 2000);
  CHECK(a.rejected >= 750);
}

}  // namespace STASH_UNITY_ID
