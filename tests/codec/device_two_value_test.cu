// device_two_value against the host reference: byte-identical encodes (tails past a multiple of
// 32 and of the kernels' 1024-element work items, all-zero and empty data, -0.0 and NaN values,
// every element type size), the refusal of data with a third bit pattern exactly where
// two_value_of says nullopt, its identity<T> fallback, and corrupted buffers reported through
// codec_status with the host's code and offset. Runs only where a GPU is present (compiled
// everywhere).
#include "support/device_bytes.cuh"

#include <stash/codec/codec.hpp>
#include <stash/codec/codec_error.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/codec/device_staging.cuh>
#include <stash/codec/device_two_value.cuh>
#include <stash/codec/identity.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/core/cuda_stream.hpp>
#include <stash/core/error.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using stash::test::device_bytes;

template <class T>
bool same_bits(std::vector<T> const& a, std::vector<T> const& b)
{
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
T from_bits(std::uint64_t bits)
{
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

// What the device encoder wrote: its bytes up to the size it reported, and its refusal word.
struct encoded {
  std::vector<std::byte> bytes;
  std::uint32_t refused;
};

// The device encode of `in` into an output poisoned with 0xa5 (a byte the encoder should have
// written but did not shows up); with `keep`, keep_unchanged_async after it (the transfer's
// fallback), the output then sized for the identity form too.
template <class T>
encoded device_encode(std::vector<T> const& in, stash::cuda_stream const& s, bool keep)
{
  using D             = stash::device_two_value<T>;
  std::size_t const n = in.size();
  std::size_t const cap =
      std::max(stash::two_value<T>::max_compressed_bytes(n),
               keep ? stash::identity<T>::max_compressed_bytes(n) : std::size_t{0});
  device_bytes d_in(n * sizeof(T));
  device_bytes d_out(cap);
  device_bytes d_size(sizeof(std::size_t));
  device_bytes d_refused(sizeof(std::uint32_t));
  device_bytes scratch(D::encode_scratch_bytes());
  STASH_CUDA_TRY(cudaMemsetAsync(d_out.as<void>(), 0xa5, cap, s));
  // Poisoned too: the encoder must write every field of its state, its size and its verdict.
  STASH_CUDA_TRY(cudaMemsetAsync(scratch.as<void>(), 0x5a, scratch.size(), s));
  STASH_CUDA_TRY(cudaMemsetAsync(d_size.as<void>(), 0x5a, d_size.size(), s));
  STASH_CUDA_TRY(cudaMemsetAsync(d_refused.as<void>(), 0x5a, d_refused.size(), s));
  if (n > 0) {
    STASH_CUDA_TRY(
        cudaMemcpyAsync(d_in.as<void>(), in.data(), n * sizeof(T), cudaMemcpyHostToDevice, s));
  }
  D::encode_async(d_in.as<T>(), n, d_out.as<std::byte>(), cap, d_size.as<std::size_t>(),
                  d_refused.as<std::uint32_t>(), scratch.as<void>(), scratch.size(), s);
  if (keep) {
    D::keep_unchanged_async(d_in.as<T>(), n, d_out.as<std::byte>(), cap, d_size.as<std::size_t>(),
                            d_refused.as<std::uint32_t>(), s);
  }
  std::size_t size = 0;
  encoded r{{}, 0};
  STASH_CUDA_TRY(
      cudaMemcpyAsync(&size, d_size.as<void>(), sizeof(size), cudaMemcpyDeviceToHost, s));
  STASH_CUDA_TRY(cudaMemcpyAsync(&r.refused, d_refused.as<void>(), sizeof(r.refused),
                                 cudaMemcpyDeviceToHost, s));
  s.synchronize();
  REQUIRE(size <= cap);
  r.bytes.resize(size);
  if (size > 0) {
    STASH_CUDA_TRY(cudaMemcpy(r.bytes.data(), d_out.as<void>(), size, cudaMemcpyDeviceToHost));
  }
  return r;
}

template <class T>
struct decoded {
  stash::codec_status status;
  std::vector<T> elements;
};

// The device decode of `bytes` into `n` elements poisoned with 0x77 bytes, zeroed on an error;
// `unchanged`: decode_or_unchanged_async (the transfer's), else decode_async.
template <class T>
decoded<T> device_decode(std::vector<std::byte> const& bytes, std::size_t n,
                         stash::cuda_stream const& s, bool unchanged)
{
  using D = stash::device_two_value<T>;
  device_bytes d_src(bytes.size());
  device_bytes d_dst(n * sizeof(T));
  device_bytes d_status(sizeof(stash::codec_status));
  device_bytes scratch(D::decode_scratch_bytes());
  STASH_CUDA_TRY(cudaMemsetAsync(d_dst.as<void>(), 0x77, d_dst.size(), s));
  STASH_CUDA_TRY(cudaMemsetAsync(d_status.as<void>(), 0x5a, d_status.size(), s));
  STASH_CUDA_TRY(cudaMemsetAsync(scratch.as<void>(), 0x5a, scratch.size(), s));
  if (!bytes.empty()) {
    STASH_CUDA_TRY(
        cudaMemcpyAsync(d_src.as<void>(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, s));
  }
  auto* const status = d_status.as<stash::codec_status>();
  if (unchanged) {
    D::decode_or_unchanged_async(d_src.as<std::byte>(), bytes.size(), d_dst.as<T>(), n, status,
                                 scratch.as<void>(), scratch.size(), s);
  } else {
    D::decode_async(d_src.as<std::byte>(), bytes.size(), d_dst.as<T>(), n, status,
                    scratch.as<void>(), scratch.size(), s);
  }
  stash::zero_on_decode_error_async(d_dst.as<void>(), d_dst.size(), status, s);
  decoded<T> r{{}, std::vector<T>(n)};
  STASH_CUDA_TRY(
      cudaMemcpyAsync(&r.status, d_status.as<void>(), sizeof(r.status), cudaMemcpyDeviceToHost, s));
  if (n > 0) {
    STASH_CUDA_TRY(cudaMemcpyAsync(r.elements.data(), d_dst.as<void>(), n * sizeof(T),
                                   cudaMemcpyDeviceToHost, s));
  }
  s.synchronize();
  return r;
}

// The host decoder's verdict on `bytes` for a destination of n elements (ok: code 0).
template <class T>
stash::codec_status host_verdict(std::vector<std::byte> const& bytes, std::size_t n)
{
  std::vector<T> dst(n);
  try {
    (void)stash::two_value<T>::host_decode(bytes, dst);
  } catch (stash::codec_error const& e) {
    return {static_cast<std::uint32_t>(e.code()), 0, e.offset()};
  }
  return {0, 0, 0};
}

// n elements: c where (i * 7919) % 10 < keep (a Bernoulli-like draw scaled in place), else 0.
template <class T>
std::vector<T> mask_of(std::size_t n, std::uint64_t c_bits, std::size_t keep = 9)
{
  std::vector<T> v(n, from_bits<T>(0));
  for (std::size_t i = 0; i < n; ++i) {
    if ((i * 7919) % 10 < keep) { v[i] = from_bits<T>(c_bits); }
  }
  return v;
}

// Encodes `in` on both sides (it is two-valued): the same bytes, and both cross decodes give it.
template <class T>
void check_two_valued(std::vector<T> const& in, stash::cuda_stream const& s)
{
  CAPTURE(in.size());
  CAPTURE(sizeof(T));
  REQUIRE(stash::two_value<T>::two_value_of(in).has_value());
  auto const host = stash::host_encode_vector<stash::two_value<T>>(std::span<T const>(in));
  for (bool const keep : {false, true}) {
    auto const dev = device_encode(in, s, keep);
    CHECK(dev.refused == 0);
    CHECK(dev.bytes == host);
  }
  for (bool const unchanged : {false, true}) {
    auto const back = device_decode<T>(host, in.size(), s, unchanged);
    CHECK(back.status.code == 0);
    CHECK(same_bits(back.elements, in));
  }
}

// `in` holds a third bit pattern: the device refuses it as two_value_of does, and the fallback
// writes identity<T>'s bytes, which the transfer's decoder takes back (and the plain one refuses).
template <class T>
void check_refused(std::vector<T> const& in, stash::cuda_stream const& s)
{
  CAPTURE(in.size());
  CAPTURE(sizeof(T));
  REQUIRE_FALSE(stash::two_value<T>::two_value_of(in).has_value());
  auto const plain = device_encode(in, s, false);
  CHECK(plain.refused == 1);
  CHECK(plain.bytes.empty());  // size 0: nothing valid written
  auto const kept = device_encode(in, s, true);
  CHECK(kept.refused == 1);
  CHECK(kept.bytes == stash::host_encode_vector<stash::identity<T>>(std::span<T const>(in)));
  auto const back = device_decode<T>(kept.bytes, in.size(), s, true);
  CHECK(back.status.code == 0);
  CHECK(same_bits(back.elements, in));
  auto const wrong = device_decode<T>(kept.bytes, in.size(), s, false);
  CHECK(wrong.status.code == static_cast<std::uint32_t>(stash::codec_errc::wrong_codec));
  CHECK(same_bits(wrong.elements, std::vector<T>(in.size(), from_bits<T>(0))));
}

constexpr std::uint64_t scale_f32 = 0x3f8e38e4u;  // 1 / (1 - 0.1) as float32 bits

}  // namespace

TEST_CASE("gpu: device_two_value encodes a scaled mask byte for byte like the host")
{
  stash::cuda_stream const s;
  // Tails: n % 32 != 0, n % 1024 != 0 (a work item's last words), many work items and blocks.
  for (std::size_t const n : {std::size_t{1}, std::size_t{31}, std::size_t{32}, std::size_t{33},
                              std::size_t{1000}, std::size_t{1024}, std::size_t{1025},
                              std::size_t{33 * 1024 + 5}, std::size_t{(1u << 20) + 77}}) {
    check_two_valued(mask_of<float>(n, scale_f32), s);
  }
  // Every element c; c only at the last element (of a tail word); at the first only.
  check_two_valued(std::vector<float>(4097, 2.0f), s);
  auto last   = std::vector<float>(4097, 0.0f);
  last.back() = 3.0f;
  check_two_valued(last, s);
  auto first    = std::vector<float>(70001, 0.0f);
  first.front() = -7.5f;
  check_two_valued(first, s);
  // Bitwise: -0.0 is c beside +0.0, a NaN keeps its payload.
  check_two_valued(mask_of<float>(100, 0x80000000u), s);
  check_two_valued(mask_of<float>(100, 0x7fa12345u), s);
  // Other element sizes: the value slot's padding and the sub-word element loads.
  check_two_valued(mask_of<double>(777, 0x3ff1c71c71c71c72ull), s);
  check_two_valued(mask_of<std::uint16_t>(2049, 0x3c00u), s);
  check_two_valued(mask_of<std::uint8_t>(4099, 0xffu, 5), s);
}

TEST_CASE("gpu: device_two_value writes all-zero and empty data as the host, value 0")
{
  stash::cuda_stream const s;
  check_two_valued(std::vector<float>{}, s);
  check_two_valued(std::vector<float>(1, 0.0f), s);
  check_two_valued(std::vector<float>(70001, 0.0f), s);  // find_kernel scans every word
  check_two_valued(std::vector<double>(33, 0.0), s);
  check_two_valued(std::vector<std::uint8_t>(1025, 0), s);
}

TEST_CASE("gpu: device_two_value refuses a third bit pattern as two_value_of does; kept unchanged")
{
  stash::cuda_stream const s;
  auto const mask = mask_of<float>(33 * 1024 + 5, scale_f32);
  // The third value at the first element, in the middle, at the last (tail) element.
  for (std::size_t const at : {std::size_t{0}, std::size_t{17 * 1024 + 3}, mask.size() - 1}) {
    CAPTURE(at);
    auto three = mask;
    three[at]  = 2.5f;
    check_refused(three, s);
  }
  // +0.0, -0.0 and c; two NaN payloads; two values, no zero.
  auto signed_zero = mask;
  signed_zero[5]   = -0.0f;
  check_refused(signed_zero, s);
  check_refused(std::vector<float>{from_bits<float>(0x7fc00000u), from_bits<float>(0x7fc00001u)},
                s);
  check_refused(std::vector<float>{0.5f, -1.0f}, s);
  auto wide = mask_of<double>(100, 0x3ff0000000000000ull);
  wide[99]  = 2.0;
  check_refused(wide, s);
  auto bytes = mask_of<std::uint8_t>(65, 1u);
  bytes[64]  = 2;
  check_refused(bytes, s);
}

TEST_CASE("gpu: device_two_value reports corrupted buffers with the host's code and offset")
{
  stash::cuda_stream const s;
  std::size_t const n = 70;  // three mask words, the last with 6 bits
  auto const in       = mask_of<float>(n, scale_f32);
  auto const good = stash::host_encode_vector<stash::two_value<float>>(std::span<float const>(in));
  auto expect     = [&](std::vector<std::byte> const& bytes, std::size_t capacity,
                    stash::codec_errc code) {
    CAPTURE(static_cast<int>(code));
    auto const host = host_verdict<float>(bytes, capacity);
    REQUIRE(host.code == static_cast<std::uint32_t>(code));
    for (bool const unchanged : {false, true}) {
      auto const r = device_decode<float>(bytes, capacity, s, unchanged);
      CHECK(r.status.code == host.code);
      CHECK(r.status.offset == host.offset);
      CHECK(same_bits(r.elements, std::vector<float>(capacity, 0.0f)));
    }
  };
  auto no_bits = std::vector<std::byte>(good);  // a value and no set bit
  for (std::size_t i = 40; i < no_bits.size(); ++i) { no_bits[i] = std::byte{0}; }
  expect(no_bits, n, stash::codec_errc::bad_value);
  auto no_value = good;  // set bits and value 0
  for (std::size_t i = 32; i < 40; ++i) { no_value[i] = std::byte{0}; }
  expect(no_value, n, stash::codec_errc::bad_value);
  auto padding = good;  // a byte past sizeof(float) in the value slot
  padding[36]  = std::byte{1};
  expect(padding, n, stash::codec_errc::bad_padding);
  auto tail = good;  // bit 6 of the last word: element 70
  tail[48]  = tail[48] | std::byte{0x40};
  expect(tail, n, stash::codec_errc::bad_mask_tail);
  expect(std::vector<std::byte>(good.begin(), good.begin() + 20), n,
         stash::codec_errc::truncated_header);
  expect(std::vector<std::byte>(good.begin(), good.end() - 1), n,
         stash::codec_errc::truncated_payload);
  expect(good, n - 1, stash::codec_errc::destination_too_small);
  // The transfer's decoder wants exactly its tensor's elements, as two_value_transfer does.
  auto const fewer = device_decode<float>(good, n + 1, s, true);
  CHECK(fewer.status.code == static_cast<std::uint32_t>(stash::codec_errc::payload_size_mismatch));
  CHECK(fewer.status.offset == 16);  // the header's count
  // Two faults: the value rule is reported before the count, as two_value_transfer's decode does.
  auto const both = device_decode<float>(no_bits, n + 1, s, true);
  CHECK(both.status.code == static_cast<std::uint32_t>(stash::codec_errc::bad_value));
  CHECK(both.status.offset == 32);
  // An identity header that stash::read_header refuses (a checksum without its flag) is not the
  // unchanged form: two_value's checks say why (another codec), as on the host.
  auto odd_identity = stash::host_encode_vector<stash::identity<float>>(std::span<float const>(in));
  odd_identity[12]  = std::byte{1};
  auto const odd    = device_decode<float>(odd_identity, n, s, true);
  CHECK(odd.status.code == static_cast<std::uint32_t>(stash::codec_errc::wrong_codec));
  CHECK(odd.status.offset == 6);
  auto const more = device_decode<float>(good, n + 1, s, false);  // the plain decoder takes it
  CHECK(more.status.code == 0);
  CHECK(same_bits(std::vector<float>(more.elements.begin(), more.elements.begin() + n), in));
}

TEST_CASE("gpu: device_two_value's size and refusal words may be mapped host memory")
{
  // The public API takes any device-accessible words: here pinned host memory, which the host reads
  // after the sync with no copy, and which keep_unchanged_async reads once per block.
  stash::cuda_stream const s;
  using D               = stash::device_two_value<float>;
  auto const mask       = mask_of<float>(33 * 1024 + 5, scale_f32);
  std::size_t const n   = mask.size();
  std::size_t const cap = std::max(stash::two_value<float>::max_compressed_bytes(n),
                                   stash::identity<float>::max_compressed_bytes(n));
  struct words {
    std::size_t size;
    std::uint32_t refused;
  };
  words* w = nullptr;
  STASH_CUDA_TRY(cudaMallocHost(&w, sizeof(words)));
  device_bytes d_in(n * sizeof(float));
  device_bytes d_out(cap);
  device_bytes scratch(D::encode_scratch_bytes());
  auto run = [&](std::vector<float> const& in) {
    w->size    = 1;
    w->refused = 7;
    STASH_CUDA_TRY(
        cudaMemcpyAsync(d_in.as<void>(), in.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
    D::encode_async(d_in.as<float>(), n, d_out.as<std::byte>(), cap, &w->size, &w->refused,
                    scratch.as<void>(), scratch.size(), s);
    D::keep_unchanged_async(d_in.as<float>(), n, d_out.as<std::byte>(), cap, &w->size, &w->refused,
                            s);
    s.synchronize();
    REQUIRE(w->size <= cap);
    std::vector<std::byte> bytes(w->size);
    STASH_CUDA_TRY(cudaMemcpy(bytes.data(), d_out.as<void>(), w->size, cudaMemcpyDeviceToHost));
    return bytes;
  };
  auto const kept = run(mask);
  CHECK(w->refused == 0);
  CHECK(kept == stash::host_encode_vector<stash::two_value<float>>(std::span<float const>(mask)));
  auto three           = mask;
  three[17 * 1024 + 3] = 2.5f;
  auto const unchanged = run(three);
  CHECK(w->refused == 1);
  CHECK(unchanged ==
        stash::host_encode_vector<stash::identity<float>>(std::span<float const>(three)));
  STASH_CUDA_TRY(cudaFreeHost(w));
}

}  // namespace STASH_UNITY_ID
