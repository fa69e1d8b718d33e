/**
 * @file codec.hpp
 * @brief The `stash::codec` concept: what an activation compression format provides, and
 * convenience wrappers that encode to / decode from a std::vector.
 *
 * Customization points of a codec `C` (all static; see docs/codec_format.md for the bytes):
 * - `using value_type`: the uncompressed element type.
 * - `static constexpr bool lossless`: decode(encode(x)) reproduces x bit-exactly.
 * - `static constexpr std::uint16_t id`: written to byte 6 of every buffer (codec_ids).
 * - `static std::size_t max_compressed_bytes(std::size_t n)`: an upper bound on the encoded size
 *   of n elements, header included; the encoder's output span must be at least that long.
 * - `static std::size_t host_encode(std::span<value_type const>, std::span<std::byte>)`: the host
 *   reference, which defines the bytes; returns the bytes written.
 * - `static std::size_t host_decode(std::span<std::byte const>, std::span<value_type>)`: returns
 *   the element count; throws stash::codec_error for any malformed input and never reads
 *   outside the source nor writes outside the destination. Bytes after the payload are ignored.
 *
 * Device side (`stash::device_codec`, in device_codec.cuh): `encode_async` / `decode_async` on a
 * stream, which never synchronize, write the compressed size (or a codec_status) to device
 * memory, and take their scratch memory from the caller (`encode_scratch_bytes(n)`).
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/codec_error.hpp>
#include <stash/core/error.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace stash {

/// @brief A compression format with a host reference implementation (see the file comment).
/// @tparam C The type checked.
template <class C>
concept codec = requires(std::size_t n, std::span<typename C::value_type const> in,
                         std::span<std::byte> out, std::span<std::byte const> src,
                         std::span<typename C::value_type> dst)
{
  typename C::value_type;
  {
    C::lossless
    } -> std::convertible_to<bool>;
  {
    C::id
    } -> std::convertible_to<std::uint16_t>;
  {
    C::max_compressed_bytes(n)
    } -> std::same_as<std::size_t>;
  {
    C::host_encode(in, out)
    } -> std::same_as<std::size_t>;
  {
    C::host_decode(src, dst)
    } -> std::same_as<std::size_t>;
};

/// @brief Encodes `in` with codec C into a vector sized to the result.
/// @tparam C The codec.
/// @param in The elements.
/// @return The encoded buffer, exactly as long as written.
/// @throws stash::logic_error When C refuses `in` (a size limit).
template <codec C>
[[nodiscard]] std::vector<std::byte> host_encode_vector(std::span<typename C::value_type const> in)
{
  std::vector<std::byte> out(C::max_compressed_bytes(in.size()));
  out.resize(C::host_encode(in, out));
  return out;
}

/// @brief Decodes a buffer written by C into a new vector. `max_elements` caps the allocation a
/// (possibly corrupted) header can ask for; a larger count is a codec_error.
///
/// The vector is allocated from the header's count before the payload is checked, so the
/// default cap (2^28 elements: 1 GiB of float32) lets a 32-byte header alone cost 1 GiB. It suits
/// buffers this process encoded. A caller decoding untrusted bytes (read from a file, received
/// from another process) must pass the largest count it expects, as tests/fuzz does, or decode
/// into its own destination with C::host_decode, which never exceeds the destination's size.
/// @tparam C The codec that wrote the buffer.
/// @param src A buffer written by C.
/// @param max_elements The largest element count accepted.
/// @return The decoded elements.
/// @throws stash::codec_error For a malformed buffer or a count above `max_elements`.
template <codec C>
[[nodiscard]] std::vector<typename C::value_type> host_decode_vector(
    std::span<std::byte const> src, std::size_t max_elements = std::size_t{1} << 28)
{
  auto const h = read_header(src);
  if (h.element_count > max_elements) {
    throw codec_error(codec_errc::destination_too_small, detail::off_count,
                      "element count " + std::to_string(h.element_count) + " exceeds the cap of " +
                          std::to_string(max_elements));
  }
  std::vector<typename C::value_type> out(static_cast<std::size_t>(h.element_count));
  out.resize(C::host_decode(src, out));
  return out;
}

namespace detail {

/// @brief Host decoders' common prologue: parse, check against codec/type/param/capacity,
/// verify the checksum; throws codec_error.
inline header_fields host_parse(std::span<std::byte const> src, std::uint16_t codec_id,
                                std::uint8_t type, std::uint16_t param, std::size_t capacity)
{
  header_fields h{};
  throw_if(parse_header(src.data(), src.size(), codec_id, type, param, capacity, h));
  verify_checksum(src.data(), h);
  return h;
}

/// @brief Host encoders' common precondition on the output span.
inline void expect_capacity(std::size_t have, std::size_t need, const char* codec_name)
{
  if (have < need) {
    STASH_FAIL(std::string(codec_name) + "::host_encode: output holds " + std::to_string(have) +
               " bytes, max_compressed_bytes requires " + std::to_string(need));
  }
}

}  // namespace detail
}  // namespace stash
