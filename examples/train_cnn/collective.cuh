// What train_cnn's data parallelism needs from the ranks' communicator (nccl_comm.cuh has the
// NCCL one), kept free of NCCL types so that train_cnn compiles without NCCL.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace train_cnn {

/// @brief The ranks' communicator. Device calls are stream-ordered and never block the host:
/// their work starts after everything already queued on `stream` and everything queued on
/// `stream` afterwards starts after it.
class collective {
 public:
  virtual ~collective() = default;
  /// @brief data[0..count) = the mean over ranks of every rank's data, in place.
  virtual void average(float* data, std::size_t count, cudaStream_t stream) = 0;
  /// @brief *loss and *correct = their sums over ranks, in place.
  virtual void sum(double* loss, unsigned long long* correct, cudaStream_t stream) = 0;
  /// @brief The smallest and largest `value` over ranks (synchronizes; for checks between epochs).
  [[nodiscard]] virtual std::pair<std::uint64_t, std::uint64_t> min_max(std::uint64_t value) = 0;
  /// @brief Number of ranks.
  [[nodiscard]] virtual int world_size() const = 0;
};

}  // namespace train_cnn
