/**
 * @file recompute_chain.hpp
 * @brief What rematerialising a dropped storage costs: the ops to re-run, what they read, their
 * time and the transient bytes they need, or why it cannot be done.
 *
 * A storage S dropped after its access at op `last_use` is rematerialised before op `at` by
 * re-running, in program order, every op that wrote S up to `last_use` (S's producer, then the
 * in-place ops over it, e.g. native_batch_norm then relu_). That is valid when:
 *  - S is an activation or a temporary (allocated inside the iteration);
 *  - the first of those ops does not read S (it creates S's value from other storages);
 *  - each op's recompute class is `yes` or `skip_state` (trace_analysis::recompute_classes);
 *  - each op's other writes are fresh results (their first access is that op, which does not
 *    read them: the re-run allocates them, transiently, and drops them), or, for a `skip_state`
 *    op, persistent storages (the re-run skips those writes);
 *  - each storage those ops read, other than S, is live at op `at` and written by no op after the
 *    one that read it and before `at` (its value is the one the op first saw).
 * In-place ops (relu_, add_, hardtanh_: the trace records their argument as both a read and a
 * write of one storage). Over S itself they are part of the chain: the re-runs rebuild S's value
 * step by step, the producer first, each in-place op then reading what the previous re-run
 * wrote. Over another storage R that a re-run reads, an in-place write after that read means the
 * re-run needs R's value from before it, which the device no longer holds: the chain is refused
 * (re-running R's writers into a transient copy of that older value is not modelled; the
 * recorded traces of data/traces have no such read). A re-run placed before the overwrite (`at`
 * at or before it) is valid.
 * The re-runs need S's bytes from the start, and one op at a time its other results and its
 * workspace (trace_analysis::workspace_bytes): `transient_bytes` is the largest of those.
 * Whether the reads are resident at `at` depends on the schedule: validate_schedule checks it.
 */
#pragma once

#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace stash {

/// @brief The re-runs that rematerialise one storage (see the file comment).
struct recompute_chain {
  std::vector<std::uint64_t> ops;   ///< op indices to re-run, in program order
  std::vector<storage_id> reads;    ///< storages they read other than the target, sorted, unique
  double seconds{};                 ///< the ops' times on the analysis's cost model
  std::uint64_t transient_bytes{};  ///< largest (other results + workspace) of one re-run
  std::string refusal;              ///< why it cannot be rematerialised; empty when it can

  /// @brief True when the storage can be rematerialised this way.
  /// @return Whether the storage can be recomputed.
  [[nodiscard]] bool valid() const noexcept { return refusal.empty(); }
};

namespace detail {

// Checks op `w`'s writes other than `target`, adding the fresh ones' bytes to `fresh`; returns
// what is wrong or an empty string.
[[nodiscard]] inline std::string check_other_writes(trace_analysis const& a, std::uint64_t w,
                                                    storage_id target, std::uint64_t& fresh)
{
  auto const& op   = a.trace().ops()[w];
  auto const& life = a.lifetimes().storages;
  for (auto const t : op.writes) {
    if (t == target) { continue; }
    auto const& acc     = life[t].accesses;
    bool const is_fresh = !acc.empty() && acc.front().op == w && !acc.front().read;
    if (is_fresh) {
      fresh += life[t].bytes;
    } else if (!(a.recompute_classes()[w] == recompute_class::skip_state && life[t].persistent())) {
      return "op " + std::to_string(w) + " '" + op.name + "' also writes storage " +
             std::to_string(t) + ", which it did not create";
    }
  }
  return {};
}

// Checks that `r`, read by op `w`, still holds that value and is live at op `at`.
[[nodiscard]] inline std::string check_read(trace_analysis const& a, std::uint64_t w, storage_id r,
                                            std::uint64_t at)
{
  auto const& life    = a.lifetimes().storages[r];
  auto const at_event = a.ops().event[at];
  if (life.alloc_event > at_event || life.end_event <= at_event) {
    return "its input storage " + std::to_string(r) + " is not live at op " + std::to_string(at);
  }
  for (auto const& x : life.accesses) {
    if (x.write && x.op > w && x.op < at) {
      return "its input storage " + std::to_string(r) + " is overwritten by op " +
             std::to_string(x.op) + " '" + a.trace().ops()[x.op].name + "' before op " +
             std::to_string(at) + ": op " + std::to_string(w) +
             " read the value from before that write, which is no longer on the device";
    }
  }
  return {};
}

}  // namespace detail

/// @brief The chain that rematerialises storage `id`, dropped after op `last_use`, before op
/// `at` (see the file comment); its `refusal` says why when there is none.
/// @param a The recorded iteration's facts.
/// @param id The storage.
/// @param last_use The storage's last use before the gap.
/// @param at The op that needs it back.
/// @return The chain (its refusal says why when it is not valid()).
[[nodiscard]] inline recompute_chain recompute_chain_of(trace_analysis const& a, storage_id id,
                                                        std::uint64_t last_use, std::uint64_t at)
{
  recompute_chain c;
  auto const& life = a.lifetimes().storages[id];
  auto refuse      = [&](std::string why) {
    c.refusal = std::move(why);
    return c;
  };
  if (life.kind != storage_kind::act && life.kind != storage_kind::temp) {
    return refuse("only activations and temporaries are recomputed");
  }
  for (auto const& x : life.accesses) {
    if (x.op > last_use) { break; }
    if (x.write) { c.ops.push_back(x.op); }
  }
  if (c.ops.empty()) { return refuse("no op writes it before op " + std::to_string(last_use)); }
  for (auto const& x : life.accesses) {
    if (x.op == c.ops.front() && x.read) {
      return refuse("its first writer, op " + std::to_string(x.op) + ", also reads it");
    }
  }
  for (auto const w : c.ops) {
    auto const& op = a.trace().ops()[w];
    if (!recomputable(a.recompute_classes()[w])) {
      return refuse("op " + std::to_string(w) + " '" + op.name + "' may not be re-run (class " +
                    std::string(to_string(a.recompute_classes()[w])) + ")");
    }
    std::uint64_t fresh = 0;
    if (auto why = detail::check_other_writes(a, w, id, fresh); !why.empty()) {
      return refuse(std::move(why));
    }
    c.transient_bytes = std::max(c.transient_bytes, fresh + a.workspace_bytes()[w]);
    c.seconds += a.op_seconds()[w];
    for (auto const r : op.reads) {
      if (r == id) { continue; }
      if (auto why = detail::check_read(a, w, r, at); !why.empty()) {
        return refuse(std::move(why));
      }
      c.reads.push_back(r);
    }
  }
  std::sort(c.reads.begin(), c.reads.end());
  c.reads.erase(std::unique(c.reads.begin(), c.reads.end()), c.reads.end());
  return c;
}

}  // namespace stash
