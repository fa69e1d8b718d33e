/**
 * @file bitmask_kernels.cuh
 * @brief Binarize kernels: one warp ballot per 32 elements; decode and the ReLU-backward mask
 * are one thread per element. Bytes match bitmask.hpp. Functions here return cudaError_t.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/detail/bitmask_format.hpp>
#include <stash/codec/detail/kernel_common.cuh>

#include <cstdint>

namespace stash::detail {

/// Grid-stride over mask words, one warp per word. (A template only so that a header may define
/// it without violating the one-definition rule.)
template <int Unused = 0>
__global__ void bitmask_encode_kernel(float const* in, std::uint64_t n, std::byte* out,
                                      std::size_t* d_size)
{
  std::uint64_t const words  = words_for_bits(n);
  std::uint64_t const warp   = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  std::uint64_t const stride = std::uint64_t{gridDim.x} * blockDim.x / 32;
  unsigned const lane        = threadIdx.x % 32;
  if (warp == 0 && lane == 0) {
    write_header(out, codec_ids::bitmask, static_cast<std::uint8_t>(element_type::f32), 0, n,
                 4 * words);
    *d_size = static_cast<std::size_t>(header_bytes + 4 * words);
  }
  auto* mask = reinterpret_cast<std::uint32_t*>(out + header_bytes);
  for (std::uint64_t w = warp; w < words; w += stride) {
    std::uint64_t const i = w * 32 + lane;
    // On the bit pattern (a load and an integer compare): no FP instruction, so no flush-to-zero.
    std::uint32_t const m = __ballot_sync(0xffffffffu, i < n && bitmask_positive(f32_bits(in[i])));
    if (lane == 0) { mask[w] = m; }
  }
}

template <int Unused = 0>
__global__ void bitmask_validate_kernel(std::byte const* src, std::uint64_t src_bytes,
                                        std::uint64_t capacity, codec_status* status)
{
  header_fields h{};
  check_result r = parse_header(src, src_bytes, codec_ids::bitmask,
                                static_cast<std::uint8_t>(element_type::f32), 0, capacity, h);
  if (r.code == codec_errc::ok) { r = bitmask_check_body(src, h.count, h.payload); }
  store_status(status, r);
}

/// `apply_to_gradient`: dst is the gradient, zeroed where the mask bit is 0; else dst gets 0/1.
template <bool ApplyToGradient>
__global__ void bitmask_decode_kernel(std::byte const* src, float* dst, codec_status const* status)
{
  if (!block_status_ok(status)) { return; }  // one read per block; the header is valid
  std::uint64_t const n = load_u64(src + off_count);
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    bool const bit = bitmask_bit(src, i);
    if constexpr (ApplyToGradient) {
      if (!bit) { dst[i] = 0.0f; }
    } else {
      dst[i] = bit ? 1.0f : 0.0f;
    }
  }
}

inline cudaError_t bitmask_encode_async(float const* in, std::uint64_t n, std::byte* out,
                                        std::size_t* d_size, cudaStream_t stream)
{
  bitmask_encode_kernel<>
      <<<thread_grid_for(words_for_bits(n) * 32), codec_block_threads, 0, stream>>>(in, n, out,
                                                                                    d_size);
  return cudaGetLastError();
}

template <bool ApplyToGradient>
cudaError_t bitmask_decode_async(std::byte const* src, std::uint64_t src_bytes, float* dst,
                                 std::uint64_t capacity, codec_status* status, cudaStream_t stream)
{
  bitmask_validate_kernel<><<<1, 1, 0, stream>>>(src, src_bytes, capacity, status);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  bitmask_decode_kernel<ApplyToGradient>
      <<<thread_grid_for(capacity), codec_block_threads, 0, stream>>>(src, dst, status);
  return cudaGetLastError();
}

}  // namespace stash::detail
