/**
 * @file tensor_handle.hpp
 * @brief `stash::tensor_handle`: the one name of a tensor held by an offload manager and by the
 * stash::allocator over it.
 *
 * A handle is not an integer: it carries the tag of the manager that issued it and the generation
 * of its slot. The manager's table reuses the slots of released tensors (so a run of any length
 * keeps it as small as the most tensors alive at once), and a slot's generation grows at each
 * release, so a handle kept after its tensor died, or passed to another manager (or allocator),
 * is recognized and refused with stash::logic_error instead of naming another tensor.
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace stash {

/// @brief Names one tensor of one offload manager (or stash::allocator). Cheap to copy; the
/// default-constructed handle names no tensor. Only a manager makes valid handles.
class tensor_handle {
 public:
  /// @brief No tensor.
  constexpr tensor_handle() noexcept = default;

  /// @brief The handle of slot `index` at `generation` in the manager tagged `owner` (managers
  /// make handles; a test may forge one to check that it is refused).
  /// @param owner The issuing manager's tag (never 0).
  /// @param index The slot in its table.
  /// @param generation The slot's generation when the tensor was made (never 0).
  constexpr tensor_handle(std::uint64_t owner, std::uint32_t index,
                          std::uint32_t generation) noexcept
      : owner_(owner), index_(index), generation_(generation)
  {
  }

  /// @brief The issuing manager's tag (0: no tensor).
  /// @return The owner tag.
  [[nodiscard]] constexpr std::uint64_t owner() const noexcept { return owner_; }
  /// @brief The slot in the manager's table: unique among the manager's live tensors, reused
  /// after a release.
  /// @return The slot.
  [[nodiscard]] constexpr std::uint32_t index() const noexcept { return index_; }
  /// @brief The slot's generation when the tensor was made.
  /// @return The slot's generation.
  [[nodiscard]] constexpr std::uint32_t generation() const noexcept { return generation_; }
  /// @brief Whether the handle names a tensor at all (it may still be released since).
  /// @return Whether the handle names no tensor.
  [[nodiscard]] constexpr bool is_null() const noexcept { return owner_ == 0; }

  /// @brief Same manager, slot and generation.
  friend constexpr bool operator==(tensor_handle, tensor_handle) noexcept = default;

 private:
  std::uint64_t owner_{0};
  std::uint32_t index_{0};
  std::uint32_t generation_{0};
};

/// @brief "#index (generation g)", for messages.
/// @param h The handle.
/// @return Its text.
[[nodiscard]] inline std::string to_string(tensor_handle h)
{
  if (h.is_null()) { return "#none"; }
  return "#" + std::to_string(h.index()) + " (generation " + std::to_string(h.generation()) + ")";
}

namespace detail {

/// A fresh manager tag, never 0, unique in the process.
[[nodiscard]] inline std::uint64_t next_owner_tag() noexcept
{
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace detail
}  // namespace stash
