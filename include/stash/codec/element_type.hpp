/**
 * @file element_type.hpp
 * @brief The element type tag stored in every compressed buffer's header.
 */
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace stash {

/// @brief Element type of the uncompressed tensor, as stored in byte 8 of a buffer header.
enum class element_type : std::uint8_t {
  f32 = 1,   ///< IEEE float32
  f64 = 2,   ///< IEEE float64
  u8  = 3,   ///< 8-bit raw / unsigned
  u16 = 4,   ///< 16-bit raw / unsigned (also fp16/bf16 bit patterns)
  u32 = 5,   ///< 32-bit unsigned
  i32 = 6,   ///< 32-bit signed
  u64 = 7,   ///< 64-bit unsigned
  i8  = 8,   ///< 8-bit signed
  i16 = 9,   ///< 16-bit signed
  i64 = 10,  ///< 64-bit signed
};

/// @brief The type's name, for messages.
/// @param t The element type.
/// @return "f32", "i64", ...; "unknown" for a value outside the enumeration.
[[nodiscard]] constexpr std::string_view to_string(element_type t) noexcept
{
  switch (t) {
    case element_type::f32:
      return "f32";
    case element_type::f64:
      return "f64";
    case element_type::u8:
      return "u8";
    case element_type::u16:
      return "u16";
    case element_type::u32:
      return "u32";
    case element_type::i32:
      return "i32";
    case element_type::u64:
      return "u64";
    case element_type::i8:
      return "i8";
    case element_type::i16:
      return "i16";
    case element_type::i64:
      return "i64";
  }
  return "unknown";
}

/// @brief The element_type tag of T; only the types listed in element_type are accepted.
/// @tparam T The element type.
/// @return The tag.
template <class T>
[[nodiscard]] constexpr element_type element_type_of() noexcept
{
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) {
    return element_type::f32;
  } else if constexpr (std::is_same_v<U, double>) {
    return element_type::f64;
  } else if constexpr (std::is_same_v<U, std::uint8_t>) {
    return element_type::u8;
  } else if constexpr (std::is_same_v<U, std::uint16_t>) {
    return element_type::u16;
  } else if constexpr (std::is_same_v<U, std::uint32_t>) {
    return element_type::u32;
  } else if constexpr (std::is_same_v<U, std::int32_t>) {
    return element_type::i32;
  } else if constexpr (std::is_same_v<U, std::uint64_t>) {
    return element_type::u64;
  } else if constexpr (std::is_same_v<U, std::int8_t>) {
    return element_type::i8;
  } else if constexpr (std::is_same_v<U, std::int16_t>) {
    return element_type::i16;
  } else {
    static_assert(std::is_same_v<U, std::int64_t>, "stash codecs: unsupported element type");
    return element_type::i64;
  }
}

/// @brief element_type_of<T>() as the header byte; a variable so device code can use it.
/// @tparam T The element type.
template <class T>
inline constexpr std::uint8_t element_type_code = static_cast<std::uint8_t>(element_type_of<T>());

/// @brief True for the element types a codec buffer can describe.
/// @tparam T The type checked.
template <class T>
concept codec_element = std::is_same_v<T, float> || std::is_same_v<T, double> ||
    std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::uint16_t> ||
    std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::uint64_t> || std::is_same_v<T, std::int8_t> ||
    std::is_same_v<T, std::int16_t> || std::is_same_v<T, std::int64_t>;

}  // namespace stash
