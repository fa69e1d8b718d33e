/**
 * @file device_codec.cuh
 * @brief The `stash::device_codec` concept: the stream-ordered side of a codec.
 *
 * Customization points of a device codec `D` (all static):
 * - `using host_codec`: the stash::codec whose bytes it writes (output is byte-identical).
 * - `encode_scratch_bytes(n)` / `decode_scratch_bytes(capacity)`: scratch the caller provides.
 * - `encode_async(d_in, n, d_out, out_capacity, d_compressed_bytes, d_scratch, scratch_bytes,
 *   stream)`: enqueues the encode, writes the compressed size to `*d_compressed_bytes` (device
 *   memory); `d_out` is 16-byte aligned and holds host_codec::max_compressed_bytes(n).
 * - `decode_async(d_src, src_bytes, d_out, out_capacity, d_status, d_scratch, scratch_bytes,
 *   stream)`: enqueues validation and decode; problems land in `*d_status` (device memory;
 *   copy it back and call stash::throw_if_error). Device decoders do not verify the optional
 *   checksum.
 * `stream` is a `cuda::stream_ref` (a `cudaStream_t` converts). Neither synchronizes nor
 * allocates. Bad arguments throw stash::logic_error, failed launches
 * stash::cuda_error.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>
#include <cuda/stream_ref>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>

namespace stash {

/// @brief A codec's stream-ordered device implementation (see the file comment).
/// @tparam D The type checked.
template <class D>
concept device_codec = codec<typename D::host_codec> &&
    requires(std::size_t n, typename D::host_codec::value_type const* d_in,
             typename D::host_codec::value_type* d_out, std::byte* d_bytes, std::byte const* d_src,
             std::size_t* d_size, codec_status* d_status, void* d_scratch, cuda::stream_ref stream)
{
  {
    D::encode_scratch_bytes(n)
    } -> std::same_as<std::size_t>;
  {
    D::decode_scratch_bytes(n)
    } -> std::same_as<std::size_t>;
  D::encode_async(d_in, n, d_bytes, n, d_size, d_scratch, n, stream);
  D::decode_async(d_src, n, d_out, n, d_status, d_scratch, n, stream);
};

/// @brief The device codec that writes host codec `HostCodec`'s bytes: specialized by each
/// device codec's header (device_zvc.cuh, ...), so a codec is named once, by its host spelling,
/// and its device form found from it (stash::transfer_for on cuda_backend).
/// @tparam HostCodec The host codec.
template <class HostCodec>
struct device_codec_for;

/// @brief device_codec_for's type.
/// @tparam HostCodec The host codec.
template <class HostCodec>
using device_codec_for_t = typename device_codec_for<HostCodec>::type;

namespace detail {

/// @brief The argument checks every device encoder makes before enqueueing anything.
inline void expect_device_encode_args(const char* who, void const* in, std::size_t n,
                                      std::byte const* out, std::size_t out_capacity,
                                      std::size_t need, std::size_t const* d_size)
{
  STASH_EXPECTS(n == 0 || in != nullptr, std::string(who) + ": null input");
  STASH_EXPECTS(out != nullptr && d_size != nullptr, std::string(who) + ": null output");
  STASH_EXPECTS(reinterpret_cast<std::uintptr_t>(out) % 16 == 0,
                std::string(who) + ": output must be 16-byte aligned");
  STASH_EXPECTS(out_capacity >= need, std::string(who) + ": output holds " +
                                          std::to_string(out_capacity) + " bytes, needs " +
                                          std::to_string(need));
}

/// @brief A device encoder's per-buffer element limit (the host format's), checked before anything
/// is taken or enqueued.
inline void expect_device_element_limit(const char* who, std::size_t n, std::size_t max_elements)
{
  STASH_EXPECTS(n <= max_elements, std::string(who) + ": " + std::to_string(n) +
                                       " elements exceed the per-buffer limit of " +
                                       std::to_string(max_elements));
}

/// @brief The argument checks every device decoder makes before enqueueing anything.
inline void expect_device_decode_args(const char* who, std::byte const* src, void const* out,
                                      std::size_t out_capacity, codec_status const* d_status)
{
  STASH_EXPECTS(src != nullptr && d_status != nullptr, std::string(who) + ": null source/status");
  STASH_EXPECTS(out_capacity == 0 || out != nullptr, std::string(who) + ": null output");
  STASH_EXPECTS(reinterpret_cast<std::uintptr_t>(src) % 16 == 0,
                std::string(who) + ": source must be 16-byte aligned");
}

}  // namespace detail
}  // namespace stash
