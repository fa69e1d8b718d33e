/**
 * @file units.hpp
 * @brief Byte units, alignment arithmetic and human-readable byte counts.
 */
#pragma once

#include <stash/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

namespace stash {

/// @brief 1 KiB in bytes.
inline constexpr std::size_t KiB = std::size_t{1} << 10;
/// @brief 1 MiB in bytes.
inline constexpr std::size_t MiB = std::size_t{1} << 20;
/// @brief 1 GiB in bytes.
inline constexpr std::size_t GiB = std::size_t{1} << 30;

/// @brief The alignment cudaMalloc guarantees, and stash's default for planned offsets.
inline constexpr std::size_t cuda_allocation_alignment = 256;

/// @brief True when `value` is a power of two (0 is not).
/// @param value The number.
/// @return Whether exactly one bit is set.
[[nodiscard]] constexpr bool is_pow2(std::size_t value) noexcept
{
  return value != 0 && (value & (value - 1)) == 0;
}

/// @brief Rounds `value` up to a multiple of `alignment` (a power of two). Wraps to a small
/// number when the result does not fit 64 bits: for a size that comes from a caller, use
/// checked_align_up.
/// @param value The number.
/// @param alignment A power of two.
/// @return The smallest multiple of `alignment` >= `value` (modulo 2^64).
[[nodiscard]] constexpr std::uint64_t align_up(std::uint64_t value,
                                               std::uint64_t alignment) noexcept
{
  return (value + alignment - 1) & ~(alignment - 1);
}

/// @brief `value` rounded up to a multiple of `alignment` (a power of two), or nothing when the
/// result does not fit 64 bits (`align_up(SIZE_MAX - 100, 512)` would wrap to 0). Pools turn
/// nothing into stash::out_of_memory: no memory holds such a block.
/// @param value The size or offset to round.
/// @param alignment A power of two.
/// @return The rounded value, or std::nullopt on overflow.
[[nodiscard]] constexpr std::optional<std::uint64_t> checked_align_up(
    std::uint64_t value, std::uint64_t alignment) noexcept
{
  if (value > std::numeric_limits<std::uint64_t>::max() - (alignment - 1)) { return std::nullopt; }
  return align_up(value, alignment);
}

/// @brief Rounds `value` down to a multiple of `alignment` (a power of two).
/// @param value The number.
/// @param alignment A power of two.
/// @return The largest multiple of `alignment` <= `value`.
[[nodiscard]] constexpr std::uint64_t align_down(std::uint64_t value,
                                                 std::uint64_t alignment) noexcept
{
  return value & ~(alignment - 1);
}

/// @brief True when `value` is a multiple of `alignment` (a power of two).
/// @param value The number.
/// @param alignment A power of two.
/// @return Whether `value` is a multiple of `alignment`.
[[nodiscard]] constexpr bool is_aligned(std::uint64_t value, std::uint64_t alignment) noexcept
{
  return (value & (alignment - 1)) == 0;
}

/// @brief Formats a byte count with a binary unit, e.g. "797.1 MiB".
/// @param bytes The count.
/// @return The count in B, or with one decimal in KiB up to PiB.
[[nodiscard]] inline std::string format_bytes(std::uint64_t bytes)
{
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value                         = static_cast<double>(bytes);
  int unit                             = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  if (unit == 0) {
    std::snprintf(buffer, sizeof(buffer), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.1f %s", value, units[unit]);
  }
  return buffer;
}

}  // namespace stash
