/**
 * @file dsa_search.hpp
 * @brief Planner internal: depth-first search for an offset assignment within a capacity, over
 * one independent section of blocks (the engine behind stash::search_planner).
 *
 * The search enumerates gravity-packed solutions (every block at 0 or on the top of a block live
 * at a common time; any plan can be pushed down into one). Sorted by offset, each block of such a
 * solution sits exactly at its minoff (the highest top of its placed time-overlapping blocks)
 * when the blocks below it are placed, and minoff >= the level (the offset of the block placed
 * last). So the search branches on WHICH unplaced block goes next, among those whose minoff is
 * at or above the level, at its minoff; a block whose minoff fell below the level has to wait
 * for a block to rest on. Pruning, each cheap enough to run at every node:
 * - dominance ("monotonic floor"): putting b at x is pointless while another unplaced block c
 *   fits entirely below x on what is already placed (minoff(c) + size(c) <= x): every completion
 *   could lower c there and place it before b;
 * - inference: in every time cell the unplaced blocks live there stack up from the lowest offset
 *   any of them can take, so that plus their total must fit (a waiting block, or one refuted at
 *   its minoff, has to rest on one of its own unplaced time-overlapping blocks, so it can take no
 *   less than the lowest top any of those can reach: max(its minoff, level) + its size);
 * - fail first: the blocks that can fill the lowest (then tightest) cell are tried first (in
 *   rank order, or largest first); once all of them are refuted, inference usually sees the
 *   waste in that cell at once;
 * - failed sub-states: what is left to solve depends only on the unplaced blocks, their minoffs
 *   (those below the level only as "waiting"), the level and the bans in force, so a sub-state
 *   proven infeasible is remembered (a lossy table of 128-bit hashes, kept across restarts for
 *   the same capacity) and skipped when another prefix leads to it again;
 * - a block whose time-overlapping blocks are all placed ("no hat") constrains nothing that is
 *   still to be placed: it settles at its minoff at once, out of the offset order;
 * - a block refuted at offset x is banned from x in the sibling branches (they would only reach
 *   the same placements in another order), and a block identical in lifetime and size to one
 *   already tried at x is skipped;
 * - decomposition: when no unplaced block spans some cell boundary, the parts before and after
 *   it are solved one after the other (each with its own level), so a failure in one never
 *   re-explores choices in the other.
 * The rules only remove solutions that a kept branch also reaches, so a search that runs out of
 * nodes proves nothing but an exhausted one means no plan exists (a brute-force test checks
 * this on small instances). Sizes are kept in units of their gcd. Undo is by a trail of
 * (address, old value) pairs. A node costs O(blocks and cells of its part + conflicts and cells
 * of the block placed); the per-cell inference uses a union-find over "next unpainted cell"
 * instead of walking every lifetime, and the lists in offset order are merged, not sorted.
 */
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
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
  exhausted,  ///< the search space holds no solution
  budget,     ///< the node budget ran out first
  deadline    ///< the wall-clock deadline (a safety net, off unless given) ran out first
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
    // Every offset of a canonical solution is a sum of sizes, so the search runs in units of
    // their gcd: the capacity rounds down to it, and a block that cannot stay at an offset has
    // to rise by at least one such unit (which makes the inference on banned blocks bite).
    grain_ = 0;
    for (auto sz : inst_.size) { grain_ = std::gcd(grain_, sz); }
    if (grain_ == 0) { grain_ = 1; }
    for (auto& sz : inst_.size) { sz /= grain_; }
    std::vector<std::uint32_t> by_begin(n_);
    for (std::uint32_t i = 0; i < n_; ++i) { by_begin[i] = i; }
    std::sort(by_begin.begin(), by_begin.end(), [&](std::uint32_t a, std::uint32_t b) {
      return inst_.cell_begin[a] < inst_.cell_begin[b];
    });
    neighbors_.resize(n_);
    for (std::size_t k = 0; k < n_; ++k) {
      auto const a = by_begin[k];
      // Blocks starting before a ends (and not before a starts) overlap a.
      for (std::size_t m = k + 1; m < n_ && inst_.cell_begin[by_begin[m]] < inst_.cell_end[a];
           ++m) {
        neighbors_[a].push_back(by_begin[m]);
        neighbors_[by_begin[m]].push_back(a);
      }
    }
    by_begin_ = std::move(by_begin);
    // Each block's neighbours by ascending (size, index): one sort of all blocks, then every
    // block appended to its neighbours' lists in that order (no sort per list).
    {
      std::vector<std::uint32_t> by_size(n_);
      for (std::uint32_t i = 0; i < n_; ++i) { by_size[i] = i; }
      std::sort(by_size.begin(), by_size.end(), [&](std::uint32_t a, std::uint32_t b) {
        return inst_.size[a] != inst_.size[b] ? inst_.size[a] < inst_.size[b] : a < b;
      });
      by_size_.resize(n_);
      for (std::size_t b = 0; b < n_; ++b) { by_size_[b].reserve(neighbors_[b].size()); }
      for (auto e : by_size) {
        for (auto c : neighbors_[e]) { by_size_[c].push_back(e); }
      }
    }
    twin_.resize(n_);
    {
      std::vector<std::uint32_t> ord(n_);
      for (std::uint32_t i = 0; i < n_; ++i) { ord[i] = i; }
      auto key = [&](std::uint32_t b) {
        return std::tuple(inst_.size[b], inst_.cell_begin[b], inst_.cell_end[b]);
      };
      std::sort(ord.begin(), ord.end(),
                [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
      for (std::size_t k = 0; k < n_; ++k) {
        twin_[ord[k]] = (k > 0 && key(ord[k]) == key(ord[k - 1])) ? twin_[ord[k - 1]] : ord[k];
      }
    }
  }

  /// @brief Searches offsets with every block's top <= `capacity` (in units), expanding at most
  /// `max_nodes` nodes. On `found`, `offsets` (units, indexed like the instance) holds the
  /// solution. The search is deterministic: the same instance, arguments and earlier solves give
  /// the same result on any machine, unless `deadline` (a wall-clock safety net; no_deadline, the
  /// default, never reads the clock) stops it first, which returns dsa_status::deadline. A
  /// nonzero `seed` perturbs
  /// the static candidate order (for restarts); `critical_first` tries the blocks that can fill
  /// the lowest, tightest cell before the others (else the order is offset, then rank), and
  /// `largest_first` tries those by descending size instead of rank.
  dsa_status solve(std::uint64_t capacity, dsa_order order, std::uint64_t max_nodes,
                   std::vector<std::uint64_t>& offsets, std::uint64_t seed = 0,
                   bool critical_first = true, bool largest_first = false,
                   std::chrono::steady_clock::time_point deadline = no_deadline)
  {
    crit_order_    = critical_first;
    largest_first_ = largest_first;
    cap_           = capacity / grain_;
    if (cap_ != memo_cap_) {
      memo_.clear();
      memo_cap_ = cap_;
    }
    deadline_  = deadline;
    max_nodes_ = max_nodes;
    nodes_     = 0;
    work_      = 0;
    aborted_   = false;
    timed_out_ = false;
    level_     = 0;
    trail_.clear();
    minoff_.assign(n_, 0);
    placed_.assign(n_, 0);
    offset_.assign(n_, 0);
    banned_.assign(n_, none);
    remaining_.assign(inst_.cells, 0);
    span_.assign(std::size_t{inst_.cells} + 1, 0);
    unplaced_neighbors_.resize(n_);
    for (std::size_t b = 0; b < n_; ++b) {
      unplaced_neighbors_[b] = neighbors_[b].size();
      if (inst_.size[b] > cap_) { return dsa_status::exhausted; }
      for (auto s = inst_.cell_begin[b]; s < inst_.cell_end[b]; ++s) {
        remaining_[s] += inst_.size[b];
      }
      for (auto s = inst_.cell_begin[b] + 1; s < inst_.cell_end[b]; ++s) { ++span_[s]; }
    }
    for (auto r : remaining_) {
      if (r > cap_) { return dsa_status::exhausted; }
    }
    rank_blocks(order, seed);
    raised_stamp_.assign(n_, 0);
    stamp_ = 0;
    // Blocks that overlap nothing sit at 0 and take no part in the search.
    std::vector<std::uint32_t> by_rank(n_);
    for (std::uint32_t b = 0; b < n_; ++b) { by_rank[rank_[b]] = b; }
    std::vector<std::uint32_t> all;
    all.reserve(n_);
    for (auto b : by_rank) {
      if (unplaced_neighbors_[b] == 0) {
        settle(b);
      } else {
        all.push_back(b);
      }
    }
    // minoff is 0 for all: rank order is also (minoff, rank) order.
    bool const ok = dfs(all, all);
    if (ok) {
      offsets = offset_;
      for (auto& o : offsets) { o *= grain_; }
      return dsa_status::found;
    }
    if (!aborted_) { return dsa_status::exhausted; }
    return timed_out_ ? dsa_status::deadline : dsa_status::budget;
  }

  /// @brief The `deadline` of solve() that means none: the clock is never read.
  static constexpr std::chrono::steady_clock::time_point no_deadline =
      std::chrono::steady_clock::time_point::max();

  /// @brief Caps the work of the next solve() calls (see work()); none: no cap but the nodes.
  void limit_work(std::uint64_t max_work) noexcept { max_work_ = max_work; }

  /// @brief Work of the last solve(): every node counts the blocks and time cells it works over
  /// (the size of its subproblem), so work follows the search's time more closely than nodes.
  [[nodiscard]] std::uint64_t work() const noexcept { return work_; }

  /// @brief Blocks in the instance.
  [[nodiscard]] std::size_t blocks() const noexcept { return n_; }

  /// @brief Nodes expanded by the last solve().
  [[nodiscard]] std::uint64_t nodes() const noexcept { return nodes_; }

 private:
  struct candidate {
    std::uint64_t offset;
    std::uint32_t rank;
    std::uint32_t block;
    bool operator<(candidate const& o) const noexcept
    {
      return offset != o.offset ? offset < o.offset : rank < o.rank;
    }
  };

  static constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();

  void rank_blocks(dsa_order order, std::uint64_t seed)
  {
    rank_.assign(n_, 0);
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
        case dsa_order::twa:
          return {total[b], width(b), area};
        case dsa_order::wat:
          return {width(b), area, total[b]};
        case dsa_order::taw:
          return {total[b], area, width(b)};
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
      auto next           = [&state] {
        state ^= state << 13U;
        state ^= state >> 7U;
        state ^= state << 17U;
        return state;
      };
      for (std::size_t k = 0; k < n_ / 4 + 1; ++k) {
        auto const i = static_cast<std::size_t>(next() % (n_ - 1));
        std::swap(ord[i], ord[i + 1]);
      }
    }
    for (std::uint32_t r = 0; r < n_; ++r) { rank_[ord[r]] = r; }
  }

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

  // Places a block none of whose time-overlapping blocks is unplaced at its lowest offset: no
  // choice is left for it, and it is outside the offset order (it constrains nothing later).
  void settle(std::uint32_t c)
  {
    set(placed_[c], 1);
    set(offset_[c], minoff_[c]);
    for (auto s = inst_.cell_begin[c]; s < inst_.cell_end[c]; ++s) {
      set(remaining_[s], remaining_[s] - inst_.size[c]);
    }
    for (auto s = inst_.cell_begin[c] + 1; s < inst_.cell_end[c]; ++s) {
      set(span_[s], span_[s] - 1);
    }
  }

  // Places b at x (>= level). False if a check fails; the caller undoes the trail either way.
  bool place(std::uint32_t b, std::uint64_t x)
  {
    std::uint64_t const top = x + inst_.size[b];
    ++stamp_;
    raised_.clear();
    if (top > cap_) { return false; }
    set(placed_[b], 1);
    set(offset_[b], x);

    if (x > level_) { set(level_, x); }
    for (auto s = inst_.cell_begin[b]; s < inst_.cell_end[b]; ++s) {
      set(remaining_[s], remaining_[s] - inst_.size[b]);
      if (remaining_[s] != 0 && top + remaining_[s] > cap_) { return false; }
    }
    for (auto s = inst_.cell_begin[b] + 1; s < inst_.cell_end[b]; ++s) {
      set(span_[s], span_[s] - 1);
    }
    for (auto c : neighbors_[b]) {
      if (placed_[c]) { continue; }
      if (top > minoff_[c]) {
        set(minoff_[c], top);
        raised_.push_back(c);
        raised_stamp_[c] = stamp_;
        if (top + inst_.size[c] > cap_) { return false; }
      }
      set(unplaced_neighbors_[c], unplaced_neighbors_[c] - 1);
      if (unplaced_neighbors_[c] == 0) { settle(c); }
    }
    return true;
  }

  // Counts a node; true once the node or work budget (or the optional deadline, checked every
  // 256 nodes and only when one was given) is spent.
  bool budget_spent()
  {
    ++nodes_;
    if (nodes_ >= max_nodes_ || work_ >= max_work_) {
      aborted_ = true;
    } else if (deadline_ != no_deadline && (nodes_ & 255U) == 0 &&
               std::chrono::steady_clock::now() >= deadline_) {
      aborted_   = true;
      timed_out_ = true;
    }
    return aborted_;
  }

  // Solves the subproblem `active` (unplaced blocks, in rank order; `by_minoff`: the same blocks
  // by (minoff, rank)) on top of the current placements. Leaves its placements in place on
  // success; the caller undoes them on failure.
  bool dfs(std::vector<std::uint32_t> const& active, std::vector<std::uint32_t> const& by_minoff)
  {
    if (active.empty()) { return true; }
    if (budget_spent()) { return false; }
    // Failed sub-states: what is left to solve depends only on the unplaced blocks, their
    // lowest offsets, the level and the bans in force (not on how the placed blocks got there),
    // so a sub-state proven infeasible once is skipped when it comes back, in this run or a
    // later restart against the same capacity.
    auto const key = state_key(active);
    if (memo_has(key)) { return false; }
    bool const ok = dfs_body(active, by_minoff);
    if (!ok && !aborted_) { memo_put(key); }
    return ok;
  }

  // A 128-bit hash of the sub-state: the level, and per active block its minoff above the
  // level (or "waiting") and whether it is banned there. Order-independent (sums of mixes).
  std::pair<std::uint64_t, std::uint64_t> state_key(std::vector<std::uint32_t> const& active) const
  {
    std::uint64_t h1 = mix(level_ ^ 0x51ED27D1B3C2A8F5ULL);
    std::uint64_t h2 = mix(level_ + 0x2545F4914F6CDD1DULL);
    for (auto c : active) {
      auto const m = minoff_[c];
      // A block below the level waits for a block to rest on; its exact lowest offset is moot.
      std::uint64_t const v =
          m < level_ ? 0 : ((m - level_ + 1) << 1U) | (banned_[c] == m ? 1U : 0U);
      std::uint64_t const x = (static_cast<std::uint64_t>(c) << 40U) ^ v;
      auto const hx         = mix(x);
      h1 += hx;
      h2 += (hx ^ (hx >> 29U)) * 0x9E3779B97F4A7C15ULL;
    }
    return {h1, h2 ^ active.size()};
  }
  static std::uint64_t mix(std::uint64_t z)
  {
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
  }
  bool memo_has(std::pair<std::uint64_t, std::uint64_t> const& k) const
  {
    if (memo_.empty()) { return false; }
    auto const i = static_cast<std::size_t>(k.first & (memo_.size() - 1));
    return memo_[i] == k;
  }
  // The table starts at 2^14 entries (256 KiB) and doubles (keeping its entries) each time as
  // many keys as half its size went in, up to 2^20 entries (16 MiB), so memory follows the
  // search actually done, not the number of sections.
  void memo_put(std::pair<std::uint64_t, std::uint64_t> const& k)
  {
    if (memo_.empty()) {
      memo_.assign(std::size_t{1} << 14U, {0, 0});
      memo_puts_ = 0;
    } else if (++memo_puts_ > memo_.size() / 2 && memo_.size() < (std::size_t{1} << memo_bits)) {
      std::vector<std::pair<std::uint64_t, std::uint64_t>> bigger(2 * memo_.size(), {0, 0});
      for (auto const& e : memo_) {
        if (e.first != 0 || e.second != 0) {
          bigger[static_cast<std::size_t>(e.first & (bigger.size() - 1))] = e;
        }
      }
      memo_.swap(bigger);
      memo_puts_ = 0;
    }
    memo_[static_cast<std::size_t>(k.first & (memo_.size() - 1))] = k;
  }

  bool dfs_body(std::vector<std::uint32_t> const& active,
                std::vector<std::uint32_t> const& by_minoff)
  {
    auto const [lo_cell, hi_cell] = cell_range(active);
    work_ += active.size() + (hi_cell - lo_cell);
    if (auto const solved = solve_parts(active, by_minoff, lo_cell, hi_cell)) { return *solved; }
    if (!infer(by_minoff, lo_cell, hi_cell)) { return false; }
    std::size_t crit_group            = 0;
    std::vector<candidate> const mine = candidates(active, by_minoff, crit_group);

    std::size_t const mark = trail_.size();
    std::vector<std::uint32_t> rest, rest_m;
    rest.reserve(active.size());
    rest_m.reserve(active.size());
    for (std::size_t k = 0; k < mine.size(); ++k) {
      auto const x = mine[k].offset;
      auto const b = mine[k].block;
      // With the critical cell's blocks all refuted (banned) there, the cell may be unable to
      // take the waste; one more inference settles that before the other candidates are tried.
      if (k == crit_group && k > 0 && !infer(by_minoff, lo_cell, hi_cell)) { break; }
      if (banned_[b] == x) { continue; }
      bool duplicate = false;
      for (std::size_t j = k; j > 0 && mine[j - 1].offset == x && !duplicate; --j) {
        duplicate = twin_[mine[j - 1].block] == twin_[b];
      }
      if (!duplicate) {
        std::size_t const before = trail_.size();
        if (place(b, x)) {
          unplaced_after_place(active, by_minoff, rest, rest_m);
          if (dfs(rest, rest_m)) { return true; }
        }
        undo(before);
        if (aborted_) { break; }
      }
      set(banned_[b], x);
    }
    undo(mark);
    return false;
  }

  // The cells the active blocks live in: [lo, hi).
  [[nodiscard]] std::pair<std::uint32_t, std::uint32_t> cell_range(
      std::vector<std::uint32_t> const& active) const
  {
    std::uint32_t lo_cell = inst_.cells;
    std::uint32_t hi_cell = 0;
    for (auto c : active) {
      lo_cell = std::min(lo_cell, inst_.cell_begin[c]);
      hi_cell = std::max(hi_cell, inst_.cell_end[c]);
    }
    return {lo_cell, hi_cell};
  }

  // Dynamic decomposition: when no unplaced block spans a cell boundary, the blocks before and
  // after it no longer interact, so each part is solved once instead of in every combination.
  // Whether the parts all solve, or nullopt when there is no such boundary.
  std::optional<bool> solve_parts(std::vector<std::uint32_t> const& active,
                                  std::vector<std::uint32_t> const& by_minoff,
                                  std::uint32_t lo_cell, std::uint32_t hi_cell)
  {
    std::vector<std::uint32_t> cuts;
    for (auto s = lo_cell + 1; s < hi_cell; ++s) {
      if (span_[s] == 0) { cuts.push_back(s); }
    }
    if (cuts.empty()) { return std::nullopt; }
    auto part_of = [&](std::uint32_t c) {
      return static_cast<std::size_t>(
          std::upper_bound(cuts.begin(), cuts.end(), inst_.cell_begin[c]) - cuts.begin());
    };
    std::vector<std::vector<std::uint32_t>> parts(cuts.size() + 1), parts_m(cuts.size() + 1);
    for (auto c : active) { parts[part_of(c)].push_back(c); }
    for (auto c : by_minoff) { parts_m[part_of(c)].push_back(c); }
    std::uint64_t const level_at_split = level_;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      set(level_, level_at_split);  // each part keeps its own monotone level
      if (!dfs(parts[k], parts_m[k])) { return false; }
    }
    return true;
  }

  // The (offset, block) pairs to try, in order: the blocks that can go at the level, in rank
  // order, then those above it, in (minoff, rank) order; only offsets below the dominance bound.
  // With crit_order_, the blocks that can fill the critical cell go first: `crit_group` is how
  // many they are.
  [[nodiscard]] std::vector<candidate> candidates(std::vector<std::uint32_t> const& active,
                                                  std::vector<std::uint32_t> const& by_minoff,
                                                  std::size_t& crit_group) const
  {
    // Dominance bound: the two smallest tops an unplaced block could take right now.
    std::uint64_t best1 = none, best2 = none;
    std::uint32_t arg1 = 0;
    for (auto c : active) {
      auto const t = minoff_[c] + inst_.size[c];
      if (t < best1) {
        best2 = best1;
        best1 = t;
        arg1  = c;
      } else if (t < best2) {
        best2 = t;
      }
    }
    std::vector<candidate> mine;
    auto consider = [&](std::uint32_t c) {
      auto const x = std::max(minoff_[c], level_);
      if (x >= (c == arg1 ? best2 : best1) || x == banned_[c]) { return; }
      mine.push_back({x, rank_[c], c});
    };
    for (auto c : active) {
      if (minoff_[c] == level_) { consider(c); }
    }
    for (auto c : by_minoff) {
      if (minoff_[c] > level_) { consider(c); }
    }
    crit_group = 0;
    if (crit_order_) {
      // Fail first: the blocks that can fill the critical cell at its lowest offset go first;
      // when all of them are refuted (and banned), inference sees the cell's waste at once.
      auto const at   = crit_at_;
      auto const cell = crit_cell_;
      crit_group      = static_cast<std::size_t>(
          std::stable_partition(mine.begin(), mine.end(),
                                     [&](candidate const& cand) {
                                  return cand.offset == at &&
                                         inst_.cell_begin[cand.block] <= cell &&
                                         cell < inst_.cell_end[cand.block];
                                }) -
          mine.begin());
      if (largest_first_) {
        std::stable_sort(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(crit_group),
                         [&](candidate const& p, candidate const& q) {
                           return inst_.size[p.block] > inst_.size[q.block];
                         });
      }
    }
    return mine;
  }

  // After a place(): the still unplaced active blocks (`rest`) and the same in (minoff, rank)
  // order (`rest_m`), merging back the blocks the place raised.
  void unplaced_after_place(std::vector<std::uint32_t> const& active,
                            std::vector<std::uint32_t> const& by_minoff,
                            std::vector<std::uint32_t>& rest, std::vector<std::uint32_t>& rest_m)
  {
    // Written through raw pointers: this runs at every node over every active block.
    rest.resize(active.size());
    auto* out = rest.data();
    for (auto c : active) {
      *out = c;
      out += placed_[c] == 0 ? 1 : 0;
    }
    rest.resize(static_cast<std::size_t>(out - rest.data()));
    // The blocks b raised leave their place in the (minoff, rank) order; merge them back.
    std::size_t kept = 0;
    for (auto c : raised_) {
      if (!placed_[c]) { raised_[kept++] = c; }
    }
    raised_.resize(kept);
    auto const by_key = [&](std::uint32_t p, std::uint32_t q) {
      return minoff_[p] != minoff_[q] ? minoff_[p] < minoff_[q] : rank_[p] < rank_[q];
    };
    std::sort(raised_.begin(), raised_.end(), by_key);
    rest_m.resize(by_minoff.size());
    out           = rest_m.data();
    std::size_t j = 0;
    for (auto c : by_minoff) {
      if (placed_[c] || raised_stamp_[c] == stamp_) { continue; }
      while (j < raised_.size() && by_key(raised_[j], c)) { *out++ = raised_[j++]; }
      *out++ = c;
    }
    while (j < raised_.size()) { *out++ = raised_[j++]; }
    rest_m.resize(static_cast<std::size_t>(out - rest_m.data()));
  }

  // Inference: in every cell, the unplaced blocks live there stack up from no lower than the
  // lowest offset any of them can take. Painting each block's still unpainted cells, blocks in
  // order of their offset, gives every cell that lowest offset; a union-find over "next
  // unpainted cell" makes it O(cells + blocks) rather than O(sum of lifetimes). Most blocks sit
  // at the level, so only the few above it need sorting.
  // Kept whole (~65 lines): the search's hot loop; the union-find and the deferred list are local
  // lambdas over the same scratch, and a call per cell would cost in every node.
  bool infer(std::vector<std::uint32_t> const& by_minoff, std::uint32_t lo_cell,
             std::uint32_t hi_cell)
  {
    if (next_cell_.size() < std::size_t{inst_.cells} + 1) {
      next_cell_.resize(std::size_t{inst_.cells} + 1);
      cover_.resize(std::size_t{inst_.cells} + 1);
    }
    auto find = [&](std::uint32_t s) {  // with full path compression
      auto root = s;
      while (next_cell_[root] != root) { root = next_cell_[root]; }
      while (next_cell_[s] != root) { s = std::exchange(next_cell_[s], root); }
      return root;
    };
    // Paints c's unpainted cells with `at`. Every one of them is painted before infer() goes on
    // (or infer() fails), so each points straight to the end of c's range.
    auto paint = [&](std::uint32_t c, std::uint64_t at) {
      auto const end = inst_.cell_end[c];
      auto s         = find(inst_.cell_begin[c]);
      if (s < end && at > cap_) { return false; }
      auto const room = cap_ - at;
      while (s < end) {
        if (remaining_[s] > room) { return false; }
        next_cell_[s]    = end;
        auto const slack = room - remaining_[s];
        if (at < crit_at_ || (at == crit_at_ && slack < crit_slack_)) {
          crit_at_    = at;
          crit_slack_ = slack;
          crit_cell_  = s;
        }
        ++s;
        if (next_cell_[s] != s) { s = find(s); }
      }
      return true;
    };
    crit_at_    = none;
    crit_slack_ = none;
    crit_cell_  = lo_cell;
    if (!paint_level(by_minoff, lo_cell, hi_cell)) { return false; }
    // Lowest offsets: a block at or above the level can go at its minoff, unless it was refuted
    // there (banned). A banned block, or one below the level (it cannot float at the level: that
    // would not be gravity-packed), waits: it must rise onto one of its unplaced time-overlapping
    // blocks, placed later at or above the level and at or above that block's own minoff, so it
    // starts no lower than the lowest top any of those can take (and a banned one above its
    // minoff).
    deferred_.clear();
    for (auto c : by_minoff) {
      auto const m = minoff_[c];
      if (m >= level_ && banned_[c] != m) { continue; }
      std::uint64_t lb = none;
      for (auto e : by_size_[c]) {  // ascending size: stop once no later one can go lower
        if (level_ + inst_.size[e] >= lb) { break; }
        if (placed_[e]) { continue; }
        lb = std::min(lb, std::max(minoff_[e], level_) + inst_.size[e]);
      }
      if (m >= level_) { lb = std::max(lb, m + 1); }
      if (lb == none) { lb = level_ + 1; }  // not reached: such a block is settled at once
      deferred_.push_back({lb, c});
    }
    std::sort(deferred_.begin(), deferred_.end());
    std::size_t d = 0;
    auto flush    = [&](std::uint64_t limit) {
      for (; d < deferred_.size() && deferred_[d].first <= limit; ++d) {
        if (!paint(deferred_[d].second, deferred_[d].first)) { return false; }
      }
      return true;
    };
    for (auto c : by_minoff) {
      auto const v = minoff_[c];
      if (v <= level_ || banned_[c] == v) { continue; }  // the level's blocks are painted
      if (!flush(v)) { return false; }
      if (!paint(c, v)) { return false; }
    }
    return flush(none);
  }

  // First step of infer(): the blocks at the level (most of the active ones) all start there,
  // so their cells are marked by one sweep over a coverage count instead of one by one; each
  // covered cell is checked, and next_cell_ is set up with the covered runs already skipped. The
  // critical cell among them is the tightest one, ties going to the cell that painting the
  // blocks one by one in (minoff, rank) order would reach first.
  bool paint_level(std::vector<std::uint32_t> const& by_minoff, std::uint32_t lo_cell,
                   std::uint32_t hi_cell)
  {
    std::fill(cover_.begin() + lo_cell, cover_.begin() + hi_cell + 1, 0);
    std::size_t at_level    = 0;  // by_minoff[first_level, at_level): minoff == level
    std::size_t first_level = by_minoff.size();
    for (std::size_t k = 0; k < by_minoff.size(); ++k) {  // below the level, at it, above it
      auto const c = by_minoff[k];
      auto const m = minoff_[c];
      if (m > level_) { break; }
      at_level = k + 1;
      if (m < level_) { continue; }
      first_level = std::min(first_level, k);
      if (banned_[c] == m) { continue; }
      ++cover_[inst_.cell_begin[c]];
      --cover_[inst_.cell_end[c]];
    }
    std::int32_t live = 0;
    for (auto s = lo_cell; s < hi_cell; ++s) {
      live += cover_[s];
      cover_[s] = live > 0 ? 1 : 0;
      if (live == 0) { continue; }
      if (level_ + remaining_[s] > cap_) { return false; }
      crit_slack_ = std::min(crit_slack_, cap_ - level_ - remaining_[s]);
    }
    // Right to left: next_cell_ past the covered runs, and cover_[s] := the first tightest
    // covered cell at or after s (hi_cell if none).
    next_cell_[hi_cell] = hi_cell;
    cover_[hi_cell]     = static_cast<std::int32_t>(hi_cell);
    for (auto s = hi_cell; s-- > lo_cell;) {
      bool const covered = cover_[s] != 0;
      next_cell_[s]      = covered ? next_cell_[s + 1] : s;
      bool const tight   = covered && cap_ - level_ - remaining_[s] == crit_slack_;
      cover_[s]          = tight ? static_cast<std::int32_t>(s) : cover_[s + 1];
    }
    if (crit_slack_ == none) { return true; }  // no block at the level
    crit_at_ = level_;
    for (std::size_t k = first_level; k < at_level; ++k) {
      auto const c = by_minoff[k];
      if (banned_[c] == level_) { continue; }
      auto const t = static_cast<std::uint32_t>(cover_[inst_.cell_begin[c]]);
      if (t < inst_.cell_end[c]) {
        crit_cell_ = t;
        break;
      }
    }
    return true;
  }

  std::vector<std::int32_t> cover_;  // scratch of paint_level(): coverage, then covered flags
  static constexpr unsigned memo_bits = 20;
  // Failed sub-states (a lossy direct-mapped table of 128-bit keys); valid for one capacity.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> memo_;
  std::uint64_t memo_cap_{none};
  std::size_t memo_puts_{0};              // insertions since the table last grew
  std::vector<std::uint32_t> next_cell_;  // scratch of infer(): next unpainted cell
  // Scratch of infer(): (lowest offset, block) of the waiting blocks.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> deferred_;
  // The cell infer() found lowest (then tightest): the place the next block most urgently needs.
  std::uint64_t crit_at_{0}, crit_slack_{0};
  std::uint32_t crit_cell_{0};
  bool crit_order_{true};
  bool largest_first_{false};          // the critical cell's blocks by descending size
  std::vector<std::uint32_t> raised_;  // blocks whose minoff the last place() raised
  std::vector<std::uint64_t> raised_stamp_;
  std::uint64_t stamp_{0};
  std::vector<std::uint32_t> twin_;  // blocks equal in size and lifetime share a value

  dsa_instance inst_;
  std::size_t n_;
  std::uint64_t grain_{1};  // gcd of the sizes; sizes, offsets and capacity are kept in grains
  std::vector<std::vector<std::uint32_t>> neighbors_;
  std::vector<std::vector<std::uint32_t>> by_size_;  // neighbors_, by ascending size
  std::vector<std::uint32_t> by_begin_;
  std::vector<std::uint32_t> rank_;

  std::uint64_t cap_{0};
  std::chrono::steady_clock::time_point deadline_{no_deadline};
  std::uint64_t max_nodes_{0};
  std::uint64_t nodes_{0};
  std::uint64_t max_work_{none};
  std::uint64_t work_{0};
  bool aborted_{false};
  bool timed_out_{false};  // aborted_ by the deadline, not by the node budget

  std::uint64_t level_{0};
  std::vector<std::uint64_t> minoff_, placed_, offset_, banned_, remaining_, span_,
      unplaced_neighbors_;
  std::vector<std::pair<std::uint64_t*, std::uint64_t>> trail_;
};

}  // namespace stash::detail
