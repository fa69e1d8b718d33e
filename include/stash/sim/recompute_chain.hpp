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
 *    one that read it and before `at` (its value is the one the op first saw), or else is an
 *    activation or temporary R whose value as read can be rebuilt: R's writers up to that read
 *    (a chain of their own, valid at `at`, that neither writes nor reads S) are re-run first into
 *    a transient buffer that the chain's later ops read, freed when the chain ends
 *    (recompute_chain::transients; one level: R's own reads must hold their values). That is
 *    the clone of a pre-activation saved for silu_backward after silu_ overwrote it in place, or
 *    a softmax whose input (the attention scores) was freed: each costs its producer's re-run.
 * In-place ops (relu_, add_, hardtanh_: the trace records their argument as both a read and a
 * write of one storage). Over S itself they are part of the chain: the re-runs rebuild S's value
 * step by step, the producer first, each in-place op then reading what the previous re-run
 * wrote. Over another storage R that a re-run reads, an in-place write after that read means the
 * re-run needs R's value from before it, which the device no longer holds: it is rebuilt as
 * above. A re-run placed before the overwrite (`at` at or before it) reads R itself.
 * The re-runs need S's bytes from the start, and one op at a time its other results and its
 * workspace (trace_analysis::workspace_bytes): `transient_bytes` is the largest of those, plus
 * the rebuilt inputs' bytes (held across the whole chain; an upper bound).
 * Whether the reads are resident at `at` depends on the schedule: validate_schedule checks it.
 */
#pragma once

#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stash {

/// @brief The re-runs that rematerialise one storage (see the file comment).
struct recompute_chain {
  std::vector<std::uint64_t> ops;  ///< op indices to re-run, in program order
  std::vector<storage_id> reads;   ///< storages they read other than the target, sorted, unique
  /// Storages whose earlier value a re-run reads but the device no longer holds at `at` (freed,
  /// or overwritten in place): their writers up to that read are re-run too, into a transient
  /// buffer held while the chain runs (counted in transient_bytes). Sorted, unique.
  std::vector<storage_id> transients;
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

[[nodiscard]] inline recompute_chain chain_of(trace_analysis const& a, storage_id id,
                                              std::uint64_t last_use, std::uint64_t at,
                                              bool transients);

// Adds to `c` the re-runs that rebuild, into a transient buffer, the value of `r` that op `w` of
// the chain of `id` read (see recompute_chain::transients); what is wrong or an empty string.
[[nodiscard]] inline std::string add_transient(trace_analysis const& a, recompute_chain& c,
                                               storage_id id, std::uint64_t w, storage_id r,
                                               std::uint64_t at)
{
  auto const& life = a.lifetimes().storages[r];
  if (std::find(c.transients.begin(), c.transients.end(), r) != c.transients.end()) {
    return "its input storage " + std::to_string(r) + " is read at two points of the chain";
  }
  auto sub = chain_of(a, r, w - 1, at, false);
  if (!sub.valid()) {
    return "rebuilding its input storage " + std::to_string(r) + ": " + sub.refusal;
  }
  for (auto const x : sub.ops) {
    auto const& writes = a.trace().ops()[x].writes;
    if (std::find(writes.begin(), writes.end(), id) != writes.end() ||
        std::binary_search(sub.reads.begin(), sub.reads.end(), id)) {
      return "rebuilding its input storage " + std::to_string(r) + " needs storage " +
             std::to_string(id) + " itself";
    }
  }
  c.transients.push_back(r);
  c.ops.insert(c.ops.end(), sub.ops.begin(), sub.ops.end());
  c.reads.insert(c.reads.end(), sub.reads.begin(), sub.reads.end());
  c.seconds += sub.seconds;
  c.transient_bytes = std::max(c.transient_bytes, sub.transient_bytes) + life.bytes;
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
  return detail::chain_of(a, id, last_use, at, true);
}

namespace detail {

// recompute_chain_of; `transients`: a read whose value is gone may be rebuilt (one level).
[[nodiscard]] inline recompute_chain chain_of(trace_analysis const& a, storage_id id,
                                              std::uint64_t last_use, std::uint64_t at,
                                              bool transients)
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
  auto const own = c.ops;  // add_transient appends the rebuilt inputs' writers to c.ops
  for (auto const w : own) {
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
        auto const kind = a.lifetimes().storages[r].kind;
        if (!transients || (kind != storage_kind::act && kind != storage_kind::temp)) {
          return refuse(std::move(why));
        }
        if (auto sub = add_transient(a, c, id, w, r, at); !sub.empty()) {
          return refuse(std::move(why) + "; " + sub);
        }
        continue;
      }
      c.reads.push_back(r);
    }
  }
  std::sort(c.ops.begin(), c.ops.end());
  c.ops.erase(std::unique(c.ops.begin(), c.ops.end()), c.ops.end());
  std::sort(c.reads.begin(), c.reads.end());
  c.reads.erase(std::unique(c.reads.begin(), c.reads.end()), c.reads.end());
  std::sort(c.transients.begin(), c.transients.end());
  for (auto const r : c.transients) {  // one buffer per storage: a single value of it is read
    if (std::binary_search(c.reads.begin(), c.reads.end(), r)) {
      return refuse("its input storage " + std::to_string(r) + " is read both as it is at op " +
                    std::to_string(at) + " and as it was");
    }
  }
  return c;
}

// recompute_chain_of by (storage, last use, at), each computed once: a planner that checks
// many schedules over mostly the same recompute entries (the redrop repair's options and their
// validation) asks for the same chains again and again. Not thread-safe: one per planning call,
// on its thread. The references it returns live as long as it does (or until clear()). A hash
// table, not a tree: search asks it about 870,000 times a plan (regnet_y_400mf_b64, 33%), and
// nothing walks it in order; its nodes stay put when it grows, so the references hold.
class chain_memo {
 public:
  explicit chain_memo(trace_analysis const& a) : a_(a) {}

  [[nodiscard]] recompute_chain const& operator()(storage_id id, std::uint64_t last_use,
                                                  std::uint64_t at)
  {
    auto const key = std::make_tuple(id, last_use, at);
    auto it        = chains_.find(key);
    if (it == chains_.end()) {
      it = chains_.emplace(key, recompute_chain_of(a_, id, last_use, at)).first;
    }
    return it->second;
  }

  /// The chains kept.
  [[nodiscard]] std::size_t size() const noexcept { return chains_.size(); }
  /// Forgets every chain (references handed out before no longer valid).
  void clear() noexcept { chains_.clear(); }

 private:
  using chain_key = std::tuple<storage_id, std::uint64_t, std::uint64_t>;
  // Multiplies and xor-shifts the three fields together: keys differ in a few low bits (nearby
  // ops, storages), which the table's buckets must still tell apart.
  struct key_hash {
    [[nodiscard]] std::size_t operator()(chain_key const& k) const noexcept
    {
      auto h = (std::get<0>(k) * 0x9e3779b97f4a7c15ULL ^ std::get<1>(k)) * 0xbf58476d1ce4e5b9ULL;
      h      = (h ^ std::get<2>(k)) * 0x94d049bb133111ebULL;
      return static_cast<std::size_t>(h ^ (h >> 31));
    }
  };
  trace_analysis const& a_;
  std::unordered_map<chain_key, recompute_chain, key_hash> chains_;
};

}  // namespace detail

/// @brief How one recompute entry runs when re-runs are shared inside a batch
/// (schedule::shared_reruns; see shared_reruns_of).
struct shared_rerun {
  double seconds{};  ///< its re-run seconds, shared ops not counted
  /// For an entry that adopts a rebuild: the index of the earlier entry of its batch whose chain
  /// rebuilt its storage as a transient input, into this entry's own bytes.
  std::optional<std::size_t> adopts;
  /// For an adopting entry: its chain's ops that the earlier entry already re-ran (skipped).
  std::vector<std::uint64_t> skipped;
  /// For an entry whose chain rebuilds transient inputs: (input, index of the later entry of the
  /// batch that rematerialises it and adopts that rebuild).
  std::vector<std::pair<storage_id, std::size_t>> hands;
};

namespace detail {

// shared_reruns_of, entry k's chain (recompute_chain_of) given as *chains[k].
template <class Entries>
[[nodiscard]] std::vector<shared_rerun> shared_reruns_from(
    trace_analysis const& a, Entries const& entries,
    std::vector<recompute_chain const*> const& chains)
{
  std::vector<shared_rerun> out;
  out.reserve(chains.size());
  for (auto const* c : chains) { out.push_back(shared_rerun{c->seconds, std::nullopt, {}, {}}); }
  auto const writes = [&](std::uint64_t w, storage_id r) {
    auto const& ws = a.trace().ops()[w].writes;
    return std::find(ws.begin(), ws.end(), r) != ws.end();
  };
  for (std::size_t j = 0; j < chains.size(); ++j) {
    if (!chains[j]->valid()) { continue; }
    for (auto const r : chains[j]->transients) {
      for (std::size_t k = j + 1; k < chains.size() && entries[k].at == entries[j].at; ++k) {
        auto const& ck = *chains[k];
        if (entries[k].id != r) { continue; }
        if (out[k].adopts || !ck.valid()) { break; }
        std::vector<std::uint64_t> shared;  // R's writers j re-ran: each must be one of k's
        for (auto const w : chains[j]->ops) {
          if (writes(w, r)) { shared.push_back(w); }
        }
        bool const prefix = std::all_of(shared.begin(), shared.end(), [&](std::uint64_t w) {
          return std::binary_search(ck.ops.begin(), ck.ops.end(), w);
        });
        if (!prefix || shared.size() >= ck.ops.size()) { break; }
        double saved = 0;
        for (auto const w : shared) { saved += a.op_seconds()[w]; }
        out[k].seconds = std::max(0.0, ck.seconds - saved);
        out[k].adopts  = j;
        out[k].skipped = std::move(shared);
        out[j].hands.emplace_back(r, k);
        break;
      }
    }
  }
  return out;
}

}  // namespace detail

/// @brief How each entry runs when re-runs are shared inside a batch (schedule::shared_reruns).
/// Entries are given in the order they run. When entry j's chain rebuilds a storage R into a
/// transient buffer (recompute_chain::transients: the BatchNorm output a pre-activation `clone`
/// read before `silu_` or `hardtanh_` overwrote it) and a later entry k of the same batch (same
/// `at`) rematerialises R itself, j rebuilds R into k's bytes instead and k adopts it: R's
/// writers that j re-ran (a prefix of k's chain, R's writers in program order; nothing between j
/// and k writes R, since chains write only their own storage and fresh results) are not re-run
/// again, and k re-runs only R's writers after them. One BatchNorm then serves both the clone and
/// the activation it feeds. Every other entry runs its chain (recompute_chain_of) alone.
/// @tparam Entries A range of recompute entries (fields id, last_use, at).
/// @param a The recorded iteration's facts.
/// @param entries The recompute entries in the order they run.
/// @return Per entry, how it runs.
template <class Entries>
[[nodiscard]] std::vector<shared_rerun> shared_reruns_of(trace_analysis const& a,
                                                         Entries const& entries)
{
  std::vector<recompute_chain> own;
  own.reserve(entries.size());
  std::vector<recompute_chain const*> chains;
  chains.reserve(entries.size());
  for (auto const& e : entries) {
    chains.push_back(&own.emplace_back(recompute_chain_of(a, e.id, e.last_use, e.at)));
  }
  return detail::shared_reruns_from(a, entries, chains);
}

/// @brief As shared_reruns_of(a, entries), the chains taken from `memo` (the same chains).
/// @tparam Entries A range of recompute entries (fields id, last_use, at).
/// @param a The recorded iteration's facts.
/// @param entries The recompute entries in the order they run.
/// @param memo Chains of `a`, kept across calls.
/// @return Per entry, how it runs.
template <class Entries>
[[nodiscard]] std::vector<shared_rerun> shared_reruns_of(trace_analysis const& a,
                                                         Entries const& entries,
                                                         detail::chain_memo& memo)
{
  std::vector<recompute_chain const*> chains;
  chains.reserve(entries.size());
  for (auto const& e : entries) { chains.push_back(&memo(e.id, e.last_use, e.at)); }
  return detail::shared_reruns_from(a, entries, chains);
}

/// @brief Per entry, its re-run seconds under shared_reruns_of.
/// @tparam Entries A range of recompute entries (fields id, last_use, at).
/// @param a The recorded iteration's facts.
/// @param entries The recompute entries in the order they run.
/// @param memo When not null, the chains are taken from it (the same chains).
/// @return Per entry, its re-run seconds.
template <class Entries>
[[nodiscard]] std::vector<double> shared_rerun_seconds(trace_analysis const& a,
                                                       Entries const& entries,
                                                       detail::chain_memo* memo = nullptr)
{
  std::vector<double> out;
  auto const runs = memo ? shared_reruns_of(a, entries, *memo) : shared_reruns_of(a, entries);
  out.reserve(runs.size());
  for (auto const& x : runs) { out.push_back(x.seconds); }
  return out;
}

}  // namespace stash
