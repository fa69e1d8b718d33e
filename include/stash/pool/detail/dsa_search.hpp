/**
 * @file dsa_search.hpp
 * @brief Planner internal: depth-first search for an offset assignment within a capacity, over
 * one independent section of blocks (the engine behind stash::search_planner).
 *
 * The search builds canonical solutions: blocks are placed in non-decreasing offset order, each
 * at the lowest offset it can take (0 or the top of a time-overlapping placed block). Branching
 * picks the next block: in the narrow mode only among blocks that can take the lowest offset any
 * unplaced block can take, in the wide mode among all (lowest offset first). Pruning:
 * - capacity: every time cell must still fit the unplaced blocks live in it above its floor
 *   (the top of what is placed there, and never below the current offset);
 * - a block with no unplaced time-overlapping block ("no hat") is placed without branching: it
 *   constrains nothing that is still to be placed;
 * - a block tried at offset x and refuted is banned from x in the sibling branches (placing it
 *   there later reaches states already explored), and blocks identical in lifetime and size to
 *   one already tried at x are skipped;
 * - dominance: when the floor rises, a block that would fit entirely below it ends the branch;
 * - decomposition: when no unplaced block spans some moment, the parts before and after it are
 *   solved one after the other, so a failure in one never re-explores choices in the other.
 * Neither mode is complete (bans and narrowing cut some solutions), so callers restart with other
 * orders rather than trust "exhausted". Undo is by a trail of (address, old value) pairs; a
 * node costs O(conflicts + cells spanned by the unplaced blocks of its part).
 */
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace stash::detail {

/// @brief One independent section: sizes in alignment units (> 0) and lifetimes as cell ranges.
struct dsa_instance {
  std::vector<std::uint64_t> size;        ///< per block, in alignment units, > 0
  std::vector<std::uint32_t> cell_begin;  ///< per block
  std::vector<std::uint32_t> cell_end;    ///< per block, > cell_begin
  std::uint32_t cells{0};                 ///< number of time cells
};

/// @brief How a search ended.
enum class dsa_status {
  found,      ///< offsets within the capacity were found
  exhausted,  ///< the (pruned) search space holds no solution
  budget      ///< the deadline or node budget ran out first
};

/// @brief Static order in which candidate blocks at the same offset are tried. Letters name the
/// keys, most significant first, all descending: T = the largest total size live in any cell the
/// block spans (how close to the peak it lives), W = lifetime width in cells, A = size x width.
enum class dsa_order { twa, wat, taw };

/// @brief The search engine for one dsa_instance; reusable for several capacities.
class dsa_search {
 public:
  /// @brief Precomputes the time-overlap graph. O(n log n + overlapping pairs).
  explicit dsa_search(dsa_instance inst) : inst_(std::move(inst)), n_(inst_.size.size())
  {
    std::vector<std::uint32_t> by_begin(n_);
    for (std::uint32_t i = 0; i < n_; ++i) { by_begin[i] = i; }
    std::sort(by_begin.begin(), by_begin.end(), [&](std::uint32_t a, std::uint32_t b) {
      return inst_.cell_begin[a] < inst_.cell_begin[b];
    });
    neighbors_.resize(n_);
    for (std::size_t k = 0; k < n_; ++k) {
      auto const a = by_begin[k];
      // Blocks starting before a ends (and not before a starts) overlap a.
      for (std::size_t m = k + 1; m < n_ && inst_.cell_begin[by_begin[m]] < inst_.cell_end[a]; ++m) {
        neighbors_[a].push_back(by_begin[m]);
        neighbors_[by_begin[m]].push_back(a);
      }
    }
  }

  /// @brief Number of time-overlapping pairs (a measure of the work per node).
  [[nodiscard]] std::size_t conflict_pairs() const noexcept
  {
    std::size_t total = 0;
    for (auto const& v : neighbors_) { total += v.size(); }
    return total / 2;
  }

  /// @brief Searches offsets with every block's top <= `capacity` (in units). On `found`,
  /// `offsets` (units, indexed like the instance) holds the solution.
  dsa_status solve(std::uint64_t capacity,
                   dsa_order order,
                   std::chrono::steady_clock::time_point deadline,
                   std::uint64_t max_nodes,
                   std::vector<std::uint64_t>& offsets,
                   std::uint64_t seed = 0,
                   bool any_offset = false)
  {
    any_offset_ = any_offset;
    cap_       = capacity;
    deadline_  = deadline;
    max_nodes_ = max_nodes;
    nodes_     = 0;
    aborted_   = false;
    floor_now_ = 0;
    placed_count_ = 0;
    trail_.clear();
    minoff_.assign(n_, 0);
    placed_.assign(n_, 0);
    offset_.assign(n_, 0);
    banned_.assign(n_, none);
    floor_.assign(inst_.cells, 0);
    remaining_.assign(inst_.cells, 0);
    unplaced_neighbors_.resize(n_);
    for (std::size_t b = 0; b < n_; ++b) {
      unplaced_neighbors_[b] = neighbors_[b].size();
      if (inst_.size[b] > capacity) { return dsa_status::exhausted; }
      for (auto s = inst_.cell_begin[b]; s < inst_.cell_end[b]; ++s) {
        remaining_[s] += inst_.size[b];
      }
    }
    for (auto r : remaining_) {
      if (r > capacity) { return dsa_status::exhausted; }
    }
    rank_.assign(n_, 0);
    {
      std::vector<std::uint64_t> total(n_, 0);
      for (std::size_t b = 0; b < n_; ++b) {
        for (auto s = inst_.cell_begin[b]; s < inst_.cell_end[b]; ++s) {
          total[b] = std::max(total[b], remaining_[s]);
        }
      }
      auto width = [&](std::uint32_t b) {
        return static_cast<std::uint64_t>(inst_.cell_end[b] - inst_.cell_begin[b]);
      };
      auto key = [&](std::uint32_t b) -> std::tuple<std::uint64_t, std::uint64_t, std::uint64_t> {
        auto const area = inst_.size[b] * width(b);
        switch (order) {
          case dsa_order::twa: return {total[b], width(b), area};
          case dsa_order::wat: return {width(b), area, total[b]};
          case dsa_order::taw: return {total[b], area, width(b)};
        }
        return {};
      };
      std::vector<std::uint32_t> ord(n_);
      for (std::uint32_t i = 0; i < n_; ++i) { ord[i] = i; }
      std::sort(ord.begin(), ord.end(), [&](std::uint32_t a, std::uint32_t b) {
        auto const ka = key(a);
        auto const kb = key(b);
        if (ka != kb) { return ka > kb; }
        return a < b;
      });
      if (seed != 0 && n_ > 1) {
        // Restarts explore different trees: perturb the static order by random adjacent swaps
        // (a deterministic xorshift, so a seed always gives the same search).
        std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL;
        auto next = [&state] {
          state ^= state << 13U;
          state ^= state >> 7U;
          state ^= state << 17U;
          return state;
        };
        for (std::size_t k = 0; k < n_ / 16 + 1; ++k) {
          auto const i = static_cast<std::size_t>(next() % (n_ - 1));
          std::swap(ord[i], ord[i + 1]);
        }
      }
      for (std::uint32_t r = 0; r < n_; ++r) { rank_[ord[r]] = r; }
    }
    lowest_.assign(inst_.cells, none);
    std::vector<std::uint32_t> all(n_);
    for (std::uint32_t i = 0; i < n_; ++i) { all[i] = i; }
    std::sort(all.begin(), all.end(), [&](std::uint32_t a, std::uint32_t b) {
      return inst_.cell_begin[a] < inst_.cell_begin[b];
    });
    bool const ok = dfs(all);
    if (ok) {
      offsets = offset_;
      return dsa_status::found;
    }
    return aborted_ ? dsa_status::budget : dsa_status::exhausted;
  }

  /// @brief Nodes expanded by the last solve().
  [[nodiscard]] std::uint64_t nodes() const noexcept { return nodes_; }

 private:
  static constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();

  void set(std::uint64_t& slot, std::uint64_t value)
  {
    trail_.emplace_back(&slot, slot);
    slot = value;
  }
  void undo(std::size_t mark)
  {
    while (trail_.size() > mark) {
      *trail_.back().first = trail_.back().second;
      trail_.pop_back();
    }
  }

  // Places b at x; false if a check fails (the caller undoes the trail either way). `active`
  // is the subproblem b belongs to (b included): the checks look only at it.
  bool place(std::uint32_t b, std::uint64_t x, std::vector<std::uint32_t> const& active)
  {
    bool const floor_rose = x > floor_now_;
    set(floor_now_, x);
    std::uint64_t const top = x + inst_.size[b];
    if (top > cap_) { return false; }
    offset_[b] = x;
    placed_[b] = 1;
    ++placed_count_;
    for (auto c : neighbors_[b]) {
      if (placed_[c]) { continue; }
      set(unplaced_neighbors_[c], unplaced_neighbors_[c] - 1);
      if (top > minoff_[c]) {
        set(minoff_[c], top);
        if (top + inst_.size[c] > cap_) { return false; }
      }
    }
    for (auto s = inst_.cell_begin[b]; s < inst_.cell_end[b]; ++s) {
      set(floor_[s], top);
      set(remaining_[s], remaining_[s] - inst_.size[b]);
      if (remaining_[s] != 0 && top + remaining_[s] > cap_) { return false; }
    }
    if (floor_rose) {
      // Dominance: an unplaced block that fits entirely below the new floor, where nothing
      // placed is in its way, could have gone there; this state is no better than that one.
      for (auto c : active) {
        if (!placed_[c] && minoff_[c] + inst_.size[c] <= x) { return false; }
      }
    }
    // Section inference: in every cell the unplaced blocks stack up from no lower than the
    // lowest offset any of them can still take.
    std::uint32_t lo_cell = inst_.cells;
    std::uint32_t hi_cell = 0;
    for (auto c : active) {
      if (placed_[c]) { continue; }
      lo_cell       = std::min(lo_cell, inst_.cell_begin[c]);
      hi_cell       = std::max(hi_cell, inst_.cell_end[c]);
      auto const at = std::max(minoff_[c], x);
      for (auto s = inst_.cell_begin[c]; s < inst_.cell_end[c]; ++s) {
        lowest_[s] = std::min(lowest_[s], at);
      }
    }
    bool ok = true;
    for (auto s = lo_cell; s < hi_cell; ++s) {
      if (remaining_[s] != 0 && lowest_[s] + remaining_[s] > cap_) { ok = false; }
      lowest_[s] = none;
    }
    return ok;
  }

  void unplace(std::uint32_t b)
  {
    if (placed_[b]) {
      placed_[b] = 0;
      --placed_count_;
    }
  }

  bool budget_spent()
  {
    ++nodes_;
    if (nodes_ >= max_nodes_ ||
        ((nodes_ & 255U) == 0 && std::chrono::steady_clock::now() >= deadline_)) {
      aborted_ = true;
    }
    return aborted_;
  }

  // Solves the subproblem `active` (unplaced blocks, sorted by cell_begin) on top of the current
  // placements. Leaves its placements in place on success; the caller undoes them on failure.
  bool dfs(std::vector<std::uint32_t> const& active)
  {
    if (active.empty()) { return true; }
    if (budget_spent()) { return false; }

    // Dynamic decomposition: when no unplaced block spans a moment, the blocks before and after
    // it no longer interact, so each part is solved once instead of in every combination.
    {
      std::vector<std::size_t> cuts;
      std::uint32_t reach = 0;
      for (std::size_t k = 0; k < active.size(); ++k) {
        auto const c = active[k];
        if (k > 0 && inst_.cell_begin[c] >= reach) { cuts.push_back(k); }
        reach = std::max(reach, inst_.cell_end[c]);
      }
      if (!cuts.empty()) {
        cuts.push_back(active.size());
        std::uint64_t const floor_at_split = floor_now_;
        std::size_t from = 0;
        for (auto to : cuts) {
          std::vector<std::uint32_t> part(active.begin() + static_cast<std::ptrdiff_t>(from),
                                          active.begin() + static_cast<std::ptrdiff_t>(to));
          set(floor_now_, floor_at_split);  // each part keeps its own monotone floor
          if (!dfs(part)) { return false; }
          from = to;
        }
        return true;
      }
    }

    // Candidates: every unplaced block at the lowest offset it can take now, lowest first.
    std::vector<std::pair<std::uint64_t, std::uint32_t>> candidates;
    for (auto b : active) {
      auto const at = std::max(minoff_[b], floor_now_);
      if (at == banned_[b]) { continue; }
      if (unplaced_neighbors_[b] == 0 && at == minoff_[b]) {
        candidates.assign(1, {at, b});
        break;
      }
      candidates.emplace_back(at, b);
    }
    std::sort(candidates.begin(), candidates.end(), [&](auto const& a, auto const& b) {
      if (a.first != b.first) { return a.first < b.first; }
      return rank_[a.second] < rank_[b.second];
    });
    if (!any_offset_) {
      // Narrow mode: only the lowest offset is tried (the floor never goes down, so those
      // blocks either go there now or rest on something placed later).
      std::size_t k = 1;
      while (k < candidates.size() && candidates[k].first == candidates[0].first) { ++k; }
      candidates.resize(std::min(k, candidates.size()));
    }
    std::size_t const mark = trail_.size();
    std::vector<std::uint32_t> rest;
    rest.reserve(active.size());
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      auto const [x, b] = candidates[k];
      bool duplicate = false;
      for (std::size_t j = 0; j < k && !duplicate; ++j) {
        auto const a = candidates[j].second;
        duplicate = candidates[j].first == x && inst_.size[a] == inst_.size[b] &&
                    inst_.cell_begin[a] == inst_.cell_begin[b] &&
                    inst_.cell_end[a] == inst_.cell_end[b];
      }
      if (!duplicate) {
        std::size_t const before = trail_.size();
        if (place(b, x, active)) {
          rest.clear();
          for (auto c : active) {
            if (c != b) { rest.push_back(c); }
          }
          if (dfs(rest)) { return true; }
        }
        undo(before);
        unplace(b);
        if (aborted_) { break; }
      }
      set(banned_[b], x);
    }
    undo(mark);
    return false;
  }

  dsa_instance inst_;
  std::size_t n_;
  std::vector<std::vector<std::uint32_t>> neighbors_;
  std::vector<std::uint32_t> rank_;

  std::uint64_t cap_{0};
  std::chrono::steady_clock::time_point deadline_{};
  std::uint64_t max_nodes_{0};
  std::uint64_t nodes_{0};
  bool aborted_{false};
  bool any_offset_{false};

  std::uint64_t floor_now_{0};
  std::size_t placed_count_{0};
  std::vector<std::uint64_t> minoff_, placed_, offset_, banned_, floor_, remaining_,
    unplaced_neighbors_;
  std::vector<std::uint64_t> lowest_;  // scratch: per cell, lowest offset an unplaced block can take
  std::vector<std::pair<std::uint64_t*, std::uint64_t>> trail_;
};

}  // namespace stash::detail
