/**
 * @file stream_ref.hpp
 * @brief `stash::stream_ref`: a non-owning reference to the stream work is ordered on, a CUDA
 * stream or a host stream (the CPU stand-in the host backend runs its tests on).
 *
 * Pools, stream orders and backends take a `stream_ref`. It converts implicitly from
 * `cudaStream_t`, `cuda::stream_ref` and `host_stream&`, and to `cuda::stream_ref`, so code written
 * against CCCL or RMM passes its streams unchanged and a stash pool can sit behind a
 * `cuda::mr` resource reference. A host stream never becomes a `cudaStream_t`: asking a host stream
 * for its CUDA handle is a stash::logic_error, not a pointer in disguise.
 */
#pragma once

#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>
#include <cuda/stream_ref>

#include <cstddef>

namespace stash {

class host_stream;

/// @brief A CUDA stream or a host stream, by reference (see the file docs). The default one is
/// CUDA's default stream, which on a host backend means "no stream": nothing to order after.
class stream_ref {
 public:
  /// @brief CUDA's default stream.
  constexpr stream_ref() noexcept = default;
  /// @brief The CUDA stream `stream` (nullptr: the default stream).
  /// @param stream The CUDA stream.
  constexpr stream_ref(cudaStream_t stream) noexcept : cuda_(stream) {}  // NOLINT(*-explicit-*)
  /// @brief The default stream.
  constexpr stream_ref(std::nullptr_t) noexcept {}  // NOLINT(*-explicit-*)
  /// @brief The CUDA stream `stream` refers to.
  /// @param stream The CCCL reference.
  constexpr stream_ref(cuda::stream_ref stream) noexcept  // NOLINT(*-explicit-*)
      : cuda_(stream.get())
  {
  }
  /// @brief The host stream `stream`; it must outlive every copy of this reference.
  /// @param stream The host stream.
  constexpr stream_ref(host_stream& stream) noexcept : host_(&stream) {}  // NOLINT(*-explicit-*)

  /// @brief Whether this refers to a host stream.
  /// @return True for a host stream.
  [[nodiscard]] constexpr bool is_host() const noexcept { return host_ != nullptr; }
  /// @brief The host stream, or nullptr for a CUDA stream.
  /// @return The host stream, or nullptr.
  [[nodiscard]] constexpr host_stream* host() const noexcept { return host_; }

  /// @brief The CUDA handle; a host stream has none (stash::logic_error).
  /// @return The CUDA stream.
  /// @throws stash::logic_error For a host stream.
  [[nodiscard]] cudaStream_t get() const
  {
    STASH_EXPECTS(host_ == nullptr,
                  "stash::stream_ref::get: a host stream has no cudaStream_t (a CUDA-only "
                  "component was given a host backend's stream)");
    return cuda_;
  }
  /// @brief As a CCCL stream reference; a host stream has none (stash::logic_error).
  operator cuda::stream_ref() const { return cuda::stream_ref{get()}; }  // NOLINT(*-explicit-*)

  /// @brief Same stream.
  friend constexpr bool operator==(stream_ref a, stream_ref b) noexcept
  {
    return a.cuda_ == b.cuda_ && a.host_ == b.host_;
  }

 private:
  cudaStream_t cuda_{nullptr};
  host_stream* host_{nullptr};
};

}  // namespace stash
