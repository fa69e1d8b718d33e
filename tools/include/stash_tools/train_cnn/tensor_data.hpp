// What a train_cnn tensor holds, told to the memory at allocation: its element type and, for a max
// pool's indices, the pool's geometry. stash's codecs read every tensor as their own element type:
// a lossy member (fp16, bf16, fp8) would round int64 indices, u8 pixels or labels, a double loss
// sum as floats. Described tensors are refused by lossy members and travel lossless or raw
// (offload/transfer.hpp, "What a tensor holds"). Kept free of oneDNN and CUDA: both builds use it.
#pragma once

#include <stash/codec/element_type.hpp>
#include <stash/codec/pool_argmax.hpp>

#include <optional>
#include <type_traits>

namespace train_cnn {

/// @brief What a tensor holds: float32 unless said otherwise.
struct tensor_data {
  /// The element type.
  stash::element_type type = stash::element_type::f32;
  /// For a max pool's int64 indices (type i64): the pool's geometry (pool_argmax's descriptor).
  std::optional<stash::pool_geometry> pool{};
};

/// @brief The indices of a max pool of geometry `g`.
/// @param g The pool's geometry.
/// @return int64 data described by `g`.
[[nodiscard]] inline tensor_data pool_indices(stash::pool_geometry const& g)
{
  return tensor_data{stash::element_type::i64, g};
}

/// @brief The allocator descriptor (a transfer_descriptor_t, `Descriptor`) that says what `d`
/// holds: the pool's geometry where the codec set takes one (a pool_argmax member), else the
/// element type when it is not float32 (lossy members then refuse the tensor), else none (float32,
/// what every member of train_cnn's sets reads).
/// @tparam Descriptor The allocator's descriptor_type.
/// @param d What the tensor holds.
/// @return The descriptor.
template <class Descriptor>
[[nodiscard]] Descriptor descriptor_of(tensor_data const& d)
{
  if constexpr (std::is_constructible_v<Descriptor, stash::pool_geometry>) {
    if (d.pool) { return Descriptor{*d.pool}; }
  }
  if (d.type != stash::element_type::f32) { return Descriptor{d.type}; }
  return Descriptor{};
}

}  // namespace train_cnn
