/**
 * @file schedule.hpp
 * @brief A swap schedule (which storages leave the device, when they go, when they come back),
 * its validator and the device-memory curve it plans.
 *
 * Ops are named by op index. An entry moves storage `id` off the device for one gap between two
 * consecutive accesses, `last_use` and `next_use`:
 *  - the offload (encode, D2H) is issued when op `offload_at` starts, i.e. once op
 *    `offload_at - 1` finished; it may overlap ops that only read the storage (vDNN overlaps the
 *    copy of a layer's input with that layer), so no op in [offload_at, last_use] may write it;
 *  - the device bytes are released once the copy finished and op `last_use` finished;
 *  - the prefetch (H2D, decode) is issued when op `prefetch_at` starts and holds the device bytes
 *    again from when it starts; op `next_use` waits for it.
 * The planned curve treats copies as instantaneous: the storage is off the device after the
 * later of op `last_use` and op `offload_at - 1`, and back from the start of op `prefetch_at`:
 * after the frees that end op `prefetch_at - 1` (returned when it ends, before the prefetch is
 * issued, as simulated).
 *
 * A wrap entry (`wrap` set) moves a persistent storage (allocated before op 0, never freed; see
 * may_wrap) off the device for the gap that crosses the iteration boundary, in steady state:
 * `last_use` is its last access of the iteration and `next_use` its first (of the next
 * iteration; both may be one op, e.g. a momentum buffer only the optimizer touches):
 *  - the offload is issued when op `offload_at` starts, or when the iteration's last op ends
 *    for offload_at = the op count (an optimizer update is often the last op); no op in
 *    [offload_at, last_use] may write it, and it must be done when the iteration ends;
 *  - the storage starts each replayed iteration on the host; the prefetch is issued when op
 *    `prefetch_at` starts, prefetch_at <= next_use (0: at the iteration's start);
 *  - next_use <= offload_at: the copy-out follows the copy-in.
 * Planned curve: off from its allocation (before op 0) through op prefetch_at - 1 and its end
 * frees, and again
 * after the later of op `last_use` and op `offload_at - 1` through the iteration's end. The
 * first (recorded) iteration runs with everything resident; the schedule plans the replayed
 * ones. Another entry of the same storage lies between the two halves: its offload_at is at
 * least the wrap's next_use, and the wrap's offload_at at least its next_use.
 *
 * A recompute entry drops storage `id` for the gap between its consecutive accesses `last_use`
 * and `next_use` and rematerialises it by re-running its writers (recompute_chain.hpp):
 *  - its device bytes are released when op `last_use` ends (nothing is copied);
 *  - the re-runs run on the compute stream after op `at - 1` ended and before op `at` takes its
 *    allocations, last_use < at <= next_use; the storage holds its bytes again from their start,
 *    and each re-run also holds its transient bytes (other results, workspace) while it runs;
 *  - recompute entries are listed in the order they run: by `at`, and within one `at` (a batch)
 *    in execution order;
 *  - every storage the re-runs read must be resident at `at`: not inside a swap entry's gap
 *    (last_use < at <= next_use, even if prefetched), and either not dropped by a recompute entry
 *    there or rematerialised by an earlier entry of the same batch (a chain). Chains are bounded:
 *    an entry's depth (1 + the largest depth of the same-batch entries it reads) is at most
 *    max_recompute_depth.
 * Planned curve: the storage is off from after op `last_use` through op `at - 1` and its end
 * frees (back after them, as a prefetch issued at `at`); while entry k of a batch runs, the planned
 * bytes are the level after op at-1's end frees, less the batch's entries after k, plus k's
 * transient bytes.
 *
 * Re-run uses (issue 22, "one entry per gap"): a storage R that recompute entry k's re-runs read
 * (recompute_chain::reads) is used at op k.at too, before op k.at's step. Such a use splits R's
 * gap between two consecutive accesses into sub-gaps, each of which may carry its own entry: an
 * entry's last_use and next_use are then uses of R (accesses or re-run uses) with no access of R
 * strictly between them. So R may come back for the re-run and leave again right after it:
 *  - an entry whose next_use is a re-run use that is not an access of R is waited for by the
 *    re-runs of op next_use (a prefetch must be back before the batch starts; a recompute entry
 *    of R runs in the batch before the entry that reads R). An entry whose next_use is an access
 *    of R is op next_use's, as before: the re-runs at that op do not wait for it, so R is not
 *    resident for them;
 *  - an entry whose last_use p is a re-run use that is not an access of R (early_departure) may
 *    leave right after the batch of re-runs at p, before op p's step: a recompute entry always
 *    does, a swap entry with offload_at = p does (its copy is issued when compute reaches op p
 *    and may overlap the batch, which only reads R; not for an R the batch itself rebuilds,
 *    whose copy would start before its value exists: then offload_at > p), a swap entry with
 *    offload_at > p leaves as before, after op offload_at - 1. The planned curve counts an early
 *    departure off from op p's step on (the first event after op p-1's end frees) and counts it
 *    back while the batch runs (recompute_run_bytes). With `redrop` set a swap entry copies
 *    nothing: the host copy of R made for the previous sub-gap (a swap entry of R whose next_use
 *    is this entry's last_use, with the same encoding) is still valid, since no op writes R
 *    inside one gap between accesses; the device bytes are released when the batch (early) or
 *    op offload_at - 1 (late) ends, and its prefetch is one more H2D copy of that host copy.
 * A schedule without re-run-use entries is planned and timed as before.
 * Shared re-runs (`shared_reruns`): inside one batch, an entry j whose chain rebuilds storage R
 * as a transient input, followed by R's own entry k, rebuilds R into R's bytes and k re-runs
 * only R's writers after those j ran (shared_reruns_of); planned as the unshared batch.
 * The simulator (sim/simulator.hpp) times the same schedule. Schedules live in sim/, the lowest
 * component that reads them; swap policies (swap/) write them.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/radix_sort.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/op_index.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stash {

/// @brief One storage moved off the device for one gap between two of its accesses.
struct swap_entry {
  storage_id id{};              ///< the storage
  std::uint64_t last_use{};     ///< op index of its last access before the gap
  std::uint64_t next_use{};     ///< op index of its first access after the gap
  std::uint64_t offload_at{};   ///< the offload is issued when this op starts
  std::uint64_t prefetch_at{};  ///< the prefetch is issued when this op starts
  std::uint64_t bytes{};        ///< device bytes freed (the storage's size)
  swap_encoding encoding{swap_encoding::configured};  ///< how it crosses the link
  /// True for a wrap entry: the gap from the last access of an iteration to the first of the
  /// next (see the file comment); false (the default) for a gap inside one iteration.
  bool wrap{false};
  /// True when the offload copies nothing (see the file comment, re-run uses): last_use is a
  /// re-run use and the previous swap entry of the same storage, ending there, left a host copy
  /// that is still valid; the device bytes are dropped when op last_use ends.
  bool redrop{false};

  /// @brief Field by field.
  friend constexpr bool operator==(swap_entry const&, swap_entry const&) = default;
};

/// @brief Whether storage `id` may take a wrap entry: it is persistent (never freed), allocated
/// before op 0 (it lives across the iteration boundary) and accessed by at least one op.
/// @param analysis The recorded iteration's facts.
/// @param id The storage.
/// @return True when a wrap entry of it can be valid.
[[nodiscard]] inline bool may_wrap(trace_analysis const& analysis, storage_id id)
{
  auto const& s = analysis.lifetimes().storages[id];
  return analysis.op_count() > 0 && s.persistent() && !s.accesses.empty() &&
         s.alloc_event < analysis.ops().event[0];
}

/// @brief One storage dropped for one gap and rematerialised by re-running its writers before op
/// `at` (see the file comment).
struct recompute_entry {
  storage_id id{};           ///< the storage
  std::uint64_t last_use{};  ///< op index of its last access before the gap
  std::uint64_t next_use{};  ///< op index of its first access after the gap
  std::uint64_t at{};        ///< the re-runs run before this op, last_use < at <= next_use
  std::uint64_t bytes{};     ///< device bytes freed (the storage's size)

  /// @brief Field by field.
  friend constexpr bool operator==(recompute_entry const&, recompute_entry const&) = default;
};

/// @brief The longest chain of same-batch recomputes an entry may depend on (itself included).
inline constexpr std::size_t max_recompute_depth = 64;

/// @brief What a swap policy decided for one trace and budget.
struct schedule {
  std::string policy;                       ///< name of the policy that planned it
  std::string note;                         ///< policy-specific remark (e.g. what vdnn_dyn picked)
  std::uint64_t budget{};                   ///< the device memory budget it was planned for
  std::uint64_t baseline_peak{};            ///< peak live bytes without swapping
  std::uint64_t device_peak{};              ///< planned device peak under this schedule
  std::vector<swap_entry> entries;          ///< in the order the policy issues them
  std::vector<recompute_entry> recomputes;  ///< in the order they run (see the file comment)
  /// True when re-runs are shared inside a batch (shared_reruns_of, recompute_chain.hpp): an
  /// entry that rematerialises a storage an earlier entry of its batch rebuilt as a transient
  /// input adopts that rebuild (made into the storage's own bytes) and re-runs only the ops after
  /// it. The simulator prices it so and stash::allocator runs it so; validity and the planned
  /// curve are those of the unshared chains (the shared ones read no more, and the rebuilt input
  /// holds the same bytes either way). False: every chain runs alone.
  bool shared_reruns{false};

  /// @brief True when the planned peak fits the budget.
  /// @return Whether the planned peak fits the budget.
  [[nodiscard]] bool fits() const noexcept { return device_peak <= budget; }
  /// @brief Sum of the bytes of all entries (each crosses the link once each way).
  /// @return Bytes of the swap entries.
  [[nodiscard]] std::uint64_t offloaded_bytes() const noexcept
  {
    std::uint64_t sum = 0;
    for (auto const& e : entries) { sum += e.bytes; }
    return sum;
  }
  /// @brief Sum of the bytes of all recompute entries.
  /// @return Bytes of the recompute entries.
  [[nodiscard]] std::uint64_t recomputed_bytes() const noexcept
  {
    std::uint64_t sum = 0;
    for (auto const& e : recomputes) { sum += e.bytes; }
    return sum;
  }
};

/// @brief A schedule that does not fit its trace. Says which entry (if one), what is wrong and,
/// when the allocator found it, which policy returned it.
class schedule_error : public logic_error {
 public:
  /// @brief `entry` is the index in schedule::entries, or nullopt for the schedule as a whole.
  /// @param entry The offending swap entry's index, if one.
  /// @param what What is wrong.
  /// @param policy The policy that made the schedule.
  schedule_error(std::optional<std::size_t> entry, std::string const& what,
                 std::string const& policy = {})
      : logic_error("invalid swap schedule" +
                    (policy.empty() ? std::string() : " from policy '" + policy + "'") +
                    (entry ? " entry " + std::to_string(*entry) : std::string()) + ": " + what),
        entry_(entry),
        reason_(what)
  {
  }
  /// @brief The error for recompute entry `k` (schedule::recomputes[k]).
  /// @param k The offending recompute entry's index.
  /// @param what What is wrong.
  /// @return The error.
  [[nodiscard]] static schedule_error in_recompute(std::size_t k, std::string const& what)
  {
    schedule_error e(std::nullopt, "recompute entry " + std::to_string(k) + ": " + what);
    e.recompute_entry_ = k;
    return e;
  }
  /// @brief Index of the faulty swap entry, if the fault is in one.
  /// @return The offending swap entry's index, if one.
  [[nodiscard]] std::optional<std::size_t> entry() const noexcept { return entry_; }
  /// @brief Index of the faulty recompute entry, if the fault is in one.
  /// @return The offending recompute entry's index, if one.
  [[nodiscard]] std::optional<std::size_t> recompute_entry() const noexcept
  {
    return recompute_entry_;
  }
  /// @brief What is wrong, without the entry and policy.
  /// @return What is wrong, without the prefix.
  [[nodiscard]] std::string const& reason() const noexcept { return reason_; }

 private:
  std::optional<std::size_t> entry_;
  std::optional<std::size_t> recompute_entry_;
  std::string reason_;
};

/// @brief The events over which a swap entry keeps its storage off the device in the planned
/// (instantaneous-copy) model: off from event `after + 1` through event `last`; empty when
/// after >= last. planned_device_curve also counts it off through the end frees that follow
/// event `last` (op prefetch_at - 1's).
struct off_window {
  std::uint64_t after;  ///< off from event after + 1
  std::uint64_t last;   ///< through event last
};

/// @brief The planned off-window of `e` (see off_window).
/// For a wrap entry: the part of its tail half up to the last op's event (planned_device_curve
/// also counts it off after the last op and from its allocation through op prefetch_at - 1).
/// @param e The entry.
/// @param ops The trace's op index.
/// @return The ops during which the storage is off the device.
[[nodiscard]] inline off_window planned_off_window(swap_entry const& e, op_index const& ops)
{
  auto const release_op = e.offload_at == 0 ? e.last_use : std::max(e.last_use, e.offload_at - 1);
  if (e.wrap) {
    // make_schedule computes the planned curve before validate_schedule can refuse an entry: a
    // wrap whose offload_at is past the op count must not read past the op index.
    if (ops.event.empty()) { return off_window{}; }
    auto const last = ops.event.size() - 1;
    return off_window{ops.event[std::min<std::uint64_t>(release_op, last)], ops.event[last]};
  }
  return off_window{ops.event[release_op], ops.event[e.prefetch_at - 1]};
}

namespace detail {

[[nodiscard]] inline std::string describe(trace const& t, storage_id id)
{
  auto const& label = t.storages()[id].label;
  return "storage " + std::to_string(id) + (label.empty() ? "" : " '" + label + "'");
}

}  // namespace detail

[[nodiscard]] inline std::uint64_t planned_peak(trace_analysis const& analysis,
                                                std::span<swap_entry const> entries,
                                                std::span<recompute_entry const> recomputes = {});

namespace detail {

// Whether op `op` accesses storage `id` (a recorded access, not a re-run use).
[[nodiscard]] inline bool is_access(trace_analysis const& a, storage_id id, std::uint64_t op)
{
  auto const& acc = a.lifetimes().storages[id].accesses;
  auto const it =
      std::lower_bound(acc.begin(), acc.end(), op,
                       [](storage_access const& x, std::uint64_t o) { return x.op < o; });
  return it != acc.end() && it->op == op;
}

// Whether swap entry `e` leaves right after the batch of re-runs at its last_use (see the file
// comment: last_use is a re-run use only, offload_at = last_use).
[[nodiscard]] inline bool early_departure(trace_analysis const& a, swap_entry const& e)
{
  return !e.wrap && e.offload_at == e.last_use && e.id < a.trace().storages().size() &&
         e.last_use < a.op_count() && !is_access(a, e.id, e.last_use);
}
// Whether recompute entry `e` leaves right after the batch of re-runs at its last_use.
[[nodiscard]] inline bool early_departure(trace_analysis const& a, recompute_entry const& e)
{
  return e.id < a.trace().storages().size() && e.last_use < a.op_count() &&
         !is_access(a, e.id, e.last_use);
}

// Sorts pairs as std::sort does, given pairs with equal firsts already in order (listed by
// index): a stable radix sort by the first alone (a comparison sort below a few dozen pairs).
// Validation and the redrop repair sort their entries by storage thousands of times a plan.
template <class Second>
void sort_by_first(std::vector<std::pair<std::uint64_t, Second>>& pairs,
                   std::vector<std::pair<std::uint64_t, Second>>& scratch)
{
  if (pairs.size() < 64) {
    std::sort(pairs.begin(), pairs.end());
    return;
  }
  stable_radix_sort(pairs, scratch, [](auto const& p) { return p.first; });
}
template <class Second>
void sort_by_first(std::vector<std::pair<std::uint64_t, Second>>& pairs)
{
  std::vector<std::pair<std::uint64_t, Second>> scratch;
  sort_by_first(pairs, scratch);
}

// Values grouped by storage, each storage's ascending and unique: the per-storage lists
// validation needs, without a vector per storage (the trace's thousands, for each schedule
// checked). A storage's values are found through a table over every storage holding its slot
// among those present: 4 bytes a storage, set where present (a prefix pass over 8-byte ends was
// most of the grouping's cost at thousands of validations a plan).
class storage_groups {
 public:
  // `pairs` holds (storage, value), every storage below `storages`.
  storage_groups(std::size_t storages, std::vector<std::pair<storage_id, std::uint64_t>> pairs)
      : slot_(checked(storages), 0)
  {
    sort_pairs(pairs);
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
    values_.reserve(pairs.size());
    begin_.reserve(pairs.size() + 1);
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      auto const id = pairs[k].first;
      if (k == 0 || pairs[k - 1].first != id) {
        begin_.push_back(values_.size());
        slot_[id] = static_cast<std::uint32_t>(begin_.size());
      }
      values_.push_back(pairs[k].second);
    }
    begin_.push_back(values_.size());
  }

  [[nodiscard]] std::span<std::uint64_t const> operator[](storage_id id) const
  {
    auto const k = slot_[id];
    if (k == 0) { return {}; }
    return std::span<std::uint64_t const>(values_).subspan(begin_[k - 1],
                                                           begin_[k] - begin_[k - 1]);
  }

 private:
  using pair_t = std::pair<storage_id, std::uint64_t>;

  // The slots are 4 bytes: a trace of 2^32 - 1 storages or more is refused, not wrapped.
  static std::size_t checked(std::size_t storages)
  {
    STASH_EXPECTS(
        storages < std::size_t{0xFFFFFFFFU},
        "storage_groups: " + std::to_string(storages) + " storages exceed the limit of 2^32 - 2");
    return storages;
  }

  // Sorts `pairs` as std::sort does: stably by value (skipped when they already ascend, as the
  // callers list them), then sort_by_first.
  static void sort_pairs(std::vector<pair_t>& pairs)
  {
    std::vector<pair_t> next;
    auto const value = [](pair_t const& p) { return p.second; };
    if (pairs.size() >= 64 &&
        !std::is_sorted(pairs.begin(), pairs.end(),
                        [&](pair_t const& x, pair_t const& y) { return value(x) < value(y); })) {
      stable_radix_sort(pairs, next, value);
    }
    sort_by_first(pairs, next);
  }

  std::vector<std::uint32_t> slot_;  // per storage: 1 + its place among those present; 0: absent
  std::vector<std::size_t> begin_;   // per storage present, where its values start; then the end
  std::vector<std::uint64_t> values_;
};

// The re-run uses of a schedule (see the file comment): each recompute entry's chain, computed
// once (null for an entry outside the trace, which validate_schedule refuses), and each
// storage's re-run uses, sorted and unique (an entry whose chain is not valid adds none). The
// chains are computed here, or taken from `memo` (kept there) when one is given.
struct rerun_index {
 private:
  std::vector<recompute_chain> owned_;  // the chains computed here (no memo): built first

 public:
  std::vector<recompute_chain const*> chains;
  storage_groups uses;

  rerun_index(trace_analysis const& a, std::span<recompute_entry const> recomputes,
              chain_memo* memo = nullptr)
      : chains(recomputes.size(), nullptr),
        uses(a.trace().storages().size(), use_pairs(a, recomputes, memo, chains, owned_))
  {
  }

  // Whether `op` is a use of `id`: an access or a re-run use.
  [[nodiscard]] bool is_use(trace_analysis const& a, storage_id id, std::uint64_t op) const
  {
    return is_access(a, id, op) || std::binary_search(uses[id].begin(), uses[id].end(), op);
  }
  // Whether `op` is a re-run use of `id` that is not an access of it.
  [[nodiscard]] bool rerun_only(trace_analysis const& a, storage_id id, std::uint64_t op) const
  {
    return std::binary_search(uses[id].begin(), uses[id].end(), op) && !is_access(a, id, op);
  }

  rerun_index(rerun_index const&)            = delete;  // `chains` may point into `owned_`
  rerun_index& operator=(rerun_index const&) = delete;

 private:
  // Fills `chains` (computed into `owned`, or taken from `memo`); returns the (storage, re-run
  // use) pairs.
  static std::vector<std::pair<storage_id, std::uint64_t>> use_pairs(
      trace_analysis const& a, std::span<recompute_entry const> recomputes, chain_memo* memo,
      std::vector<recompute_chain const*>& chains, std::vector<recompute_chain>& owned)
  {
    if (memo == nullptr) { owned.reserve(recomputes.size()); }  // the pointers stay valid
    std::vector<std::pair<storage_id, std::uint64_t>> pairs;
    for (std::size_t k = 0; k < recomputes.size(); ++k) {
      auto const& e = recomputes[k];
      if (e.id >= a.trace().storages().size() || e.last_use >= e.at || e.at >= a.op_count()) {
        continue;
      }
      if (memo != nullptr) {
        chains[k] = &(*memo)(e.id, e.last_use, e.at);
      } else {
        chains[k] = &owned.emplace_back(recompute_chain_of(a, e.id, e.last_use, e.at));
      }
      if (!chains[k]->valid()) { continue; }
      for (auto const r : chains[k]->reads) { pairs.emplace_back(r, e.at); }
    }
    return pairs;
  }
};

// Empty when ops u < v are consecutive uses of `id` (accesses or re-run uses, no access
// between); else what is wrong.
[[nodiscard]] inline std::string gap_fault(trace_analysis const& a, rerun_index const& reruns,
                                           storage_id id, std::uint64_t u, std::uint64_t v)
{
  auto const& acc    = a.lifetimes().storages[id].accesses;
  auto const after_u = std::upper_bound(
      acc.begin(), acc.end(), u, [](std::uint64_t o, storage_access const& x) { return o < x.op; });
  bool const between = after_u != acc.end() && after_u->op < v;
  if (u < v && !between && reruns.is_use(a, id, u) && reruns.is_use(a, id, v)) { return {}; }
  return "ops " + std::to_string(u) + " and " + std::to_string(v) +
         " are not consecutive accesses of it (nor re-run uses with no access between)";
}

// Where storage `r` is at op `at` for recompute entry `k` of `s`: resident (0), rematerialised by
// an earlier entry of k's batch (its depth), or away (nullopt). `recompute_depth[j]` holds the
// depth of entries j < k. A swap entry of r ending at `at` keeps r away unless `at` is a re-run
// use that is not an access of r (the batch waits for that prefetch: see the file comment).
[[nodiscard]] inline std::optional<std::size_t> read_depth(
    trace_analysis const& a, schedule const& s, storage_groups const& swaps_of,
    storage_groups const& recomputes_of, std::span<std::size_t const> recompute_depth, storage_id r,
    std::size_t k)
{
  auto const at = s.recomputes[k].at;
  for (auto const j : swaps_of[r]) {
    auto const& e   = s.entries[j];
    bool const away = e.wrap ? (e.last_use < at || at <= e.next_use)
                             : (e.last_use < at &&
                                (at < e.next_use || (at == e.next_use && is_access(a, r, at))));
    if (away) { return std::nullopt; }
  }
  for (auto const j : recomputes_of[r]) {
    auto const& e = s.recomputes[j];
    if (e.last_use < at && at < e.at) { return std::nullopt; }
    if (e.at == at) {
      if (j >= k) { return std::nullopt; }
      return recompute_depth[j];
    }
  }
  return 0;
}

// Checks recompute entry k's own fields (the rules that need no other entry).
inline void validate_recompute_fields(trace_analysis const& a, schedule const& s,
                                      rerun_index const& reruns, std::size_t k)
{
  auto const& e = s.recomputes[k];
  auto const& t = a.trace();
  auto const n  = t.ops().size();
  auto fail     = [&](std::string const& what) { throw schedule_error::in_recompute(k, what); };
  if (e.id >= t.storages().size()) {
    fail("storage id " + std::to_string(e.id) + " does not exist (the trace has " +
         std::to_string(t.storages().size()) + " storages)");
  }
  auto const who = [&] { return describe(t, e.id); };  // built only for a message
  if (e.bytes != t.storages()[e.id].bytes) {
    fail(who() + ": bytes " + std::to_string(e.bytes) + " differ from its size " +
         std::to_string(t.storages()[e.id].bytes));
  }
  if (e.last_use >= n || e.next_use >= n || e.at >= n) {
    fail(who() + ": op index out of range (the trace has " + std::to_string(n) + " ops)");
  }
  if (auto const fault = gap_fault(a, reruns, e.id, e.last_use, e.next_use); !fault.empty()) {
    fail(who() + ": " + fault);
  }
  if (!(e.last_use < e.at && e.at <= e.next_use)) {
    fail(who() + ": at " + std::to_string(e.at) + " must be in (last_use " +
         std::to_string(e.last_use) + ", next_use " + std::to_string(e.next_use) + "]");
  }
  if (k > 0 && s.recomputes[k - 1].at > e.at) {
    fail(who() + ": listed after an entry that runs later (at " +
         std::to_string(s.recomputes[k - 1].at) + ")");
  }
  if (!reruns.chains[k]->valid()) {
    fail(who() + " cannot be recomputed: " + reruns.chains[k]->refusal);
  }
}

// Checks wrap entry k (see the file comment), its id and bytes already checked.
inline void validate_wrap_entry(trace_analysis const& a, schedule const& s, std::size_t k)
{
  auto const& e   = s.entries[k];
  auto const& t   = a.trace();
  auto const n    = a.op_count();
  auto const who  = [&] { return describe(t, e.id); };  // built only for a message
  auto fail       = [&](std::string const& what) { throw schedule_error(k, what); };
  auto const& acc = a.lifetimes().storages[e.id].accesses;
  if (!may_wrap(a, e.id)) {
    fail(who() + ": a wrap entry needs a persistent storage allocated before op 0 and accessed");
  }
  if (e.last_use != acc.back().op || e.next_use != acc.front().op) {
    fail(who() + ": a wrap entry runs from its last access (op " + std::to_string(acc.back().op) +
         ") to its first (op " + std::to_string(acc.front().op) + "), not from op " +
         std::to_string(e.last_use) + " to op " + std::to_string(e.next_use));
  }
  if (e.offload_at > n || e.prefetch_at > e.next_use) {
    fail(who() + ": offload_at " + std::to_string(e.offload_at) + " must be at most the op count " +
         std::to_string(n) + " and prefetch_at " + std::to_string(e.prefetch_at) +
         " at most next_use " + std::to_string(e.next_use));
  }
  // The copy-out follows the copy-in: before op next_use the device holds nothing to copy (the
  // prefetch is waited for there), so an earlier offload would copy bytes not yet brought in.
  if (e.offload_at < e.next_use) {
    fail(who() + ": offload_at " + std::to_string(e.offload_at) +
         " comes before the first access (op " + std::to_string(e.next_use) +
         "), which its prefetch must precede: the copy-out would run before the copy-in");
  }
  for (auto const& x : acc) {
    if (x.write && x.op >= e.offload_at) {
      fail(who() + ": op " + std::to_string(x.op) + " writes it after its offload starts (op " +
           std::to_string(e.offload_at) + ")");
    }
  }
}

// Two entries (swap or recompute) of one storage whose gaps overlap.
inline void check_gap_overlap(trace const& t, storage_id id,
                              std::vector<std::pair<std::uint64_t, std::uint64_t>>& gaps,
                              std::size_t k)
{
  std::sort(gaps.begin(), gaps.end());
  for (std::size_t j = 1; j < gaps.size(); ++j) {
    if (gaps[j].first < gaps[j - 1].second) {
      throw schedule_error::in_recompute(k, describe(t, id) +
                                                ": its gap overlaps another entry "
                                                "of the same storage");
    }
  }
}

// The recompute rules (see the file comment): fields, chain, order, overlaps, resident reads.
inline void validate_recomputes(trace_analysis const& a, schedule const& s,
                                rerun_index const& reruns)
{
  auto const& t = a.trace();
  for (std::size_t k = 0; k < s.recomputes.size(); ++k) {
    validate_recompute_fields(a, s, reruns, k);
  }
  auto const storages   = t.storages().size();
  auto const by_storage = [&](auto const& list) {  // each storage's entries, in index order
    std::vector<std::pair<storage_id, std::uint64_t>> pairs;
    pairs.reserve(list.size());
    for (std::size_t j = 0; j < list.size(); ++j) { pairs.emplace_back(list[j].id, j); }
    return storage_groups(storages, std::move(pairs));
  };
  auto const swaps_of      = by_storage(s.entries);
  auto const recomputes_of = by_storage(s.recomputes);
  std::vector<std::size_t> depth(s.recomputes.size(), 1);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps;  // one buffer for every entry
  for (std::size_t k = 0; k < s.recomputes.size(); ++k) {
    auto const& e = s.recomputes[k];
    gaps.clear();
    for (auto const j : swaps_of[e.id]) {
      gaps.emplace_back(s.entries[j].last_use, s.entries[j].next_use);
    }
    for (auto const j : recomputes_of[e.id]) {
      gaps.emplace_back(s.recomputes[j].last_use, s.recomputes[j].next_use);
    }
    check_gap_overlap(t, e.id, gaps, k);
    for (auto const r : reruns.chains[k]->reads) {
      auto const d = read_depth(a, s, swaps_of, recomputes_of, depth, r, k);
      if (!d) {
        throw schedule_error::in_recompute(
            k, describe(t, e.id) + ": its re-run reads " + describe(t, r) +
                   ", which is not resident before op " + std::to_string(e.at));
      }
      depth[k] = std::max(depth[k], *d + 1);
    }
    if (depth[k] > max_recompute_depth) {
      throw schedule_error::in_recompute(
          k, describe(t, e.id) + ": chain of " + std::to_string(depth[k]) +
                 " recomputes exceeds max_recompute_depth " + std::to_string(max_recompute_depth));
    }
  }
}

// Checks swap entry k inside one iteration (not a wrap), its id and bytes already checked.
inline void validate_swap_fields(trace_analysis const& a, schedule const& s,
                                 rerun_index const& reruns, std::size_t k)
{
  auto const& e  = s.entries[k];
  auto const n   = a.op_count();
  auto const who = [&] { return describe(a.trace(), e.id); };  // built only for a message
  auto fail      = [&](std::string const& what) { throw schedule_error(k, what); };
  if (e.last_use >= n || e.next_use >= n || e.offload_at >= n || e.prefetch_at >= n) {
    fail(who() + ": op index out of range (the trace has " + std::to_string(n) + " ops)");
  }
  if (auto const fault = gap_fault(a, reruns, e.id, e.last_use, e.next_use); !fault.empty()) {
    fail(who() + ": " + fault);
  }
  if (!(e.last_use < e.prefetch_at && e.prefetch_at <= e.next_use)) {
    fail(who() + ": prefetch_at " + std::to_string(e.prefetch_at) + " must be in (last_use " +
         std::to_string(e.last_use) + ", next_use " + std::to_string(e.next_use) + "]");
  }
  if (e.offload_at >= e.prefetch_at) {
    fail(who() + ": offload_at " + std::to_string(e.offload_at) + " must precede prefetch_at " +
         std::to_string(e.prefetch_at));
  }
  if (a.trace().alloc_event(e.id) >= a.ops().event[e.offload_at]) {
    fail(who() + ": offload_at " + std::to_string(e.offload_at) +
         " starts before the storage is allocated");
  }
  bool const after_rerun = reruns.rerun_only(a, e.id, e.last_use);
  if (after_rerun && e.offload_at < e.last_use) {
    fail(who() + ": offload_at " + std::to_string(e.offload_at) +
         " must not precede the re-run use at op " + std::to_string(e.last_use));
  }
  if (after_rerun && e.offload_at == e.last_use && !e.redrop &&
      std::any_of(s.recomputes.begin(), s.recomputes.end(),
                  [&](recompute_entry const& r) { return r.id == e.id && r.at == e.last_use; })) {
    fail(who() + ": rebuilt by the re-runs at op " + std::to_string(e.last_use) +
         ", its copy must be issued after them (offload_at > " + std::to_string(e.last_use) + ")");
  }
  if (e.redrop && !after_rerun) {
    fail(who() +
         ": a redrop entry must start at a re-run use that is not an access of it, not at op " +
         std::to_string(e.last_use));
  }
  for (auto const& x : a.lifetimes().storages[e.id].accesses) {
    if (x.op <= e.last_use && x.write && x.op >= e.offload_at) {
      fail(who() + ": op " + std::to_string(x.op) + " writes it after its offload starts (op " +
           std::to_string(e.offload_at) + ")");
    }
  }
}

// Two swap entries of one storage (sorted by last_use) that overlap, a redrop entry without the
// swap entry whose host copy it keeps, or a wrap entry overlapping the first entry.
inline void check_swap_sequence(trace const& t, schedule const& s, storage_id id,
                                std::vector<std::size_t> const& list)
{
  for (std::size_t j = 0; j < list.size(); ++j) {
    auto const& cur = s.entries[list[j]];
    if (j > 0) {
      auto const& prev = s.entries[list[j - 1]];
      if (cur.last_use == prev.last_use || cur.offload_at < prev.next_use) {
        throw schedule_error(list[j], describe(t, id) + " overlaps entry " +
                                          std::to_string(list[j - 1]) + " of the same storage");
      }
    }
    if (cur.redrop &&
        (j == 0 || s.entries[list[j - 1]].wrap || s.entries[list[j - 1]].next_use != cur.last_use ||
         s.entries[list[j - 1]].encoding != cur.encoding)) {
      throw schedule_error(list[j],
                           describe(t, id) +
                               ": a redrop entry needs a swap entry of it ending at its "
                               "last_use, with the same encoding, whose host copy it keeps");
    }
  }
  // A wrap entry (the last by last_use) ends where the first one may begin: the ring closes.
  auto const& wrap = s.entries[list.back()];
  if (wrap.wrap && list.size() > 1 && s.entries[list.front()].offload_at < wrap.next_use) {
    throw schedule_error(list.front(), describe(t, id) + " overlaps wrap entry " +
                                           std::to_string(list.back()) + " of the same storage");
  }
}

// Every rule of validate_schedule but the last (device_peak is the planned peak), given the
// schedule's re-run uses.
inline void validate_rules(trace_analysis const& analysis, schedule const& s,
                           rerun_index const& reruns)
{
  auto const& t    = analysis.trace();
  auto const& life = analysis.lifetimes();
  std::vector<std::pair<storage_id, std::size_t>> by_storage;  // (storage, entry)
  by_storage.reserve(s.entries.size());
  for (std::size_t k = 0; k < s.entries.size(); ++k) {
    auto const& e = s.entries[k];
    auto fail     = [&](std::string const& what) { throw schedule_error(k, what); };
    if (e.id >= t.storages().size()) {
      fail("storage id " + std::to_string(e.id) + " does not exist (the trace has " +
           std::to_string(t.storages().size()) + " storages)");
    }
    if (e.bytes != t.storages()[e.id].bytes) {
      fail(describe(t, e.id) + ": bytes " + std::to_string(e.bytes) + " differ from its size " +
           std::to_string(t.storages()[e.id].bytes));
    }
    if (e.wrap && e.redrop) { fail(describe(t, e.id) + ": a wrap entry cannot be a redrop"); }
    if (e.wrap) {
      validate_wrap_entry(analysis, s, k);
    } else {
      validate_swap_fields(analysis, s, reruns, k);
    }
    by_storage.emplace_back(e.id, k);
  }
  // Each storage's entries (storages ascending, entries in index order), by last use. The pairs
  // were listed in index order: sorted by storage alone, stably, they are sorted.
  sort_by_first(by_storage);
  std::vector<std::size_t> list;
  for (std::size_t i = 0; i < by_storage.size();) {
    auto const id = by_storage[i].first;
    list.clear();
    for (; i < by_storage.size() && by_storage[i].first == id; ++i) {
      list.push_back(by_storage[i].second);
    }
    std::sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
      return s.entries[a].last_use < s.entries[b].last_use;
    });
    check_swap_sequence(t, s, id, list);
  }
  if (s.baseline_peak != life.peak_live_bytes) {
    throw schedule_error(std::nullopt, "baseline_peak " + std::to_string(s.baseline_peak) +
                                           " is not the trace's peak " +
                                           std::to_string(life.peak_live_bytes));
  }
  validate_recomputes(analysis, s, reruns);
}

// planned_peak(analysis, s.entries, s.recomputes), the re-runs' chains taken from `reruns`
// (validate_rules passed: every recompute entry has its chain there).
[[nodiscard]] inline std::uint64_t planned_peak_of(trace_analysis const& analysis,
                                                   schedule const& s, rerun_index const& reruns);

// validate_schedule's last rule: device_peak is the planned peak `peak`.
inline void check_planned_peak(schedule const& s, std::uint64_t peak)
{
  if (s.device_peak != peak) {
    throw schedule_error(std::nullopt, "device_peak " + std::to_string(s.device_peak) +
                                           " is not the planned peak " + std::to_string(peak));
  }
}

}  // namespace detail

/// @brief Checks `s` against `t`; throws stash::schedule_error naming the entry and the rule.
///
/// Rules: the storage exists and its size is `bytes`; last_use and next_use are consecutive
/// uses of it (accesses, or re-run uses with no access between: see the file comment); no op in
/// [offload_at, last_use] writes it and it is allocated before offload_at starts; last_use <
/// prefetch_at <= next_use and offload_at < prefetch_at, and offload_at > last_use when last_use
/// is only a re-run use; two entries of one storage do not overlap (the later one's offload
/// starts at or after the earlier one's next use); a redrop entry starts at a re-run use where
/// the previous swap entry of its storage ends, with its encoding; a wrap entry follows the
/// rules of the file comment (and is no redrop); recompute entries follow the rules of the file
/// comment (the error names the recompute entry: schedule_error::recompute_entry); device_peak
/// is the planned peak and baseline_peak the trace's peak.
/// @param analysis The recorded iteration's facts.
/// @param s The schedule.
inline void validate_schedule(trace_analysis const& analysis, schedule const& s)
{
  detail::rerun_index const reruns(analysis, s.recomputes);
  detail::validate_rules(analysis, s, reruns);
  detail::check_planned_peak(s, detail::planned_peak_of(analysis, s, reruns));
}

namespace detail {

// validate_schedule with the chains from `memo` (kept there): a planner that validates many
// schedules of the same entries computes each chain once.
inline void validate_schedule_with(trace_analysis const& analysis, schedule const& s,
                                   chain_memo& memo)
{
  rerun_index const reruns(analysis, s.recomputes, &memo);
  validate_rules(analysis, s, reruns);
  check_planned_peak(s, planned_peak_of(analysis, s, reruns));
}

// validate_schedule but its last rule (device_peak is the planned peak), for a caller that
// computed device_peak as planned_peak does from the same entries; the chains from `memo`.
inline void validate_schedule_but_peak(trace_analysis const& analysis, schedule const& s,
                                       chain_memo& memo)
{
  rerun_index const reruns(analysis, s.recomputes, &memo);
  validate_rules(analysis, s, reruns);
}

// make_schedule computes the planned curve and peak before validate_schedule can refuse an
// entry: one whose storage or op indices lie outside the trace (a policy's mistake) counts
// nothing there, rather than reading and writing past the op index (review 2026-11-26, eighth
// read), and validate_schedule refuses it.
[[nodiscard]] inline bool in_trace(trace_analysis const& a, swap_entry const& e) noexcept
{
  auto const n       = a.ops().event.size();
  auto const release = e.offload_at == 0 ? e.last_use : std::max(e.last_use, e.offload_at - 1);
  return e.id < a.trace().storages().size() && e.prefetch_at <= n &&
         (e.wrap ? n > 0 : release < n && e.prefetch_at > 0);
}
[[nodiscard]] inline bool in_trace(trace_analysis const& a, recompute_entry const& e) noexcept
{
  auto const n = a.ops().event.size();
  return e.id < a.trace().storages().size() && e.last_use < n && e.at > 0 && e.at <= n;
}

// The last event of op `op`'s end: its frees (and phase marks) after its event. What a prefetch
// or re-run issued at op `op` + 1 comes back after, as simulated.
[[nodiscard]] inline std::uint64_t back_after(trace_analysis const& a, std::uint64_t op)
{
  auto const events = a.trace().events();
  auto j            = a.ops().event[op];
  while (j + 1 < events.size() &&
         (events[j + 1].kind == event_kind::free || events[j + 1].kind == event_kind::phase)) {
    ++j;
  }
  return j;
}

}  // namespace detail

/// @brief Calls `f(from, through)` for each run of events [from, through] over which
/// planned_device_curve counts swap entry `e` off the device (none for an entry outside the
/// trace): from after its release to its return (a prefetch issued at op p is back once op p-1
/// has ended, its end frees returned, as simulated), and for a wrap entry to the iteration's end
/// and from its allocation to its return.
/// @param analysis The recorded iteration's facts.
/// @param e A swap entry.
/// @param f Called with two event indices, from <= through.
template <class F>
void for_each_planned_off_run(trace_analysis const& analysis, swap_entry const& e, F&& f)
{
  if (!detail::in_trace(analysis, e)) { return; }  // refused by validate_schedule
  auto const& ops   = analysis.ops();
  auto const events = analysis.trace().events();
  auto const back   = detail::back_after(analysis, e.prefetch_at == 0 ? 0 : e.prefetch_at - 1);
  auto w            = planned_off_window(e, ops);
  if (detail::early_departure(analysis, e) && e.last_use > 0) {  // off from op last_use's step
    w.after = detail::back_after(analysis, e.last_use - 1);
  }
  auto const last = e.wrap ? events.size() - 1 : back;
  if (w.after + 1 <= last) { f(w.after + 1, last); }
  if (e.wrap && e.prefetch_at > 0) {  // the head: on the host until its prefetch
    auto const from = analysis.trace().alloc_event(e.id);
    if (from <= back) { f(from, back); }
  }
}

/// @brief The run of events [from, through] over which planned_device_curve counts recompute
/// entry `e` off the device: from after its last use (its step, for an early departure) until a
/// re-run back as a prefetch issued at `at` is. None for an entry outside the trace (refused by
/// validate_schedule) or whose run is empty. The one rule planned_device_curve and the planners
/// that keep the curve in another form (raising it as entries go) share.
/// @param analysis The recorded iteration's facts.
/// @param e A recompute entry.
/// @return Its run (two event indices, from <= through), or nullopt when it has none.
[[nodiscard]] inline std::optional<std::pair<std::uint64_t, std::uint64_t>> recompute_off_run(
    trace_analysis const& analysis, recompute_entry const& e)
{
  if (!detail::in_trace(analysis, e)) { return std::nullopt; }
  auto const from    = detail::early_departure(analysis, e) && e.last_use > 0
                           ? detail::back_after(analysis, e.last_use - 1) + 1
                           : analysis.ops().event[e.last_use] + 1;
  auto const through = detail::back_after(analysis, e.at - 1);
  if (from > through) { return std::nullopt; }
  return std::pair{from, through};
}

namespace detail {

// A difference array over a trace's events (one more slot: the end) that is all zero between
// uses, and a bitmap of the events holding a difference, which gives them back in order without
// a sort: planned_device_curve's bytes off the device change at two events an entry, hundreds a
// plan against a trace's ~15,000 events, and search computes thousands of curves, each of which
// zeroed and summed the whole array.
class off_steps {
 public:
  // Ready for a trace of `events` events (all zero: only a new size clears anything).
  void size_for(std::size_t events)
  {
    if (delta_.size() != events + 1 || bits_.size() != (events + 1 + 63) / 64) {
      delta_.assign(events + 1, 0);
      bits_.assign((events + 1 + 63) / 64, 0);
    }
  }
  // The bytes away change by `change` (modulo 2^64) from event `at` on.
  void add(std::uint64_t at, std::uint64_t change)
  {
    delta_[at] += change;
    bits_[at / 64] |= std::uint64_t{1} << (at % 64);
  }
  // Calls f(event, change) for each event holding one, in event order, and zeroes them.
  template <class F>
  void drain(F&& f)
  {
    for (std::size_t w = 0; w < bits_.size(); ++w) {
      for (auto word = std::exchange(bits_[w], 0); word != 0; word &= word - 1) {
        auto const at = w * 64 + static_cast<std::size_t>(std::countr_zero(word));
        f(static_cast<std::uint64_t>(at), std::exchange(delta_[at], 0));
      }
    }
  }

 private:
  std::vector<std::uint64_t> delta_;
  std::vector<std::uint64_t> bits_;
};

// planned_device_curve's bytes off the device into `steps` (sized for the trace): each swap
// entry's runs (for_each_planned_off_run) and each recompute entry's gap, a re-run back as a
// prefetch issued at `at` is.
inline void planned_off_steps(trace_analysis const& analysis, std::span<swap_entry const> entries,
                              std::span<recompute_entry const> recomputes, off_steps& steps)
{
  steps.size_for(analysis.trace().events().size());
  auto off = [&](std::uint64_t from, std::uint64_t through, std::uint64_t bytes) {
    if (from <= through) {
      steps.add(from, bytes);
      steps.add(through + 1, std::uint64_t{0} - bytes);
    }
  };
  for (auto const& e : entries) {
    for_each_planned_off_run(analysis, e, [&](std::uint64_t from, std::uint64_t through) {
      off(from, through, e.bytes);
    });
  }
  for (auto const& e : recomputes) {
    if (auto const run = recompute_off_run(analysis, e)) { off(run->first, run->second, e.bytes); }
  }
}

// out[i] = live[i] less the bytes away at event i (`steps` summed through i, modulo 2^64) for
// every event, `steps` drained. True when no event has more bytes away than live; false when
// one might (exact_curve decides). Between two steps the bytes away are constant: a loop the
// compiler vectorizes, which tells below 2^63 bytes that none is away beyond those live by the
// sign bits alone (live[i] - away is negative as a signed value exactly then); the few bits of
// a borrow beyond that.
[[nodiscard]] inline bool curve_from_steps(std::span<std::uint64_t const> live, off_steps& steps,
                                           std::span<std::uint64_t> out)
{
  constexpr std::uint64_t top = std::uint64_t{1} << 63;
  std::uint64_t away          = 0;
  std::uint64_t signs         = 0;  // bit 63 set once some event may have more away than live
  std::size_t i               = 0;
  auto fill_to                = [&](std::size_t end) {
    auto const* l = live.data();
    auto* o       = out.data();
    if (away < top) {
      for (; i < end; ++i) {
        o[i] = l[i] - away;
        signs |= o[i] | l[i];
      }
      return;
    }
    for (; i < end; ++i) {  // a borrow out of bit 63
      o[i] = l[i] - away;
      signs |= (~l[i] & away) | (~(l[i] ^ away) & o[i]);
    }
  };
  steps.drain([&](std::uint64_t at, std::uint64_t change) {
    fill_to(std::min<std::uint64_t>(at, live.size()));
    away += change;
  });
  fill_to(live.size());
  return (signs & top) == 0;
}

// planned_device_curve of `entries` and `recomputes` into `out` (sized for the trace) as a
// running sum over every event, where curve_from_steps could not rule out more bytes away than
// live: the schedule_error naming the first such event, or the curve when there is none.
inline void exact_curve(trace_analysis const& analysis, std::span<swap_entry const> entries,
                        std::span<recompute_entry const> recomputes, std::span<std::uint64_t> out)
{
  auto const live = analysis.live_bytes();
  std::vector<std::uint64_t> delta(live.size() + 1, 0);
  off_steps steps;
  planned_off_steps(analysis, entries, recomputes, steps);
  steps.drain([&](std::uint64_t at, std::uint64_t change) { delta[at] = change; });
  std::uint64_t away = 0;
  for (std::uint64_t i = 0; i < live.size(); ++i) {
    away += delta[i];
    if (away > live[i]) {
      throw schedule_error(std::nullopt, "planned device bytes below zero at event " +
                                             std::to_string(i) + ": " + std::to_string(away) +
                                             " B away of " + std::to_string(live[i]) + " B live");
    }
    out[i] = live[i] - away;
  }
}

}  // namespace detail

/// @brief Planned device bytes after each event of `t` under `entries` (copies instantaneous;
/// see the file comment). Entries must be valid (validate_schedule): more bytes away than live
/// at an event (an entry away past its storage's free, one gap listed twice) is a
/// stash::schedule_error, never a count wrapped below zero; an entry whose storage or op indices
/// lie outside the trace is not counted.
/// @param analysis The recorded iteration's facts.
/// @param entries Swap entries.
/// @param recomputes Recompute entries.
/// @return Device bytes at each op.
[[nodiscard]] inline std::vector<std::uint64_t> planned_device_curve(
    trace_analysis const& analysis, std::span<swap_entry const> entries,
    std::span<recompute_entry const> recomputes = {})
{
  thread_local detail::off_steps steps;     // all zero between calls (drained)
  auto const live = analysis.live_bytes();  // per event, nothing swapped
  std::vector<std::uint64_t> curve;
  // Allocated before any step is added: nothing between the steps and their drain throws.
  curve.assign(live.size(), 0);  // (a store loop: value-initialising calls memset, costlier here)
  detail::planned_off_steps(analysis, entries, recomputes, steps);
  if (!detail::curve_from_steps(live, steps, curve)) {  // invalid entries (see above), or huge
    detail::exact_curve(analysis, entries, recomputes, curve);
  }
  return curve;
}

/// @brief The planned device bytes once op `op`'s end frees are returned and the entries back
/// with them (the recompute entries and prefetches at op + 1) are counted: the level a re-run
/// batch at op + 1 starts from (recompute_run_bytes).
///
/// The entries come back at the event right after op `op` (planned_device_curve), which is an end
/// free only when op `op` has one; frees across a phase line are end frees too
/// (trace_analysis::memory_steps). So the level is the curve just before the first allocation or
/// op after op `op`: the curve at that event less its own allocation (0 rather than a wrapped
/// value where the curve is not this schedule's, i.e. does not count that allocation). The curve
/// is a callable so that planners which keep it in another form (a range tree) read it the same
/// way.
/// @tparam CurveAt A callable taking an event index (std::uint64_t) and returning the planned
/// device bytes at that event (std::uint64_t).
/// @param analysis The recorded iteration's facts.
/// @param curve_at The planned device curve of the schedule, per event (planned_device_curve).
/// @param op An op index of the trace.
/// @return The planned device bytes after op `op`'s end frees, the entries back with them counted.
template <class CurveAt>
requires std::is_invocable_r_v<std::uint64_t, CurveAt&, std::uint64_t>
[[nodiscard]] std::uint64_t level_after_end_frees(trace_analysis const& analysis,
                                                  CurveAt&& curve_at, std::uint64_t op)
{
  auto const events = analysis.trace().events();
  auto j            = analysis.ops().event[op] + 1;
  while (j < events.size() &&
         (events[j].kind == event_kind::free || events[j].kind == event_kind::phase)) {
    ++j;
  }
  if (j == events.size()) { return curve_at(j - 1); }
  auto const alloc =
      events[j].kind == event_kind::alloc ? analysis.trace().storages()[events[j].index].bytes : 0;
  std::uint64_t const at = curve_at(j);
  return at >= alloc ? at - alloc : 0;
}

namespace detail {

// recompute_run_bytes, entry k's transient bytes (its chain's) given by `transient_of(k)`:
// called once per entry, in order, once its batch is known to be counted.
template <class TransientOf>
[[nodiscard]] std::vector<std::uint64_t> run_bytes(trace_analysis const& analysis,
                                                   std::span<std::uint64_t const> curve,
                                                   std::span<recompute_entry const> recomputes,
                                                   std::span<swap_entry const> entries,
                                                   TransientOf&& transient_of)
{
  // bytes that leave right after the batch at each op, resident while it runs
  std::vector<std::pair<std::uint64_t, std::uint64_t>> leaving;
  for (auto const& e : entries) {
    if (detail::in_trace(analysis, e) && detail::early_departure(analysis, e)) {
      leaving.emplace_back(e.last_use, e.bytes);
    }
  }
  for (auto const& e : recomputes) {
    if (detail::in_trace(analysis, e) && detail::early_departure(analysis, e)) {
      leaving.emplace_back(e.last_use, e.bytes);
    }
  }
  std::sort(leaving.begin(), leaving.end());
  auto leaving_at = [&](std::uint64_t at) {
    std::uint64_t sum = 0;
    for (auto it =
             std::lower_bound(leaving.begin(), leaving.end(), std::make_pair(at, std::uint64_t{0}));
         it != leaving.end() && it->first == at; ++it) {
      sum += it->second;
    }
    return sum;
  };
  std::vector<std::uint64_t> out(recomputes.size());
  std::uint64_t still_to_come = 0;  // bytes of the batch's entries after the current one
  std::uint64_t level         = 0;
  // An entry outside the trace: validate_schedule refuses the schedule; nothing is counted.
  for (auto const& e : recomputes) {
    if (!detail::in_trace(analysis, e)) { return out; }
  }
  for (std::size_t k = 0; k < recomputes.size(); ++k) {
    auto const& e = recomputes[k];
    if (k == 0 || recomputes[k - 1].at != e.at) {
      level = level_after_end_frees(
                  analysis, [&](std::uint64_t i) { return curve[i]; }, e.at - 1) +
              leaving_at(e.at);
      still_to_come = 0;
      for (auto j = k; j < recomputes.size() && recomputes[j].at == e.at; ++j) {
        still_to_come += recomputes[j].bytes;
      }
    }
    still_to_come -= e.bytes;
    if (still_to_come > level) {  // the level counts every entry of the batch: never here
      throw schedule_error::in_recompute(
          k, "planned device bytes below zero while it runs: " + std::to_string(still_to_come) +
                 " B of its batch still to come, " + std::to_string(level) + " B planned");
    }
    out[k] = level - still_to_come + transient_of(k);
  }
  return out;
}

// The planned peak given the curve and each entry's transient bytes (run_bytes).
template <class TransientOf>
[[nodiscard]] std::uint64_t peak_with(trace_analysis const& analysis,
                                      std::span<std::uint64_t const> curve,
                                      std::span<swap_entry const> entries,
                                      std::span<recompute_entry const> recomputes,
                                      TransientOf&& transient_of)
{
  auto peak = curve.empty() ? 0 : *std::max_element(curve.begin(), curve.end());
  for (auto const b : run_bytes(analysis, curve, recomputes, entries, transient_of)) {
    peak = std::max(peak, b);
  }
  return peak;
}

[[nodiscard]] inline std::uint64_t planned_peak_of(trace_analysis const& analysis,
                                                   schedule const& s, rerun_index const& reruns)
{
  auto const curve = planned_device_curve(analysis, s.entries, s.recomputes);
  return peak_with(analysis, curve, s.entries, s.recomputes,
                   [&](std::size_t k) { return reruns.chains[k]->transient_bytes; });
}

}  // namespace detail

/// @brief The planned device bytes while each recompute entry's re-run runs (see the file
/// comment), given `curve`, the planned_device_curve of the same schedule. A curve that does not
/// count the batch (not the schedule's) is a stash::schedule_error naming the entry.
/// @param analysis The recorded iteration's facts.
/// @param curve The planned device bytes per op (planned_device_curve).
/// @param recomputes Recompute entries.
/// @param entries The schedule's swap entries: those leaving right after a batch (early
/// departures, see the file comment) are counted while it runs.
/// @return Device bytes the recompute runs add at each op.
[[nodiscard]] inline std::vector<std::uint64_t> recompute_run_bytes(
    trace_analysis const& analysis, std::span<std::uint64_t const> curve,
    std::span<recompute_entry const> recomputes, std::span<swap_entry const> entries = {})
{
  return detail::run_bytes(analysis, curve, recomputes, entries, [&](std::size_t k) {
    auto const& e = recomputes[k];
    return recompute_chain_of(analysis, e.id, e.last_use, e.at).transient_bytes;
  });
}

/// @brief The planned device peak of `entries` and `recomputes` on `t`: the max of
/// planned_device_curve and of recompute_run_bytes.
/// @param analysis The recorded iteration's facts.
/// @param entries Swap entries.
/// @param recomputes Recompute entries.
/// @return The planned device peak.
[[nodiscard]] inline std::uint64_t planned_peak(trace_analysis const& analysis,
                                                std::span<swap_entry const> entries,
                                                std::span<recompute_entry const> recomputes)
{
  auto const curve = planned_device_curve(analysis, entries, recomputes);
  auto peak        = curve.empty() ? 0 : *std::max_element(curve.begin(), curve.end());
  for (auto const b : recompute_run_bytes(analysis, curve, recomputes, entries)) {
    peak = std::max(peak, b);
  }
  return peak;
}

/// @brief Whether `s` has an entry that starts or ends at a re-run use that is not an access of
/// its storage, or a redrop entry (see the file comment): a schedule whose replay needs
/// stash::allocator's early departures and kept host copies.
/// @param analysis The recorded iteration's facts.
/// @param s A valid schedule (validate_schedule).
/// @return True when some entry splits a gap at a re-run use.
[[nodiscard]] inline bool splits_gaps(trace_analysis const& analysis, schedule const& s)
{
  auto const n = analysis.op_count();
  auto sub_gap = [&](storage_id id, std::uint64_t u, std::uint64_t v) {
    return id < analysis.trace().storages().size() && u < n && v < n &&
           (!detail::is_access(analysis, id, u) || !detail::is_access(analysis, id, v));
  };
  return std::any_of(s.entries.begin(), s.entries.end(),
                     [&](swap_entry const& e) {
                       return e.redrop || (!e.wrap && sub_gap(e.id, e.last_use, e.next_use));
                     }) ||
         std::any_of(s.recomputes.begin(), s.recomputes.end(), [&](recompute_entry const& e) {
           return sub_gap(e.id, e.last_use, e.next_use);
         });
}

/// @brief A schedule for `entries` with its peaks filled in.
/// @param analysis The recorded iteration's facts.
/// @param policy The policy that made the schedule.
/// @param budget Device bytes the iteration must fit in.
/// @param entries Swap entries.
/// @param recomputes Recompute entries.
/// @return The schedule, its peak computed.
[[nodiscard]] inline schedule make_schedule(trace_analysis const& analysis, std::string policy,
                                            std::uint64_t budget, std::vector<swap_entry> entries,
                                            std::vector<recompute_entry> recomputes = {})
{
  schedule s;
  s.policy        = std::move(policy);
  s.budget        = budget;
  s.baseline_peak = analysis.peak_live_bytes();
  s.device_peak   = planned_peak(analysis, entries, recomputes);
  s.entries       = std::move(entries);
  s.recomputes    = std::move(recomputes);
  return s;
}

}  // namespace stash
