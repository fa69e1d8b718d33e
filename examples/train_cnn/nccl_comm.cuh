// train_cnn's NCCL communicator: the `collective` a data-parallel network averages its gradients
// with. One per rank, built after cudaSetDevice(its GPU) from the unique id that data_parallel.hpp
// exchanged. Collectives run on the communicator's own stream, ordered against the caller's
// (stash's compute stream) with events on both sides, so the host never waits for them.
// Only compiled when CMake found NCCL (STASH_HAVE_NCCL).
#pragma once

#include "collective.cuh"

#include <stash_tools/train_cnn/data_parallel.hpp>

#include <stash/core/error.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

// ncclAvg (2.10), ncclGetLastError (2.13), ncclCommFinalize (2.14).
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "train_cnn's data-parallel mode needs NCCL 2.14 or newer (CMake should not have enabled it)"
#endif

namespace train_cnn {

static_assert(sizeof(ncclUniqueId) == unique_id_size,
              "NCCL_UNIQUE_ID_BYTES changed: update unique_id_size");

/// @brief A failing NCCL call: its result code, ncclGetErrorString, NCCL's last error message and
/// where it was called.
class nccl_error : public std::runtime_error {
 public:
  /// @brief Builds "file:line: expr failed: <ncclGetErrorString> (<ncclGetLastError>)".
  nccl_error(ncclResult_t code, ncclComm_t comm, const char* file, int line, const char* expression)
      : std::runtime_error(make_message(code, comm, file, line, expression)), code_(code)
  {
  }

  /// @brief The NCCL result code that was returned.
  [[nodiscard]] ncclResult_t code() const noexcept { return code_; }

 private:
  static std::string make_message(ncclResult_t code, ncclComm_t comm, const char* file, int line,
                                  const char* expression)
  {
    std::string m = std::string(file) + ":" + std::to_string(line) + ": " + expression +
                    " failed: " + ncclGetErrorString(code);
    char const* last = ncclGetLastError(comm);
    if (last != nullptr && last[0] != '\0') { m += std::string(" (") + last + ")"; }
    return m;
  }

  ncclResult_t code_;
};

}  // namespace train_cnn

/// @brief Evaluates an NCCL call on communicator `comm` (nullptr before there is one); throws
/// train_cnn::nccl_error unless it returned ncclSuccess.
#define TRAIN_CNN_NCCL(comm, call)                                                              \
  do {                                                                                          \
    ncclResult_t const train_cnn_nccl_status_ = (call);                                         \
    if (train_cnn_nccl_status_ != ncclSuccess) {                                                \
      throw ::train_cnn::nccl_error(train_cnn_nccl_status_, (comm), __FILE__, __LINE__, #call); \
    }                                                                                           \
  } while (0)

namespace train_cnn {

/// @brief A fresh NCCL unique id (rank 0 only), as the bytes data_parallel.hpp exchanges.
[[nodiscard]] inline unique_id_bytes new_unique_id()
{
  ncclUniqueId id;
  TRAIN_CNN_NCCL(nullptr, ncclGetUniqueId(&id));
  unique_id_bytes b{};
  std::memcpy(b.data(), &id, unique_id_size);
  return b;
}

/// @brief One rank's NCCL communicator and the stream its collectives run on.
class nccl_collective final : public collective {
 public:
  /// @brief Joins the communicator of `r.world_size` ranks identified by `id` as rank `r.rank`, on
  /// the current CUDA device. Blocks until every rank has joined (ncclCommInitRank).
  nccl_collective(rank_info const& r, unique_id_bytes const& id) : world_size_(r.world_size)
  {
    ncclUniqueId uid;
    std::memcpy(&uid, id.data(), unique_id_size);
    try {
      STASH_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      STASH_CUDA_TRY(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
      STASH_CUDA_TRY(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
      STASH_CUDA_TRY(cudaMalloc(&scratch_, 2 * sizeof(std::uint64_t)));
      ncclComm_t comm = nullptr;  // comm_ is set only once the communicator exists
      TRAIN_CNN_NCCL(nullptr, ncclCommInitRank(&comm, r.world_size, uid, r.rank));
      comm_ = comm;
    } catch (...) {
      release();  // a call failed part-way: no destructor runs, so give back what was taken
      throw;
    }
  }

  /// @brief Without finalize() (an exception is unwinding, peers may be gone): ncclCommAbort,
  /// which does not wait for the other ranks.
  ~nccl_collective() override { release(); }
  nccl_collective(nccl_collective const&)            = delete;
  nccl_collective& operator=(nccl_collective const&) = delete;

  /// @brief The orderly end, on every rank: completes outstanding collectives and frees the
  /// communicator (ncclCommFinalize + ncclCommDestroy).
  void finalize()
  {
    if (comm_ == nullptr) { return; }
    STASH_CUDA_TRY(cudaStreamSynchronize(stream_));
    TRAIN_CNN_NCCL(comm_, ncclCommFinalize(comm_));
    TRAIN_CNN_NCCL(comm_, ncclCommDestroy(comm_));
    comm_ = nullptr;
  }

  void average(float* data, std::size_t count, cudaStream_t stream) override
  {
    after(stream);
    // One all-reduce of one gradient tensor: the network calls this for each as backward writes it.
    TRAIN_CNN_NCCL(comm_, ncclAllReduce(data, data, count, ncclFloat, ncclAvg, comm_, stream_));
    before(stream);
  }

  void sum(double* loss, unsigned long long* correct, cudaStream_t stream) override
  {
    static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
    after(stream);
    TRAIN_CNN_NCCL(comm_, ncclGroupStart());
    TRAIN_CNN_NCCL(comm_, ncclAllReduce(loss, loss, 1, ncclFloat64, ncclSum, comm_, stream_));
    TRAIN_CNN_NCCL(comm_, ncclAllReduce(correct, correct, 1, ncclUint64, ncclSum, comm_, stream_));
    TRAIN_CNN_NCCL(comm_, ncclGroupEnd());
    before(stream);
  }

  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> min_max(std::uint64_t value) override
  {
    std::uint64_t host[2] = {value, value};
    STASH_CUDA_TRY(cudaMemcpyAsync(scratch_, host, sizeof host, cudaMemcpyHostToDevice, stream_));
    TRAIN_CNN_NCCL(comm_, ncclGroupStart());
    TRAIN_CNN_NCCL(comm_,
                   ncclAllReduce(scratch_, scratch_, 1, ncclUint64, ncclMin, comm_, stream_));
    TRAIN_CNN_NCCL(
        comm_, ncclAllReduce(scratch_ + 1, scratch_ + 1, 1, ncclUint64, ncclMax, comm_, stream_));
    TRAIN_CNN_NCCL(comm_, ncclGroupEnd());
    STASH_CUDA_TRY(cudaMemcpyAsync(host, scratch_, sizeof host, cudaMemcpyDeviceToHost, stream_));
    STASH_CUDA_TRY(cudaStreamSynchronize(stream_));
    return {host[0], host[1]};
  }

  [[nodiscard]] int world_size() const override { return world_size_; }

 private:
  // The collective starts after everything queued on `stream` so far.
  void after(cudaStream_t stream)
  {
    STASH_CUDA_TRY(cudaEventRecord(ready_, stream));
    STASH_CUDA_TRY(cudaStreamWaitEvent(stream_, ready_, 0));
  }
  // What is queued on `stream` from now on starts after the collective. Re-recording the events
  // each call is safe: cudaStreamWaitEvent captures the event's state when it is called.
  void before(cudaStream_t stream)
  {
    STASH_CUDA_TRY(cudaEventRecord(done_, stream_));
    STASH_CUDA_TRY(cudaStreamWaitEvent(stream, done_, 0));
  }

  // Everything held (null members were never created).
  void release() noexcept
  {
    if (comm_ != nullptr) { (void)ncclCommAbort(comm_); }
    if (scratch_ != nullptr) { STASH_CUDA_CHECK_NOTHROW(cudaFree(scratch_)); }
    if (done_ != nullptr) { STASH_CUDA_CHECK_NOTHROW(cudaEventDestroy(done_)); }
    if (ready_ != nullptr) { STASH_CUDA_CHECK_NOTHROW(cudaEventDestroy(ready_)); }
    if (stream_ != nullptr) { STASH_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_)); }
  }

  int world_size_;
  ncclComm_t comm_{nullptr};
  cudaStream_t stream_{nullptr};
  cudaEvent_t ready_{nullptr};
  cudaEvent_t done_{nullptr};
  std::uint64_t* scratch_{nullptr};
};

}  // namespace train_cnn
