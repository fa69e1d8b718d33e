/**
 * @file allocator_state.hpp
 * @brief The logic behind libstash_torch_alloc's C entry points, over any upstream, so tests run
 * it on host memory: configuration parsing, `allocator_state<Upstream>` (one pool, a mutex, the
 * iteration brackets and the figures) and the `c_*` functions that turn exceptions into
 * nullptr / -1 plus a message.
 *
 * Internal to the example (in the stash_tools target, not in stash's public headers):
 * examples/pytorch_allocator/stash_torch_alloc.cpp
 * instantiates it over stash::device_upstream, tests/pytorch_allocator over
 * stash::host_upstream.
 */
#pragma once

#include "stash_torch_alloc.h"

#include <stash/core/device.hpp>
#include <stash/core/error.hpp>
#include <stash/core/misuse.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>
#include <stash/pool/async_pool.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/pool/pool.hpp>

#include <stash_tools/size.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace stash::torch_alloc {

/// @brief Which stash pool serves PyTorch's allocations.
enum class pool_kind : std::uint8_t {
  caching = STASH_TORCH_POOL_CACHING,  ///< stash::caching_pool (PyTorch's scheme, reimplemented)
  arena   = STASH_TORCH_POOL_ARENA,    ///< stash::lifetime_arena (records step 1, replays after)
  async   = STASH_TORCH_POOL_ASYNC,    ///< stash::async_pool (the driver's stream-ordered pool)
};

/// @brief Budget value meaning "no budget".
inline constexpr std::size_t no_budget = std::numeric_limits<std::size_t>::max();

/// @brief The spelling used by STASH_POOL and stash_configure.
[[nodiscard]] constexpr std::string_view to_string(pool_kind kind) noexcept
{
  switch (kind) {
    case pool_kind::caching:
      return "caching";
    case pool_kind::arena:
      return "arena";
    case pool_kind::async:
      return "async";
  }
  return "?";
}

/// @brief Parses a pool name; `source` (e.g. "STASH_POOL") names the input in the error.
/// @throws stash::logic_error for anything but "caching", "arena" or "async".
[[nodiscard]] inline pool_kind parse_pool_kind(std::string_view text, std::string_view source)
{
  for (auto const kind : {pool_kind::caching, pool_kind::arena, pool_kind::async}) {
    if (to_string(kind) == text) { return kind; }
  }
  throw logic_error(std::string(source) + "='" + std::string(text) +
                    "': unknown pool (expected caching, arena or async)");
}

/// @brief Parses a budget in the tools' one size grammar (stash_tools::parse_size: e.g.
/// 8589934592, 8GiB, 512M, 1.5G, 12GB); "0" (in any unit) and "none" mean no budget. `source`
/// names the input in the error.
/// @param text The budget.
/// @param source Where it came from, e.g. "STASH_BUDGET".
/// @throws stash::logic_error "<source>='<text>': <why>" for anything else, or a budget that does
/// not fit in a size_t.
[[nodiscard]] inline std::size_t parse_budget(std::string_view text, std::string_view source)
{
  auto const fail = [&](std::string const& why) {
    throw logic_error(std::string(source) + "='" + std::string(text) + "': " + why + " (expected " +
                      std::string(stash_tools::size_examples) + "; 0 or none for no budget)");
  };
  if (text == "none") { return no_budget; }
  std::uint64_t bytes = 0;
  try {
    bytes = stash_tools::parse_size(text);
  } catch (stash_tools::size_error const& e) {
    fail(e.what());
  }
  if (bytes > std::numeric_limits<std::size_t>::max()) { fail("is too large"); }
  return bytes == 0 ? no_budget : static_cast<std::size_t>(bytes);
}

/// @brief What stash_configure or the environment chose.
struct config {
  pool_kind pool     = pool_kind::caching;  ///< the pool
  std::size_t budget = no_budget;           ///< cap in bytes (no_budget: none)
};

/// @brief Looks up an environment variable (nullptr when unset); std::getenv by default, a fake
/// one in tests.
using env_lookup = std::function<char const*(char const*)>;

/// @brief The configuration from STASH_POOL (default caching) and STASH_BUDGET (default none).
/// @throws stash::logic_error naming the variable when a value is malformed.
[[nodiscard]] inline config config_from_environment(env_lookup const& lookup)
{
  config c;
  if (char const* pool = lookup("STASH_POOL"); pool != nullptr && *pool != '\0') {
    c.pool = parse_pool_kind(pool, "STASH_POOL");
  }
  if (char const* budget = lookup("STASH_BUDGET"); budget != nullptr && *budget != '\0') {
    c.budget = parse_budget(budget, "STASH_BUDGET");
  }
  return c;
}

/// @brief Makes `device` current for its scope (device memory only) and restores the previous
/// one: pools call cudaMalloc and record events on the current device, which need not be the one
/// PyTorch names.
class device_guard {
 public:
  /// @brief Switches to `device` if it is not current.
  explicit device_guard(int device)
  {
    STASH_CUDA_TRY(cudaGetDevice(&previous_));
    if (previous_ != device) {
      STASH_CUDA_TRY(cudaSetDevice(device));
      switched_ = true;
    }
  }
  device_guard(device_guard const&)            = delete;
  device_guard& operator=(device_guard const&) = delete;
  /// @brief Restores the previous device; a failure is reported, never thrown.
  ~device_guard()
  {
    if (switched_) { STASH_CUDA_CHECK_NOTHROW(cudaSetDevice(previous_)); }
  }

 private:
  int previous_{0};
  bool switched_{false};
};

/// @brief One pool serving one device, behind a mutex: the state behind the C entry points.
///
/// The pool is created at the first allocation from the configuration given to configure() or,
/// failing that, from the environment; from then on the configuration is fixed. It serves the
/// device of that first allocation only. All members are thread safe; they report misuse and
/// failures by throwing (the `c_*` functions below turn that into C return values).
template <upstream_resource Upstream>
class allocator_state {
 public:
  /// @brief The caching pool over `Upstream`.
  using caching_type = caching_pool<Upstream>;
  /// @brief The lifetime arena over `Upstream`.
  using arena_type = lifetime_arena<Upstream>;
  /// @brief Device memory: devices are real (checked, made current); otherwise they are labels.
  static constexpr bool device_memory = Upstream::is_device_accessible;

  /// @brief A state reading the environment through `lookup`; `report` prints failures on stderr.
  explicit allocator_state(env_lookup lookup = &std::getenv, bool report = true)
      : lookup_(std::move(lookup)), report_(report)
  {
  }

  allocator_state(allocator_state const&)            = delete;
  allocator_state& operator=(allocator_state const&) = delete;

  /// @brief Chooses the pool by name and the budget (0: none); only before the first allocation.
  void configure(char const* pool, std::size_t budget)
  {
    std::lock_guard lock(mutex_);
    if (pool == nullptr) { throw logic_error("pool name is null"); }
    if (!std::holds_alternative<std::monostate>(pool_)) {
      throw logic_error("too late: the " + std::string(to_string(*current_kind())) +
                        " pool already serves allocations (configure before the first one)");
    }
    config c;
    c.pool   = parse_pool_kind(pool, "pool");
    c.budget = budget == 0 ? no_budget : budget;
    check_supported(c.pool);
    config_ = c;
  }

  /// @brief `size` bytes on `device` for `stream` (nullptr for 0).
  void* allocate(ssize_t size, int device, cudaStream_t stream)
  {
    std::lock_guard lock(mutex_);
    try {
      if (size < 0) { throw logic_error("negative size " + std::to_string(size)); }
      check_device(device);
      if (size == 0) { return nullptr; }
      std::optional<device_guard> guard;
      if constexpr (device_memory) { guard.emplace(device); }
      if (std::holds_alternative<std::monostate>(pool_)) { create_pool(); }
      void* const p = std::visit(
          [&](auto& pool) -> void* {
            if constexpr (std::is_same_v<std::decay_t<decltype(pool)>, std::monostate>) {
              return nullptr;
            } else {
              return pool.allocate_async(static_cast<std::size_t>(size), stream);
            }
          },
          pool_);
      if (p == nullptr) { throw logic_error("the pool returned no memory"); }
      ++allocations_;
      return p;
    } catch (...) {
      if (size > 0) { ++failed_allocations_; }
      throw;
    }
  }

  /// @brief Frees `p` (from allocate, with the same size and device).
  void deallocate(void* p, ssize_t size, int device, cudaStream_t stream)
  {
    std::lock_guard lock(mutex_);
    if (size < 0) { throw logic_error("negative size " + std::to_string(size)); }
    if (p == nullptr && size == 0) { return; }
    if (std::holds_alternative<std::monostate>(pool_)) {
      throw logic_error("nothing was allocated yet, so this pointer is not stash's");
    }
    check_device(device);
    std::optional<device_guard> guard;
    if constexpr (device_memory) { guard.emplace(device); }
    // A pool's free never throws; this thread's wrong free comes back as this API's error.
    stash::scoped_misuse_handler const recording;
    std::visit(
        [&](auto& pool) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(pool)>, std::monostate>) {
            pool.deallocate_async(p, static_cast<std::size_t>(size), stream);
          }
        },
        pool_);
    if (auto const misuse = stash::take_misuse()) { throw logic_error(misuse->what()); }
  }

  /// @brief Starts a training step.
  void begin_iteration()
  {
    std::lock_guard lock(mutex_);
    if (in_iteration_) {
      throw logic_error("a step has already begun (missing stash_end_iteration)");
    }
    if (auto* arena = std::get_if<arena_type>(&pool_)) { arena->begin_iteration(); }
    in_iteration_ = true;
  }

  /// @brief Ends a training step; the arena plans from it when that is due.
  void end_iteration()
  {
    std::lock_guard lock(mutex_);
    if (!in_iteration_) { throw logic_error("no step has begun (missing stash_begin_iteration)"); }
    // The arena leaves its iteration before it plans: whatever planning throws, both agree that
    // the step is over.
    in_iteration_ = false;
    ++iterations_;
    if (auto* arena = std::get_if<arena_type>(&pool_)) { arena->end_iteration(); }
  }

  /// @brief The current figures (all zero but the counters before the first allocation).
  [[nodiscard]] stash_torch_stats stats() const
  {
    std::lock_guard lock(mutex_);
    stash_torch_stats s{};
    pool_stats const p = std::visit(
        [](auto const& pool) -> pool_stats {
          if constexpr (std::is_same_v<std::decay_t<decltype(pool)>, std::monostate>) {
            return pool_stats{};
          } else {
            return pool.stats();
          }
        },
        pool_);
    s.in_use_bytes        = p.in_use_bytes;
    s.peak_in_use_bytes   = p.peak_in_use_bytes;
    s.reserved_bytes      = p.reserved_bytes;
    s.peak_reserved_bytes = p.peak_reserved_bytes;
    s.fallbacks           = p.fallbacks;
    s.allocations         = allocations_;
    s.failed_allocations  = failed_allocations_;
    s.budget_bytes        = config_ ? config_->budget : no_budget;
    s.iterations          = iterations_;
    if (auto const* arena = std::get_if<arena_type>(&pool_)) {
      s.arena_bytes = arena->arena_bytes();
    }
    s.device        = device_;
    auto const kind = current_kind();
    s.pool          = kind ? static_cast<std::int32_t>(*kind) : STASH_TORCH_POOL_NONE;
    return s;
  }

  /// @brief The arena, when that is the pool in use (tests inspect its state).
  [[nodiscard]] arena_type const* arena() const noexcept { return std::get_if<arena_type>(&pool_); }

  /// @brief Keeps "where: what" as the last error and, unless quiet, prints it on stderr.
  void record_error(char const* where, char const* what) noexcept
  {
    if (report_) { std::fprintf(stderr, "stash_torch_alloc: %s: %s\n", where, what); }
    std::lock_guard lock(error_mutex_);
    try {
      last_error_ = std::string(where) + ": " + what;
    } catch (...) {
      last_error_.clear();  // no memory for the message: better none than a stale one
    }
  }

  /// @brief Copies the last error into `buffer` (NUL-terminated, truncated); its full length.
  std::size_t last_error(char* buffer, std::size_t size) const noexcept
  {
    std::lock_guard lock(error_mutex_);
    if (buffer != nullptr && size > 0) {
      std::size_t const n = std::min(size - 1, last_error_.size());
      std::memcpy(buffer, last_error_.data(), n);
      buffer[n] = '\0';
    }
    return last_error_.size();
  }

  /// @brief The last error ("" if none).
  [[nodiscard]] std::string last_error() const
  {
    std::lock_guard lock(error_mutex_);
    return last_error_;
  }

 private:
  using pool_variant = std::variant<std::monostate, caching_type, arena_type, async_pool>;

  static void check_supported(pool_kind kind)
  {
    if (kind == pool_kind::async && !device_memory) {
      throw logic_error(
          "the async pool allocates device memory (cudaMallocFromPoolAsync); this allocator "
          "serves host memory");
    }
  }

  [[nodiscard]] std::optional<pool_kind> current_kind() const noexcept
  {
    switch (pool_.index()) {
      case 1:
        return pool_kind::caching;
      case 2:
        return pool_kind::arena;
      case 3:
        return pool_kind::async;
      default:
        return std::nullopt;
    }
  }

  // The first allocation binds the device; later calls must name the same one.
  void check_device(int device)
  {
    if (device < 0) { throw logic_error("invalid device " + std::to_string(device)); }
    if (device_ >= 0) {
      if (device != device_) {
        throw logic_error("device " + std::to_string(device) +
                          " requested, but stash_torch_alloc serves one device per process "
                          "and this process uses device " +
                          std::to_string(device_));
      }
      return;
    }
    if constexpr (device_memory) {
      int const count = device_count();
      if (count == 0) { throw logic_error("no usable CUDA device (" + no_gpu_reason() + ")"); }
      if (device >= count) {
        throw logic_error("device " + std::to_string(device) + " does not exist (" +
                          std::to_string(count) + " devices)");
      }
    }
    device_ = device;
  }

  void create_pool()
  {
    // A malformed environment fails every allocation (config_ stays unset), not just the first.
    config const c = config_ ? *config_ : config_from_environment(lookup_);
    check_supported(c.pool);
    switch (c.pool) {
      case pool_kind::caching: {
        caching_pool_options options;
        options.budget = c.budget;
        pool_.template emplace<caching_type>(Upstream{}, options);
        break;
      }
      case pool_kind::arena: {
        lifetime_arena_options options;
        options.budget = c.budget;
        auto& arena    = pool_.template emplace<arena_type>(Upstream{}, options);
        // The first allocation came inside a step: the arena's recording starts with it.
        if (in_iteration_) { arena.begin_iteration(); }
        break;
      }
      case pool_kind::async: {
        if constexpr (device_memory) { pool_.template emplace<async_pool>(c.budget); }
        break;
      }
    }
    config_ = c;
  }

  mutable std::mutex mutex_;  // guards everything below but the last error
  env_lookup lookup_;
  bool report_;
  std::optional<config> config_;
  pool_variant pool_;
  int device_{-1};
  bool in_iteration_{false};
  std::uint64_t iterations_{0};
  std::uint64_t allocations_{0};
  std::uint64_t failed_allocations_{0};

  mutable std::mutex error_mutex_;  // separate: errors are recorded after mutex_ is released
  std::string last_error_;
};

// --- The C entry points' bodies: nothing escapes them
// ---------------------------------------------

/// @brief stash_malloc over `state`: nullptr (and a recorded error) on any failure.
template <class State>
void* c_malloc(State& state, ssize_t size, int device, cudaStream_t stream) noexcept
{
  // The call's arguments go into the message; snprintf cannot throw.
  char where[80];
  std::snprintf(where, sizeof(where), "stash_malloc(%zd B, device %d)", size, device);
  try {
    return state.allocate(size, device, stream);
  } catch (std::exception const& e) {
    state.record_error(where, e.what());
  } catch (...) {
    state.record_error(where, "unknown exception");
  }
  return nullptr;
}

/// @brief stash_free over `state`: a failure is recorded, never raised.
template <class State>
void c_free(State& state, void* p, ssize_t size, int device, cudaStream_t stream) noexcept
{
  char where[96];
  std::snprintf(where, sizeof(where), "stash_free(%p, %zd B, device %d)", p, size, device);
  try {
    state.deallocate(p, size, device, stream);
  } catch (std::exception const& e) {
    state.record_error(where, e.what());
  } catch (...) {
    state.record_error(where, "unknown exception");
  }
}

/// @brief Runs `f` (a member call on `state`): 0 on success, -1 and a recorded error otherwise.
template <class State, class F>
int c_call(State& state, char const* where, F&& f) noexcept
{
  try {
    std::forward<F>(f)();
    return 0;
  } catch (std::exception const& e) {
    state.record_error(where, e.what());
  } catch (...) {
    state.record_error(where, "unknown exception");
  }
  return -1;
}

/// @brief stash_configure over `state`.
template <class State>
int c_configure(State& state, char const* pool, std::size_t budget) noexcept
{
  return c_call(state, "stash_configure", [&] { state.configure(pool, budget); });
}

/// @brief stash_begin_iteration over `state`.
template <class State>
int c_begin_iteration(State& state) noexcept
{
  return c_call(state, "stash_begin_iteration", [&] { state.begin_iteration(); });
}

/// @brief stash_end_iteration over `state`.
template <class State>
int c_end_iteration(State& state) noexcept
{
  return c_call(state, "stash_end_iteration", [&] { state.end_iteration(); });
}

/// @brief stash_stats over `state`.
template <class State>
int c_stats(State& state, stash_torch_stats* out) noexcept
{
  return c_call(state, "stash_stats", [&] {
    if (out == nullptr) { throw logic_error("output pointer is null"); }
    *out = state.stats();
  });
}

}  // namespace stash::torch_alloc
