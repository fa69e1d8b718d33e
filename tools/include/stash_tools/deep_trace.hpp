/**
 * @file deep_trace.hpp
 * @brief Large synthetic traces with a real trace's structure, for planning-scale benchmarks and
 * tests: `deepen_trace(base, copies)` stacks `copies` copies of a recorded network the way a
 * deeper network of the same blocks runs.
 *
 * The base trace's events split at its phase markers into a prologue (before `forward`: the
 * parameters and inputs), the forward phase, the backward phase and the rest (the optimizer).
 * The result runs every copy's prologue, then every copy's forward in order 0..copies-1, then
 * every copy's backward in reverse order (the last forward's backward first, as a deep network's
 * backward runs), then every copy's optimizer. Each copy owns its storages (fresh ids, labels
 * prefixed "c<k>."), so copy k reads and frees only its own, in the base's relative order, and
 * the result is a valid trace: copy k's activations live from its forward to its backward,
 * spanning the other copies, as a deep network's do. Deterministic; linear in the result's size.
 * Header entries that name op indices (`recompute@...`) are dropped; the others are kept.
 */
#pragma once

#include <stash/trace/trace.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stash_tools {

namespace deep_trace_detail {

/// Index of the first event of each segment: prologue, forward, backward, rest (+ the end).
[[nodiscard]] inline std::vector<std::size_t> segment_bounds(stash::trace const& base)
{
  auto const events = base.events();
  std::vector<std::size_t> at{0, events.size(), events.size(), events.size(), events.size()};
  for (std::size_t i = events.size(); i-- > 0;) {
    if (events[i].kind != stash::event_kind::phase) { continue; }
    auto const p = events[i].phase_value();
    if (p == stash::phase::forward) { at[1] = i; }
    if (p == stash::phase::backward) { at[2] = i; }
    if (p == stash::phase::optimizer) { at[3] = i; }
  }
  // Missing phases: an empty segment at the next one's start.
  if (at[3] < at[2]) { at[2] = at[3]; }
  if (at[2] < at[1]) { at[1] = at[2]; }
  return at;
}

/// Appends events [from, to) of `base` as copy `k`, mapping its storages through `ids`.
inline void emit_segment(stash::trace const& base, stash::trace& out, std::size_t from,
                         std::size_t to, std::size_t k, std::vector<stash::storage_id>& ids)
{
  auto const events = base.events();
  auto map          = [&](std::vector<stash::storage_id> const& list) {
    std::vector<stash::storage_id> mapped;
    mapped.reserve(list.size());
    for (auto const id : list) { mapped.push_back(ids[id]); }
    return mapped;
  };
  for (auto i = from; i < to; ++i) {
    auto const& ev = events[i];
    if (ev.kind == stash::event_kind::alloc) {
      auto const& s = base.storages()[ev.index];
      ids[ev.index] = out.add_alloc(s.bytes, s.kind, "c" + std::to_string(k) + "." + s.label);
    } else if (ev.kind == stash::event_kind::free) {
      out.add_free(ids[ev.index]);
    } else if (ev.kind == stash::event_kind::op) {
      auto const& o = base.ops()[ev.index];
      out.add_op(o.name, map(o.reads), map(o.writes));
    }
  }
}

}  // namespace deep_trace_detail

/// @brief `copies` copies of `base` stacked as one deeper network (see the file comment).
[[nodiscard]] inline stash::trace deepen_trace(stash::trace const& base, std::size_t copies)
{
  using deep_trace_detail::emit_segment;
  auto const at = deep_trace_detail::segment_bounds(base);
  stash::trace out;
  for (auto const& h : base.header()) {
    if (h.key.rfind("recompute@", 0) != 0) { out.add_header(h.key, h.value); }
  }
  out.add_header("deepened", std::to_string(copies));
  out.reserve(base.storages().size() * copies, base.ops().size() * copies,
              base.events().size() * copies);
  std::vector<std::vector<stash::storage_id>> ids(
      copies, std::vector<stash::storage_id>(base.storages().size(), 0));
  for (std::size_t k = 0; k < copies; ++k) { emit_segment(base, out, at[0], at[1], k, ids[k]); }
  auto const phases = {stash::phase::forward, stash::phase::backward, stash::phase::optimizer};
  std::size_t seg   = 1;
  for (auto const p : phases) {
    if (at[seg] < at[seg + 1]) { out.add_phase(p); }  // one marker for all copies
    for (std::size_t j = 0; j < copies; ++j) {
      auto const k = p == stash::phase::backward ? copies - 1 - j : j;
      // Skip the phase marker itself: it was written once above.
      bool const marker =
          at[seg] < at[seg + 1] && base.events()[at[seg]].kind == stash::event_kind::phase;
      auto const from = marker ? at[seg] + 1 : at[seg];
      emit_segment(base, out, from, at[seg + 1], k, ids[k]);
    }
    ++seg;
  }
  return out;
}

/// @brief The number of copies of `base` whose deepened trace has at least `storages` storages.
[[nodiscard]] inline std::size_t copies_for(stash::trace const& base, std::size_t storages)
{
  auto const per = base.storages().size();
  return per == 0 ? 1 : (storages + per - 1) / per;
}

}  // namespace stash_tools
