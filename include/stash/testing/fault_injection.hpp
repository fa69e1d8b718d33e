/**
 * @file fault_injection.hpp
 * @brief Wrappers that make the k-th fallible call fail, so a test can walk every failure point
 * of a program: an upstream and a pool whose allocation throws stash::out_of_memory, and an
 * offload backend whose copy, event record/wait or host "kernel launch" throws stash::cuda_error.
 *
 * All wrappers of one test share a `fault_injector`, which numbers their fallible calls in the
 * order they are made. Run the program once with nothing armed to count the calls, then once per
 * k with `arm(k)`: the k-th call fails, once. What stash promises (offload_manager.hpp, "Failures
 * lose nothing") can then be checked after each failure: the tensor is resident and intact, the
 * pools hold what they held, and the next iteration runs.
 * @code
 * stash::testing::fault_injector faults;
 * stash::testing::fault_injecting_pool device(real_device_pool, faults);
 * stash::testing::fault_injecting_backend backend(real_backend, faults);
 * faults.arm(k);
 * try { run_step(); } catch (std::exception const&) { check_nothing_lost(); }
 * @endcode
 * Host thread only, as the offload manager is (the backends' workers never call the wrappers).
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/upstream_resource.hpp>
#include <stash/offload/offload_backend.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_resource.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace stash::testing {

/// @brief The kinds of fallible calls.
enum class fault_kind : std::uint8_t {
  allocate,  ///< an upstream's or pool's allocate
  copy,      ///< a backend's copy_async
  event,     ///< a backend's record or wait
  launch,    ///< a backend's launch (the host backend's kernel launch)
};

/// @brief Number of fault kinds.
inline constexpr std::size_t fault_kinds = 4;

/// @brief The kind's name, for messages.
/// @param k The kind.
/// @return The name.
[[nodiscard]] constexpr const char* to_string(fault_kind k) noexcept
{
  switch (k) {
    case fault_kind::allocate:
      return "allocate";
    case fault_kind::copy:
      return "copy";
    case fault_kind::event:
      return "event";
    case fault_kind::launch:
      return "launch";
  }
  return "unknown";
}

/// @brief Numbers the fallible calls of the wrappers that share it and fails the armed one.
class fault_injector {
 public:
  /// @brief The call `k` calls from now (0: the next) fails, and so do the `times - 1` counted
  /// calls after it unless disarm() comes first (a pool that retries its upstream, as caching_pool
  /// does, absorbs a single failure: `times` = 3 defeats its two retries); calls of kinds not in
  /// `kinds` (a bit per fault_kind; default all) are neither counted for it nor failed.
  /// @param k Which call, counted from the next (0).
  /// @param kinds A bit per fault_kind counted and failed.
  /// @param times How many counted calls fail in a row.
  void arm(std::uint64_t k, unsigned kinds = ~0u, std::uint64_t times = 1) noexcept
  {
    armed_     = times > 0;
    countdown_ = k;
    kinds_     = kinds;
    remaining_ = times;
  }
  /// @brief Nothing fails from now on (calls are still counted).
  void disarm() noexcept { armed_ = false; }
  /// @brief Whether a failure is still to come (false once the armed ones all happened).
  /// @return Whether a failure is to come.
  [[nodiscard]] bool armed() const noexcept { return armed_; }

  /// @brief Counts a call of `kind`; true when it must fail (the wrappers then throw).
  /// @param kind The call's kind.
  /// @return Whether the call must fail.
  [[nodiscard]] bool fail_now(fault_kind kind) noexcept
  {
    auto const i = static_cast<std::size_t>(kind);
    ++calls_[i];
    if (!armed_ || (kinds_ & (1u << i)) == 0) { return false; }
    if (countdown_ > 0) {
      --countdown_;
      return false;
    }
    armed_ = --remaining_ > 0;
    ++failures_;
    last_ = kind;
    return true;
  }

  /// @brief Calls counted so far, of every kind.
  /// @return The count.
  [[nodiscard]] std::uint64_t calls() const noexcept
  {
    std::uint64_t sum = 0;
    for (auto c : calls_) { sum += c; }
    return sum;
  }
  /// @brief Calls of `kind` counted so far.
  /// @param kind The call's kind.
  /// @return The count.
  [[nodiscard]] std::uint64_t calls(fault_kind kind) const noexcept
  {
    return calls_[static_cast<std::size_t>(kind)];
  }
  /// @brief Failures injected so far.
  /// @return The count.
  [[nodiscard]] std::uint64_t failures() const noexcept { return failures_; }
  /// @brief The kind of the last injected failure.
  /// @return Its kind, or nullopt before the first.
  [[nodiscard]] std::optional<fault_kind> last_failure() const noexcept { return last_; }

 private:
  std::array<std::uint64_t, fault_kinds> calls_{};
  std::uint64_t failures_{0};
  std::uint64_t countdown_{0};
  std::uint64_t remaining_{0};
  unsigned kinds_{~0u};
  bool armed_{false};
  std::optional<fault_kind> last_;
};

/// @brief An upstream whose allocate throws stash::out_of_memory when its injector says so.
/// @tparam Upstream The upstream wrapped (kept by value: upstreams are cheap handles).
template <upstream_resource Upstream = host_upstream>
class fault_injecting_upstream {
 public:
  /// @brief As the wrapped upstream.
  static constexpr bool is_device_accessible = Upstream::is_device_accessible;
  /// @brief As the wrapped upstream.
  static constexpr bool is_host_accessible = Upstream::is_host_accessible;

  /// @brief Wraps `upstream`; `faults` outlives this and every copy.
  /// @param upstream The wrapped upstream.
  /// @param faults The injector (outlives this and every copy).
  fault_injecting_upstream(Upstream upstream, fault_injector& faults)
      : upstream_(std::move(upstream)), faults_(&faults)
  {
  }

  /// @brief The wrapped allocate, unless this call is the injected failure.
  /// @param bytes Its size.
  /// @param alignment A power of two.
  /// @return The memory.
  void* allocate(std::size_t bytes, std::size_t alignment = alignof(std::max_align_t))
  {
    if (faults_->fail_now(fault_kind::allocate)) {
      throw out_of_memory("fault_injecting_upstream (injected)", bytes, std::nullopt, std::nullopt);
    }
    return upstream_.allocate(bytes, alignment);
  }
  /// @brief The wrapped deallocate (never fails).
  /// @param p The memory.
  /// @param bytes Its size.
  /// @param alignment A power of two.
  void deallocate(void* p, std::size_t bytes,
                  std::size_t alignment = alignof(std::max_align_t)) noexcept
  {
    upstream_.deallocate(p, bytes, alignment);
  }

  /// @brief Equal when the wrapped upstreams are and the injector is the same.
  friend bool operator==(fault_injecting_upstream const& a, fault_injecting_upstream const& b)
  {
    return a.upstream_ == b.upstream_ && a.faults_ == b.faults_;
  }

 private:
  Upstream upstream_;
  fault_injector* faults_;
};

/// @brief A pool whose allocate throws stash::out_of_memory when its injector says so (deallocate
/// never fails: the pool concept's frees are noexcept, as cuda::mr's); forwards everything else
/// (including begin/end_iteration, so a lifetime_arena keeps learning).
/// @tparam Pool The pool wrapped (by reference).
template <pool_with_stats Pool>
class fault_injecting_pool : public pool_resource<fault_injecting_pool<Pool>> {
 public:
  /// @brief As the wrapped pool.
  static constexpr bool is_host_accessible = pool_is_host_accessible<Pool>();
  /// @brief As the wrapped pool.
  static constexpr bool is_device_accessible = pool_is_device_accessible<Pool>();
  STASH_POOL_PROPERTIES(fault_injecting_pool, pool_is_device_accessible<Pool>(),
                        pool_is_host_accessible<Pool>())

  /// @brief Wraps `pool`; both outlive this.
  /// @param pool The pool wrapped.
  /// @param faults The injector numbering the calls.
  fault_injecting_pool(Pool& pool, fault_injector& faults) : pool_(&pool), faults_(&faults) {}

  /// @brief The wrapped allocate, unless this call is the injected failure.
  /// @param bytes Its size.
  /// @param alignment A power of two.
  /// @param stream The stream it is used on.
  /// @return The memory.
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    if (faults_->fail_now(fault_kind::allocate)) {
      throw out_of_memory("fault_injecting_pool (injected)", bytes, std::nullopt,
                          pool_->stats().in_use_bytes);
    }
    return pool_allocate(*pool_, stream, bytes, alignment);
  }
  /// @brief The wrapped deallocate (never throws).
  /// @param p The memory.
  /// @param bytes Its size.
  /// @param alignment As allocated.
  /// @param stream The stream it was last used on.
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, stream_ref stream) noexcept
  {
    pool_deallocate(*pool_, stream, p, bytes, alignment);
  }
  /// @brief The wrapped pool's stats.
  /// @return The counters.
  [[nodiscard]] pool_stats stats() const { return pool_->stats(); }
  /// @brief Forwarded when the pool learns iterations.
  void begin_iteration() requires iteration_aware_pool<Pool> { pool_->begin_iteration(); }
  /// @brief Forwarded when the pool learns iterations.
  void end_iteration() requires iteration_aware_pool<Pool> { pool_->end_iteration(); }

 private:
  Pool* pool_;
  fault_injector* faults_;
};

/// @brief An offload backend whose copy_async, record, wait and launch throw stash::cuda_error
/// when its injector says so, before anything is queued; the rest is forwarded. Host copies of an
/// allocator over it come from a fault-injecting `HostUpstream` on the same injector.
/// @tparam Backend The backend wrapped (by reference): host_backend on a CPU.
/// @tparam HostUpstream Where an allocator over this backend takes its host copies.
template <offload_backend Backend, upstream_resource HostUpstream = host_upstream>
class fault_injecting_backend {
 public:
  /// @brief The wrapped backend's stream.
  using stream = typename Backend::stream;
  /// @brief The wrapped backend's event.
  using event = typename Backend::event;
  /// @brief The wrapped backend's stream order.
  using stream_order = typename Backend::stream_order;

  /// @brief Wraps `backend`; both outlive this.
  /// @param backend The backend (outlives this object).
  /// @param faults The injector (outlives this and every copy).
  fault_injecting_backend(Backend& backend, fault_injector& faults)
      : backend_(backend), faults_(faults)
  {
  }

  /// @brief Forwarded (streams are made up front, not a failure point of an iteration).
  /// @param priority Lower is more urgent (CUDA stream priorities).
  /// @return The wrapped backend's stream.
  stream create_stream(int priority = 0) { return backend_.create_stream(priority); }
  /// @brief Forwarded, unless this call is the injected failure.
  /// @param s The stream.
  /// @return The wrapped backend's event.
  event record(stream s)
  {
    inject(fault_kind::event, cudaErrorInvalidResourceHandle, "record (injected)");
    return backend_.record(s);
  }
  /// @brief Forwarded, unless this call is the injected failure (a wait for no event is no call:
  /// the CUDA backend makes none).
  /// @param s The stream.
  /// @param e The event.
  void wait(stream s, event e)
  {
    if (e != event{}) {
      inject(fault_kind::event, cudaErrorInvalidResourceHandle, "wait (injected)");
    }
    backend_.wait(s, e);
  }
  /// @brief Forwarded.
  /// @param e The event.
  /// @return Whether `e` completed.
  bool query(event const& e) { return backend_.query(e); }
  /// @brief Forwarded.
  /// @param e The event.
  void synchronize(event const& e) { backend_.synchronize(e); }
  /// @brief Forwarded.
  /// @param s The stream.
  void synchronize(stream s) { backend_.synchronize(s); }
  /// @brief Forwarded.
  /// @param e The event.
  void release(event& e) noexcept { backend_.release(e); }
  /// @brief Forwarded, unless this call is the injected failure.
  /// @param dst Destination.
  /// @param src Source.
  /// @param bytes Its size.
  /// @param s The stream.
  void copy_async(void* dst, void const* src, std::size_t bytes, stream s)
  {
    inject(fault_kind::copy, cudaErrorInvalidValue, "copy_async (injected)");
    backend_.copy_async(dst, src, bytes, s);
  }
  /// @brief Forwarded, unless this call is the injected failure.
  /// @param s The stream.
  /// @param task Runs once the stream's earlier work has.
  void launch(stream s, std::function<void()> task) requires
      requires(Backend& b, stream t, std::function<void()> f)
  {
    b.launch(t, std::move(f));
  }
  {
    inject(fault_kind::launch, cudaErrorLaunchOutOfResources, "launch (injected)");
    backend_.launch(s, std::move(task));
  }
  /// @brief Forwarded.
  /// @param s The stream.
  /// @return The stream as pools see it.
  stream_ref tag(stream s) const noexcept { return backend_.tag(s); }
  /// @brief Forwarded.
  /// @param s The stream.
  /// @return Whether `s` is capturing.
  bool capturing(stream s) { return backend_.capturing(s); }
  /// @brief The host-copy upstream of an allocator over this backend: fault-injecting too.
  /// @return The upstream.
  [[nodiscard]] fault_injecting_upstream<HostUpstream> staging_upstream() const
  {
    return fault_injecting_upstream<HostUpstream>(HostUpstream{}, faults_);
  }
  /// @brief The wrapped backend.
  /// @return The backend.
  [[nodiscard]] Backend& inner() noexcept { return backend_; }

 private:
  void inject(fault_kind kind, cudaError_t code, const char* what)
  {
    if (faults_.fail_now(kind)) { throw cuda_error(code, "fault_injecting_backend", 0, what); }
  }

  Backend& backend_;
  fault_injector& faults_;
};

}  // namespace stash::testing
