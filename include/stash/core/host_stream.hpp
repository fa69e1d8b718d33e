/**
 * @file host_stream.hpp
 * @brief `stash::host_stream`: an in-order queue of host work drained by one thread, the CPU
 * stand-in for a CUDA stream on which the host backend, the pools' stream orders and their tests
 * run without a GPU.
 */
#pragma once

#include <stash/core/stream_ref.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

namespace stash {

/// @brief A completion flag that threads can wait on: the host stream's event.
struct host_flag {
  std::mutex mutex;                 ///< guards the wait
  std::condition_variable done_cv;  ///< signalled by set()
  std::atomic<bool> done{false};    ///< set once the marked work ran
  std::uint64_t capture{0};  ///< the capture it was recorded in (0: none); set before it is shared

  /// @brief Marks the flag done and wakes every waiter.
  void set()
  {
    {
      std::lock_guard<std::mutex> lock(mutex);
      done.store(true, std::memory_order_release);
    }
    done_cv.notify_all();
  }
  /// @brief Blocks until set().
  void wait()
  {
    std::unique_lock<std::mutex> lock(mutex);
    done_cv.wait(lock, [&] { return done.load(std::memory_order_acquire); });
  }
};

/// @brief An in-order queue of host work drained by one worker thread: a CPU stand-in for a CUDA
/// stream, referred to by stash::stream_ref.
class host_stream {
 public:
  /// @brief Starts the worker; before each task it sleeps a random time up to `max_delay`
  /// (0: never), to shake out ordering bugs in tests.
  /// @param max_delay Longest random sleep before a task (0: none).
  /// @param seed Seed of the delays (the same seed, the same delays).
  explicit host_stream(std::chrono::microseconds max_delay = {}, std::uint64_t seed = 0)
      : max_delay_(max_delay), rng_(seed), worker_([this] { run(); })
  {
  }

  host_stream(host_stream const&)            = delete;
  host_stream& operator=(host_stream const&) = delete;

  /// @brief Finishes the queued work, then stops the thread. Never throws.
  ~host_stream()
  {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  /// @brief Queues `task` after everything queued so far.
  /// @param task The work; it runs on the stream's worker thread.
  void enqueue(std::function<void()> task)
  {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_all();
  }

  /// @brief A flag set once everything queued so far has run (part of the stream's capture, if
  /// it is capturing).
  /// @return The flag, shared with the worker.
  std::shared_ptr<host_flag> mark()
  {
    auto flag     = std::make_shared<host_flag>();
    flag->capture = capture_;
    enqueue([flag] { flag->set(); });
    return flag;
  }

  /// @brief The capture this stream is part of (0: none). Host thread only.
  /// @return The capture id, 0 for none.
  [[nodiscard]] std::uint64_t capture() const noexcept { return capture_; }
  /// @brief Joins capture `id` (0: leaves it). Host thread only.
  /// @param id The capture to join, 0 to leave.
  void set_capture(std::uint64_t id) noexcept { capture_ = id; }

 private:
  void run()
  {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) { return; }
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      if (max_delay_.count() > 0) {
        std::uniform_int_distribution<std::int64_t> d(0, max_delay_.count());
        std::this_thread::sleep_for(std::chrono::microseconds(d(rng_)));
      }
      task();
    }
  }

  std::chrono::microseconds max_delay_;
  std::mt19937_64 rng_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_{false};
  std::uint64_t capture_{0};
  std::thread worker_;  // last: started once the members above exist
};

}  // namespace stash
