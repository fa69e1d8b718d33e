/**
 * @file csr.hpp
 * @brief Gist's Sparse Storage Dense Compute (SSDC): CSR over rows of 256 columns with 1-byte
 * column indices, so it pays from about 20% zeros (4-byte indices need 50%).
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/detail/csr_format.hpp>
#include <stash/codec/element_type.hpp>

#include <limits>
#include <string>

namespace stash {

/// @brief CSR of T with rows of 256 columns (the last row may be shorter). "Zero" is the all-zero
/// bit pattern, so -0.0 and NaN are kept. At most 2^32 - 1 elements per buffer.
/// @tparam T The element type.
template <codec_element T>
class csr {
 public:
  /// @brief Uncompressed element type.
  using value_type = T;
  /// @brief Bit-exact.
  static constexpr bool lossless = true;
  /// @brief Header codec id.
  static constexpr std::uint16_t id = codec_ids::csr;
  /// @brief Columns per row.
  static constexpr std::size_t row_width = detail::csr_row_width;
  /// @brief Largest element count one buffer holds (row pointers are u32).
  static constexpr std::size_t max_elements = std::numeric_limits<std::uint32_t>::max();

  /// @brief The size when no element is zero.
  /// @param n Element count.
  /// @return The bound for n elements.
  [[nodiscard]] static std::size_t max_compressed_bytes(std::size_t n)
  {
    return static_cast<std::size_t>(detail::make_csr_layout(n, n).values_off) + n * sizeof(T);
  }

  /// @brief Host reference encoder; returns bytes written.
  /// @param in The elements.
  /// @param out At least max_compressed_bytes(in.size()) bytes.
  /// @return Bytes written.
  /// @throws stash::logic_error When `in` exceeds max_elements or `out` is too small.
  static std::size_t host_encode(std::span<T const> in, std::span<std::byte> out)
  {
    STASH_EXPECTS(in.size() <= max_elements, "csr::host_encode: " + std::to_string(in.size()) +
                                                 " elements exceed the per-buffer limit of 2^32-1");
    detail::expect_capacity(out.size(), max_compressed_bytes(in.size()), "csr");
    std::uint64_t const n    = in.size();
    std::uint64_t const rows = detail::make_csr_layout(n, 0).rows;
    std::uint64_t nnz        = 0;
    for (std::uint64_t r = 0; r < rows; ++r) { nnz += detail::csr_row_nnz(in.data(), n, r); }
    auto const l    = detail::make_csr_layout(n, nnz);
    std::byte* o    = out.data();
    std::uint64_t k = 0;
    for (std::uint64_t r = 0; r < l.rows; ++r) {
      detail::store_u32(o + l.row_ptr_off + 4 * r, static_cast<std::uint32_t>(k));
      k = detail::csr_encode_row(in.data(), l, r, k, o);
    }
    detail::store_u32(o + l.row_ptr_off + 4 * l.rows, static_cast<std::uint32_t>(k));
    for (std::uint64_t p = l.cols_off + nnz; p < l.values_off; ++p) { o[p] = std::byte{0}; }
    std::uint64_t const total = l.values_off + nnz * sizeof(T);
    detail::write_header(o, id, static_cast<std::uint8_t>(element_type_of<T>()), detail::csr_param,
                         in.size(), total - detail::header_bytes);
    return static_cast<std::size_t>(total);
  }

  /// @brief Host reference decoder; validates the whole buffer, then scatters into dst.
  /// @param src A csr buffer.
  /// @param dst At least the encoded element count.
  /// @return The element count.
  /// @throws stash::codec_error For a malformed buffer or a destination too small.
  static std::size_t host_decode(std::span<std::byte const> src, std::span<T> dst)
  {
    std::size_t const cap = dst.size() < max_elements ? dst.size() : max_elements;
    auto const h      = detail::host_parse(src, id, static_cast<std::uint8_t>(element_type_of<T>()),
                                           detail::csr_param, cap);
    std::uint64_t nnz = 0;
    detail::throw_if(detail::csr_check<T>(src.data(), h.count, h.payload, nnz));
    auto const l = detail::make_csr_layout(h.count, nnz);
    for (std::uint64_t r = 0; r < l.rows; ++r) {
      detail::csr_decode_row(src.data(), l, r, dst.data());
    }
    return static_cast<std::size_t>(h.count);
  }
};

}  // namespace stash
