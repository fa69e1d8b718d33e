/**
 * @file kernel_common.cuh
 * @brief Helpers shared by the codec kernels: error reporting into a codec_status, launch
 * geometry.
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/detail/format.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>

namespace stash::detail {

inline constexpr int codec_block_threads = 256;
inline constexpr int codec_warps_per_block = codec_block_threads / 32;

/// @brief Records an error; the first one to arrive wins (code and offset stay consistent).
__device__ inline void report(codec_status* status, check_result r)
{
  if (r.code == codec_errc::ok) { return; }
  if (atomicCAS(&status->code, 0u, static_cast<std::uint32_t>(r.code)) == 0u) {
    status->offset = r.offset;
  }
}

/// @brief Unconditionally stores a verdict (used by the single-thread validation kernels, which
/// run first and so reset the status the caller passed in).
__device__ inline void store_status(codec_status* status, check_result r)
{
  status->code     = static_cast<std::uint32_t>(r.code);
  status->reserved = 0;
  status->offset   = r.offset;
}

/// @brief Blocks for `items` work items of `per_block` each (at least one block).
inline unsigned int blocks_for(std::uint64_t items, std::uint64_t per_block)
{
  std::uint64_t const b = (items + per_block - 1) / per_block;
  return static_cast<unsigned int>(b == 0 ? 1 : b);
}

/// @brief Bits of lanes below this one.
__device__ STASH_FORCEINLINE std::uint32_t lanemask_lt(unsigned lane)
{
  return (1u << lane) - 1u;
}

}  // namespace stash::detail
