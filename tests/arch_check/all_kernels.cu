// Every stash kernel, instantiated so that nvcc generates its device code: compiled (never run)
// for each architecture in STASH_ARCH_CHECK_ARCHITECTURES (tests/CMakeLists.txt) by the
// `stash_arch_check` object library. Header checks alone would not do: a kernel template that
// nobody instantiates is never compiled for any architecture (sm_75's lack of
// __reduce_add_sync went unnoticed that way). Add a codec or element type here when one is added.
// Only the headers that define kernels: cicc parses the whole unit once per architecture, and the
// umbrella stash/stash.cuh (the planners' host code) tripled that for nothing (162 -> 61 CPU s;
// the umbrella compiles under nvcc in the header check's all_headers.cu).
#include <stash/codec/device_bitmask.cuh>
#include <stash/codec/device_csr.cuh>
#include <stash/codec/device_pool_argmax.cuh>
#include <stash/codec/device_precision.cuh>
#include <stash/codec/device_range_mask.cuh>
#include <stash/codec/device_rle.cuh>
#include <stash/codec/device_two_value.cuh>
#include <stash/codec/device_zvc.cuh>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/device_range_mask_transfer.cuh>
#include <stash/offload/device_two_value_transfer.cuh>

#include <cstddef>
#include <cstdint>

namespace {

// Host code that enqueues every kernel of device codec D; never called, only compiled.
template <class D>
void enqueue_codec(stash::cuda_backend& backend, cudaStream_t s)
{
  using T = typename D::host_codec::value_type;
  D::encode_async(static_cast<T const*>(nullptr), 0, nullptr, 0, nullptr, nullptr, 0, s);
  D::decode_async(nullptr, 0, static_cast<T*>(nullptr), 0, nullptr, nullptr, 0, s);
  // The offload manager's codec path (device_codec_transfer's own kernels).
  stash::device_codec_transfer<D>::encode(backend, s, nullptr, 0, nullptr, 0, nullptr, nullptr);
  stash::device_codec_transfer<D>::decode(backend, s, nullptr, 0, nullptr, 0, nullptr, nullptr);
  stash::device_codec_transfer<D, stash::decode_from::mapped>::decode(backend, s, nullptr, 0,
                                                                      nullptr, 0, nullptr, nullptr);
}

template <class... D>
void enqueue_codecs(stash::cuda_backend& backend, cudaStream_t s)
{
  (enqueue_codec<D>(backend, s), ...);
}

// two_value's kernels (not a device_codec: its encoder reports a refusal) and its transfer's.
template <class... T>
void enqueue_two_value(stash::cuda_backend& backend, cudaStream_t s)
{
  auto one = [&]<class E>(E const* in) {
    using D = stash::device_two_value<E>;
    D::encode_async(in, 0, nullptr, 0, nullptr, nullptr, nullptr, 0, s);
    D::keep_unchanged_async(in, 0, nullptr, 0, nullptr, nullptr, s);
    D::decode_async(nullptr, 0, static_cast<E*>(nullptr), 0, nullptr, nullptr, 0, s);
    D::decode_or_unchanged_async(nullptr, 0, static_cast<E*>(nullptr), 0, nullptr, nullptr, 0, s);
    stash::device_two_value_transfer<E>::encode(backend, s, nullptr, 0, nullptr, 0, nullptr,
                                                nullptr);
    stash::device_two_value_transfer<E>::decode(backend, s, nullptr, 0, nullptr, 0, nullptr,
                                                nullptr);
  };
  (one(static_cast<T const*>(nullptr)), ...);
}

}  // namespace

/// @brief Enqueues every kernel stash defines (never called: the point is that it compiles).
void stash_arch_check_every_kernel(stash::cuda_backend& backend, cudaStream_t s)
{
  // One element type per size for the templated codecs (the kernels differ by size only).
  enqueue_codecs<
      stash::device_zvc<float>, stash::device_zvc<double>, stash::device_zvc<std::uint16_t>,
      stash::device_zvc<std::uint8_t>, stash::device_csr<float>, stash::device_csr<double>,
      stash::device_csr<std::uint16_t>, stash::device_csr<std::uint8_t>, stash::device_rle<float>,
      stash::device_rle<double>, stash::device_rle<std::uint16_t>, stash::device_rle<std::uint8_t>,
      stash::device_bitmask, stash::device_precision<stash::fp16>,
      stash::device_precision<stash::bf16>, stash::device_precision<stash::fp8_e4m3>,
      stash::device_precision<stash::fp8_e5m2>, stash::device_precision<stash::fp10>>(backend, s);
  stash::device_bitmask::apply_mask_to_gradient_async(nullptr, 0, nullptr, 0, nullptr, s);
  enqueue_two_value<float, double, std::uint16_t, std::uint8_t>(backend, s);
  // Max-pool indices (the geometry is per call, so not in the device_codec list above).
  stash::pool_geometry const g{1, 2, 2, 2, 2, 1, 1};
  stash::device_pool_argmax::encode_indices_async(nullptr, g, nullptr, 0, nullptr, nullptr, 0, s);
  stash::device_pool_argmax::decode_indices_async(nullptr, 0, g, nullptr, 0, nullptr, s);
  // range_mask (the bounds are per call) and its transfer.
  stash::range_bounds const relu6{0.0f, 6.0f};
  stash::device_range_mask::encode_async(nullptr, 0, relu6, nullptr, 0, nullptr, s);
  stash::device_range_mask::decode_async(nullptr, 0, nullptr, 0, nullptr, s);
  stash::device_range_mask::decode_exact_async(nullptr, 0, nullptr, 0, nullptr, s);
  stash::device_range_mask::apply_mask_to_gradient_async(nullptr, 0, nullptr, 0, nullptr, s);
  stash::device_range_mask_transfer::encode(backend, s, nullptr, 0, nullptr, 0, nullptr, nullptr,
                                            relu6);
  stash::device_range_mask_transfer::decode(backend, s, nullptr, 0, nullptr, 0, nullptr, nullptr, 0,
                                            relu6);
}
