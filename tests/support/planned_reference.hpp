// The planned device peak of a schedule recomputed from sim/schedule.hpp's definition, storage by
// storage and op by op (no running sums, no event deltas): a reference for planned_peak.
//  - After each event: the live storages less those away then. A swap entry keeps its storage
//    away after op max(last_use, offload_at - 1) (last_use when offload_at is 0) through op
//    prefetch_at - 1 and the frees that end it; a recompute entry after op last_use through op
//    at - 1 and its end frees. An early departure (last_use p > 0 is not an access of the
//    storage, only a re-run use; a recompute entry, or a swap entry not wrapping with
//    offload_at = p) is away from op p's step on instead: from the first event after op p-1's
//    end frees that is neither a free nor a phase line.
//  - While recompute entry k runs (before op `at`, after op at-1's end frees): the storages live
//    then (their frees up to op `at`'s first allocation done, its allocations not yet), less the
//    swaps away across that point (released by op at-1, prefetched after op `at` starts), the
//    recomputes of later batches away across it, and the entries of k's batch listed after k;
//    plus k's transient bytes.
#pragma once

#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace stash::test {

namespace detail {

// The first event after op `op` that is neither a free nor a phase line (op op's end frees end
// there): a storage prefetched or re-run for op op + 1 is back from it.
inline std::uint64_t back_event(trace_analysis const& a, std::uint64_t op)
{
  auto const events = a.trace().events();
  auto e            = a.ops().event[op] + 1;
  while (e < events.size() &&
         (events[e].kind == event_kind::free || events[e].kind == event_kind::phase)) {
    ++e;
  }
  return e;
}

// True when storage `id` is away after event `e`: inside an entry's window (see the file comment).
// Whether op `op` reads or writes storage `id` in the recorded trace (not a re-run use).
inline bool accessed_at(trace_analysis const& a, storage_id id, std::uint64_t op)
{
  auto const& acc = a.lifetimes().storages[id].accesses;
  return std::any_of(acc.begin(), acc.end(), [&](auto const& x) { return x.op == op; });
}

// Whether an entry leaving after op `last_use` leaves from op last_use's step on instead.
inline bool leaves_early(trace_analysis const& a, storage_id id, std::uint64_t last_use)
{
  return last_use > 0 && !accessed_at(a, id, last_use);
}

// True when storage `id` is away after event `e`: inside an entry's window (see the file comment).
inline bool away_after_event(trace_analysis const& a, schedule const& s, storage_id id,
                             std::uint64_t e)
{
  auto const& ev = a.ops().event;
  for (auto const& w : s.entries) {
    if (w.id != id) { continue; }
    auto const release = w.offload_at == 0 ? w.last_use : std::max(w.last_use, w.offload_at - 1);
    bool const early   = !w.wrap && w.offload_at == w.last_use && leaves_early(a, id, w.last_use);
    bool const gone    = early ? back_event(a, w.last_use - 1) <= e : ev[release] < e;
    if (gone && e < back_event(a, w.prefetch_at - 1)) { return true; }
  }
  for (auto const& r : s.recomputes) {
    if (r.id != id) { continue; }
    bool const gone =
        leaves_early(a, id, r.last_use) ? back_event(a, r.last_use - 1) <= e : ev[r.last_use] < e;
    if (gone && e < back_event(a, r.at - 1)) { return true; }
  }
  return false;
}

inline bool live_after_event(trace_analysis const& a, storage_id id, std::uint64_t e)
{
  auto const& life = a.lifetimes().storages[id];
  return life.alloc_event <= e && (!life.free_event || *life.free_event > e);
}

}  // namespace detail

/// The planned bytes while each recompute entry of `s` runs (see the file comment).
inline std::vector<std::uint64_t> reference_run_bytes(trace_analysis const& a, schedule const& s)
{
  auto const& t     = a.trace();
  auto const events = t.events();
  std::vector<std::uint64_t> out;
  for (std::size_t k = 0; k < s.recomputes.size(); ++k) {
    auto const at = s.recomputes[k].at;
    // The last event before op `at` that is not one of its allocations or the op itself.
    auto point = a.ops().event[at] - 1;
    for (auto e = a.ops().event[at - 1] + 1; e < a.ops().event[at]; ++e) {
      if (events[e].kind == event_kind::alloc) {
        point = e - 1;
        break;
      }
    }
    std::uint64_t bytes = 0;
    for (storage_id id = 0; id < t.storages().size(); ++id) {
      if (!detail::live_after_event(a, id, point)) { continue; }
      bool away = false;
      for (auto const& w : s.entries) {
        auto const release =
            w.offload_at == 0 ? w.last_use : std::max(w.last_use, w.offload_at - 1);
        away = away || (w.id == id && release < at && w.prefetch_at > at);
      }
      for (std::size_t j = 0; j < s.recomputes.size(); ++j) {
        auto const& r = s.recomputes[j];
        if (r.id != id || r.last_use >= at) { continue; }
        away = away || r.at > at || (r.at == at && j > k);
      }
      if (!away) { bytes += t.storages()[id].bytes; }
    }
    auto const& e = s.recomputes[k];
    out.push_back(bytes + recompute_chain_of(a, e.id, e.last_use, e.at).transient_bytes);
  }
  return out;
}

/// The planned device peak of `s` (see the file comment).
inline std::uint64_t reference_planned_peak(trace_analysis const& a, schedule const& s)
{
  auto const& t       = a.trace();
  std::uint64_t peak  = 0;
  auto const n_events = t.events().size();
  for (std::uint64_t e = 0; e < n_events; ++e) {
    std::uint64_t bytes = 0;
    for (storage_id id = 0; id < t.storages().size(); ++id) {
      if (detail::live_after_event(a, id, e) && !detail::away_after_event(a, s, id, e)) {
        bytes += t.storages()[id].bytes;
      }
    }
    peak = std::max(peak, bytes);
  }
  for (auto const b : reference_run_bytes(a, s)) { peak = std::max(peak, b); }
  return peak;
}

}  // namespace stash::test
