// libFuzzer target: the chain decoder (stash::chain<A, B>::host_decode), over the chains the
// tools use and two lossless ones. Input: one selector byte, then the buffer. Decodes or throws
// stash::codec_error; nothing else.
#include "fuzz_support.hpp"

#include <stash/codec/chain.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/rle.hpp>
#include <stash/codec/zvc.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace {

template <class C>
void decode(std::span<std::byte const> src)
{
  auto const out = stash::host_decode_vector<C>(src, stash::fuzz::max_elements);
  if constexpr (C::lossless) {
    auto const again = stash::host_decode_vector<C>(
        stash::host_encode_vector<C>(std::span<typename C::value_type const>(out)));
    if (again.size() != out.size() ||
        (!out.empty() && std::memcmp(again.data(), out.data(), out.size() * sizeof(out[0])) != 0)) {
      stash::fuzz::contract_violation("lossless round trip through a chain changed the data");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size)
{
  if (size < 1) { return 0; }
  auto const src = std::as_bytes(std::span<std::uint8_t const>(data, size)).subspan(1);
  using stash::chain, stash::precision, stash::zvc, stash::rle;
  try {
    switch (data[0] % 4) {
      case 0:
        decode<chain<precision<float, stash::fp16>, zvc<std::uint16_t>>>(src);
        break;
      case 1:
        decode<chain<precision<float, stash::fp8_e4m3>, zvc<std::uint8_t>>>(src);
        break;
      case 2:
        decode<chain<rle<float>, zvc<std::uint32_t>>>(src);
        break;
      default:
        decode<chain<zvc<float>, rle<std::uint8_t>>>(src);
        break;
    }
  } catch (stash::codec_error const&) {
  }
  return 0;
}
