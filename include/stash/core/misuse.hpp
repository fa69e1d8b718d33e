/**
 * @file misuse.hpp
 * @brief How a `deallocate` that must not throw still reports a caller's mistake: the
 * `stash::misuse_handler`.
 *
 * `cuda::mr` declares deallocation noexcept (CCCL 3.5's resource refs and `any_resource` call it
 * from noexcept functions), so every stash pool, adaptor and upstream frees without throwing. A
 * free that is wrong (a pointer the pool never handed out or already freed, another size or
 * alignment than allocated, an alignment that is no power of two, or a foreign resource whose own
 * free threw) changes nothing in the pool and is reported to the process's misuse handler as a
 * `stash::misuse_error` (a stash::logic_error saying what, where and with which figures).
 *
 * The handler is one function pointer for the process, set with `set_misuse_handler`; a
 * `scoped_misuse_handler` overrides it for the calling thread only, for its scope (tests, and code
 * that turns a wrong free back into its own error, as the PyTorch allocator's C API does). It is
 * called on the thread that freed and must not throw.
 * The default handler:
 * - in a debug build (NDEBUG not defined where the pool is compiled) writes the message to stderr
 *   and aborts: a wrong free is a bug, found where it happens;
 * - otherwise writes the message to stderr once per thread, keeps the error for the thread
 *   (`take_misuse()` returns and clears the last one) and counts it (`misuse_count()`), and the
 *   program carries on with the pool intact.
 * Allocation keeps throwing: `allocate` refuses a bad alignment with stash::logic_error and a
 * request it cannot serve with stash::out_of_memory.
 */
#pragma once

#include <stash/core/error.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace stash {

/// @brief What was wrong with a free.
enum class misuse_kind : std::uint8_t {
  unknown_pointer,  ///< not handed out by this resource, or already freed
  wrong_size,       ///< another size than the one allocated
  bad_alignment,    ///< not a power of two, above what the resource honours, or not as allocated
  failed_free,      ///< the adapted (foreign) resource's own free threw
};

/// @brief A wrong free, as the misuse handler receives it (and take_misuse() returns it).
class misuse_error : public logic_error {
 public:
  /// @brief Records the figures; `message` says what and where.
  /// @param kind What was wrong.
  /// @param message The full message (who, what, the figures).
  /// @param pointer The pointer freed.
  /// @param bytes The size given.
  /// @param alignment The alignment given.
  misuse_error(misuse_kind kind, std::string const& message, void* pointer, std::size_t bytes,
               std::size_t alignment)
      : logic_error(message), kind_(kind), pointer_(pointer), bytes_(bytes), alignment_(alignment)
  {
  }
  /// @brief What was wrong.
  /// @return The kind of misuse.
  [[nodiscard]] misuse_kind kind() const noexcept { return kind_; }
  /// @brief The pointer freed.
  /// @return The pointer as given to the free.
  [[nodiscard]] void* pointer() const noexcept { return pointer_; }
  /// @brief The size given to the free.
  /// @return The size as given.
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  /// @brief The alignment given to the free.
  /// @return The alignment as given.
  [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }

 private:
  misuse_kind kind_;
  void* pointer_;
  std::size_t bytes_;
  std::size_t alignment_;
};

/// @brief Called with every wrong free; must not throw (see the file docs).
using misuse_handler = void (*)(misuse_error const&) noexcept;

namespace detail {

struct misuse_state {
  std::optional<misuse_error> last;
  std::uint64_t count{0};
  bool printed{false};
};

inline misuse_state& thread_misuse_state() noexcept
{
  thread_local misuse_state state;
  return state;
}

inline void record_misuse(misuse_error const& e) noexcept
{
  auto& state = thread_misuse_state();
  state.last  = e;  // copying a std::logic_error does not allocate (shared message)
  ++state.count;
}

}  // namespace detail

/// @brief The default handler (see the file docs): abort with the message in a debug build,
/// otherwise say it once per thread on stderr and keep it for take_misuse().
/// @param e The wrong free.
inline void default_misuse_handler(misuse_error const& e) noexcept
{
#if !defined(NDEBUG)
  std::fprintf(stderr, "stash: %s (aborting: a wrong free in a debug build)\n", e.what());
  std::abort();
#else
  auto& state = detail::thread_misuse_state();
  if (!state.printed) {
    std::fprintf(stderr, "stash: %s (ignored, the pool unchanged; see stash::take_misuse)\n",
                 e.what());
    state.printed = true;
  }
  detail::record_misuse(e);
#endif
}

/// @brief A handler that only records (take_misuse() / misuse_count()), in any build: for tests
/// and for programs that poll.
/// @param e The wrong free.
inline void recording_misuse_handler(misuse_error const& e) noexcept { detail::record_misuse(e); }

namespace detail {
inline std::atomic<misuse_handler>& misuse_handler_slot() noexcept
{
  static std::atomic<misuse_handler> slot{&default_misuse_handler};
  return slot;
}
// The calling thread's override (scoped_misuse_handler), nullptr when none.
inline misuse_handler& thread_misuse_handler() noexcept
{
  thread_local misuse_handler handler = nullptr;
  return handler;
}
}  // namespace detail

/// @brief Installs `handler` for the whole process (nullptr: the default); returns the previous
/// process-wide one. A thread's scoped_misuse_handler still takes precedence on that thread.
/// @param handler Called with every wrong free.
/// @return The process-wide handler installed before.
inline misuse_handler set_misuse_handler(misuse_handler handler) noexcept
{
  return detail::misuse_handler_slot().exchange(handler != nullptr ? handler
                                                                   : &default_misuse_handler);
}

/// @brief The handler in force on the calling thread (its scoped override, else the process's).
/// @return The handler a wrong free on this thread goes to.
[[nodiscard]] inline misuse_handler get_misuse_handler() noexcept
{
  misuse_handler const local = detail::thread_misuse_handler();
  return local != nullptr ? local : detail::misuse_handler_slot().load();
}

/// @brief The last wrong free recorded on this thread (by the default handler in a release build
/// or by recording_misuse_handler), cleared by the call; nothing if none since the last call.
/// @return The last recorded misuse, or nothing.
[[nodiscard]] inline std::optional<misuse_error> take_misuse() noexcept
{
  auto& state = detail::thread_misuse_state();
  std::optional<misuse_error> e;
  e.swap(state.last);
  return e;
}

/// @brief How many wrong frees were recorded on this thread.
/// @return The count for the calling thread.
[[nodiscard]] inline std::uint64_t misuse_count() noexcept
{
  return detail::thread_misuse_state().count;
}

/// @brief Installs a handler for the calling thread and its lifetime (recording_misuse_handler by
/// default), restoring the thread's previous one after; other threads keep theirs. The recorded
/// error of the thread is cleared on entry.
class scoped_misuse_handler {
 public:
  /// @brief Installs `handler` for this thread.
  /// @param handler The handler for this scope (nullptr: the process's).
  explicit scoped_misuse_handler(misuse_handler handler = &recording_misuse_handler) noexcept
      : previous_(detail::thread_misuse_handler())
  {
    detail::thread_misuse_handler() = handler;
    (void)take_misuse();
  }
  scoped_misuse_handler(scoped_misuse_handler const&)            = delete;
  scoped_misuse_handler& operator=(scoped_misuse_handler const&) = delete;
  /// @brief Restores the thread's previous handler.
  ~scoped_misuse_handler() { detail::thread_misuse_handler() = previous_; }

 private:
  misuse_handler previous_;
};

namespace detail {

/// @brief Builds the misuse_error and hands it to the handler; never throws (a message that
/// cannot be built is replaced by a fixed one).
inline void report_misuse(misuse_kind kind, char const* who, std::string const& what, void* p,
                          std::size_t bytes, std::size_t alignment) noexcept
{
  misuse_handler const handler = get_misuse_handler();
  try {
    handler(misuse_error(kind, std::string(who) + "::deallocate: " + what, p, bytes, alignment));
  } catch (...) {  // only the message's allocation can throw
    static misuse_error const fallback(
        misuse_kind::failed_free, "stash: a wrong free (no memory for its message)", nullptr, 0, 0);
    handler(fallback);
  }
}

/// @brief Reports an unknown pointer, a size or an alignment that differs from the allocation's.
inline void report_bad_free(char const* who, void* p, std::size_t bytes, std::size_t alignment,
                            std::size_t allocated_bytes, std::size_t allocated_alignment,
                            bool known) noexcept
{
  if (!known) {
    report_misuse(misuse_kind::unknown_pointer, who,
                  "pointer not allocated by this pool, or already freed", p, bytes, alignment);
  } else if (allocated_bytes != bytes) {
    report_misuse(misuse_kind::wrong_size, who,
                  "size differs from the one allocated (" + std::to_string(allocated_bytes) +
                      " B allocated, " + std::to_string(bytes) + " B freed)",
                  p, bytes, alignment);
  } else {
    report_misuse(misuse_kind::bad_alignment, who,
                  "alignment differs from the one allocated (" +
                      std::to_string(allocated_alignment) + " B allocated, " +
                      std::to_string(alignment) + " B freed)",
                  p, bytes, alignment);
  }
}

/// @brief Whether a free of `p` with `bytes` and `alignment` matches its allocation; when not,
/// reports it (report_bad_free, under `who`) and the pool must change nothing. One check for
/// every pool's do_deallocate.
/// @tparam Record The pool's record of a live allocation, with an `alignment` member.
/// @tparam Size The type of its size member.
/// @param allocated The record of `p`, null when the pool holds no such pointer.
/// @param size The record's member holding the size `p` was allocated with.
template <class Record, class Size>
[[nodiscard]] bool free_matches(char const* who, void* p, std::size_t bytes, std::size_t alignment,
                                Record const* allocated, Size Record::*size) noexcept
{
  if (allocated != nullptr && allocated->*size == bytes && allocated->alignment == alignment) {
    return true;
  }
  report_bad_free(who, p, bytes, alignment, allocated != nullptr ? allocated->*size : 0,
                  allocated != nullptr ? allocated->alignment : 0, allocated != nullptr);
  return false;
}

}  // namespace detail
}  // namespace stash
