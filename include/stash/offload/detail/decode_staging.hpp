/**
 * @file decode_staging.hpp
 * @brief Where device_codec_transfer's staged decode puts things in its device scratch, and how
 * many bytes it moves: host code, so a CPU test checks the sizes the GPU path relies on.
 */
#pragma once

#include <stash/core/units.hpp>
#include <stash/offload/transfer.hpp>

#include <cstddef>

namespace stash::detail {

/// @brief Alignment of each region of the staging scratch (CUB's and cudaMalloc's).
inline constexpr std::size_t staging_alignment = 256;

/// @brief The layout of a staged decode's scratch, and what it copies.
///
/// [0, status_offset): the decoder's own scratch (the pool's alignment); then the device copy of
/// the decode's codec_status; then `source_bytes` for the staged host copy (a multiple of 16).
struct decode_staging {
  std::size_t status_offset{0};      ///< the device codec_status the decode kernels write
  std::size_t source_offset{0};      ///< the staged host copy
  std::size_t source_bytes{0};       ///< reserved for it: its known size, else the slot's capacity
  std::size_t copy_bytes{0};         ///< a copy-engine copy of that many bytes (host-known size)
  bool device_sized_copy{false};     ///< else a kernel copies the length the header declares
  std::size_t decoder_src_bytes{0};  ///< the source size the decoder is given
  std::size_t total_bytes{0};        ///< scratch to take
};

/// @brief The staging of a host copy in a slot of `capacity` bytes whose size is `encoded_bytes`
/// (unknown_encoded_bytes when the host does not know it), for a decoder that needs
/// `decoder_scratch` bytes of its own.
///
/// Known size: exactly that prefix, rounded up to 16 bytes (the slot holds align_up(capacity, 16)
/// bytes before its status, so the rounding stays in the slot), crosses PCIe on a copy engine, and
/// the decoder is told that size, so a size that disagrees with the buffer's header fails
/// validation. A size past the capacity (a corrupted slot) counts as the capacity. Unknown size:
/// room for the whole capacity; a kernel reads the header's payload length on the device and
/// copies header + payload (clamped to the capacity), which is everything the decoder may read.
[[nodiscard]] constexpr decode_staging plan_decode_staging(std::size_t decoder_scratch,
                                                           std::size_t capacity,
                                                           std::size_t encoded_bytes) noexcept
{
  bool const known           = encoded_bytes != unknown_encoded_bytes;
  std::size_t const readable = known && encoded_bytes < capacity ? encoded_bytes : capacity;
  decode_staging p;
  p.status_offset     = align_up(decoder_scratch, staging_alignment);
  p.source_offset     = p.status_offset + staging_alignment;
  p.source_bytes      = align_up(readable, 16);
  p.copy_bytes        = known ? p.source_bytes : 0;
  p.device_sized_copy = !known;
  p.decoder_src_bytes = readable;
  p.total_bytes       = p.source_offset + p.source_bytes;
  return p;
}

}  // namespace stash::detail
