/**
 * @file sections.hpp
 * @brief Planner internal: splits an offset-planning input into independent sections, stacks the
 * blocks that live over a whole section below it, and finds sections of the same shape.
 *
 * A section is a maximal run of time in which something is always live: sections never overlap
 * in time, so each is planned on its own from offset 0 (the footprint is the largest section's).
 * Within a section, a block live over the whole run (it begins first and ends last) can sit
 * below all the others in some optimal plan: cut its row out of any plan and close the gap
 * (every block beside it in time lives within its lifetime, so each moves down as a whole), then
 * put it at the bottom. Such blocks (in training traces: parameters, optimizer state, the batch)
 * are stacked, and what remains above them is split again. Repeated training iterations give
 * sections of the same shape (sizes and lifetimes equal up to a shift in time, block by block),
 * which share one plan.
 */
#pragma once

#include <stash/pool/plan.hpp>
#include <stash/trace/lifetime_interval.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stash::detail {

/// @brief One independent part of a planning input.
struct plan_section {
  std::vector<std::uint32_t> blocks{};  ///< by (begin, longer first, index)
  std::uint64_t base{0};                ///< offset above the blocks stacked below the section
  /// The first section of the same shape (itself if none before it): the two list their blocks
  /// in the same order, so a plan of one is a plan of the other.
  std::size_t same_as{0};
};

/// @brief An input split into sections, with the stacked blocks placed.
struct section_split {
  std::vector<plan_section> sections{};
  std::vector<std::uint64_t> offsets{};  ///< per interval: the stacked blocks' offsets, else 0
};

/// @brief Sets every section's same_as (hashed, then compared block by block).
inline void find_same_shapes(std::span<const lifetime_interval> in, std::uint64_t alignment,
                             std::vector<plan_section>& sections)
{
  auto shape_hash = [&](plan_section const& sec) {
    std::uint64_t h  = sec.blocks.size();
    auto const start = in[sec.blocks.front()].begin;
    for (auto i : sec.blocks) {
      for (auto v : {in[i].begin - start, in[i].end - start, padded_size(in[i].bytes, alignment)}) {
        h = (h ^ v) * 0x100000001B3ULL + (h >> 29U);
      }
    }
    return h;
  };
  auto same = [&](plan_section const& a, plan_section const& b) {
    if (a.blocks.size() != b.blocks.size()) { return false; }
    auto const sa = in[a.blocks.front()].begin;
    auto const sb = in[b.blocks.front()].begin;
    for (std::size_t k = 0; k < a.blocks.size(); ++k) {
      auto const& x = in[a.blocks[k]];
      auto const& y = in[b.blocks[k]];
      if (x.begin - sa != y.begin - sb || x.end - sa != y.end - sb ||
          padded_size(x.bytes, alignment) != padded_size(y.bytes, alignment)) {
        return false;
      }
    }
    return true;
  };
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> seen;
  for (std::size_t s = 0; s < sections.size(); ++s) {
    auto& sec    = sections[s];
    sec.same_as  = s;
    auto& firsts = seen[shape_hash(sec)];
    for (auto f : firsts) {
      if (same(sections[f], sec)) {
        sec.same_as = f;
        break;
      }
    }
    if (sec.same_as == s) { firsts.push_back(s); }
  }
}

/// @brief Splits `in` into sections and stacks the blocks live over their whole section (see
/// the file comment). O(n log n) per level of stacking.
[[nodiscard]] inline section_split split_sections(std::span<const lifetime_interval> in,
                                                  std::uint64_t alignment)
{
  section_split out;
  out.offsets.assign(in.size(), 0);
  std::vector<std::pair<std::vector<std::uint32_t>, std::uint64_t>> todo(1);
  todo[0].first.resize(in.size());
  std::iota(todo[0].first.begin(), todo[0].first.end(), 0U);
  std::vector<std::uint64_t> reach_after;
  while (!todo.empty()) {
    auto [ids, base] = std::move(todo.back());
    todo.pop_back();
    // By begin, longer first: a block that contains the rest of its run comes first in it.
    std::sort(ids.begin(), ids.end(), [&](std::uint32_t a, std::uint32_t b) {
      return in[a].begin != in[b].begin ? in[a].begin < in[b].begin
             : in[a].end != in[b].end   ? in[a].end > in[b].end
                                        : a < b;
    });
    for (std::size_t first = 0; first < ids.size();) {
      std::size_t last    = first + 1;
      std::uint64_t reach = in[ids[first]].end;
      while (last < ids.size() && in[ids[last]].begin < reach) {
        reach = std::max(reach, in[ids[last]].end);
        ++last;
      }
      // Stack the blocks that begin first and end last in the run [first, last).
      reach_after.assign(last - first + 1, 0);
      for (std::size_t k = last; k-- > first;) {
        reach_after[k - first] = std::max(reach_after[k - first + 1], in[ids[k]].end);
      }
      std::size_t peel   = first;
      std::uint64_t over = base;
      while (peel + 1 < last && in[ids[peel]].end >= reach_after[peel - first + 1]) {
        out.offsets[ids[peel]] = over;
        over += padded_size(in[ids[peel]].bytes, alignment);
        ++peel;
      }
      auto const from = ids.begin() + static_cast<std::ptrdiff_t>(peel);
      auto const to   = ids.begin() + static_cast<std::ptrdiff_t>(last);
      if (peel == first) {
        out.sections.push_back({{from, to}, base, 0});
      } else {
        todo.emplace_back(std::vector<std::uint32_t>(from, to), over);
      }
      first = last;
    }
  }
  find_same_shapes(in, alignment, out.sections);
  return out;
}

}  // namespace stash::detail
