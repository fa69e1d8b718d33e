/**
 * @file device_staging.cuh
 * @brief Stream-ordered helpers around a device decode that need the buffer format: copy the
 * prefix of a codec buffer its header declares (e.g. from pinned host memory into device memory,
 * when the host does not know the buffer's size), and zero a destination whose decode failed.
 */
#pragma once

#include <stash/codec/codec_status.hpp>
#include <stash/codec/detail/staging_kernels.cuh>
#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>
#include <cuda/stream_ref>

#include <cstddef>
#include <cstdint>

namespace stash {

/// @brief Enqueues a copy of the codec buffer at `src` into `dst`: as many bytes as its header
/// declares (header + payload; `capacity` when the header is unreadable or declares more), read on
/// the device, rounded up to 16. `src` and `dst` are 16-byte aligned and hold align_up(capacity,
/// 16) bytes; `src` may be mapped pinned host memory. Every byte a decoder of that buffer may
/// read (given `capacity` as the source size) is copied.
/// @param src The buffer (16-byte aligned).
/// @param capacity The most bytes to copy.
/// @param dst The copy's destination (16-byte aligned).
/// @param stream The stream the kernel is queued on.
/// @throws stash::logic_error For a null or misaligned buffer.
/// @throws stash::cuda_error For a launch that failed.
inline void copy_declared_prefix_async(std::byte const* src, std::size_t capacity, std::byte* dst,
                                       cuda::stream_ref stream)
{
  STASH_EXPECTS(src != nullptr && dst != nullptr, "copy_declared_prefix_async: null buffer");
  STASH_EXPECTS(reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(dst) % 16 == 0,
                "copy_declared_prefix_async: buffers must be 16-byte aligned");
  STASH_CUDA_TRY(detail::copy_declared_prefix_async(src, capacity, dst, stream.get()));
}

/// @brief Enqueues: if `*status` (device-accessible) reports an error, the `bytes` at `dst` become
/// zeros, so a failed decode leaves no half-decoded data. The status is read once per block.
/// @param dst The decoded elements.
/// @param bytes Their size.
/// @param status The decode's verdict.
/// @param stream The stream the kernel is queued on (after the decode).
/// @throws stash::logic_error For a null status, or a null `dst` with bytes > 0.
/// @throws stash::cuda_error For a launch that failed.
inline void zero_on_decode_error_async(void* dst, std::size_t bytes, codec_status const* status,
                                       cuda::stream_ref stream)
{
  STASH_EXPECTS(status != nullptr && (bytes == 0 || dst != nullptr),
                "zero_on_decode_error_async: null status or destination");
  STASH_CUDA_TRY(detail::zero_on_error_async(dst, bytes, status, stream.get()));
}

}  // namespace stash
