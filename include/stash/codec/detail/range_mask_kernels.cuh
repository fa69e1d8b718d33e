/**
 * @file range_mask_kernels.cuh
 * @brief range_mask kernels: one warp ballot per 32 elements (the inside test on the bit
 * patterns, range_mask_format.hpp's); decode and the hardtanh-backward mask are one thread per
 * element after a one-thread validation. Bytes match range_mask.hpp. Functions here return
 * cudaError_t.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/codec/detail/kernel_common.cuh>
#include <stash/codec/detail/range_mask_format.hpp>
#include <stash/codec/element_type.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace stash::detail {

// The header and the bounds are stored as aligned words (not byte by byte: on the transfer's
// mapped pinned slot each byte access would be its own PCIe request), and the mask as aligned
// u32 words, as the public layer checks `out` / `src` 16-byte aligned.
static_assert(header_bytes % 16 == 0 && range_mask_lo_off % 8 == 0 && range_mask_words_off % 4 == 0,
              "range_mask's bounds and mask words must stay aligned");

/// Grid-stride over mask words, one warp per word; the first thread also writes the header and
/// the bounds (`lo` / `hi`: bit patterns of usable bounds, checked by the caller). (A template
/// only so that a header may define it without violating the one-definition rule.)
template <int Unused = 0>
__global__ void range_mask_encode_kernel(float const* in, std::uint64_t n, std::uint32_t lo,
                                         std::uint32_t hi, std::byte* out, std::size_t* d_size)
{
  std::uint64_t const words = words_for_bits(n);
  unsigned const lane       = threadIdx.x % 32;
  if (global_warp() == 0 && lane == 0) {
    alignas(16) std::byte head[header_bytes + 8];
    write_header(head, codec_ids::range_mask, static_cast<std::uint8_t>(element_type::f32), 0, n,
                 range_mask_payload_bytes(n));
    store_u32(head + range_mask_lo_off, lo);
    store_u32(head + range_mask_hi_off, hi);
    reinterpret_cast<uint4*>(out)[0] = reinterpret_cast<uint4 const*>(head)[0];
    reinterpret_cast<uint4*>(out)[1] = reinterpret_cast<uint4 const*>(head)[1];
    reinterpret_cast<std::uint64_t*>(out + range_mask_lo_off)[0] =
        reinterpret_cast<std::uint64_t const*>(head + range_mask_lo_off)[0];
    *d_size = static_cast<std::size_t>(header_bytes + range_mask_payload_bytes(n));
  }
  std::int32_t const lo_key = range_mask_key(lo);
  std::int32_t const hi_key = range_mask_key(hi);
  auto* const mask          = reinterpret_cast<std::uint32_t*>(out + range_mask_words_off);
  for (std::uint64_t w = global_warp(); w < words; w += grid_warps()) {
    std::uint64_t const i = w * 32 + lane;
    // On the bit pattern (loads and integer compares): no FP instruction, so no flush-to-zero.
    std::uint32_t const m =
        __ballot_sync(0xffffffffu, i < n && range_mask_inside(f32_bits(in[i]), lo_key, hi_key));
    if (lane == 0) { mask[w] = m; }
  }
}

/// One thread: the header and the body checks; with `exact`, a buffer of fewer elements than
/// `capacity` is payload_size_mismatch at the count (checked last, as the host transfer does).
template <int Unused = 0>
__global__ void range_mask_validate_kernel(std::byte const* src, std::uint64_t src_bytes,
                                           std::uint64_t capacity, bool exact, codec_status* status)
{
  header_fields h{};
  check_result r = parse_header(src, src_bytes, codec_ids::range_mask,
                                static_cast<std::uint8_t>(element_type::f32), 0, capacity, h);
  if (r.code == codec_errc::ok) { r = range_mask_check_body(src, h.count, h.payload); }
  if (r.code == codec_errc::ok && exact && h.count != capacity) {
    r = {codec_errc::payload_size_mismatch, off_count};
  }
  store_status(status, r);
}

/// After validation, one thread per element. ApplyToGradient: dst is the gradient, zeroed where
/// the mask bit is 0; else dst gets the inside value or lo.
template <bool ApplyToGradient>
__global__ void range_mask_decode_kernel(std::byte const* src, float* dst,
                                         codec_status const* status)
{
  if (!block_status_ok(status)) { return; }  // one read per block; the buffer is valid
  // The count and the bounds read once per block too (the source may be mapped host memory).
  __shared__ std::uint64_t n_shared;
  __shared__ std::uint32_t bounds_shared[2];
  if (threadIdx.x == 0) {
    n_shared         = load_u64(src + off_count);
    bounds_shared[0] = load_u32(src + range_mask_lo_off);
    bounds_shared[1] = load_u32(src + range_mask_hi_off);
  }
  __syncthreads();  // block-uniform: every thread of the block passed the status check
  std::uint64_t const n = n_shared;
  float const outside   = f32_from_bits(bounds_shared[0]);
  float const inside    = f32_from_bits(range_mask_inside_bits(bounds_shared[0], bounds_shared[1]));
  // Aligned word loads, not range_mask_bit's four byte loads: on the transfer's mapped slot each
  // load is a bus request (the 32 threads of a warp read one word, coalesced).
  auto const* const mask = reinterpret_cast<std::uint32_t const*>(src + range_mask_words_off);
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    bool const bit = ((mask[i / 32] >> (i % 32)) & 1u) != 0;
    if constexpr (ApplyToGradient) {
      if (!bit) { dst[i] = 0.0f; }
    } else {
      dst[i] = bit ? inside : outside;
    }
  }
}

/// Encode of n elements into `out` (16-byte aligned, max_compressed_bytes(n)); `lo` / `hi` are
/// usable bounds' bit patterns.
inline cudaError_t range_mask_encode_async(float const* in, std::uint64_t n, std::uint32_t lo,
                                           std::uint32_t hi, std::byte* out, std::size_t* d_size,
                                           cudaStream_t stream)
{
  range_mask_encode_kernel<><<<warp_grid_for(words_for_bits(n)), codec_block_threads, 0, stream>>>(
      in, n, lo, hi, out, d_size);
  return cudaGetLastError();
}

/// Validation, then the decode into at most `capacity` elements (exactly, with `exact`) or the
/// gradient's masking; the verdict lands in *status.
template <bool ApplyToGradient>
cudaError_t range_mask_decode_async(std::byte const* src, std::uint64_t src_bytes, float* dst,
                                    std::uint64_t capacity, bool exact, codec_status* status,
                                    cudaStream_t stream)
{
  range_mask_validate_kernel<><<<1, 1, 0, stream>>>(src, src_bytes, capacity, exact, status);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  range_mask_decode_kernel<ApplyToGradient>
      <<<thread_grid_for(capacity), codec_block_threads, 0, stream>>>(src, dst, status);
  return cudaGetLastError();
}

}  // namespace stash::detail
