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

inline constexpr int codec_block_threads   = 256;
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

/// @brief Whether validation passed, as one thread of the block read it: one load per block, not
/// per thread (the status may be in host memory), and every thread of the block gets the same
/// answer, so an exit on it is block- (hence warp-) uniform even if another block reports an error
/// meanwhile. Every thread of the block must call it, before any divergent exit (it synchronizes
/// the block). At most once per kernel: a second call would let thread 0 overwrite the shared word
/// while slower threads still read the first answer (the decode kernels call it once, first).
__device__ inline bool block_status_ok(codec_status const* status)
{
  __shared__ std::uint32_t code;
  if (threadIdx.x == 0) { code = status->code; }
  __syncthreads();
  return code == 0u;
}

/// @brief Blocks for `items` work items of `per_block` each (at least one block).
inline unsigned int blocks_for(std::uint64_t items, std::uint64_t per_block)
{
  std::uint64_t const b = (items + per_block - 1) / per_block;
  return static_cast<unsigned int>(b == 0 ? 1 : b);
}

/// @brief Blocks for a grid-stride loop over `items` warp-sized work items: one warp each up to a
/// cap that fills any current GPU many times over (so a huge capacity cannot overflow the grid).
inline unsigned int warp_grid_for(std::uint64_t items)
{
  constexpr std::uint64_t max_blocks = 1u << 16;
  std::uint64_t const b              = blocks_for(items, codec_warps_per_block);
  return static_cast<unsigned int>(b < max_blocks ? b : max_blocks);
}

/// @brief Blocks for a grid-stride loop over `items` one-thread work items (elements): one thread
/// each up to a cap of 65,535 blocks (so a huge capacity cannot overflow the grid).
inline unsigned int thread_grid_for(std::uint64_t items)
{
  constexpr std::uint64_t max_blocks = 65535;
  std::uint64_t const b              = blocks_for(items, codec_block_threads);
  return static_cast<unsigned int>(b < max_blocks ? b : max_blocks);
}

/// @brief This thread's warp in the grid, and the number of warps in the grid.
__device__ STASH_FORCEINLINE std::uint64_t global_warp()
{
  return (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
}
__device__ STASH_FORCEINLINE std::uint64_t grid_warps()
{
  return std::uint64_t{gridDim.x} * blockDim.x / 32;
}

/// @brief Inclusive prefix sum over the lanes of a full warp.
__device__ STASH_FORCEINLINE std::uint32_t warp_inclusive_sum(std::uint32_t v, unsigned lane)
{
  for (unsigned d = 1; d < 32; d *= 2) {
    std::uint32_t const up = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) { v += up; }
  }
  return v;
}

/// @brief __shfl_sync of any codec element type, through its bit pattern.
template <class T>
__device__ STASH_FORCEINLINE T shfl_element(T v, int src_lane)
{
  if constexpr (sizeof(T) == 8) {
    unsigned long long u = bit_pattern(v);
    u                    = __shfl_sync(0xffffffffu, u, src_lane);
    memcpy(&v, &u, sizeof(T));
  } else {
    auto b = bit_pattern(v);
    b      = static_cast<decltype(b)>(__shfl_sync(0xffffffffu, static_cast<unsigned>(b), src_lane));
    memcpy(&v, &b, sizeof(T));
  }
  return v;
}

/// @brief Bits of lanes below this one.
__device__ STASH_FORCEINLINE std::uint32_t lanemask_lt(unsigned lane) { return (1u << lane) - 1u; }

/// @brief The sum of `v` over the 32 lanes of a full warp, in every lane. __reduce_add_sync is
/// sm_80+; for older targets (sm_75: T4, RTX 20xx) the same sum is five xor shuffles.
__device__ STASH_FORCEINLINE unsigned warp_sum(unsigned v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_add_sync(0xffffffffu, v);
#else
  for (int offset = 16; offset > 0; offset /= 2) { v += __shfl_xor_sync(0xffffffffu, v, offset); }
  return v;
#endif
}

}  // namespace stash::detail
