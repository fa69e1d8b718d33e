/**
 * @file codec_status.hpp
 * @brief The error record a device decoder writes to device memory instead of throwing.
 */
#pragma once

#include <stash/codec/codec_error.hpp>

#include <cstdint>

namespace stash {

/// @brief Written by device decoders (zeroed first, then the first error found wins). Copy it to
/// the host after the stream has run and call throw_if_error().
struct codec_status {
  std::uint32_t code;      ///< a stash::codec_errc value; 0 means success
  std::uint32_t reserved;  ///< keeps `offset` 8-byte aligned
  std::uint64_t offset;    ///< byte offset of the problem in the compressed buffer
};

/// @brief Throws stash::codec_error when `status` records an error.
/// @param status A status a device decoder wrote (copied to the host).
/// @throws stash::codec_error With the status's code and offset, when it is not ok.
inline void throw_if_error(codec_status const& status)
{
  if (status.code != 0) {
    throw codec_error(static_cast<codec_errc>(status.code), status.offset, "reported by device");
  }
}

}  // namespace stash
