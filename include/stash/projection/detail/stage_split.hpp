/**
 * @file stage_split.hpp
 * @brief Splitting a trace into k pipeline stages for model parallelism (internal to
 * projection.hpp): which forward op owns each op and storage, the balanced contiguous split, and
 * the trace one stage's device sees.
 *
 * Units. A training step runs forward ops, then backward ops in roughly reverse order, then the
 * optimizer. A contiguous split of the *whole* op sequence would put all of backward on the last
 * device, so the split is over the forward ops: each forward op is a unit, and every other op
 * and every storage is assigned to a unit:
 *  - a storage belongs to the unit of the first op that touches it; one no op touches (a kernel
 *    workspace) to the unit of the next op after its allocation;
 *  - a backward or optimizer op belongs to the highest unit among the param/optstate storages it
 *    touches (the layer whose weights it differentiates or updates); failing that, the highest
 *    among the act/input storages it touches (the saved activations of its layer; its input may
 *    come from the previous unit, hence the highest); failing that, the unit of the previous
 *    non-forward op (or the last unit).
 * A stage is a contiguous range of units. A storage touched by an op of another stage crosses a
 * stage boundary once per receiving stage.
 *
 * Split (exact dynamic program, O(k U^2) over U units): minimise the largest stage time among
 * splits whose every stage's memory estimate fits the budget; if none fits, minimise the largest
 * stage memory estimate (offload then decides). Stage time = the sum of its ops' times; memory
 * estimate = bytes of its param, optstate, grad, act and input storages (what is live when
 * backward starts; temporaries are left out here and counted in the exact per-stage peak).
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace stash::detail {

/// Unit of every op and storage, and each op's phase.
struct unit_map {
  std::size_t units{};                    // number of forward ops
  std::vector<std::size_t> op_unit;       // per op
  std::vector<std::size_t> storage_unit;  // per storage
  std::vector<phase> op_phase;            // per op
};

// Kept whole (~65 lines): the forward pass numbers units and the backward pass maps each op and
// storage back onto them; both read the same per-storage first-forward-use table.
[[nodiscard]] inline unit_map assign_units(trace const& t)
{
  auto const ops      = t.ops();
  auto const storages = t.storages();
  auto const events   = t.events();
  constexpr auto none = std::numeric_limits<std::size_t>::max();
  unit_map m;
  m.op_unit.assign(ops.size(), none);
  m.storage_unit.assign(storages.size(), none);
  m.op_phase.assign(ops.size(), phase::forward);
  phase current = phase::forward;  // ops before any marker count as forward
  for (auto const& e : events) {
    if (e.kind == event_kind::phase) { current = e.phase_value(); }
    if (e.kind == event_kind::op) {
      m.op_phase[e.index] = current;
      if (current == phase::forward) { ++m.units; }
    }
  }
  STASH_EXPECTS(m.units > 0, "projection: the trace has no forward ops to split");

  std::size_t next_unit = 0, last_other = none;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto const& o    = ops[i];
    std::size_t unit = none;
    if (m.op_phase[i] == phase::forward) {
      unit = next_unit++;
    } else {
      std::size_t weights = none, saved = none;
      for (auto const* list : {&o.reads, &o.writes}) {
        for (auto const id : *list) {
          auto const u = m.storage_unit[id];
          if (u == none) { continue; }
          auto const k = storages[id].kind;
          if (k == storage_kind::param || k == storage_kind::optstate) {
            weights = weights == none ? u : std::max(weights, u);
          } else if (k == storage_kind::act || k == storage_kind::input) {
            saved = saved == none ? u : std::max(saved, u);
          }
        }
      }
      unit       = weights != none      ? weights
                   : saved != none      ? saved
                   : last_other != none ? last_other
                                        : m.units - 1;
      last_other = unit;
    }
    m.op_unit[i] = unit;
    for (auto const* list : {&o.reads, &o.writes}) {
      for (auto const id : *list) {
        if (m.storage_unit[id] == none) { m.storage_unit[id] = unit; }
      }
    }
  }
  // Untouched storages: the unit of the next op after their allocation (a workspace belongs to
  // the op it precedes), else the last op's.
  std::size_t next_op_unit = ops.empty() ? 0 : m.op_unit.back();
  for (std::size_t e = events.size(); e-- > 0;) {
    auto const& ev = events[e];
    if (ev.kind == event_kind::op) { next_op_unit = m.op_unit[ev.index]; }
    if (ev.kind == event_kind::alloc && m.storage_unit[ev.index] == none) {
      m.storage_unit[ev.index] = next_op_unit;
    }
  }
  return m;
}

/// Result of the split: stage of each unit (non-decreasing) and whether the memory constraint
/// could be met.
struct stage_split {
  std::vector<std::size_t> unit_stage;  // per unit
  bool memory_feasible{};
};

/// Splits units 0..U-1 into `k` contiguous non-empty stages (see the file comment).
/// `unit_time` and `unit_memory` are per unit; `budget` the per-device memory budget.
[[nodiscard]] inline stage_split split_units(std::span<double const> unit_time,
                                             std::span<std::uint64_t const> unit_memory,
                                             std::size_t k, std::uint64_t budget)
{
  auto const u = unit_time.size();
  STASH_EXPECTS(k >= 1 && k <= u, "projection: cannot split " + std::to_string(u) +
                                      " forward ops into " + std::to_string(k) + " stages");
  std::vector<double> time_prefix(u + 1, 0.0);
  std::vector<std::uint64_t> mem_prefix(u + 1, 0);
  for (std::size_t i = 0; i < u; ++i) {
    time_prefix[i + 1] = time_prefix[i] + unit_time[i];
    mem_prefix[i + 1]  = mem_prefix[i] + unit_memory[i];
  }
  constexpr double inf = std::numeric_limits<double>::infinity();
  // cost(i, j) of a stage over units [i, j): its time when its memory fits (or memory is the
  // objective), infinity otherwise.
  auto run = [&](bool by_memory, std::vector<std::size_t>& stage_of) {
    // best[s][j]: the smallest largest-stage cost of splitting units [0, j) into s stages.
    std::vector<std::vector<double>> best(k + 1, std::vector<double>(u + 1, inf));
    std::vector<std::vector<std::size_t>> cut(k + 1, std::vector<std::size_t>(u + 1, 0));
    best[0][0] = 0;
    for (std::size_t s = 1; s <= k; ++s) {
      for (std::size_t j = s; j <= u - (k - s); ++j) {
        for (std::size_t i = s - 1; i < j; ++i) {
          if (best[s - 1][i] == inf) { continue; }
          auto const mem = mem_prefix[j] - mem_prefix[i];
          double cost    = 0;
          if (by_memory) {
            cost = static_cast<double>(mem);
          } else if (mem <= budget) {
            cost = time_prefix[j] - time_prefix[i];
          } else {
            continue;
          }
          double const worst = std::max(best[s - 1][i], cost);
          if (worst < best[s][j]) {
            best[s][j] = worst;
            cut[s][j]  = i;
          }
        }
      }
    }
    if (best[k][u] == inf) { return false; }
    stage_of.assign(u, 0);
    std::size_t j = u;
    for (std::size_t s = k; s >= 1; --s) {
      auto const i = cut[s][j];
      for (std::size_t x = i; x < j; ++x) { stage_of[x] = s - 1; }
      j = i;
    }
    return true;
  };
  stage_split out;
  out.memory_feasible = run(false, out.unit_stage);
  if (!out.memory_feasible) { (void)run(true, out.unit_stage); }
  return out;
}

/// The trace that the device of stage `stage` sees: its own ops, the storages it owns with their
/// original lifetimes, and storages received from other stages, allocated just before the first
/// of its ops that touches them and freed just after the last. Phase markers are kept.
// Kept whole (~70 lines): one pass over the events that rewrites them for one stage; the
// received storages' first and last touching ops are found and used in the same pass.
[[nodiscard]] inline trace stage_trace(trace const& t, unit_map const& m,
                                       std::span<std::size_t const> unit_stage, std::size_t stage)
{
  auto const ops         = t.ops();
  auto const storages    = t.storages();
  auto const events      = t.events();
  auto const stage_of_op = [&](std::size_t op) { return unit_stage[m.op_unit[op]]; };
  auto const owned       = [&](storage_id id) { return unit_stage[m.storage_unit[id]] == stage; };

  // First and last op of this stage touching each foreign storage.
  std::unordered_map<storage_id, std::pair<std::size_t, std::size_t>> foreign;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (stage_of_op(i) != stage) { continue; }
    for (auto const* list : {&ops[i].reads, &ops[i].writes}) {
      for (auto const id : *list) {
        if (owned(id)) { continue; }
        auto [it, fresh] = foreign.try_emplace(id, i, i);
        if (!fresh) { it->second.second = i; }
      }
    }
  }
  std::vector<std::vector<storage_id>> arrive(ops.size()), leave(ops.size());
  for (auto const& [id, span] : foreign) {
    arrive[span.first].push_back(id);
    leave[span.second].push_back(id);
  }
  for (auto& list : arrive) { std::sort(list.begin(), list.end()); }
  for (auto& list : leave) { std::sort(list.begin(), list.end()); }

  trace out;
  for (auto const& h : t.header()) { out.add_header(h.key, h.value); }
  constexpr auto none = std::numeric_limits<storage_id>::max();
  std::vector<storage_id> new_id(storages.size(), none);
  std::optional<phase> last_phase;
  auto const map_list = [&](std::vector<storage_id> const& list) {
    std::vector<storage_id> mapped;
    mapped.reserve(list.size());
    for (auto const id : list) { mapped.push_back(new_id[id]); }
    return mapped;
  };
  for (auto const& e : events) {
    switch (e.kind) {
      case event_kind::alloc:
        if (owned(e.index)) {
          auto const& s   = storages[e.index];
          new_id[e.index] = out.add_alloc(s.bytes, s.kind, s.label);
        }
        break;
      case event_kind::free:
        if (owned(e.index)) { out.add_free(new_id[e.index]); }
        break;
      case event_kind::phase:
        if (last_phase != e.phase_value()) {
          out.add_phase(e.phase_value());
          last_phase = e.phase_value();
        }
        break;
      case event_kind::op: {
        if (stage_of_op(e.index) != stage) { break; }
        for (auto const id : arrive[e.index]) {
          auto const& s = storages[id];
          new_id[id]    = out.add_alloc(s.bytes, s.kind, s.label);
        }
        auto const& o = ops[e.index];
        (void)out.add_op(o.name, map_list(o.reads), map_list(o.writes));
        for (auto const id : leave[e.index]) { out.add_free(new_id[id]); }
        break;
      }
    }
  }
  return out;
}

}  // namespace stash::detail
