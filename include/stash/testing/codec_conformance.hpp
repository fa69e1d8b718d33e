/**
 * @file codec_conformance.hpp
 * @brief The conformance kit of the `codec` concept (stash's codecs and yours): sizes, header,
 * round trip, and that every malformed input is a stash::codec_error and nothing else, each
 * failure named in a stash::testing::conformance_report.
 *
 * @code
 * std::vector<float> sample = ...;   // data like yours: real activations, edge cases
 * auto const r = stash::testing::check_codec<my_codec>(sample);
 * CHECK_MESSAGE(r.ok(), r.summary());
 * @endcode
 * Checked on `sample` (and on an empty input): host_encode writes at most max_compressed_bytes,
 * and refuses a smaller output span with stash::logic_error; the header names the codec's id,
 * the element count and the encoded size; host_decode returns the element count and, for a
 * lossless codec, the bytes exactly; a destination one element short is codec_error
 * destination_too_small; every truncation of the buffer (every length for buffers up to 4 KiB,
 * 257 spread lengths beyond) and 256 single-byte corruptions are decoded or refused with
 * stash::codec_error, never another exception, and a decode never reports more elements than the
 * destination holds.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/codec.hpp>
#include <stash/codec/codec_error.hpp>
#include <stash/core/error.hpp>
#include <stash/testing/conformance_report.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace stash::testing {

namespace detail {

// What a decode of possibly malformed bytes did.
enum class decode_outcome { decoded, codec_error, other_error };

template <codec C>
decode_outcome try_decode(std::span<std::byte const> src, std::span<typename C::value_type> dst,
                          std::size_t& count)
{
  try {
    count = C::host_decode(src, dst);
    return decode_outcome::decoded;
  } catch (codec_error const&) {
    return decode_outcome::codec_error;
  } catch (...) {
    return decode_outcome::other_error;
  }
}

template <codec C>
std::vector<std::byte> encode_checked(std::span<typename C::value_type const> in,
                                      conformance_report& r, std::string const& at)
{
  std::vector<std::byte> buf(C::max_compressed_bytes(in.size()));
  std::size_t const used = C::host_encode(in, buf);
  r.expect(used <= buf.size(),
           "host_encode wrote " + std::to_string(used) + " B, more than max_compressed_bytes" + at);
  buf.resize(std::min(used, buf.size()));
  auto const h = read_header(buf);
  r.expect(h.codec_id == C::id, "the header does not carry the codec's id" + at);
  r.expect(h.element_count == in.size(), "the header's element count is not the input's" + at);
  r.expect(h.total_bytes() == buf.size(), "the header's size is not the bytes written" + at);
  if (buf.size() > 0) {
    std::vector<std::byte> small(C::max_compressed_bytes(in.size()) - 1);
    bool refused = false;
    try {
      (void)C::host_encode(in, small);
    } catch (logic_error const&) {
      refused = true;
    } catch (...) {
    }
    r.expect(refused, "an output span below max_compressed_bytes is not a logic_error" + at);
  }
  return buf;
}

template <codec C>
void check_round_trip(std::span<typename C::value_type const> in, std::vector<std::byte> const& buf,
                      conformance_report& r, std::string const& at)
{
  using T = typename C::value_type;
  std::vector<T> out(in.size());
  std::size_t count = 0;
  auto const how    = try_decode<C>(buf, out, count);
  r.expect(how == decode_outcome::decoded && count == in.size(),
           "its own buffer does not decode to the element count" + at);
  if (C::lossless && how == decode_outcome::decoded && !in.empty()) {
    r.expect(std::memcmp(out.data(), in.data(), in.size() * sizeof(T)) == 0,
             "a lossless codec's round trip changed the bytes" + at);
  }
  if (!in.empty()) {
    std::vector<T> short_dst(in.size() - 1);
    bool too_small = false;
    try {
      (void)C::host_decode(buf, short_dst);
    } catch (codec_error const& e) {
      too_small = e.code() == codec_errc::destination_too_small;
    } catch (...) {
    }
    r.expect(too_small, "a destination one element short is not destination_too_small" + at);
  }
}

// Truncations and single-byte corruptions: decoded or codec_error, never more than fits.
template <codec C>
void check_malformed(std::size_t n, std::vector<std::byte> const& buf, conformance_report& r,
                     std::string const& at)
{
  std::vector<typename C::value_type> out(n);
  std::size_t bad_kind = 0, overrun = 0, truncated_ok = 0;
  auto probe = [&](std::span<std::byte const> src, bool truncated) {
    std::size_t count = 0;
    auto const how    = try_decode<C>(src, out, count);
    bad_kind += how == decode_outcome::other_error;
    overrun += how == decode_outcome::decoded && count > out.size();
    truncated_ok += truncated && how == decode_outcome::decoded;
  };
  std::size_t const lengths = buf.size() <= 4096 ? buf.size() : 257;
  for (std::size_t i = 0; i < lengths; ++i) {
    probe(std::span(buf).first(buf.size() <= 4096 ? i : i * (buf.size() - 1) / 256), true);
  }
  std::mt19937_64 rng(20261123);
  for (int i = 0; i < 256 && !buf.empty(); ++i) {
    auto copy = buf;
    auto& b   = copy[std::uniform_int_distribution<std::size_t>(0, copy.size() - 1)(rng)];
    b ^= static_cast<std::byte>(std::uniform_int_distribution<int>(1, 255)(rng));
    probe(copy, false);
  }
  r.expect(bad_kind == 0, std::to_string(bad_kind) +
                              " malformed buffers threw something other than codec_error" + at);
  r.expect(overrun == 0, "a malformed buffer reported more elements than the destination" + at);
  r.expect(truncated_ok == 0,
           std::to_string(truncated_ok) + " truncated buffers decoded as if whole" + at);
}

}  // namespace detail

/// @brief Runs the codec conformance checks (see the file comment) of `C` on `sample` and on an
/// empty input. An exception escaping a check is reported as a failure.
/// @tparam C A type satisfying stash::codec.
/// @param sample Elements to encode (use data like what the codec will see).
/// @return The report (ok() when every check passed).
template <codec C>
[[nodiscard]] conformance_report check_codec(std::span<typename C::value_type const> sample)
{
  conformance_report r;
  r.subject = "codec " + std::to_string(C::id);
  for (auto const in : {sample, sample.first(0)}) {
    std::string const at = " (" + std::to_string(in.size()) + " elements)";
    try {
      auto const buf = detail::encode_checked<C>(in, r, at);
      detail::check_round_trip<C>(in, buf, r, at);
      detail::check_malformed<C>(in.size(), buf, r, at);
    } catch (std::exception const& e) {
      r.expect(false, std::string("threw: ") + e.what() + at);
    }
  }
  return r;
}

}  // namespace stash::testing
