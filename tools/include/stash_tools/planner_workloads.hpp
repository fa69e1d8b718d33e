/**
 * @file planner_workloads.hpp
 * @brief Inputs derived from recorded traces for the planner benchmarks and tests: many training
 * iterations back to back (a large real trace without a large file), one iteration of a
 * transformer at another sequence length (shapes that change from step to step), and a trace's
 * lifetimes with other sizes (inputs the planners were not tuned on).
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/lifetime_interval.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace stash_tools {

/// @brief The lifetimes of `iterations` training steps of `t` back to back: the storages `t`
/// never frees (parameters, optimizer state, the batch) are allocated once and live to the end,
/// every other storage is allocated again in each step, shifted by the step's length in events.
/// Ids are 0..size-1 in order: the persistent storages, then step after step.
[[nodiscard]] inline std::vector<stash::lifetime_interval> repeat_iterations(stash::trace const& t,
                                                                             std::size_t iterations)
{
  STASH_EXPECTS(iterations > 0, "repeat_iterations: at least one iteration");
  auto const one           = stash::lifetime_intervals(t);
  std::uint64_t const step = t.events().size();
  std::vector<stash::lifetime_interval> out;
  for (auto const& b : one) {
    if (b.end == step) { out.push_back({out.size(), b.begin, step * iterations, b.bytes}); }
  }
  for (std::size_t i = 0; i < iterations; ++i) {
    for (auto const& b : one) {
      if (b.end != step) {
        out.push_back({out.size(), b.begin + i * step, b.end + i * step, b.bytes});
      }
    }
  }
  return out;
}

/// @brief How a transformer trace's storage sizes follow the sequence length: those that are a
/// whole number of batch x heads x seq x seq elements (attention scores and their gradients)
/// grow with its square, those that are a whole number of batch x seq elements (token
/// activations) grow with it, the rest (parameters, optimizer state, per-feature vectors) stay.
struct sequence_scaling {
  std::uint64_t batch{};           ///< the trace's batch size
  std::uint64_t heads{};           ///< attention heads of the model
  std::uint64_t seq{};             ///< the trace's sequence length
  std::uint64_t element_bytes{4};  ///< bytes per element (float32)
};

/// @brief The size of a storage of `bytes` at the trace's sequence length, at sequence length
/// `seq` instead (see stash_tools::sequence_scaling).
[[nodiscard]] inline std::uint64_t scaled_bytes(std::uint64_t bytes, sequence_scaling const& s,
                                                std::uint64_t seq)
{
  std::uint64_t const square = s.batch * s.heads * s.seq * s.seq * s.element_bytes;
  std::uint64_t const linear = s.batch * s.seq * s.element_bytes;
  if (bytes % square == 0) {
    return bytes / square * s.batch * s.heads * seq * seq * s.element_bytes;
  }
  if (bytes % linear == 0) { return bytes / linear * s.batch * seq * s.element_bytes; }
  return bytes;
}

/// @brief One allocator call of an iteration: allocate storage `id` (bytes > 0) or free it
/// (bytes == 0).
struct alloc_step {
  std::uint64_t id{};
  std::uint64_t bytes{};
};

/// @brief The allocations and frees of one step of `t` at sequence length `seq`, in program
/// order, leaving out the storages `t` never frees (they are allocated once, outside the steps).
[[nodiscard]] inline std::vector<alloc_step> scaled_iteration(stash::trace const& t,
                                                              sequence_scaling const& s,
                                                              std::uint64_t seq)
{
  auto const one = stash::lifetime_intervals(t);
  auto const end = t.events().size();
  std::vector<alloc_step> out;
  for (auto const& e : t.events()) {
    if (e.kind != stash::event_kind::alloc && e.kind != stash::event_kind::free) { continue; }
    if (one[e.index].end == end) { continue; }  // persistent
    out.push_back({e.index, e.kind == stash::event_kind::alloc
                                ? scaled_bytes(one[e.index].bytes, s, seq)
                                : 0});
  }
  return out;
}

/// @brief The lifetimes of scaled_iteration(t, s, seq) (event positions within that list).
[[nodiscard]] inline std::vector<stash::lifetime_interval> step_intervals(
    std::vector<alloc_step> const& steps)
{
  std::vector<stash::lifetime_interval> out;
  std::vector<std::size_t> slot_of;
  for (std::uint64_t k = 0; k < steps.size(); ++k) {
    auto const& st = steps[k];
    if (st.id >= slot_of.size()) { slot_of.resize(st.id + 1, 0); }
    if (st.bytes > 0) {
      slot_of[st.id] = out.size();
      out.push_back({st.id, k, steps.size(), st.bytes});
    } else {
      out[slot_of[st.id]].end = k;
    }
  }
  return out;
}

/// @brief `intervals` with every size multiplied by a factor drawn uniformly from [0.5, 1.5]
/// (std::mt19937_64 seeded with `seed`, so the same on every platform), rounded down to a
/// multiple of 4 bytes and at least 4: the same lifetimes, a packing problem the planners have
/// not seen.
[[nodiscard]] inline std::vector<stash::lifetime_interval> perturb_sizes(
    std::vector<stash::lifetime_interval> intervals, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  for (auto& b : intervals) {
    auto const permille = 500 + rng() % 1001;  // 0.500 .. 1.500
    b.bytes             = std::max<std::uint64_t>(4, b.bytes * permille / 1000 / 4 * 4);
  }
  return intervals;
}

}  // namespace stash_tools
