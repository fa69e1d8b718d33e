/**
 * @file two_value_kernels.cuh
 * @brief two_value kernels: the encoder finds the first nonzero element (its pattern is c, as
 * two_value::two_value_of picks it), then one warp per 32 mask words ballots each word and flags a
 * foreign element, and one thread writes the value slot and header, or the refusal. The decoder
 * validates on one thread, expands with one warp per 32 mask words (coalesced word loads, one
 * shuffle per word) and checks the value against the mask's any-bit. Bytes match two_value.hpp;
 * the per-element logic is two_value_format.hpp's. The identity<T> fallback of data that is not
 * two-valued (device_two_value_transfer's) is here too: written after a refusal, decoded beside
 * the two_value form. Functions here return cudaError_t.
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/codec/detail/kernel_common.cuh>
#include <stash/codec/detail/two_value_format.hpp>
#include <stash/codec/element_type.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace stash::detail {

// The value slot is an aligned u64 and the mask aligned u32 words, accessed as such (not byte by
// byte: on the transfer's mapped pinned slot each byte access would be its own PCIe request), as
// the public layer checks `out` / `src` 16-byte aligned.
static_assert(two_value_value_off % 8 == 0 && two_value_mask_off % 4 == 0 && header_bytes % 16 == 0,
              "two_value's value slot and mask words must stay aligned");

/// @brief "No nonzero element": the encoder's `first` before any is found.
inline constexpr std::uint64_t two_value_no_element = ~std::uint64_t{0};

/// @brief The encoder's device scratch (encode_scratch_bytes).
struct two_value_encode_state {
  std::uint64_t first;    ///< index of the first element that is not all-zero bits, or none
  std::uint32_t foreign;  ///< nonzero once an element is neither zero nor in[first]'s pattern
  std::uint32_t reserved;
};
static_assert(sizeof(two_value_encode_state) == 16);

/// @brief The decoder's device scratch (decode_scratch_bytes), written by the validation kernel.
struct two_value_decode_state {
  std::uint64_t count;        ///< elements in the buffer (valid once validation passed)
  std::uint64_t c_bits;       ///< the value slot (two_value form)
  std::uint32_t any_bit;      ///< nonzero once a mask word with a set bit was read
  std::uint32_t unchanged;    ///< nonzero for an identity<T> buffer (the fallback form)
  std::uint32_t short_count;  ///< nonzero when an exact count was asked for and is not met
  std::uint32_t reserved;
};
static_assert(sizeof(two_value_decode_state) == 32);

/// @brief Elements per warp-sized work item: 32 mask words of 32 bits.
inline constexpr std::uint64_t two_value_chunk_elements = 32 * 32;

/// @brief Work items (32 mask words each) for n elements; no overflow for any n.
STASH_HOST_DEVICE STASH_FORCEINLINE std::uint64_t two_value_chunks(std::uint64_t n)
{
  return n / two_value_chunk_elements + (n % two_value_chunk_elements != 0 ? 1 : 0);
}

/// @brief Whether a buffer is the unchanged (identity) form, decided as two_value_transfer's host
/// decode decides it (detail::written_unchanged: stash::read_header's checks pass and the header
/// names identity). A malformed header is not: two_value's checks then say why, as on the host.
__device__ inline bool two_value_written_unchanged(std::byte const* src, std::uint64_t src_bytes)
{
  if (src_bytes < header_bytes) { return false; }
  header_fields h{};
  check_result const r = parse_header(src, src_bytes, load_u16(src + off_codec_id),
                                      static_cast<std::uint8_t>(src[off_type]),
                                      load_u16(src + off_param), ~std::uint64_t{0}, h);
  return r.code == codec_errc::ok && h.codec_id == codec_ids::identity;
}

/// @brief c's pattern: in[first]'s, or 0 when every element is all-zero bits.
template <class T>
__device__ STASH_FORCEINLINE std::uint64_t two_value_c_bits(T const* in, std::uint64_t first)
{
  return first == two_value_no_element ? 0 : two_value_bits(in[first]);
}

// (Kernels are templates so that a header may define them without violating the ODR.)

template <int Unused = 0>
__global__ void two_value_reset_kernel(two_value_encode_state* state)
{
  *state = two_value_encode_state{two_value_no_element, 0, 0};
}

/// One warp per mask word, grid-stride: a warp's first word holding a nonzero element gives its
/// candidate (its later words hold larger indices, so it stops there); the smallest wins.
template <class T>
__global__ void two_value_find_kernel(T const* in, std::uint64_t n, two_value_encode_state* state)
{
  std::uint64_t const words = words_for_bits(n);
  unsigned const lane       = threadIdx.x % 32;
  for (std::uint64_t w = global_warp(); w < words; w += grid_warps()) {
    std::uint64_t const i = w * 32 + lane;
    std::uint32_t const m = __ballot_sync(0xffffffffu, i < n && two_value_bits(in[i]) != 0);
    if (m != 0) {  // the same in every lane: the warp leaves together
      if (lane == 0) {
        auto const first = static_cast<unsigned long long>(
            w * 32 + static_cast<unsigned>(__ffs(static_cast<int>(m)) - 1));
        atomicMin(reinterpret_cast<unsigned long long*>(&state->first), first);
      }
      return;
    }
  }
}

/// One warp per 32 mask words, grid-stride: word j of the chunk is a ballot over its 32
/// elements, kept by lane j, and the warp stores its 32 words in one coalesced write.
template <class T>
__global__ void two_value_mask_kernel(T const* in, std::uint64_t n, std::byte* out,
                                      two_value_encode_state* state)
{
  std::uint64_t const words  = words_for_bits(n);
  std::uint64_t const chunks = two_value_chunks(n);
  std::uint64_t const c_bits = two_value_c_bits(in, state->first);
  unsigned const lane        = threadIdx.x % 32;
  auto* const mask           = reinterpret_cast<std::uint32_t*>(out + two_value_mask_off);
  bool foreign               = false;
  for (std::uint64_t k = global_warp(); k < chunks; k += grid_warps()) {
    std::uint32_t mine = 0;
    for (unsigned j = 0; j < 32; ++j) {
      std::uint64_t const w = k * 32 + j;
      if (w >= words) { break; }  // the same in every lane
      std::uint64_t const i = w * 32 + lane;
      std::uint64_t const b = i < n ? two_value_bits(in[i]) : 0;
      std::uint32_t const m = __ballot_sync(0xffffffffu, two_value_is_value(b, c_bits));
      foreign = __any_sync(0xffffffffu, two_value_is_foreign(b, c_bits)) != 0 || foreign;
      if (lane == j) { mine = m; }
    }
    if (k * 32 + lane < words) { mask[k * 32 + lane] = mine; }
  }
  if (lane == 0 && foreign) { atomicOr(&state->foreign, 1u); }
}

/// One thread, after the mask: the value slot, the header and the size; or, when an element was
/// foreign, the refusal (size 0, no header: as host_encode, nothing valid is written).
template <class T>
__global__ void two_value_finish_kernel(T const* in, std::uint64_t n, std::byte* out,
                                        std::size_t* size, std::uint32_t* refused,
                                        two_value_encode_state const* state)
{
  if (state->foreign != 0) {
    *size    = 0;
    *refused = 1;
    return;
  }
  std::uint64_t const payload = two_value_payload_bytes(n);
  // Header and value slot composed here and stored as three aligned words, not 40 byte stores.
  alignas(16) std::byte head[header_bytes + 16];
  write_header(head, codec_ids::two_value, element_type_code<T>, 0, n, payload);
  store_u64(head + two_value_value_off, two_value_c_bits(in, state->first));
  auto const* from = reinterpret_cast<uint4 const*>(head);
  auto* to         = reinterpret_cast<uint4*>(out);
  to[0]            = from[0];
  to[1]            = from[1];
  reinterpret_cast<std::uint64_t*>(out + two_value_value_off)[0] =
      reinterpret_cast<std::uint64_t const*>(head + two_value_value_off)[0];
  *size    = static_cast<std::size_t>(header_bytes + payload);
  *refused = 0;
}

/// After a refusal (`*refused` set by the finish kernel): the elements unchanged as an
/// identity<T> buffer and its size; otherwise nothing. Grid-stride over elements.
template <class T>
__global__ void two_value_keep_unchanged_kernel(T const* in, std::uint64_t n, std::byte* out,
                                                std::size_t* size, std::uint32_t const* refused)
{
  // The word read once per block, as block_status_ok reads a status: the public API takes any
  // device-accessible word, and a per-thread read of a mapped host word would be a bus round trip
  // for each of up to 2^24 threads. The exit is block-uniform.
  __shared__ std::uint32_t refused_shared;
  if (threadIdx.x == 0) { refused_shared = *refused; }
  __syncthreads();
  if (refused_shared == 0) { return; }
  std::uint64_t const first = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  auto* const to            = reinterpret_cast<T*>(out + header_bytes);
  for (std::uint64_t i = first; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    to[i] = in[i];
  }
  if (first == 0) {
    alignas(16) std::byte head[header_bytes];
    write_header(head, codec_ids::identity, element_type_code<T>, 0, n, n * sizeof(T));
    reinterpret_cast<uint4*>(out)[0] = reinterpret_cast<uint4 const*>(head)[0];
    reinterpret_cast<uint4*>(out)[1] = reinterpret_cast<uint4 const*>(head)[1];
    *size                            = static_cast<std::size_t>(header_bytes + n * sizeof(T));
  }
}

/// One thread: the header and the O(1) body checks; resets the decoder's state. With
/// `OrIdentity`, an identity<T> buffer is taken too, and either form must hold exactly
/// `capacity` elements (device_two_value_transfer's tensor), checked in two_value_transfer's
/// order: last, so after the value rule for the two_value form (the check kernel reports it).
template <class T, bool OrIdentity>
__global__ void two_value_validate_kernel(std::byte const* src, std::uint64_t src_bytes,
                                          std::uint64_t capacity, codec_status* status,
                                          two_value_decode_state* state)
{
  header_fields h{};
  bool const unchanged = OrIdentity && two_value_written_unchanged(src, src_bytes);
  check_result r =
      parse_header(src, src_bytes, unchanged ? codec_ids::identity : codec_ids::two_value,
                   element_type_code<T>, 0, capacity, h);
  if (r.code == codec_errc::ok) {
    if (unchanged) {
      // identity's payload rule (payload == count * sizeof(T)), without the product's overflow.
      if (h.payload % sizeof(T) != 0 || h.payload / sizeof(T) != h.count) {
        r = {codec_errc::payload_size_mismatch, off_payload};
      }
    } else {
      r = two_value_check_body<T>(src, h.count, h.payload);
    }
  }
  // Fewer elements than the tensor's would leave some undecoded.
  bool const short_count = OrIdentity && r.code == codec_errc::ok && h.count != capacity;
  if (short_count && unchanged) { r = {codec_errc::payload_size_mismatch, off_count}; }
  bool const ok = r.code == codec_errc::ok;
  *state        = two_value_decode_state{ok ? h.count : 0,
                                  ok && !unchanged ? load_u64(src + two_value_value_off) : 0,
                                  0,
                                  unchanged ? 1u : 0u,
                                  short_count ? 1u : 0u,
                                  0};
  store_status(status, r);
}

/// After validation: the elements, from the mask (one warp per 32 words: lane j loads word j, then
/// each word is shuffled to the warp, which writes its 32 elements) or, for the fallback form,
/// copied. Records whether any mask bit is set (for the value check that follows).
template <class T>
__global__ void two_value_expand_kernel(std::byte const* src, T* dst, codec_status const* status,
                                        two_value_decode_state* state)
{
  if (!block_status_ok(status)) { return; }  // one read per block, the same for the block
  std::uint64_t const n = state->count;      // device scratch: cheap to read per thread
  if (state->unchanged != 0) {
    auto const* from = reinterpret_cast<T const*>(src + header_bytes);
    for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
         i += std::uint64_t{gridDim.x} * blockDim.x) {
      dst[i] = from[i];
    }
    return;
  }
  T const c                  = two_value_from_bits<T>(state->c_bits);
  T const zero               = two_value_from_bits<T>(0);
  std::uint64_t const words  = words_for_bits(n);
  std::uint64_t const chunks = two_value_chunks(n);
  unsigned const lane        = threadIdx.x % 32;
  auto const* const mask     = reinterpret_cast<std::uint32_t const*>(src + two_value_mask_off);
  bool any_bit               = false;
  for (std::uint64_t k = global_warp(); k < chunks; k += grid_warps()) {
    std::uint32_t const mine = k * 32 + lane < words ? mask[k * 32 + lane] : 0;
    any_bit                  = any_bit || mine != 0;
    for (unsigned j = 0; j < 32; ++j) {
      std::uint64_t const w = k * 32 + j;
      if (w >= words) { break; }  // the same in every lane
      std::uint32_t const word = __shfl_sync(0xffffffffu, mine, static_cast<int>(j));
      std::uint64_t const i    = w * 32 + lane;
      if (i < n) { dst[i] = ((word >> lane) & 1u) != 0 ? c : zero; }
    }
  }
  // One atomic per warp, not per lane (every lane of a mask holding set bits would otherwise hit
  // the same word). Every lane gets here: the loop above is warp-uniform.
  bool const warp_any = __any_sync(0xffffffffu, any_bit) != 0;
  if (lane == 0 && warp_any) { atomicOr(&state->any_bit, 1u); }
}

/// One thread, after the expansion: the canonical value rule (a nonzero value exactly when some
/// mask bit is set), then an exact count asked for and not met, unless an error is already
/// recorded or the buffer is the fallback form (fully checked by the validation).
template <int Unused = 0>
__global__ void two_value_check_value_kernel(codec_status* status,
                                             two_value_decode_state const* state)
{
  if (status->code != 0 || state->unchanged != 0) { return; }
  check_result r = two_value_check_value(state->c_bits, state->any_bit != 0);
  if (r.code == codec_errc::ok && state->short_count != 0) {
    r = {codec_errc::payload_size_mismatch, off_count};
  }
  report(status, r);
}

/// Encode of n elements into `out` (16-byte aligned, max_compressed_bytes(n)); `*refused` is 0
/// after a two_value buffer, 1 after a refusal (size 0). `state` is device scratch.
template <class T>
cudaError_t two_value_encode_async(T const* in, std::uint64_t n, std::byte* out, std::size_t* size,
                                   std::uint32_t* refused, two_value_encode_state* state,
                                   cudaStream_t stream)
{
  two_value_reset_kernel<><<<1, 1, 0, stream>>>(state);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  two_value_find_kernel<T>
      <<<warp_grid_for(words_for_bits(n)), codec_block_threads, 0, stream>>>(in, n, state);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  two_value_mask_kernel<T>
      <<<warp_grid_for(two_value_chunks(n)), codec_block_threads, 0, stream>>>(in, n, out, state);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  two_value_finish_kernel<T><<<1, 1, 0, stream>>>(in, n, out, size, refused, state);
  return cudaGetLastError();
}

/// After two_value_encode_async on the same stream: where it refused, the identity<T> buffer
/// (`out` holds header_bytes + n sizeof(T)).
template <class T>
cudaError_t two_value_keep_unchanged_async(T const* in, std::uint64_t n, std::byte* out,
                                           std::size_t* size, std::uint32_t const* refused,
                                           cudaStream_t stream)
{
  two_value_keep_unchanged_kernel<T>
      <<<warp_grid_for(two_value_chunks(n)), codec_block_threads, 0, stream>>>(in, n, out, size,
                                                                               refused);
  return cudaGetLastError();
}

/// Validation, decode into at most `capacity` elements (exactly, with OrIdentity) and the value
/// check; the verdict lands in *status. `state` is device scratch.
template <class T, bool OrIdentity>
cudaError_t two_value_decode_async(std::byte const* src, std::uint64_t src_bytes, T* dst,
                                   std::uint64_t capacity, codec_status* status,
                                   two_value_decode_state* state, cudaStream_t stream)
{
  two_value_validate_kernel<T, OrIdentity>
      <<<1, 1, 0, stream>>>(src, src_bytes, capacity, status, state);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  two_value_expand_kernel<T>
      <<<warp_grid_for(two_value_chunks(capacity)), codec_block_threads, 0, stream>>>(
          src, dst, status, state);
  if (cudaError_t const e = cudaGetLastError(); e != cudaSuccess) { return e; }
  two_value_check_value_kernel<><<<1, 1, 0, stream>>>(status, state);
  return cudaGetLastError();
}

}  // namespace stash::detail
