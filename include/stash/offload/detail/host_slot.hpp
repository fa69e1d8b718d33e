/**
 * @file host_slot.hpp
 * @brief The layout of an offloaded tensor's host slot: the transfer's copy, then (16-byte
 * aligned) the transfer_status it writes. Internals of offload_manager.hpp.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/transfer.hpp>

#include <cstddef>
#include <limits>
#include <optional>

namespace stash::detail {

// Host pool bytes of a slot whose copy takes up to `capacity` bytes; stash::out_of_memory for a
// copy so large that the slot's size would wrap.
[[nodiscard]] inline std::size_t host_slot_bytes(std::size_t capacity)
{
  if (capacity > std::numeric_limits<std::size_t>::max() - 16 - sizeof(transfer_status)) {
    throw out_of_memory("offload_manager host slot (a host copy larger than the address space)",
                        capacity, std::nullopt, std::nullopt);
  }
  return align_up(capacity, 16) + sizeof(transfer_status);
}

// The status record of the slot at `host` (its copy `capacity` bytes).
[[nodiscard]] inline transfer_status* host_slot_status(void* host, std::size_t capacity) noexcept
{
  return reinterpret_cast<transfer_status*>(static_cast<char*>(host) + align_up(capacity, 16));
}

}  // namespace stash::detail
