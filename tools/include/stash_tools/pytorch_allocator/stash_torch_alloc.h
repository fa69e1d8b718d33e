/**
 * @file stash_torch_alloc.h
 * @brief The C interface of libstash_torch_alloc: stash's pools as PyTorch's CUDA allocator.
 *
 * `stash_malloc` / `stash_free` have the signatures torch.cuda.memory.CUDAPluggableAllocator
 * loads (PyTorch declares them with `size_t`; its documentation writes `ssize_t`; the two have the
 * same size and calling convention). The other entry points are for ctypes:
 *
 * - `stash_configure(pool, budget)` picks the pool ("caching", "arena" or "async") and a budget in
 *   bytes (0: none) before the first allocation. Without it the first allocation reads the
 *   environment: STASH_POOL (default "caching") and STASH_BUDGET (bytes, or with a binary suffix
 *   K/KiB, M/MiB, G/GiB, T/TiB; "0" or "none": no budget).
 * - `stash_begin_iteration()` / `stash_end_iteration()` bracket one training step. The arena
 *   records the first step's allocation sequence and replays it from one planned block after;
 *   the other pools only count the steps.
 * - `stash_stats(&s)` fills a stash_torch_stats.
 * - `stash_last_error(buf, n)` copies the message of the most recent failure.
 *
 * One device per process: the pool serves the device of the first allocation (cuda:0 unless the
 * program first allocates elsewhere); requests for another device fail with a message. Every
 * entry point is thread safe (one mutex) and none lets a C++ exception escape: failures return
 * nullptr / -1, print "stash_torch_alloc: ..." on stderr and are kept for stash_last_error.
 */
#ifndef STASH_TORCH_ALLOC_H
#define STASH_TORCH_ALLOC_H

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#if defined(__GNUC__)
/// @brief Marks an entry point exported from the shared library (the rest is hidden).
#define STASH_TORCH_ALLOC_API __attribute__((visibility("default")))
#else
#define STASH_TORCH_ALLOC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// @brief stash_torch_stats::pool values.
enum stash_torch_pool_kind {
  STASH_TORCH_POOL_NONE    = 0, /**< no pool yet (nothing allocated) */
  STASH_TORCH_POOL_CACHING = 1, /**< stash::caching_pool over cudaMalloc */
  STASH_TORCH_POOL_ARENA   = 2, /**< stash::lifetime_arena over cudaMalloc */
  STASH_TORCH_POOL_ASYNC   = 3  /**< stash::async_pool (cudaMallocFromPoolAsync) */
};

/// @brief What stash_stats reports; byte counts in bytes. Mirrored field by field by the ctypes
/// structure of train_torchvision.py: change both together.
typedef struct stash_torch_stats {
  uint64_t in_use_bytes;        /**< handed out now (after the pool's rounding) */
  uint64_t peak_in_use_bytes;   /**< most handed out at once */
  uint64_t reserved_bytes;      /**< taken from the device now */
  uint64_t peak_reserved_bytes; /**< most taken from the device at once */
  uint64_t fallbacks;           /**< arena: allocations the plan did not serve (0 for the others) */
  uint64_t allocations;         /**< successful stash_malloc calls with size > 0 */
  uint64_t failed_allocations;  /**< stash_malloc calls that returned nullptr for size > 0 */
  uint64_t budget_bytes;        /**< the budget (UINT64_MAX when none) */
  uint64_t iterations;          /**< completed begin/end iteration pairs */
  uint64_t arena_bytes;         /**< arena: bytes of the planned block (0 while recording) */
  int32_t device;               /**< the device served (-1 before the first allocation) */
  int32_t pool;                 /**< a stash_torch_pool_kind */
} stash_torch_stats;

/// @brief Allocates `size` bytes on `device` for work on `stream`; nullptr for size 0 and on any
/// failure (reported on stderr and by stash_last_error).
STASH_TORCH_ALLOC_API void* stash_malloc(ssize_t size, int device, cudaStream_t stream);

/// @brief Frees `ptr` from stash_malloc (same size and device); failures are reported, not
/// raised.
STASH_TORCH_ALLOC_API void stash_free(void* ptr, ssize_t size, int device, cudaStream_t stream);

/// @brief Chooses the pool ("caching", "arena", "async") and the budget in bytes (0: none).
/// Only before the first allocation. @return 0 on success, -1 on error.
STASH_TORCH_ALLOC_API int stash_configure(const char* pool, size_t budget);

/// @brief Starts a training step. @return 0 on success, -1 on error (e.g. a step already begun).
STASH_TORCH_ALLOC_API int stash_begin_iteration(void);

/// @brief Ends a training step (the arena plans after the first). @return 0 on success, -1 on
/// error (e.g. no step begun).
STASH_TORCH_ALLOC_API int stash_end_iteration(void);

/// @brief Fills `*out` with the current figures. @return 0 on success, -1 on error.
STASH_TORCH_ALLOC_API int stash_stats(stash_torch_stats* out);

/// @brief Copies the last failure's message ("" if none) into `buffer` (NUL-terminated,
/// truncated to `size` - 1 characters). @return the message's full length.
STASH_TORCH_ALLOC_API size_t stash_last_error(char* buffer, size_t size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STASH_TORCH_ALLOC_H */
