/**
 * @file codec_error.hpp
 * @brief The error raised when a compressed buffer cannot be decoded: what is wrong and where.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace stash {

/// @brief Why a compressed buffer was rejected. Shared by the host reference and the kernels,
/// which report it through stash::codec_status.
enum class codec_errc : std::uint32_t {
  ok = 0,                 ///< no error
  truncated_header,       ///< fewer bytes than a buffer header
  bad_magic,              ///< the first four bytes are not "STSH"
  bad_version,            ///< a format version this build does not read
  bad_flags,              ///< unknown flag or nonzero reserved bits
  wrong_codec,            ///< the header names another codec
  wrong_element_type,     ///< the header names another element type
  bad_param,              ///< the codec parameter (chunk size, format) is not the expected one
  truncated_payload,      ///< the payload extends past the end of the source
  destination_too_small,  ///< the element count exceeds the destination's capacity
  payload_size_mismatch,  ///< payload bytes disagree with what the element count implies
  bad_chunk_table,        ///< chunk/row offsets not monotone or disagreeing with the masks
  bad_mask_tail,          ///< mask bits set past the last element
  bad_column_index,       ///< a CSR column index out of range or not increasing
  bad_run,                ///< an RLE run of length 0 or past the chunk end
  bad_padding,            ///< nonzero padding bits or bytes
  checksum_mismatch,      ///< the payload checksum does not match
  bad_inner_buffer,       ///< a chained codec's inner buffer is inconsistent
  bad_index,              ///< a pooling argmax outside its window
  bad_value,              ///< a value field: two_value's disagrees with its mask, range_mask's
                          ///< bounds are unusable (NaN, no float strictly between them)
};

/// @brief A short English description of `code`.
/// @param code The error.
/// @return A static string.
[[nodiscard]] inline const char* describe(codec_errc code) noexcept
{
  switch (code) {
    case codec_errc::ok:
      return "no error";
    case codec_errc::truncated_header:
      return "buffer shorter than the 32-byte header";
    case codec_errc::bad_magic:
      return "bad magic (not a stash codec buffer)";
    case codec_errc::bad_version:
      return "unsupported format version";
    case codec_errc::bad_flags:
      return "unknown flags or nonzero reserved field";
    case codec_errc::wrong_codec:
      return "buffer was written by another codec";
    case codec_errc::wrong_element_type:
      return "buffer holds another element type";
    case codec_errc::bad_param:
      return "unexpected codec parameter";
    case codec_errc::truncated_payload:
      return "payload extends past the end of the buffer";
    case codec_errc::destination_too_small:
      return "element count exceeds the destination";
    case codec_errc::payload_size_mismatch:
      return "payload size disagrees with its contents";
    case codec_errc::bad_chunk_table:
      return "inconsistent chunk or row offset table";
    case codec_errc::bad_mask_tail:
      return "mask bits set past the last element";
    case codec_errc::bad_column_index:
      return "column index out of range or not increasing";
    case codec_errc::bad_run:
      return "invalid run length";
    case codec_errc::bad_padding:
      return "nonzero padding";
    case codec_errc::checksum_mismatch:
      return "payload checksum mismatch";
    case codec_errc::bad_inner_buffer:
      return "inconsistent inner buffer of a chained codec";
    case codec_errc::bad_index:
      return "pooling argmax outside its window";
    case codec_errc::bad_value:
      return "value field invalid or disagreeing with the mask";
  }
  return "unknown codec error";
}

/// @brief A compressed buffer that cannot be decoded (truncated, corrupted, or written by another
/// codec). The message is "stash::codec_error at byte OFFSET: WHAT".
class codec_error : public std::runtime_error {
 public:
  /// @brief `offset` is the byte offset in the compressed buffer where the problem was found.
  /// @param code What is wrong.
  /// @param offset Where, in bytes from the buffer's start.
  /// @param detail More words for the message (optional).
  codec_error(codec_errc code, std::uint64_t offset, std::string const& detail = {})
      : std::runtime_error("stash::codec_error at byte " + std::to_string(offset) + ": " +
                           describe(code) + (detail.empty() ? std::string() : " (" + detail + ")")),
        code_(code),
        offset_(offset)
  {
  }

  /// @brief What is wrong, as a code.
  /// @return The error code.
  [[nodiscard]] codec_errc code() const noexcept { return code_; }
  /// @brief Byte offset in the compressed buffer where the problem was found.
  /// @return The offset in bytes.
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

 private:
  codec_errc code_;
  std::uint64_t offset_;
};

}  // namespace stash
