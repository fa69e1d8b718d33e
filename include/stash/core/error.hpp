/**
 * @file error.hpp
 * @brief stash's exception types and the macros that raise them.
 *
 * Modelled on RMM: a library precondition failure is a `stash::logic_error`; a failing CUDA
 * runtime call is a `stash::cuda_error`; running out of a memory budget is a
 * `stash::out_of_memory` carrying the figures a user needs to size their budget.
 * Destructors never throw: they use STASH_CUDA_CHECK_NOTHROW, which reports and carries on.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

namespace stash {

/// @brief A violated precondition or invariant: a bug in the caller or in stash.
class logic_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// @brief A CUDA runtime call failed; carries the error code and where it happened.
class cuda_error : public std::runtime_error {
 public:
  /// @brief Builds "file:line: expr failed: cudaErrorX: description".
  /// @param code The status the call returned.
  /// @param file Source file of the call.
  /// @param line Source line of the call.
  /// @param expression The call as written.
  cuda_error(cudaError_t code, const char* file, int line, const char* expression)
      : std::runtime_error(make_message(code, file, line, expression)), code_(code)
  {
  }

  /// @brief The CUDA error code that was returned.
  /// @return The status of the failed call.
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }

 private:
  static std::string make_message(cudaError_t code, const char* file, int line,
                                  const char* expression)
  {
    return std::string(file) + ":" + std::to_string(line) + ": " + expression +
           " failed: " + cudaGetErrorName(code) + ": " + cudaGetErrorString(code);
  }

  cudaError_t code_;
};

/// @brief An allocation did not fit. Derives from std::bad_alloc so generic handlers catch it.
///
/// Carries the requested size, the budget it had to fit in, the bytes in use at the time and,
/// where the allocator knows it, the largest free block (which tells fragmentation from
/// exhaustion).
class out_of_memory : public std::bad_alloc {
 public:
  /// @brief Records the figures and composes the message.
  /// @param where    who ran out (e.g. "caching_pool", "device_upstream")
  /// @param requested bytes asked for
  /// @param budget    bytes the allocator may hold in total, if it has a budget
  /// @param in_use    bytes handed out at the time, if known
  /// @param largest_free the largest block that could have been handed out, if known
  out_of_memory(std::string const& where, std::size_t requested, std::optional<std::size_t> budget,
                std::optional<std::size_t> in_use,
                std::optional<std::size_t> largest_free = std::nullopt)
      : requested_(requested), budget_(budget), in_use_(in_use), largest_free_(largest_free)
  {
    auto fmt = [](std::optional<std::size_t> v) {
      return v ? std::to_string(*v) + " B" : std::string("unknown");
    };
    message_ = "stash::out_of_memory in " + where + ": requested " + std::to_string(requested) +
               " B, budget " + fmt(budget) + ", in use " + fmt(in_use) + ", largest free block " +
               fmt(largest_free);
  }

  /// @brief The full message with all figures.
  /// @return The message, valid as long as the exception.
  [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }
  /// @brief Bytes that were requested.
  /// @return The size of the failed request.
  [[nodiscard]] std::size_t requested_bytes() const noexcept { return requested_; }
  /// @brief The allocator's budget, if it has one.
  /// @return The budget, or nothing for an allocator without one.
  [[nodiscard]] std::optional<std::size_t> budget_bytes() const noexcept { return budget_; }
  /// @brief Bytes in use when the allocation failed, if known.
  /// @return The bytes in use, or nothing when unknown.
  [[nodiscard]] std::optional<std::size_t> in_use_bytes() const noexcept { return in_use_; }
  /// @brief Largest free block at the time, if known.
  /// @return The largest free block, or nothing when unknown.
  [[nodiscard]] std::optional<std::size_t> largest_free_bytes() const noexcept
  {
    return largest_free_;
  }

 private:
  std::size_t requested_;
  std::optional<std::size_t> budget_;
  std::optional<std::size_t> in_use_;
  std::optional<std::size_t> largest_free_;
  std::string message_;
};

namespace detail {

/// @brief Resets the thread's last CUDA error only when it holds `status`, the error the caller
/// is handling now. A status the runtime did not record (cudaErrorNotReady from a query, a code
/// passed in by hand) leaves in place an error the caller's own earlier call left pending (a
/// launch nobody has checked yet), which an unconditional cudaGetLastError() would swallow.
inline void clear_last_error_if(cudaError_t status) noexcept
{
  if (cudaPeekAtLastError() == status) { (void)cudaGetLastError(); }
}

[[noreturn]] inline void throw_logic_error(const char* file, int line, std::string const& msg)
{
  throw stash::logic_error(std::string("stash failure at ") + file + ":" + std::to_string(line) +
                           ": " + msg);
}

[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* file, int line,
                                          const char* expression)
{
  // Clear the (non-sticky) last error this failure left, so a handled failure does not resurface
  // in an unrelated later cudaGetLastError() call; another pending error is the caller's.
  clear_last_error_if(code);
  throw stash::cuda_error(code, file, line, expression);
}

inline void report_cuda_error_nothrow(cudaError_t code, const char* file, int line,
                                      const char* expression) noexcept
{
  clear_last_error_if(code);
  std::fprintf(stderr, "stash: %s:%d: %s failed: %s: %s (ignored in a non-throwing context)\n",
               file, line, expression, cudaGetErrorName(code), cudaGetErrorString(code));
}

}  // namespace detail
}  // namespace stash

/// @brief Throws stash::logic_error with file:line and `msg` unless `cond` holds.
#define STASH_EXPECTS(cond, msg)                                                    \
  do {                                                                              \
    if (!(cond)) { ::stash::detail::throw_logic_error(__FILE__, __LINE__, (msg)); } \
  } while (0)

/// @brief Throws stash::logic_error with file:line and `msg` unconditionally.
#define STASH_FAIL(msg) ::stash::detail::throw_logic_error(__FILE__, __LINE__, (msg))

/// @brief Evaluates a CUDA runtime call; throws stash::cuda_error unless it returned cudaSuccess.
#define STASH_CUDA_TRY(call)                                                                \
  do {                                                                                      \
    cudaError_t const stash_cuda_try_status_ = (call);                                      \
    if (stash_cuda_try_status_ != cudaSuccess) {                                            \
      ::stash::detail::throw_cuda_error(stash_cuda_try_status_, __FILE__, __LINE__, #call); \
    }                                                                                       \
  } while (0)

/// @brief For destructors and other noexcept paths: reports a failing CUDA call on stderr and
/// carries on, never throws.
#define STASH_CUDA_CHECK_NOTHROW(call)                                                         \
  do {                                                                                         \
    cudaError_t const stash_cuda_check_status_ = (call);                                       \
    if (stash_cuda_check_status_ != cudaSuccess) {                                             \
      ::stash::detail::report_cuda_error_nothrow(stash_cuda_check_status_, __FILE__, __LINE__, \
                                                 #call);                                       \
    }                                                                                          \
  } while (0)
