/**
 * @file pool_argmax_format.hpp
 * @brief Max-pool index <-> 4-bit window position, per output: the logic the host reference
 * (pool_argmax::host_encode_indices / host_decode_indices) and the kernels share.
 */
#pragma once

#include <stash/codec/detail/format.hpp>

#include <cstdint>

namespace stash::detail {

/// @brief A pool's dimensions as plain integers (device code cannot call pool_geometry's members).
struct pool_dims {
  std::uint64_t height, width, out_h, out_w, window_h, window_w, stride_h, stride_w;
};

/// @brief A nibble no window position has (windows hold at most 16): the index is outside.
inline constexpr std::uint32_t outside_window = 16;

/// @brief Window position ky*kw + kx of output `o`'s max-pool index `index` (PyTorch's: iy*width
/// + ix within the output's plane), or outside_window when the index is not in that window.
STASH_HOST_DEVICE inline std::uint32_t argmax_nibble(pool_dims const& d, std::uint64_t o,
                                                     std::int64_t index)
{
  if (index < 0 || static_cast<std::uint64_t>(index) >= d.height * d.width) {
    return outside_window;
  }
  std::uint64_t const in_plane = o % (d.out_h * d.out_w);
  std::uint64_t const iy       = static_cast<std::uint64_t>(index) / d.width;
  std::uint64_t const ix       = static_cast<std::uint64_t>(index) % d.width;
  std::uint64_t const y0       = in_plane / d.out_w * d.stride_h;
  std::uint64_t const x0       = in_plane % d.out_w * d.stride_w;
  // Unsigned wrap makes an index before the window's start fail the same test as one after it.
  std::uint64_t const ky = iy - y0;
  std::uint64_t const kx = ix - x0;
  if (ky >= d.window_h || kx >= d.window_w) { return outside_window; }
  return static_cast<std::uint32_t>(ky * d.window_w + kx);
}

/// @brief The max-pool index of output `o` whose window position is `k` (< window_h*window_w).
STASH_HOST_DEVICE inline std::int64_t argmax_index(pool_dims const& d, std::uint64_t o,
                                                   std::uint32_t k)
{
  std::uint64_t const in_plane = o % (d.out_h * d.out_w);
  std::uint64_t const iy       = in_plane / d.out_w * d.stride_h + k / d.window_w;
  std::uint64_t const ix       = in_plane % d.out_w * d.stride_w + k % d.window_w;
  return static_cast<std::int64_t>(iy * d.width + ix);
}

/// @brief Nibble j of word w: output 8w + j.
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint32_t argmax_nibble_of_word(std::uint32_t word,
                                                                        std::uint64_t j)
{
  return (word >> (4 * j)) & 0xfu;
}

/// @brief Checks the nibbles of payload word `w` (n outputs, windows of `window` positions): a
/// position past the window is bad_index, a nibble past the last output must be 0 (bad_padding).
STASH_HOST_DEVICE inline check_result argmax_check_word(std::uint32_t word, std::uint64_t w,
                                                        std::uint64_t n, std::uint32_t window)
{
  for (std::uint64_t j = 0; j < 8; ++j) {
    std::uint32_t const k = argmax_nibble_of_word(word, j);
    bool const past_end   = 8 * w + j >= n;
    if (past_end ? k != 0 : k >= window) {
      return {past_end ? codec_errc::bad_padding : codec_errc::bad_index, header_bytes + 4 * w};
    }
  }
  return check_ok();
}

}  // namespace stash::detail
