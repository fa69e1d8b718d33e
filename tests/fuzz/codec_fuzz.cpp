// libFuzzer target: every codec's host decoder and the buffer-header checks (read_header,
// verify_checksum). Input: one selector byte choosing the decoder (pool_argmax, backward and index
// decoder, takes four more bytes of geometry), then the buffer. Decodes or throws
// stash::codec_error; nothing else.
// Oracles beyond "no crash": a destination one element short is refused, a lossless codec's
// decode(encode(x)) reproduces x bit-exactly, and range_mask's decode re-encodes (with the
// buffer's bounds) to the same payload.
#include "fuzz_support.hpp"

#include <stash/codec/bitmask.hpp>
#include <stash/codec/buffer_header.hpp>
#include <stash/codec/csr.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/pool_argmax.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/range_mask.hpp>
#include <stash/codec/rle.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/codec/zvc.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace {

using bytes = std::span<std::byte const>;

template <class C>
void decode(bytes src)
{
  auto const out = stash::host_decode_vector<C>(src, stash::fuzz::max_elements);
  if (!out.empty()) {
    // Exactly one element too few: the decoder must refuse before writing anything.
    std::vector<typename C::value_type> short_dst(out.size() - 1);
    bool refused = false;
    try {
      (void)C::host_decode(src, short_dst);
    } catch (stash::codec_error const&) {
      refused = true;
    }
    if (!refused) { stash::fuzz::contract_violation("decoded into a too small destination"); }
  }
  if constexpr (C::lossless) {
    auto const again = stash::host_decode_vector<C>(
        stash::host_encode_vector<C>(std::span<typename C::value_type const>(out)));
    if (again.size() != out.size() ||
        (!out.empty() && std::memcmp(again.data(), out.data(), out.size() * sizeof(out[0])) != 0)) {
      stash::fuzz::contract_violation("lossless round trip changed the data");
    }
  }
}

void pool_backward(bytes geometry, bytes src)
{
  // Geometry always valid (window and stride 1..4, small maps), so only the buffer is on trial.
  auto const g0 = static_cast<std::size_t>(geometry[0]);
  stash::pool_geometry g{};
  g.window_h = 1 + (g0 & 3);
  g.window_w = 1 + (g0 >> 2 & 3);
  g.stride_h = 1 + (g0 >> 4 & 3);
  g.stride_w = 1 + (g0 >> 6 & 3);
  g.planes   = 1 + static_cast<std::size_t>(geometry[1]) % 8;
  g.height   = g.window_h + static_cast<std::size_t>(geometry[2]) % 32;
  g.width    = g.window_w + static_cast<std::size_t>(geometry[3]) % 32;
  // The index decoder on the same buffer: what it accepts re-encodes to the same payload (every
  // index inside its window; a re-encode that refuses one throws codec_error, caught below as a
  // refusal, so it is checked explicitly).
  std::vector<std::int64_t> indices(g.outputs());
  bool decoded = false;
  try {
    (void)stash::pool_argmax::host_decode_indices(src, g, indices);
    decoded = true;
    std::vector<std::byte> again(stash::pool_argmax::max_compressed_bytes(g.outputs()));
    std::size_t const n = stash::pool_argmax::host_encode_indices(indices, g, again);
    if (std::memcmp(again.data() + 32, src.data() + 32, n - 32) != 0) {
      stash::fuzz::contract_violation("host_decode_indices does not invert host_encode_indices");
    }
  } catch (stash::codec_error const&) {
    if (decoded) { stash::fuzz::contract_violation("host_decode_indices left an index outside"); }
  }
  std::vector<float> grad_out(g.outputs(), 1.0f);
  std::vector<float> grad_in(g.planes * g.height * g.width);
  stash::pool_argmax::host_backward(src, g, grad_out, grad_in);
}

// range_mask (not a stash::codec: its encoder takes the bounds): decode as decode<C> does, then
// the decoded values (lo or the inside value) must encode with the buffer's own bounds to the
// same payload, and the gradient mask must keep exactly the inside elements.
void range_mask_decode(bytes src)
{
  auto const h = stash::read_header(src);
  if (h.element_count > stash::fuzz::max_elements) { return; }
  std::vector<float> out(static_cast<std::size_t>(h.element_count));
  std::size_t const n = stash::range_mask::host_decode(src, out);
  if (n > 0) {
    std::vector<float> short_dst(n - 1);
    bool refused = false;
    try {
      (void)stash::range_mask::host_decode(src, short_dst);
    } catch (stash::codec_error const&) {
      refused = true;
    }
    if (!refused) { stash::fuzz::contract_violation("decoded into a too small destination"); }
  }
  std::vector<std::byte> again(stash::range_mask::max_compressed_bytes(n));
  std::size_t const used =
      stash::range_mask::host_encode(out, again, stash::range_mask::bounds_of(src));
  if (used != h.total_bytes() || std::memcmp(again.data() + 32, src.data() + 32, used - 32) != 0) {
    stash::fuzz::contract_violation("range_mask's decode does not re-encode to its payload");
  }
  std::vector<float> grad(n, 1.0f);
  stash::range_mask::apply_mask_to_gradient(src, grad);
  float const lo = stash::range_mask::bounds_of(src).lo;
  for (std::size_t i = 0; i < n; ++i) {
    if ((grad[i] != 0.0f) == (std::memcmp(&out[i], &lo, sizeof lo) == 0)) {
      stash::fuzz::contract_violation("range_mask's gradient mask disagrees with its decode");
    }
  }
}

void check_header(bytes src)
{
  auto const h = stash::read_header(src);
  if (h.total_bytes() > src.size()) {
    stash::fuzz::contract_violation("read_header accepted a payload past the end");
  }
  stash::verify_checksum(src);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size)
{
  if (size < 1) { return 0; }
  auto const all  = std::as_bytes(std::span<std::uint8_t const>(data, size));
  bytes const src = all.subspan(1);
  using stash::fp10, stash::fp16, stash::bf16, stash::fp8_e4m3, stash::fp8_e5m2;
  try {
    switch (data[0] % 23) {
      case 0:
        check_header(src);
        break;
      case 1:
        decode<stash::identity<float>>(src);
        break;
      case 2:
        decode<stash::identity<std::uint8_t>>(src);
        break;
      case 3:
        decode<stash::zvc<float>>(src);
        break;
      case 4:
        decode<stash::zvc<std::uint16_t>>(src);
        break;
      case 5:
        decode<stash::zvc<std::uint8_t>>(src);
        break;
      case 6:
        decode<stash::zvc<double>>(src);
        break;
      case 7:
        decode<stash::csr<float>>(src);
        break;
      case 8:
        decode<stash::csr<std::uint16_t>>(src);
        break;
      case 9:
        decode<stash::rle<float>>(src);
        break;
      case 10:
        decode<stash::rle<std::uint8_t>>(src);
        break;
      case 11:
        decode<stash::bitmask>(src);
        break;
      case 12:
        decode<stash::precision<float, fp16>>(src);
        break;
      case 13:
        decode<stash::precision<float, bf16>>(src);
        break;
      case 14:
        decode<stash::precision<float, fp10>>(src);
        break;
      case 15:
        decode<stash::precision<float, fp8_e4m3>>(src);
        break;
      case 16:
        decode<stash::precision<float, fp8_e5m2>>(src);
        break;
      case 17:
        if (src.size() >= 4) { pool_backward(src.first(4), src.subspan(4)); }
        break;
      case 18:
        decode<stash::identity<double>>(src);
        break;
      case 19:
        decode<stash::rle<std::uint32_t>>(src);
        break;
      case 20:
        decode<stash::two_value<float>>(src);
        break;
      case 21:
        decode<stash::two_value<std::uint8_t>>(src);
        break;
      default:
        range_mask_decode(src);
        break;
    }
  } catch (stash::codec_error const&) {
  }
  return 0;
}
