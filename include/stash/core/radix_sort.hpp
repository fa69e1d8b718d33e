/**
 * @file radix_sort.hpp
 * @brief A stable sort of a vector by an unsigned 64-bit key, in linear time: the planners sort
 * thousands of keys per step, where a comparison sort was most of the cost.
 */
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace stash {

/// @brief Sorts `items` by key(item), stably: a least-significant-digit radix sort over 8-bit
/// digits, skipping the digits every key shares.
/// @tparam T The element type (copy-assignable).
/// @tparam Key Callable as key(T const&) -> std::uint64_t.
/// @param items The elements, sorted in place.
/// @param scratch A buffer the sort resizes to items.size() and may swap with `items` (kept by a
/// caller that sorts often, to save the allocation).
/// @param key The sort key of an element.
template <class T, class Key>
void stable_radix_sort(std::vector<T>& items, std::vector<T>& scratch, Key const& key)
{
  std::uint64_t any = 0, every = ~std::uint64_t{0};
  for (auto const& x : items) {
    any |= key(x);
    every &= key(x);
  }
  scratch.resize(items.size());
  for (unsigned shift = 0; shift < 64; shift += 8) {
    if ((((any ^ every) >> shift) & 0xffU) == 0) { continue; }
    std::array<std::size_t, 257> start{};
    for (auto const& x : items) { ++start[((key(x) >> shift) & 0xffU) + 1]; }
    for (std::size_t d = 1; d < start.size(); ++d) { start[d] += start[d - 1]; }
    for (auto const& x : items) { scratch[start[(key(x) >> shift) & 0xffU]++] = x; }
    std::swap(items, scratch);
  }
}

}  // namespace stash
