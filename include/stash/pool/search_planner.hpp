/**
 * @file search_planner.hpp
 * @brief An offset planner that searches for footprints at or near the lower bound, bounded by a
 * budget of search nodes and work, falling back to the best plan found (at worst the greedy one).
 *
 * Steps: (1) split the blocks at the moments where nothing is live into independent sections,
 * stacking below each section the blocks that live over all of it (detail::split_sections:
 * parameters and optimizer state in a training trace; some optimal plan has them there), and
 * plan every section greedily (stash::greedy_planner's plan); (2) for every section whose
 * footprint exceeds the target, run a depth-first search over gravity-packed placements
 * (detail::dsa_search) against that target, restarting it with other orders; sections of the
 * same shape (repeated training iterations) share the solution found for the first. With a
 * capacity the target is the capacity; without one the planner tries the lower bound L first and
 * then bisects between L and the best footprint found, each try with half of the budget left.
 * The budget is a number of search nodes (search_options::node_budget) and of work
 * (search_options::work_budget: nodes weighted by the size of their subproblem), split between
 * targets, sections and restarts by those counts only, so the same input and options give the
 * same plan on a busy or a quiet machine; a wall-clock cap (search_options::time_cap) exists only
 * as an opt-in safety net, and search_stats::time_capped says when it cut the search short. The
 * ideas (canonical solutions, branching on which block goes next, dominance, inference, section
 * decomposition) follow MiniMalloc (Moffitt, ASPLOS 2023); the code is stash's own.
 */
#pragma once

#include <stash/core/units.hpp>
#include <stash/pool/detail/dsa_search.hpp>
#include <stash/pool/detail/sections.hpp>
#include <stash/pool/detail/time_cells.hpp>
#include <stash/pool/greedy_planner.hpp>
#include <stash/pool/offset_planner.hpp>
#include <stash/pool/plan.hpp>
#include <stash/trace/lifetime_interval.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace stash {

/// @brief Default search budget of a stash::search_planner, in search nodes per plan() call
/// (see benchmarks/results/planners.md for how it was chosen).
inline constexpr std::uint64_t default_search_nodes = 200'000;

/// @brief Default work budget of a stash::search_planner per plan() call: each node counts the
/// blocks and time cells of its subproblem, so a node on a 3,000-block trace counts about ten
/// times one on a 300-block MiniMalloc instance, as it costs. About 1 s of search on one core of
/// the machine of benchmarks/results/planners.md, whatever the input's size.
inline constexpr std::uint64_t default_search_work = 100'000'000;

/// @brief Budget and target of a stash::search_planner. The search stops on search nodes and
/// work (both counted by the search, never read from a clock), so a plan depends only on the
/// input and these options, never on the machine or its load.
struct search_options {
  /// @brief Arena size to fit into (bytes). When set, the search stops at the first plan within
  /// it; when unset, it minimises the footprint toward the lower bound.
  std::optional<std::uint64_t> capacity{};
  /// @brief Search nodes allowed for the whole plan() call, over every section, target footprint
  /// and restart; 0 keeps the greedy plan.
  std::uint64_t node_budget{default_search_nodes};
  /// @brief Search work allowed for the whole plan() call (see stash::default_search_work): it
  /// bounds the search's time on large inputs, where nodes are expensive; 0 means no limit
  /// besides the nodes.
  std::uint64_t work_budget{default_search_work};
  /// @brief Safety net on wall-clock time for the whole plan() call (greedy included); zero, the
  /// default, means none. When it stops the search, search_stats::time_capped is set and the
  /// plan may differ from run to run.
  std::chrono::milliseconds time_cap{0};
  /// @brief Sections with more time-overlapping pairs than this keep their greedy plan (the
  /// search's memory and per-node work grow with them).
  std::size_t max_conflict_pairs{4'000'000};
};

/// @brief Per-call statistics of the last search (for benchmarks and diagnostics).
struct search_stats {
  std::uint64_t nodes{0};             ///< search nodes expanded, all attempts and sections
  std::uint64_t node_budget{0};       ///< the budget the call ran with
  std::uint64_t work{0};              ///< search work (see search_options::work_budget)
  std::uint64_t work_budget{0};       ///< the work budget the call ran with (0: none)
  std::size_t sections{0};            ///< independent sections the input split into
  std::size_t attempts{0};            ///< target footprints tried
  std::uint64_t greedy_footprint{0};  ///< footprint of the starting plan (greedy per section)
  std::uint64_t lower_bound{0};       ///< L at the plan's alignment
  bool time_capped{false};  ///< search_options::time_cap stopped the search (not reproducible)
};

/// @brief Bounded search planner (see the file comment).
class search_planner {
 public:
  /// @brief A planner with the given options.
  /// @param options The search's options.
  explicit search_planner(search_options options = {}) : options_(options) {}

  /// @brief The planner's name in plans and reports.
  /// @return "search".
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "search"; }

  /// @brief The options this planner runs with.
  /// @return The options.
  [[nodiscard]] search_options const& options() const noexcept { return options_; }

  /// @brief Plans `intervals` (sizes padded to `alignment`, a power of two).
  /// @param intervals The lifetimes.
  /// @param alignment A power of two.
  /// @return The plan.
  /// @throws stash::logic_error For invalid input (validate_planner_input).
  [[nodiscard]] stash::plan plan(std::span<const lifetime_interval> intervals,
                                 std::uint64_t alignment = cuda_allocation_alignment) const
  {
    search_stats ignored;
    return plan(intervals, alignment, ignored);
  }

  /// @brief As plan(intervals, alignment), also reporting statistics into `stats`.
  /// @param intervals The lifetimes.
  /// @param alignment A power of two.
  /// @param stats Receives the search's statistics.
  /// @return The plan.
  /// @throws stash::logic_error For invalid input (validate_planner_input).
  [[nodiscard]] stash::plan plan(std::span<const lifetime_interval> intervals,
                                 std::uint64_t alignment, search_stats& stats) const
  {
    using clock      = std::chrono::steady_clock;
    auto const start = clock::now();
    validate_planner_input(intervals, alignment, "search_planner");
    STASH_EXPECTS(!options_.capacity || *options_.capacity > 0,
                  "search_planner: capacity must be positive");

    stats             = search_stats{};
    stats.node_budget = options_.node_budget;
    stats.work_budget = options_.work_budget;
    stats.lower_bound = plan_lower_bound(intervals, alignment);
    if (options_.node_budget == 0) {  // the greedy plan only
      stash::plan best       = greedy_planner{}.plan(intervals, alignment);
      best.planner           = std::string(name());
      stats.greedy_footprint = best.footprint;
      best.plan_time = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - start);
      return best;
    }
    stash::plan best;
    best.planner   = std::string(name());
    best.alignment = alignment;
    best.footprint = std::numeric_limits<std::uint64_t>::max();
    search_state st{intervals, alignment, best, stats};
    if (options_.time_cap.count() > 0) { st.deadline = start + options_.time_cap; }
    start_plan(st);
    stats.sections         = st.sections.size();
    stats.greedy_footprint = best.footprint;
    if (options_.capacity) {
      auto const target = align_down(*options_.capacity, alignment);
      if (best.footprint > target && target >= stats.lower_bound) {
        attempt(st, target, budget{options_.node_budget, work_limit()});
      }
    } else {
      bisect(st);
    }
    best.plan_time = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - start);
    return best;
  }

 private:
  // Node limit of the first restart: luby_unit, or luby_nodes_per_block per block of the
  // section if that is more (a run must be able to place every block a few times over); later
  // ones follow the Luby sequence in multiples of it.
  static constexpr std::uint64_t luby_unit            = 1000;
  static constexpr std::uint64_t luby_nodes_per_block = 2;

  // Everything one plan() call works on.
  struct search_state {
    std::span<const lifetime_interval> intervals;
    std::uint64_t alignment;
    stash::plan& best;
    search_stats& stats;
    std::chrono::steady_clock::time_point deadline{detail::dsa_search::no_deadline};
    std::vector<detail::plan_section> sections{};
    // The plan the search improves section by section: the stacked blocks at their offsets and
    // each section's blocks above its base; copied to `best` whenever its footprint is smaller.
    stash::plan work{};
    std::vector<std::uint64_t> section_footprint{};
    std::vector<std::optional<detail::dsa_search>> engines{};
    std::vector<std::vector<std::uint32_t>> members{};  // per section, its non-empty blocks
  };

  // True (and recorded) once the time cap, if any, has passed.
  static bool time_up(search_state& st)
  {
    if (st.deadline != detail::dsa_search::no_deadline &&
        std::chrono::steady_clock::now() >= st.deadline) {
      st.stats.time_capped = true;
    }
    return st.stats.time_capped;
  }

  // Nodes and work a search may use.
  struct budget {
    std::uint64_t nodes;
    std::uint64_t work;
  };

  [[nodiscard]] std::uint64_t work_limit() const noexcept
  {
    return options_.work_budget == 0 ? std::numeric_limits<std::uint64_t>::max()
                                     : options_.work_budget;
  }

  // Without a capacity: tries the lower bound L first, then bisects between the highest target
  // that failed and the best footprint found. Each try gets half of the nodes and of the work
  // left (rounded up), so the split depends on counts only.
  void bisect(search_state& st) const
  {
    std::uint64_t lo = st.stats.lower_bound;  // nothing below lo exists or was found in budget
    bool first       = true;
    while (lo < st.best.footprint && !st.stats.time_capped) {
      std::uint64_t const nodes =
          options_.node_budget - std::min(options_.node_budget, st.stats.nodes);
      std::uint64_t const work = work_limit() - std::min(work_limit(), st.stats.work);
      if (nodes == 0 || work == 0) { break; }
      std::uint64_t const target =
          first ? lo : align_down(lo + (st.best.footprint - lo) / 2, st.alignment);
      if (!attempt(st, target, budget{nodes - nodes / 2, work - work / 2})) {
        lo = target + st.alignment;
      }
      first = false;
    }
  }

  // Tries to bring every section to footprint <= target within `allowed` nodes and work (shared
  // by the sections in turn); commits the new offsets only if all succeed.
  bool attempt(search_state& st, std::uint64_t target, budget allowed) const
  {
    ++st.stats.attempts;
    std::vector<std::pair<std::size_t, std::vector<std::uint64_t>>> solved;
    // (section of the shape, target above its base) -> index into `solved`
    std::map<std::pair<std::size_t, std::uint64_t>, std::size_t> by_shape;
    budget spent{0, 0};
    for (std::size_t s = 0; s < st.sections.size(); ++s) {
      if (st.section_footprint[s] <= target) { continue; }
      auto const base = st.sections[s].base;
      if (base > target) { return false; }
      auto const key = std::pair(st.sections[s].same_as, target - base);
      if (auto const it = by_shape.find(key); it != by_shape.end()) {
        auto units = solved[it->second].second;  // the same shape, already solved: no search
        solved.emplace_back(s, std::move(units));
        continue;
      }
      if (!st.engines[s] &&
          !build_engine(st.intervals, st.alignment, st.members[s], st.engines[s])) {
        return false;
      }
      auto units = solve_section(st, *st.engines[s], target - base, allowed, spent);
      if (!units) { return false; }
      by_shape.emplace(key, solved.size());
      solved.emplace_back(s, std::move(*units));
    }
    for (auto& [s, units] : solved) {
      // Sections of one shape list their blocks in the same order, so units[k] is for the k-th.
      auto const base  = st.sections[s].base;
      std::uint64_t fp = base;
      for (std::size_t k = 0; k < st.members[s].size(); ++k) {
        auto const i       = st.members[s][k];
        st.work.offsets[i] = base + units[k] * st.alignment;
        fp = std::max(fp, st.work.offsets[i] + padded_size(st.intervals[i].bytes, st.alignment));
      }
      st.section_footprint[s] = fp;
    }
    commit(st);
    return true;
  }

  // The work plan's footprint from its sections; copied into `best` when smaller.
  static void commit(search_state& st)
  {
    st.work.footprint = 0;
    for (auto fp : st.section_footprint) { st.work.footprint = std::max(st.work.footprint, fp); }
    if (st.work.footprint < st.best.footprint) {
      st.best.offsets   = st.work.offsets;
      st.best.footprint = st.work.footprint;
    }
  }

  // The search's starting point, the greedy planner's plan: the input split into sections, the
  // blocks live over a whole section stacked below it, and each section planned greedily.
  static void start_plan(search_state& st)
  {
    auto split      = detail::split_sections(st.intervals, st.alignment);
    st.sections     = std::move(split.sections);
    st.work.offsets = std::move(split.offsets);
    detail::greedy_sections(st.intervals, st.alignment, st.sections, st.work.offsets,
                            st.section_footprint);
    auto const n = st.sections.size();
    st.engines.resize(n);
    st.members.assign(n, {});
    for (std::size_t s = 0; s < n; ++s) {
      for (auto i : st.sections[s].blocks) {
        if (st.intervals[i].bytes != 0) { st.members[s].push_back(i); }
      }
    }
    commit(st);
  }

  // Portfolio with restarts: three static orders x {critical cell first, plain offset order,
  // critical cell first with its largest blocks first}, node limits following the Luby sequence
  // (unit x 1 1 2 1 1 2 4 ...), orders randomly perturbed after the first nine. The search's
  // running time is heavy-tailed in the order, so many short runs beat one long one; the engine
  // remembers failed sub-states across the runs. (The unit was picked on the MiniMalloc
  // instances, where each hard one is solved by one short run of the sequence, and checked on
  // the training traces; see benchmarks/results/planners.md for how sensitive that is.) Runs
  // until `spent` reaches `allowed`; returns the offsets in units of the alignment, or nothing.
  std::optional<std::vector<std::uint64_t>> solve_section(search_state& st,
                                                          detail::dsa_search& engine,
                                                          std::uint64_t target, budget allowed,
                                                          budget& spent) const
  {
    constexpr detail::dsa_order orders[] = {detail::dsa_order::twa, detail::dsa_order::wat,
                                            detail::dsa_order::taw};
    std::vector<std::uint64_t> units;
    for (std::uint64_t run = 0;
         spent.nodes < allowed.nodes && spent.work < allowed.work && !time_up(st); ++run) {
      std::uint64_t const unit  = std::max(luby_unit, luby_nodes_per_block * engine.blocks());
      std::uint64_t const limit = std::min(unit * luby(run + 1), allowed.nodes - spent.nodes);
      engine.limit_work(allowed.work - spent.work);
      auto const status =
          engine.solve(target / st.alignment, orders[run % 3], limit, units, run < 9 ? 0 : run,
                       /*critical_first=*/(run / 3) % 3 != 1,
                       /*largest_first=*/(run / 3) % 3 == 2, st.deadline);
      spent.nodes += engine.nodes();
      spent.work += engine.work();
      st.stats.nodes += engine.nodes();
      st.stats.work += engine.work();
      if (status == detail::dsa_status::found) { return units; }
      // The search is complete, so an exhausted run proves the target unreachable.
      if (status == detail::dsa_status::exhausted) { break; }
      if (status == detail::dsa_status::deadline) { st.stats.time_capped = true; }
    }
    return std::nullopt;
  }

  // The Luby sequence 1 1 2 1 1 2 4 1 1 2 1 1 2 4 8 ... (i >= 1): restart lengths that waste
  // at most a logarithmic factor against the best fixed length, whatever the run-time law.
  static std::uint64_t luby(std::uint64_t i)
  {
    for (;;) {
      std::uint64_t k = 1;
      while (k < 63 && (std::uint64_t{1} << k) - 1 < i) { ++k; }
      if ((std::uint64_t{1} << k) - 1 == i) { return std::uint64_t{1} << (k - 1); }
      i -= (std::uint64_t{1} << (k - 1)) - 1;
    }
  }

  bool build_engine(std::span<const lifetime_interval> intervals, std::uint64_t alignment,
                    std::vector<std::uint32_t> const& members,
                    std::optional<detail::dsa_search>& engine) const
  {
    auto cells = detail::make_time_cells(intervals, members, /*begins_only=*/true);
    detail::dsa_instance inst;
    inst.size.reserve(members.size());
    for (auto i : members) {
      inst.size.push_back(padded_size(intervals[i].bytes, alignment) / alignment);
    }
    inst.cell_begin = std::move(cells.cell_begin);
    inst.cell_end   = std::move(cells.cell_end);
    inst.cells      = cells.cells;
    // Count conflicts before building the graph, so a dense section cannot exhaust memory.
    {
      std::vector<std::uint32_t> begins(inst.cell_begin);
      std::sort(begins.begin(), begins.end());
      std::size_t pairs = 0;
      for (std::size_t k = 0; k < members.size(); ++k) {
        auto const below = static_cast<std::size_t>(
            std::lower_bound(begins.begin(), begins.end(), inst.cell_end[k]) - begins.begin());
        pairs += below;  // blocks starting before k ends: an upper bound on 2x pairs + n
        if (pairs > 2 * options_.max_conflict_pairs + members.size()) { return false; }
      }
    }
    engine.emplace(std::move(inst));
    return true;
  }

  search_options options_;
};

static_assert(offset_planner<search_planner>);

}  // namespace stash
