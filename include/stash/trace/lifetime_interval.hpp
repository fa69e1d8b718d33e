/**
 * @file lifetime_interval.hpp
 * @brief One storage's size and live interval: the unit that lifetime analysis produces and that
 * offset planners consume.
 */
#pragma once

#include <cstdint>

namespace stash {

/// @brief A block of `bytes` that is live over the half-open interval [begin, end) of logical time.
///
/// For a stash trace, time is the index of the event in program order: a storage allocated by
/// event a and freed by event f is live over [a, f); one never freed is live until the end of the
/// iteration (the number of events). For a MiniMalloc CSV, [begin, end) is the row's
/// [lower, upper). Two intervals conflict (must not share addresses) when they overlap in time.
struct lifetime_interval {
  std::uint64_t id;     ///< storage id (trace) or buffer id (MiniMalloc)
  std::uint64_t begin;  ///< first time step the block is live
  std::uint64_t end;    ///< first time step the block is dead again (end > begin)
  std::uint64_t bytes;  ///< size in bytes, before any alignment padding
};

}  // namespace stash
