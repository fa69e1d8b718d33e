/**
 * @file parallel_tasks.hpp
 * @brief Independent tasks over worker threads without giving up determinism: each task writes
 * only its own results, so what the tasks compute does not depend on the thread count or on
 * which thread ran which task (stash::joint_search::threads, stash-plan's --threads).
 */
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace stash {

/// @brief The worker threads stash's tools use by default: the machine's hardware threads, at least
/// one (std::thread::hardware_concurrency() may not know) and at most `cap`.
/// @param cap The most threads to use.
/// @return The count.
[[nodiscard]] inline unsigned default_threads(unsigned cap = 8) noexcept
{
  return std::clamp(std::thread::hardware_concurrency(), 1U, std::max(cap, 1U));
}

/// @brief Runs task(i, worker) once for every i in [0, count), on up to `threads` threads (the
/// calling thread is worker 0), handing out the tasks in order of i as workers free up, and
/// returns when every task has ended. `worker` (< threads) names the thread running the task, for
/// state a thread keeps for itself. With threads <= 1 the tasks run in order on the calling
/// thread. When tasks throw, no task is handed out after the first failure, those already
/// running end, and the exception of the failed task of least i is rethrown: the one a run in
/// order would have thrown, as every task before it has run. When a thread cannot be started, the
/// threads already running do the work.
/// @param threads The most threads to run tasks on.
/// @param count How many tasks.
/// @param task Called as task(i, worker); tasks must be independent of each other.
template <class Task>
void run_tasks(std::size_t threads, std::size_t count, Task&& task)
{
  threads = std::min(threads, count);
  if (threads <= 1) {
    for (std::size_t i = 0; i < count; ++i) { task(i, std::size_t{0}); }
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> errors(count);  // slot i: task i's exception, if any
  auto work = [&](std::size_t worker) {
    while (!failed.load(std::memory_order_relaxed)) {
      auto const i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= count) { return; }
      try {
        task(i, worker);
      } catch (...) {
        errors[i] = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  {
    std::vector<std::jthread> pool;  // joined at the end of this block
    pool.reserve(threads - 1);
    for (std::size_t w = 1; w < threads; ++w) {
      try {
        pool.emplace_back(work, w);
      } catch (std::system_error const&) {
        break;  // no more threads: the ones started and this one take every task
      }
    }
    work(0);
  }
  for (auto const& e : errors) {
    if (e) { std::rethrow_exception(e); }
  }
}

}  // namespace stash
