/**
 * @file lifetime_arena.hpp
 * @brief The lifetime-aware arena: record one iteration's allocations, plan their offsets
 * offline, and replay later iterations from one pre-allocated block in O(1) per allocation.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/misuse.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/greedy_planner.hpp>
#include <stash/pool/offset_planner.hpp>
#include <stash/pool/plan.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_resource.hpp>
#include <stash/pool/stream_order.hpp>
#include <stash/trace/lifetime_interval.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stash {

/// @brief How a lifetime_arena matches an allocation to the slot planned for it.
enum class arena_sizes : std::uint8_t {
  /// Only at the recorded size: an allocation of another size goes to the fallback pool and
  /// counts as a deviation (the default; SmartPool's scheme).
  exact,
  /// At any size up to the slot's: iterations whose sequences differ only in sizes (a variable
  /// sequence length, a smaller last batch) form one family, and each slot is planned at the
  /// largest size the family has shown for it (rounded up to a size class, see
  /// lifetime_arena_options::size_classes), so every member replays from one plan. An
  /// allocation larger than its slot falls back; once settle_iterations iterations in a row of
  /// the same sequence did so, the family is planned anew at the new largest sizes.
  largest,
};

/// @brief Tuning of a lifetime_arena.
struct lifetime_arena_options {
  std::size_t budget =
      std::numeric_limits<std::size_t>::max();  ///< cap on reserved bytes (arena + fallback)
  std::uint64_t alignment = cuda_allocation_alignment;  ///< of every planned offset
  /// Consecutive iterations with the same deviating allocation sequence before re-planning.
  unsigned settle_iterations = 2;
  caching_pool_options fallback{};  ///< the online pool that serves what the plan does not
  /// How allocations match their planned slots when sizes change between iterations.
  arena_sizes sizes = arena_sizes::exact;
  /// With arena_sizes::largest: iterations recorded (served by the fallback pool) before the
  /// first plan; the largest size of each slot over those of them with the same sequence as the
  /// last one is planned. 1 plans after the first iteration, as with exact sizes.
  unsigned record_iterations = 1;
  /// With arena_sizes::largest: size classes per doubling that a slot's planned size is rounded
  /// up to (4: 1, 1.25, 1.5, 1.75 times a power of two; at most 1/4 of a slot wasted), so that
  /// small growth later still fits; 0 plans the largest size seen exactly.
  unsigned size_classes = 0;
};

/// @brief Where a lifetime_arena stands.
enum class arena_state : std::uint8_t {
  recording,  ///< no plan yet: everything comes from the fallback pool while the sequence is
              ///< recorded
  replaying,  ///< a plan is in force: allocations matching it come from the arena
};

/// @brief A pool that learns a training iteration and replays it (SmartPool's scheme).
///
/// Use: `begin_iteration()`, the iteration's allocate/deallocate calls, `end_iteration()`. The
/// first iteration is recorded (served by the fallback caching_pool); at its end the lifetimes of
/// the allocations made and freed within it are planned by `Planner` and one arena of the plan's
/// footprint is taken from the upstream. From then on, allocation number k of an iteration gets
/// `arena + offset[k]` when its size matches the recording: a lookup, no search.
///
/// It never hands out overlapping memory, whatever the program does: an arena block that is
/// still live past its recorded end (or past its iteration) is "overdue", and an allocation whose
/// planned range would touch an overdue block goes to the fallback pool instead. Allocations that
/// deviate from the recording (another size, extra allocations, another stream) also go to the
/// fallback pool and are counted in `stats().fallbacks`; once the same deviating sequence has been
/// seen `settle_iterations` times in a row, it is planned anew (at an iteration boundary with no
/// arena block live). Storages that outlive the recorded iteration (parameters, optimizer state)
/// are persistent: they stay where the fallback pool placed them, once.
///
/// The arena serves the stream it was recorded on (the first one allocated on in the recorded
/// iteration); allocations on other streams are not numbered and are served by the fallback pool,
/// which orders cross-stream reuse with `Order`. An arena block freed on another stream (e.g. by
/// an offload manager once its D2H copy is queued) is fenced: when its range is planned for a
/// later allocation, the arena's stream is made to wait for the freeing stream's work on the
/// device (`Order::wait`, counted in `fence_waits()`), so the plan's footprint holds; an `Order`
/// that cannot wait sends that allocation to the fallback pool while the fence is pending. Such
/// timing-caused fallbacks do not re-plan: only a changed sequence does.
///
/// Changing shapes: with `lifetime_arena_options::sizes = arena_sizes::largest`, an iteration
/// whose allocations and frees come in the same order as the recorded one but with other sizes
/// is the same sequence; each slot is planned at the largest size seen for it (over the first
/// `record_iterations` iterations, and grown when a later one needs more), so a variable-length
/// step replays from the arena without fallbacks. The price is the footprint of the largest
/// shapes, also in iterations with smaller ones.
///
/// Alignment: the plan's offsets, and the arena's base, are multiples of the largest alignment a
/// planned allocation asked for (at least `lifetime_arena_options::alignment`); a replayed
/// allocation asking for more than the plan's alignment deviates (fallback pool, then re-plan).
/// Freeing never throws: a wrong free goes to the misuse handler (core/misuse.hpp). Not thread
/// safe.
template <upstream_resource Upstream, offset_planner Planner = greedy_planner,
          stream_order Order = default_stream_order_t<Upstream>>
class lifetime_arena : public pool_resource<lifetime_arena<Upstream, Planner, Order>> {
 public:
  /// @brief Whether the host may touch the memory.
  static constexpr bool is_host_accessible = Upstream::is_host_accessible;
  /// @brief Whether device code may touch the memory.
  static constexpr bool is_device_accessible = Upstream::is_device_accessible;
  STASH_POOL_PROPERTIES(lifetime_arena, Upstream::is_device_accessible,
                        Upstream::is_host_accessible)

  /// @brief An arena over `upstream` (the fallback pool takes its segments from a copy of it).
  /// @param upstream Where the arena block and the fallback's segments come from.
  /// @param options Budget, alignment, matching and fallback options.
  /// @param planner Plans each recorded iteration.
  /// @param order The stream order's state.
  explicit lifetime_arena(Upstream upstream = Upstream{}, lifetime_arena_options options = {},
                          Planner planner = Planner{}, Order order = Order{})
      : upstream_(upstream),
        options_(options),
        planner_(std::move(planner)),
        order_(order),
        fallback_(std::move(upstream), with_budget(options.fallback, options.budget),
                  std::move(order))
  {
    STASH_EXPECTS(is_pow2(options_.alignment), "lifetime_arena: alignment must be a power of two");
  }

  lifetime_arena(lifetime_arena const&)            = delete;
  lifetime_arena& operator=(lifetime_arena const&) = delete;

  /// @brief Returns the arena to the upstream. Never throws.
  ~lifetime_arena()
  {
    for (auto& f : fenced_) { order_.release(f.marker.value); }
    release_arena();
    for (auto& r : retired_) {
      for (auto& m : r.markers) { order_.release(m.value); }
      upstream_.deallocate(r.ptr, r.bytes, cuda_allocation_alignment);
    }
  }

  /// @brief Starts an iteration: allocation numbering restarts at 0.
  void begin_iteration()
  {
    STASH_EXPECTS(!in_iteration_, "lifetime_arena::begin_iteration: iteration already begun");
    reap_retired();
    in_iteration_ = true;
    index_        = 0;
    time_         = 0;
    current_.clear();
    next_recorded_end_ = 0;
    deviated_          = false;
  }

  /// @brief Says that the iteration in progress is not the one to plan: its caller allocates
  /// otherwise from the next iteration on (stash::allocator starting to replay a schedule that
  /// swaps or recomputes: prefetches and rematerialisations come on top, offloads free early).
  /// end_iteration() then learns nothing from it: it gives the arena back (no block of it live) and
  /// records the next iteration, served by the fallback pool, to plan at its end. Without this,
  /// the arena planned from this iteration would be held beside the fallback's blocks for the
  /// settle_iterations deviating iterations before a re-plan. With an arena block still live, only
  /// the deviations counted so far are forgotten (the usual re-plan rule then applies).
  void relearn() noexcept { relearn_ = true; }

  /// @brief Ends an iteration; plans (or re-plans) from it when that is due.
  void end_iteration()
  {
    STASH_EXPECTS(in_iteration_, "lifetime_arena::end_iteration: no iteration begun");
    in_iteration_ = false;
    ++iterations_;
    // Blocks still live now outlive their iteration: from here on they are overdue.
    for (auto& [ptr, live] : live_) {
      if (live.in_arena) { overdue_.push_back({ptr, live.offset, live.size}); }
      live.index = no_index;
    }
    if (std::exchange(relearn_, false)) {
      forget_sequence();
      return;
    }
    if (state_ == arena_state::recording) {
      adopt_recording();
      if (recorded_family_ >= options_.record_iterations) { try_plan(); }
      return;
    }
    // Fallbacks with the recorded sequence unchanged (or, with arena_sizes::largest, every size
    // within its slot) come from timing (blocks still fenced or overdue), which a new plan of the
    // same sequence would not fix.
    if (!deviated_ || fits(current_, recorded_)) {
      pending_.clear();
      settled_ = 0;
      return;
    }
    // The iteration deviated: re-plan once the same sequence has repeated long enough (with
    // arena_sizes::largest, at the largest sizes seen, the planned ones included).
    if (!pending_.empty() && same_sequence(pending_, current_)) {
      ++settled_;
      grow_to(pending_, current_);
    } else {
      pending_ = current_;
      round_to_classes(pending_);
      if (options_.sizes == arena_sizes::largest && same_sequence(recorded_, current_)) {
        grow_to(pending_, recorded_);
      }
      settled_ = 1;
    }
    if (settled_ >= options_.settle_iterations && overdue_.empty() && arena_live_ == 0) {
      recorded_ = std::move(pending_);
      pending_.clear();
      settled_         = 0;
      recorded_family_ = std::max(options_.record_iterations, 1U);
      retire_arena();
      state_ = arena_state::recording;
      try_plan();
      ++replans_;
    }
  }

  /// @brief Allocation number k of the iteration: from the arena when it matches the plan,
  /// otherwise from the fallback pool.
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096.
  /// @param stream The stream the memory is used on.
  /// @return The memory, or nullptr for 0 bytes.
  /// @throws stash::out_of_memory When the fallback pool cannot serve it within the budget.
  /// @throws stash::logic_error As caching_pool::do_allocate (the fallback pool while capturing).
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    if (bytes == 0) { return nullptr; }
    if (!checked_align_up(
            bytes, std::max<std::uint64_t>(options_.alignment, options_.fallback.rounding))) {
      throw_oom(bytes, std::nullopt);  // no block that large exists: before anything is counted
    }
    // Only the arena's stream is numbered (the first stream allocated on while recording), so
    // allocations on side streams (e.g. an offload manager's prefetches) do not shift the sequence.
    if (in_iteration_ && state_ == arena_state::recording && current_.empty()) { stream_ = stream; }
    std::size_t const k   = in_iteration_ && stream == stream_ ? index_++ : no_index;
    std::uint64_t const t = time_++;
    void* p               = nullptr;
    bool in_arena         = false;
    std::uint64_t off     = 0;
    // A block freed on another stream is fenced, without allocating, in the free that cannot throw.
    fenced_.reserve(fenced_.size() + arena_live_ + 1);
    if (k != no_index && state_ == arena_state::replaying && stream == stream_ && !fence_failed_ &&
        k < recorded_.size() && fits_slot(bytes, alignment, recorded_[k].bytes) &&
        recorded_[k].planned) {
      mark_overdue_until(recorded_[k].begin);
      off = plan_.offsets[recorded_[k].slot];
      if (!touches_overdue(off, padded(bytes)) && clear_fences(off, padded(bytes), stream)) {
        p        = arena_ + off;
        in_arena = true;
      }
    }
    if (p == nullptr) {
      p = fallback_allocate(bytes, alignment, stream);  // may throw: nothing below has happened yet
      bool const expected_persistent = k < recorded_.size() &&
                                       fits_slot(bytes, alignment, recorded_[k].bytes) &&
                                       recorded_[k].end == never;
      if (state_ == arena_state::replaying && k != no_index && !expected_persistent) {
        ++fallbacks_;
        deviated_ = true;
      }
    }
    if (k != no_index) {
      current_.push_back(recorded_alloc{bytes, t, never, 0, false, stream, p, alignment});
    }
    live_.emplace(p, live_block{k, bytes, in_arena, off, padded(bytes), alignment});
    if (in_arena) { ++arena_live_; }
    in_use_ += padded(bytes);
    peak_in_use_   = std::max(peak_in_use_, in_use_);
    peak_reserved_ = std::max(peak_reserved_, arena_raw_bytes_ + fallback_.stats().reserved_bytes);
    ++allocations_;
    return p;
  }

  /// @brief Frees memory from allocate(). Never throws: an unknown pointer, another size or
  /// another alignment than allocated goes to the misuse handler (core/misuse.hpp) and changes
  /// nothing.
  /// @param p Memory from this arena.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  /// @param stream The stream of its last use.
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, stream_ref stream) noexcept
  {
    if (p == nullptr && bytes == 0) { return; }
    auto it = live_.find(p);
    if (!detail::free_matches("lifetime_arena", p, bytes, alignment,
                              it == live_.end() ? nullptr : &it->second, &live_block::bytes)) {
      return;
    }
    live_block const block = it->second;
    if (!block.in_arena) { fallback_.deallocate_async(p, bytes, alignment, stream); }
    live_.erase(it);
    std::uint64_t const t = time_++;
    if (block.index != no_index && block.index < current_.size()) { current_[block.index].end = t; }
    if (block.in_arena) {
      --arena_live_;
      std::erase_if(overdue_, [&](overdue_block const& o) { return o.ptr == p; });
      // Freed on another stream, the block may still be in use there: fence it off until that
      // stream's work queued so far has passed.
      if (stream != stream_) { fence(p, block, stream); }
    }
    in_use_ -= padded(bytes);
  }

  /// @brief Figures for the arena and its fallback pool together.
  /// @return The figures.
  [[nodiscard]] pool_stats stats() const
  {
    pool_stats const f = fallback_.stats();
    pool_stats s;
    s.in_use_bytes        = in_use_;
    s.peak_in_use_bytes   = peak_in_use_;
    s.reserved_bytes      = arena_raw_bytes_ + f.reserved_bytes;
    s.peak_reserved_bytes = peak_reserved_;
    s.largest_free_bytes  = f.largest_free_bytes;
    s.budget_bytes        = options_.budget;
    s.allocations         = allocations_;
    s.fallbacks           = fallbacks_;
    return s;
  }

  /// @brief recording or replaying.
  /// @return The state.
  [[nodiscard]] arena_state state() const noexcept { return state_; }
  /// @brief The plan in force (empty while recording).
  /// @return The plan.
  [[nodiscard]] stash::plan const& current_plan() const noexcept { return plan_; }
  /// @brief Bytes of the arena block (the plan's footprint).
  /// @return The bytes.
  [[nodiscard]] std::size_t arena_bytes() const noexcept { return arena_bytes_; }
  /// @brief How many times a deviating pattern was planned anew.
  /// @return The count.
  [[nodiscard]] std::uint64_t replans() const noexcept { return replans_; }
  /// @brief How many times the arena's stream was made to wait for a block freed on another
  /// stream (instead of taking other memory).
  /// @return The count.
  [[nodiscard]] std::uint64_t fence_waits() const noexcept { return fence_waits_; }
  /// @brief Why the last planning attempt left the arena recording ("" when it succeeded).
  /// @return The reason, or an empty string.
  [[nodiscard]] std::string const& plan_failure() const noexcept { return plan_failure_; }
  /// @brief The fallback pool.
  /// @return The fallback pool.
  [[nodiscard]] caching_pool<Upstream, Order> const& fallback() const noexcept { return fallback_; }

 private:
  static constexpr std::size_t no_index = std::numeric_limits<std::size_t>::max();
  static constexpr std::uint64_t never  = std::numeric_limits<std::uint64_t>::max();

  struct recorded_alloc {
    std::size_t bytes;
    std::uint64_t begin;  // event time within the iteration
    std::uint64_t end;    // never: outlived the iteration (persistent)
    std::size_t slot;     // index into the planned intervals
    bool planned;
    stream_ref stream;
    void* ptr;  // where it went (running iteration only)
    std::size_t alignment;
  };
  struct live_block {
    std::size_t index;  // allocation number in its iteration (no_index outside / after it)
    std::size_t bytes;
    bool in_arena;
    std::uint64_t offset;
    std::uint64_t size;  // padded
    std::size_t alignment;
  };
  struct overdue_block {
    void* ptr;
    std::uint64_t offset;
    std::uint64_t size;
  };
  struct fenced_block {
    void* ptr;
    std::uint64_t offset;
    std::uint64_t size;
    tracked_marker<Order> marker;  // recorded while capturing: never queried, never passes
  };
  struct retired_arena {
    void* ptr;
    std::size_t bytes;
    std::vector<tracked_marker<Order>> markers;  // the arena's stream, and streams still fenced
  };

  static caching_pool_options with_budget(caching_pool_options o, std::size_t budget)
  {
    o.budget = std::min(o.budget, budget);
    return o;
  }

  [[nodiscard]] std::uint64_t padded(std::size_t bytes) const noexcept
  {
    return align_up(bytes, options_.alignment);
  }

  // The same sequence: allocations and frees in the same order, and (with exact sizes) of the
  // same sizes.
  [[nodiscard]] bool same_sequence(std::vector<recorded_alloc> const& a,
                                   std::vector<recorded_alloc> const& b) const
  {
    bool const sizes = options_.sizes == arena_sizes::exact;
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [&](auto const& x, auto const& y) {
             return (!sizes || x.bytes == y.bytes) && x.begin == y.begin && x.end == y.end;
           });
  }

  // Whether an allocation of `bytes` at `alignment` may take a slot planned for `slot` bytes (the
  // plan's offsets and the arena's base are multiples of the plan's alignment).
  [[nodiscard]] bool fits_slot(std::size_t bytes, std::size_t alignment,
                               std::size_t slot) const noexcept
  {
    bool const size_fits = options_.sizes == arena_sizes::exact ? bytes == slot : bytes <= slot;
    return size_fits && alignment <= plan_.alignment;
  }

  // Whether every allocation of `run` fits its slot in `plan` (the same sequence).
  [[nodiscard]] bool fits(std::vector<recorded_alloc> const& run,
                          std::vector<recorded_alloc> const& plan) const
  {
    if (!same_sequence(run, plan)) { return false; }
    for (std::size_t k = 0; k < run.size(); ++k) {
      if (!fits_slot(run[k].bytes, run[k].alignment, plan[k].bytes)) { return false; }
    }
    return true;
  }

  // arena_sizes::largest: `into` (the same sequence as `from`) takes the larger size of each
  // slot, rounded up to its size class.
  void grow_to(std::vector<recorded_alloc>& into, std::vector<recorded_alloc> const& from) const
  {
    if (options_.sizes != arena_sizes::largest) { return; }
    for (std::size_t k = 0; k < into.size() && k < from.size(); ++k) {
      into[k].bytes = std::max(into[k].bytes, from[k].bytes);
    }
    round_to_classes(into);
  }

  // arena_sizes::largest with size classes: every size rounded up to its class.
  void round_to_classes(std::vector<recorded_alloc>& seq) const
  {
    if (options_.sizes != arena_sizes::largest || options_.size_classes == 0) { return; }
    for (auto& r : seq) { r.bytes = size_class(r.bytes, options_.size_classes); }
  }

  // The smallest size of the form 2^k (1 + j / classes), 0 <= j < classes, that holds `bytes`.
  static std::size_t size_class(std::size_t bytes, unsigned classes) noexcept
  {
    if (bytes <= classes) { return bytes; }
    std::size_t pow2 = 1;
    while (pow2 <= bytes / 2) { pow2 *= 2; }  // the largest power of two <= bytes
    std::size_t const step = std::max<std::size_t>(pow2 / classes, 1);
    return (bytes + step - 1) / step * step;
  }

  // Fences an arena block freed on another stream (capacity reserved when it was handed out).
  // When no marker can be recorded the range cannot be fenced: the arena stops serving (every
  // allocation goes to the fallback pool) rather than hand it out early.
  void fence(void* p, live_block const& block, stream_ref stream) noexcept
  {
    try {
      fenced_.push_back({p, block.offset, block.size, record_tracked(order_, stream)});
    } catch (std::exception const& e) {
      std::fprintf(stderr,
                   "stash: lifetime_arena: a block freed on another stream cannot be fenced (%s); "
                   "the arena serves nothing more\n",
                   e.what());
      fence_failed_ = true;
    }
  }

  // The fallback's own figures leave out the arena: report the arena's.
  void* fallback_allocate(std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    try {
      return fallback_.allocate_async(bytes, alignment, stream);
    } catch (out_of_memory const& e) {
      throw_oom(bytes, e.largest_free_bytes());
    }
  }

  [[noreturn]] void throw_oom(std::size_t bytes, std::optional<std::size_t> largest_free) const
  {
    bool const has_budget = options_.budget != std::numeric_limits<std::size_t>::max();
    throw out_of_memory(
        "lifetime_arena (fallback pool, next to a " + std::to_string(arena_bytes_) + " B arena)",
        bytes, has_budget ? std::optional<std::size_t>(options_.budget) : std::nullopt, in_use_,
        largest_free);
  }

  // The iteration just recorded becomes the one to plan; with arena_sizes::largest, one of the
  // same sequence as the last recorded joins its family (sizes grow to the largest seen).
  void adopt_recording()
  {
    if (options_.sizes == arena_sizes::largest && recorded_family_ > 0 &&
        same_sequence(recorded_, current_)) {
      auto grown = current_;
      grow_to(grown, recorded_);
      recorded_ = std::move(grown);
      ++recorded_family_;
      return;
    }
    recorded_ = current_;
    round_to_classes(recorded_);
    recorded_family_ = 1;
  }

  // Plans recorded_ and takes the arena; on failure stays recording (the fallback serves all).
  void try_plan()
  {
    std::vector<lifetime_interval> intervals;
    for (std::size_t k = 0; k < recorded_.size(); ++k) {
      auto& r   = recorded_[k];
      r.planned = r.end != never && r.stream == stream_;
      if (r.planned) {
        r.slot = intervals.size();
        intervals.push_back(lifetime_interval{k, r.begin, r.end, r.bytes});
      }
    }
    // Planned recorded ends in time order, to find overdue blocks in O(1) amortised.
    ends_by_time_.clear();
    for (std::size_t k = 0; k < recorded_.size(); ++k) {
      if (recorded_[k].planned) { ends_by_time_.push_back({recorded_[k].end, k}); }
    }
    std::sort(ends_by_time_.begin(), ends_by_time_.end());
    if (intervals.empty()) {
      plan_failure_ = "the recorded iteration freed nothing it allocated";
      return;
    }
    // Planned offsets honour the largest alignment asked of a planned block (one alignment per
    // plan: the planners pad every block to it).
    std::uint64_t alignment = options_.alignment;
    for (auto const& r : recorded_) {
      if (r.planned) { alignment = std::max<std::uint64_t>(alignment, r.alignment); }
    }
    plan_                      = planner_.plan(intervals, alignment);
    std::size_t const base_pad = plan_.alignment > cuda_allocation_alignment
                                     ? plan_.alignment - cuda_allocation_alignment
                                     : 0;
    // What the fallback cached while recording is not needed any more: give it back before the
    // arena is taken, so the two never add up.
    fallback_.release_cached();
    auto const reserved = fallback_.stats().reserved_bytes;
    if (plan_.footprint > options_.budget - std::min(options_.budget, base_pad) ||
        reserved > options_.budget - plan_.footprint - base_pad) {
      plan_failure_ = "plan footprint " + std::to_string(plan_.footprint) +
                      " B does not fit the budget next to the fallback pool's " +
                      std::to_string(reserved) + " B";
      plan_ = {};
      return;
    }
    try {
      arena_raw_ = static_cast<char*>(
          upstream_.allocate(plan_.footprint + base_pad, cuda_allocation_alignment));
      arena_raw_bytes_ = plan_.footprint + base_pad;
      arena_ =
          arena_raw_ + (align_up(reinterpret_cast<std::uintptr_t>(arena_raw_), plan_.alignment) -
                        reinterpret_cast<std::uintptr_t>(arena_raw_));
    } catch (out_of_memory const& e) {
      plan_failure_ = std::string("the upstream cannot hold the arena: ") + e.what();
      plan_         = {};
      return;
    }
    arena_bytes_ = plan_.footprint;
    fallback_.set_budget(options_.budget - arena_raw_bytes_);
    peak_reserved_ = std::max(peak_reserved_, arena_raw_bytes_ + reserved);
    plan_failure_.clear();
    state_ = arena_state::replaying;
  }

  // relearn(): the sequences seen so far will not come back. With no arena block live the plan
  // goes (the arena is retired) and the next iteration is recorded afresh.
  void forget_sequence()
  {
    pending_.clear();
    settled_ = 0;
    if (!overdue_.empty() || arena_live_ != 0) { return; }
    retire_arena();
    plan_ = {};
    recorded_.clear();
    ends_by_time_.clear();
    recorded_family_ = 0;
    state_           = arena_state::recording;
  }

  // Work queued on the old arena (on its stream, or on streams that freed fenced blocks) may
  // still run: it goes back to the upstream only once that work has passed.
  void retire_arena()
  {
    if (arena_ == nullptr) { return; }
    retired_arena r{arena_raw_, arena_raw_bytes_, {}};
    r.markers.push_back(record_tracked(order_, stream_));
    for (auto& f : fenced_) { r.markers.push_back(std::move(f.marker)); }
    fenced_.clear();
    retired_.push_back(std::move(r));
    arena_           = nullptr;
    arena_raw_       = nullptr;
    arena_bytes_     = 0;
    arena_raw_bytes_ = 0;
    fallback_.set_budget(std::min(options_.fallback.budget, options_.budget));
  }

  void release_arena() noexcept
  {
    if (arena_ != nullptr) {
      upstream_.deallocate(arena_raw_, arena_raw_bytes_, cuda_allocation_alignment);
      arena_           = nullptr;
      arena_raw_       = nullptr;
      arena_bytes_     = 0;
      arena_raw_bytes_ = 0;
      fallback_.set_budget(std::min(options_.fallback.budget, options_.budget));
    }
  }

  // Every planned block whose recorded end is at or before `t` and that is still live is overdue.
  void mark_overdue_until(std::uint64_t t)
  {
    while (next_recorded_end_ < ends_by_time_.size() &&
           ends_by_time_[next_recorded_end_].first <= t) {
      std::size_t const k = ends_by_time_[next_recorded_end_++].second;
      if (k < current_.size() && current_[k].end == never) {
        // Allocation k of this iteration is still live past its recorded end.
        auto const live = live_.find(current_[k].ptr);
        if (live != live_.end() && live->second.in_arena) {
          overdue_.push_back({live->first, live->second.offset, live->second.size});
        }
      }
    }
  }

  [[nodiscard]] bool touches_overdue(std::uint64_t offset, std::uint64_t size) const
  {
    return std::any_of(overdue_.begin(), overdue_.end(), [&](overdue_block const& o) {
      return offset < o.offset + o.size && o.offset < offset + size;
    });
  }

  // Whether [offset, offset + size) may be handed to `stream` now. Fences that passed are dropped.
  // A fence still pending is waited for on the device when the order can do that (the range is
  // then free for the arena's stream, so the fence goes); otherwise the range must not be used.
  [[nodiscard]] bool clear_fences(std::uint64_t offset, std::uint64_t size, stream_ref stream)
  {
    auto const hits = [&](fenced_block const& f) {
      return offset < f.offset + f.size && f.offset < offset + size;
    };
    if constexpr (!stream_order_with_wait<Order>) {
      std::erase_if(fenced_, [&](fenced_block& f) {
        if (!tracked_passed(order_, f.marker)) { return false; }
        order_.release(f.marker.value);
        return true;
      });
      return std::none_of(fenced_.begin(), fenced_.end(), hits);
    } else {
      // Waits are enqueued before any fence is dropped, so a failing wait loses no fence.
      std::uint64_t waits = 0;
      for (auto const& f : fenced_) {
        if (hits(f) && !tracked_passed(order_, f.marker)) {
          order_.wait(stream, f.marker.value);
          ++waits;
        }
      }
      fence_waits_ += waits;
      std::erase_if(fenced_, [&](fenced_block& f) {
        if (!hits(f) && !tracked_passed(order_, f.marker)) { return false; }
        order_.release(f.marker.value);
        return true;
      });
      return true;
    }
  }

  // Arenas replaced by a new plan go back to the upstream once the work queued on them passed.
  void reap_retired() noexcept
  {
    std::erase_if(retired_, [&](retired_arena& r) {
      for (auto const& m : r.markers) {
        if (!tracked_passed(order_, m)) { return false; }
      }
      for (auto& m : r.markers) { order_.release(m.value); }
      upstream_.deallocate(r.ptr, r.bytes, cuda_allocation_alignment);
      return true;
    });
  }

  Upstream upstream_;
  lifetime_arena_options options_;
  Planner planner_;
  Order order_;
  caching_pool<Upstream, Order> fallback_;
  arena_state state_{arena_state::recording};
  stash::plan plan_{};
  char* arena_{nullptr};      // aligned to the plan's alignment
  char* arena_raw_{nullptr};  // as the upstream gave it
  std::size_t arena_bytes_{0};
  std::size_t arena_raw_bytes_{0};
  bool fence_failed_{false};
  stream_ref stream_{nullptr};

  bool in_iteration_{false};
  bool deviated_{false};
  bool relearn_{false};  // relearn() was called: end_iteration() forgets the sequence
  std::size_t index_{0};
  std::uint64_t time_{0};
  std::vector<recorded_alloc> recorded_;  // the planned iteration
  std::vector<recorded_alloc> current_;   // the running iteration
  std::vector<recorded_alloc> pending_;   // a deviating sequence waiting to settle
  unsigned settled_{0};
  unsigned recorded_family_{0};  // iterations of the recorded sequence seen while recording
  std::vector<std::pair<std::uint64_t, std::size_t>> ends_by_time_;
  std::size_t next_recorded_end_{0};
  std::vector<overdue_block> overdue_;
  std::vector<fenced_block> fenced_;
  std::vector<retired_arena> retired_;
  std::unordered_map<void*, live_block> live_;
  std::size_t arena_live_{0};

  std::size_t in_use_{0};
  std::size_t peak_in_use_{0};
  std::size_t peak_reserved_{0};
  std::uint64_t allocations_{0};
  std::uint64_t fallbacks_{0};
  std::uint64_t iterations_{0};
  std::uint64_t replans_{0};
  std::uint64_t fence_waits_{0};
  std::string plan_failure_;
};

}  // namespace stash
