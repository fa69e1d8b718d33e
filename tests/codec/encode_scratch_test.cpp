// The scratch rule of the device encoders that take scratch (zvc, csr, rle; review R2 of
// docs/reviews/gpu_review_2026-11-25.md): too small, null or misaligned scratch is refused before
// anything is queued, by the check both the kernel wrappers (cudaErrorInvalidValue) and the
// public encode_async (stash::logic_error) call. Host code: the rule runs here without a GPU.
#include <stash/codec/detail/encode_scratch.hpp>
#include <stash/core/error.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <string>

namespace STASH_UNITY_ID {

namespace {

// Storage whose address is known to be 256-byte aligned, so that +1 and +2 are misaligned for
// u32 and +4 is aligned.
struct alignas(256) scratch_block {
  std::byte bytes[1024];
};

}  // namespace

TEST_CASE("encode scratch: enough, non-null, 4-byte aligned memory is accepted")
{
  scratch_block block;
  void* const p = block.bytes;
  CHECK(stash::detail::encode_scratch_usable(p, 1024, 1024));
  CHECK(stash::detail::encode_scratch_usable(block.bytes + 4, 1020, 512));
  CHECK(stash::detail::encode_scratch_problem(p, 1024, 1024).empty());
  CHECK_NOTHROW(stash::detail::expect_encode_scratch("device_zvc::encode_async", p, 1024, 1024));
}

TEST_CASE("encode scratch: too small, null or misaligned is refused, naming the figure")
{
  scratch_block block;
  using stash::detail::encode_scratch_problem;
  using stash::detail::encode_scratch_usable;
  // Too small: the sizes are named.
  CHECK_FALSE(encode_scratch_usable(block.bytes, 511, 512));
  auto const small = encode_scratch_problem(block.bytes, 511, 512);
  CHECK(small.find("511") != std::string::npos);
  CHECK(small.find("512") != std::string::npos);
  // Null with a size: the first kernel would store its counts at address 0.
  CHECK_FALSE(encode_scratch_usable(nullptr, 4096, 512));
  CHECK(encode_scratch_problem(nullptr, 4096, 512).find("null") != std::string::npos);
  // Misaligned for the u32 counts: 1, 2 and 3 bytes past an aligned address.
  for (std::size_t off : {1, 2, 3}) {
    CAPTURE(off);
    CHECK_FALSE(encode_scratch_usable(block.bytes + off, 512, 512));
    CHECK(encode_scratch_problem(block.bytes + off, 512, 512).find("4-byte aligned") !=
          std::string::npos);
  }
  // The public layer throws the typed error with the caller's name.
  try {
    stash::detail::expect_encode_scratch("device_csr::encode_async", block.bytes + 2, 512, 512);
    FAIL("a misaligned scratch was accepted");
  } catch (stash::logic_error const& e) {
    CHECK(std::string(e.what()).find("device_csr::encode_async") != std::string::npos);
  }
  CHECK_THROWS_AS(stash::detail::expect_encode_scratch("device_rle::encode_async", nullptr, 0, 8),
                  stash::logic_error);
}

TEST_CASE("encode scratch: an encode that reads none takes any pointer, but not a short size")
{
  scratch_block block;
  // rle with no chunks: the kernel layer needs no bytes, so null and odd pointers pass ...
  CHECK(stash::detail::encode_scratch_usable(nullptr, 0, 0));
  CHECK(stash::detail::encode_scratch_usable(block.bytes + 1, 0, 0));
  // ... and the public layer, told it reads none, checks the size only.
  CHECK_NOTHROW(
      stash::detail::expect_encode_scratch("device_rle::encode_async", nullptr, 8, 8, false));
  CHECK_THROWS_AS(
      stash::detail::expect_encode_scratch("device_rle::encode_async", nullptr, 7, 8, false),
      stash::logic_error);
}

}  // namespace STASH_UNITY_ID
