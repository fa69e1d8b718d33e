/**
 * @file unchanged_fallback.hpp
 * @brief What the host transfers with an "unchanged" fallback share (pool_argmax_transfer,
 * two_value_transfer): data their codec cannot encode is written as an identity buffer, so the
 * decode first asks which form the host copy holds, and reports a bad copy in the status with the
 * tensor zeroed (the report range_mask_transfer, which needs no fallback, uses too). Internals of
 * those transfers.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/codec_error.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/offload/transfer.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace stash::detail {

// Whether the encoder wrote the elements unchanged (identity's codec id in the header). A
// malformed header says no: the codec's own decoder then says why.
inline bool written_unchanged(std::span<std::byte const> src)
{
  try {
    return read_header(src).codec_id == codec_ids::identity;
  } catch (codec_error const&) {
    return false;
  }
}

// A decode that left fewer elements than the tensor's (some would stay undecoded) is a bad copy.
inline void expect_every_element(std::size_t decoded, std::size_t elements)
{
  if (decoded != elements) { throw codec_error(codec_errc::payload_size_mismatch, off_count); }
}

// Runs `decode` (which throws stash::codec_error for a bad host copy) and records the verdict in
// `*status`: ok, or the error with the `bytes` at `device` zeroed (no half-decoded data).
template <class Decode>
void decode_and_report(Decode&& decode, void* device, std::size_t bytes, transfer_status* status)
{
  try {
    decode();
    status->status = codec_status{0, 0, 0};
  } catch (codec_error const& e) {
    std::memset(device, 0, bytes);
    status->status = codec_status{static_cast<std::uint32_t>(e.code()), 0, e.offset()};
  }
}

}  // namespace stash::detail
