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
 * later of op `last_use` and op `offload_at - 1`, and back from the start of op `prefetch_at`.
 * The simulator (sim/simulator.hpp) times the same schedule. Schedules live in sim/, the lowest
 * component that reads them; swap policies (swap/) write them.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/op_index.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
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

  friend constexpr bool operator==(swap_entry const&, swap_entry const&) = default;
};

/// @brief What a swap policy decided for one trace and budget.
struct schedule {
  std::string policy;               ///< name of the policy that planned it
  std::string note;                 ///< policy-specific remark (e.g. what vdnn_dyn picked)
  std::uint64_t budget{};           ///< the device memory budget it was planned for
  std::uint64_t baseline_peak{};    ///< peak live bytes without swapping
  std::uint64_t device_peak{};      ///< planned device peak under this schedule
  std::vector<swap_entry> entries;  ///< in the order the policy issues them

  /// @brief True when the planned peak fits the budget.
  [[nodiscard]] bool fits() const noexcept { return device_peak <= budget; }
  /// @brief Sum of the bytes of all entries (each crosses the link once each way).
  [[nodiscard]] std::uint64_t offloaded_bytes() const noexcept
  {
    std::uint64_t sum = 0;
    for (auto const& e : entries) { sum += e.bytes; }
    return sum;
  }
};

/// @brief A schedule that does not fit its trace. Says which entry (if one), what is wrong and,
/// when the allocator found it, which policy returned it.
class schedule_error : public logic_error {
 public:
  /// @brief `entry` is the index in schedule::entries, or nullopt for the schedule as a whole.
  schedule_error(std::optional<std::size_t> entry, std::string const& what,
                 std::string const& policy = {})
      : logic_error("invalid swap schedule" +
                    (policy.empty() ? std::string() : " from policy '" + policy + "'") +
                    (entry ? " entry " + std::to_string(*entry) : std::string()) + ": " + what),
        entry_(entry),
        reason_(what)
  {
  }
  /// @brief Index of the faulty entry, if the fault is in one.
  [[nodiscard]] std::optional<std::size_t> entry() const noexcept { return entry_; }
  /// @brief What is wrong, without the entry and policy.
  [[nodiscard]] std::string const& reason() const noexcept { return reason_; }

 private:
  std::optional<std::size_t> entry_;
  std::string reason_;
};

/// @brief The events over which a swap entry keeps its storage off the device in the planned
/// (instantaneous-copy) model: off from event `after + 1` through event `last`; empty when
/// after >= last.
struct off_window {
  std::uint64_t after;  ///< off from event after + 1
  std::uint64_t last;   ///< through event last
};

/// @brief The planned off-window of `e` (see off_window).
[[nodiscard]] inline off_window planned_off_window(swap_entry const& e, op_index const& ops)
{
  auto const release_op = e.offload_at == 0 ? e.last_use : std::max(e.last_use, e.offload_at - 1);
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
                                                std::span<swap_entry const> entries);

/// @brief Checks `s` against `t`; throws stash::schedule_error naming the entry and the rule.
///
/// Rules: the storage exists and its size is `bytes`; last_use and next_use are consecutive
/// accesses of it; no op in [offload_at, last_use] writes it and it is allocated before
/// offload_at starts; last_use < prefetch_at <= next_use and offload_at < prefetch_at; two
/// entries of one storage do not overlap (the later one's offload starts at or after the earlier
/// one's next use); device_peak is the planned peak and baseline_peak the trace's peak.
// Kept whole (~70 lines): it is the list of rules in the comment above, in that order, each a
// check with its own message; splitting would only scatter the list.
inline void validate_schedule(trace_analysis const& analysis, schedule const& s)
{
  auto const& t    = analysis.trace();
  auto const& life = analysis.lifetimes();
  auto const& ops  = analysis.ops();
  auto const n     = t.ops().size();
  std::map<storage_id, std::vector<std::size_t>> by_storage;
  for (std::size_t k = 0; k < s.entries.size(); ++k) {
    auto const& e = s.entries[k];
    auto fail     = [&](std::string const& what) { throw schedule_error(k, what); };
    if (e.id >= t.storages().size()) {
      fail("storage id " + std::to_string(e.id) + " does not exist (the trace has " +
           std::to_string(t.storages().size()) + " storages)");
    }
    auto const who = detail::describe(t, e.id);
    if (e.bytes != t.storages()[e.id].bytes) {
      fail(who + ": bytes " + std::to_string(e.bytes) + " differ from its size " +
           std::to_string(t.storages()[e.id].bytes));
    }
    if (e.last_use >= n || e.next_use >= n || e.offload_at >= n || e.prefetch_at >= n) {
      fail(who + ": op index out of range (the trace has " + std::to_string(n) + " ops)");
    }
    auto const& acc = life.storages[e.id].accesses;
    auto const at   = std::find_if(acc.begin(), acc.end(),
                                   [&](storage_access const& a) { return a.op == e.last_use; });
    if (at == acc.end() || at + 1 == acc.end() || (at + 1)->op != e.next_use) {
      fail(who + ": ops " + std::to_string(e.last_use) + " and " + std::to_string(e.next_use) +
           " are not consecutive accesses of it");
    }
    if (!(e.last_use < e.prefetch_at && e.prefetch_at <= e.next_use)) {
      fail(who + ": prefetch_at " + std::to_string(e.prefetch_at) + " must be in (last_use " +
           std::to_string(e.last_use) + ", next_use " + std::to_string(e.next_use) + "]");
    }
    if (e.offload_at >= e.prefetch_at) {
      fail(who + ": offload_at " + std::to_string(e.offload_at) + " must precede prefetch_at " +
           std::to_string(e.prefetch_at));
    }
    if (t.alloc_event(e.id) >= ops.event[e.offload_at]) {
      fail(who + ": offload_at " + std::to_string(e.offload_at) +
           " starts before the storage is allocated");
    }
    for (auto a = acc.begin(); a != at + 1; ++a) {
      if (a->write && a->op >= e.offload_at) {
        fail(who + ": op " + std::to_string(a->op) + " writes it after its offload starts (op " +
             std::to_string(e.offload_at) + ")");
      }
    }
    by_storage[e.id].push_back(k);
  }
  for (auto& [id, list] : by_storage) {
    std::sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
      return s.entries[a].last_use < s.entries[b].last_use;
    });
    for (std::size_t j = 1; j < list.size(); ++j) {
      auto const& prev = s.entries[list[j - 1]];
      auto const& cur  = s.entries[list[j]];
      if (cur.last_use == prev.last_use || cur.offload_at < prev.next_use) {
        throw schedule_error(list[j], detail::describe(t, id) + " overlaps entry " +
                                          std::to_string(list[j - 1]) + " of the same storage");
      }
    }
  }
  if (s.baseline_peak != life.peak_live_bytes) {
    throw schedule_error(std::nullopt, "baseline_peak " + std::to_string(s.baseline_peak) +
                                           " is not the trace's peak " +
                                           std::to_string(life.peak_live_bytes));
  }
  auto const peak = planned_peak(analysis, s.entries);
  if (s.device_peak != peak) {
    throw schedule_error(std::nullopt, "device_peak " + std::to_string(s.device_peak) +
                                           " is not the planned peak " + std::to_string(peak));
  }
}

/// @brief Planned device bytes after each event of `t` under `entries` (copies instantaneous;
/// see the file comment). Entries must be valid (validate_schedule).
[[nodiscard]] inline std::vector<std::uint64_t> planned_device_curve(
    trace_analysis const& analysis, std::span<swap_entry const> entries)
{
  auto const& t     = analysis.trace();
  auto const& ops   = analysis.ops();
  auto const events = t.events();
  std::vector<std::int64_t> delta(events.size() + 1, 0);
  for (auto const& e : entries) {
    auto const w = planned_off_window(e, ops);
    if (w.after < w.last) {
      delta[w.after + 1] -= static_cast<std::int64_t>(e.bytes);
      delta[w.last + 1] += static_cast<std::int64_t>(e.bytes);
    }
  }
  std::vector<std::uint64_t> curve(events.size());
  std::uint64_t live   = 0;
  std::int64_t removed = 0;
  for (std::uint64_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == event_kind::alloc) { live += t.storages()[events[i].index].bytes; }
    if (events[i].kind == event_kind::free) { live -= t.storages()[events[i].index].bytes; }
    removed += delta[i];
    curve[i] = live - static_cast<std::uint64_t>(-removed);
  }
  return curve;
}

/// @brief The planned device peak of `entries` on `t` (max of planned_device_curve).
[[nodiscard]] inline std::uint64_t planned_peak(trace_analysis const& analysis,
                                                std::span<swap_entry const> entries)
{
  auto const curve = planned_device_curve(analysis, entries);
  return curve.empty() ? 0 : *std::max_element(curve.begin(), curve.end());
}

/// @brief A schedule for `entries` with its peaks filled in.
[[nodiscard]] inline schedule make_schedule(trace_analysis const& analysis, std::string policy,
                                            std::uint64_t budget, std::vector<swap_entry> entries)
{
  schedule s;
  s.policy        = std::move(policy);
  s.budget        = budget;
  s.baseline_peak = analysis.peak_live_bytes();
  s.device_peak   = planned_peak(analysis, entries);
  s.entries       = std::move(entries);
  return s;
}

}  // namespace stash
