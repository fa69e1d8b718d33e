/**
 * @file recompute_replay.hpp
 * @brief stash::recompute_fn and the allocator's table of a schedule's recompute entries: which
 * storages are dropped at which op, which are rematerialised before which op by re-running which
 * recorded ops (sim/recompute_chain.hpp), in the schedule's order. Internals of allocator.hpp.
 */
#pragma once

#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace stash {

/// @brief What `op()` may be given to re-run that op: called with the op's device pointers in the
/// order op() returns them (reads, then writes) and the stream to queue the work on. For a
/// rematerialisation the pointers are the re-run's: the dropped storage's new bytes, the live
/// reads, and transient buffers for the op's other writes (its other results, or a skip_state
/// op's persistent state, which the re-run thus does not update; that buffer holds a copy of the
/// live state, so a kernel updating it in place reads initialised bytes). It must write the same
/// bytes as the first run (a pure op; see trace/recompute_semantics.hpp). An empty one (the
/// default) costs nothing; the allocator asks for one only for ops that a recompute entry re-runs.
/// @tparam Stream The backend's stream type (stash::allocator::stream_type).
template <class Stream>
using recompute_fn = std::function<void(std::span<void* const>, Stream)>;

namespace detail {

// One recompute entry as the allocator runs it: recording op indices less first_op.
struct recompute_step {
  storage_id storage{};
  std::uint64_t last_use{};
  std::uint64_t at{};
  std::vector<std::uint64_t> ops;  // the writers to re-run, in program order
  // Inputs whose earlier value the chain rebuilds into a transient buffer
  // (recompute_chain::transients): their writers in `ops` write it, later ops read it.
  std::vector<storage_id> transients;
  // Shared re-runs (schedule::shared_reruns, shared_reruns_of): the transients this step
  // rebuilds into a later step's own storage (input, step index), and for a step that adopts
  // such a rebuild, the ops of `ops` the earlier step already re-ran.
  std::vector<std::pair<storage_id, std::size_t>> hands;
  bool adopts{false};
  std::vector<std::uint64_t> skipped;
};

// A recording op (index and name) that was given no callable where a recompute needed one: its
// entries stay resident in later plans of the same program.
struct uncallable_op {
  std::uint64_t index{};
  std::string name;
  friend bool operator==(uncallable_op const&, uncallable_op const&) = default;
};

struct recompute_table {
  std::vector<recompute_step> steps;                  // in the schedule's order
  std::vector<std::vector<std::size_t>> drops_by_op;  // steps whose storage drops when op j starts
  // Steps whose storage drops right after the re-runs before op j (an early departure: their
  // last_use j is a re-run use only, see sim/schedule.hpp).
  std::vector<std::vector<std::size_t>> drops_after_run;
  std::vector<std::vector<std::size_t>> runs_by_op;  // steps that run before op j's pointers
  std::vector<bool> needs_fn;                        // op j's callable is kept
  std::uint64_t kept{};  // entries left resident (a writer known to have no callable)

  [[nodiscard]] bool empty() const noexcept { return steps.empty(); }
};

// Records in `t` the shared re-runs of `shared` (per schedule entry) between entries that both
// became steps (`step_of`: entry -> step index, or the entry count for none): an entry kept
// resident or left out runs its chain alone, and so does its partner.
inline void link_shared(recompute_table& t, std::vector<shared_rerun> const& shared,
                        std::vector<std::size_t> const& step_of, std::uint64_t first_op)
{
  auto const none = step_of.size();
  for (std::size_t k = 0; k < shared.size(); ++k) {
    if (!shared[k].adopts || step_of[k] == none || step_of[*shared[k].adopts] == none) { continue; }
    auto& step  = t.steps[step_of[k]];
    step.adopts = true;
    for (auto const w : shared[k].skipped) { step.skipped.push_back(w - first_op); }
    t.steps[step_of[*shared[k].adopts]].hands.emplace_back(step.storage, step_of[k]);
  }
}

// The table of `s`'s recompute entries over storages and ops of the iteration (those from
// `first_storage` and `first_op` on, `ops` of them); entries re-running an op of `uncallable`
// stay resident, counted in `kept`.
[[nodiscard]] inline recompute_table make_recompute_table(trace_analysis const& a,
                                                          schedule const& s,
                                                          std::uint64_t first_storage,
                                                          std::uint64_t first_op, std::uint64_t ops,
                                                          std::span<uncallable_op const> uncallable)
{
  recompute_table t;
  t.drops_by_op.resize(ops + 1);
  t.drops_after_run.resize(ops + 1);
  t.runs_by_op.resize(ops + 1);
  t.needs_fn.resize(ops);
  auto const& recorded = a.trace().ops();
  auto const shared    = s.shared_reruns ? shared_reruns_of(a, s.recomputes)
                                         : std::vector<shared_rerun>(s.recomputes.size());
  std::vector<std::size_t> step_of(s.recomputes.size(), s.recomputes.size());  // entry -> step
  for (std::size_t i = 0; i < s.recomputes.size(); ++i) {
    auto const& e = s.recomputes[i];
    if (e.id < first_storage || e.last_use < first_op || e.at > first_op + ops) { continue; }
    auto full  = recompute_chain_of(a, e.id, e.last_use, e.at);  // validated by the schedule
    auto chain = std::move(full.ops);
    bool const known_uncallable = std::any_of(chain.begin(), chain.end(), [&](std::uint64_t w) {
      return std::find(uncallable.begin(), uncallable.end(), uncallable_op{w, recorded[w].name}) !=
             uncallable.end();
    });
    if (chain.empty() || chain.front() < first_op || known_uncallable) {
      ++t.kept;
      continue;
    }
    for (auto& w : chain) {
      w -= first_op;
      t.needs_fn[w] = true;
    }
    step_of[i] = t.steps.size();
    if (early_departure(a, e)) {
      t.drops_after_run[e.last_use - first_op].push_back(t.steps.size());
    } else {
      t.drops_by_op[e.last_use - first_op + 1].push_back(t.steps.size());
    }
    t.runs_by_op[e.at - first_op].push_back(t.steps.size());
    t.steps.push_back({e.id,
                       e.last_use - first_op,
                       e.at - first_op,
                       std::move(chain),
                       std::move(full.transients),
                       {},
                       false,
                       {}});
  }
  link_shared(t, shared, step_of, first_op);
  return t;
}

}  // namespace detail
}  // namespace stash
