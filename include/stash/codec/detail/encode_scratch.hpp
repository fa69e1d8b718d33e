/**
 * @file encode_scratch.hpp
 * @brief The check the device encoders that take scratch (zvc, csr, rle) make on it before
 * anything is queued: large enough, and, when the encode reads it at all, non-null and aligned
 * for the u32 counts and table the first kernels store at its start. Host code only, so the
 * rule is tested on the CPU; the kernel wrappers return cudaErrorInvalidValue on it, the public
 * `encode_async` throws stash::logic_error with the figures.
 */
#pragma once

#include <stash/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

namespace stash::detail {

/// @brief The alignment an encoder's scratch needs: its first arrays are u32 counts and tables
/// (the table at a 256-byte multiple past them; CUB aligns its own storage inside the rest).
inline constexpr std::size_t encode_scratch_alignment = alignof(std::uint32_t);

/// @brief Why `bytes` of scratch at `scratch` cannot serve an encode that needs `need` bytes of
/// it; empty when they can. An encode that reads no scratch (`reads` false, or need == 0: rle
/// with no chunks) takes any pointer, null included.
/// @param scratch The scratch pointer the caller passes.
/// @param bytes How many bytes the caller says it holds.
/// @param need How many bytes the encode asks for (encode_scratch_bytes(n)).
/// @param reads Whether the encode touches the scratch at all.
/// @return A sentence naming the figure at fault, or an empty string.
[[nodiscard]] inline std::string encode_scratch_problem(void const* scratch, std::size_t bytes,
                                                        std::size_t need, bool reads = true)
{
  if (bytes < need) {
    return "scratch holds " + std::to_string(bytes) + " bytes, needs " + std::to_string(need) +
           " (encode_scratch_bytes(n))";
  }
  if (!reads || need == 0) { return {}; }
  if (scratch == nullptr) { return "scratch is null, needs " + std::to_string(need) + " bytes"; }
  auto const address = reinterpret_cast<std::uintptr_t>(scratch);
  if (address % encode_scratch_alignment != 0) {
    std::ostringstream s;
    s << "scratch at " << scratch << " is not " << encode_scratch_alignment
      << "-byte aligned (its first arrays are u32)";
    return s.str();
  }
  return {};
}

/// @brief True when encode_scratch_problem() finds nothing (for the kernel wrappers, which
/// return a cudaError_t instead of throwing).
/// @param scratch The scratch pointer.
/// @param bytes Its size.
/// @param need The bytes the encode uses (0: it reads none).
/// @return Whether the scratch can serve the encode.
[[nodiscard]] inline bool encode_scratch_usable(void const* scratch, std::size_t bytes,
                                                std::size_t need) noexcept
{
  return bytes >= need &&
         (need == 0 || (scratch != nullptr &&
                        reinterpret_cast<std::uintptr_t>(scratch) % encode_scratch_alignment == 0));
}

/// @brief Throws stash::logic_error naming `who` and the figure at fault when the scratch cannot
/// serve the encode (see encode_scratch_problem()).
/// @param who The calling function, for the message.
/// @param scratch The scratch pointer.
/// @param bytes Its size.
/// @param need The bytes the encode asks for (encode_scratch_bytes(n)).
/// @param reads Whether the encode touches the scratch at all.
/// @throws stash::logic_error When the scratch is too small, or null or misaligned while read.
inline void expect_encode_scratch(const char* who, void const* scratch, std::size_t bytes,
                                  std::size_t need, bool reads = true)
{
  if (auto const why = encode_scratch_problem(scratch, bytes, need, reads); !why.empty()) {
    STASH_FAIL(std::string(who) + ": " + why);
  }
}

}  // namespace stash::detail
