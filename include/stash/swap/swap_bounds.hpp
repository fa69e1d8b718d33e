/**
 * @file swap_bounds.hpp
 * @brief What no schedule can beat: the least device budget a swap schedule can fit
 * (swap_bound_bytes, per scope), the least budget any keep / swap / recompute schedule can fit
 * (memory_lower_bound_bytes) and the least iteration time at a budget
 * (iteration_time_lower_bound, with or without recomputation).
 *
 * All read the memory steps of the trace_analysis (the bytes each op needs when it starts; see
 * trace_analysis::memory_steps) and the gaps between consecutive accesses of each storage. A
 * storage may be off the device at op i only inside one of its gaps (u, v) with u < i < v: it
 * is offloaded at the earliest once op u ended and must be back when op v starts; its prefetch
 * may be issued when op v - 1 ends, so it can be away for the whole of op i = v - 1.
 * With wrap gaps (swap_scope::any_kind_wrap, time_bound_options::wrap) a persistent storage
 * (may_wrap, sim/schedule.hpp) may also be away from op 0 through op first - 1 and from op
 * last + 1 through the end of the iteration, after its last op included (first and last: its
 * first and last access): the wrap entry's gap.
 * tests/swap/swap_bounds_test.cpp checks each against a brute force over every schedule of small
 * traces under the simulator.
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/time_bound.hpp>
#include <stash/swap/encoding_choice.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace stash {

/// @brief Which storages a bound lets leave the device.
enum class swap_scope : std::uint8_t {
  activations,    ///< only storages of kind act (what vDNN, cDMA and Gist move)
  any_kind,       ///< any storage with a gap (parameters, gradients and temporaries too)
  any_kind_wrap,  ///< any_kind, and persistent storages across the iteration boundary (wrap gaps)
};

/// @brief Bytes of the storages that may take a wrap entry (may_wrap), all away after the last op
/// under a schedule that wraps them all.
/// @param analysis The recorded iteration's facts.
/// @return Bytes.
[[nodiscard]] inline std::uint64_t wrappable_bytes(trace_analysis const& analysis)
{
  std::uint64_t sum = 0;
  for (auto const& s : analysis.lifetimes().storages) {
    if (may_wrap(analysis, s.id)) { sum += s.bytes; }
  }
  return sum;
}

/// @brief Bytes that may be off the device while op i runs, for every op: the sum over the gaps
/// (u, v) with u < i < v of the storages in `scope` (and, for any_kind_wrap, over the wrap gaps
/// holding i: i < first or i > last).
/// @param analysis The recorded iteration's facts.
/// @param scope Which storages may leave the device.
/// @return Bytes.
[[nodiscard]] inline std::vector<std::uint64_t> offloadable_bytes(
    trace_analysis const& analysis, swap_scope scope = swap_scope::activations)
{
  auto const n = analysis.op_count();
  std::vector<std::int64_t> delta(n + 1, 0);
  for (auto const& s : analysis.lifetimes().storages) {
    if (scope == swap_scope::activations && s.kind != storage_kind::act) { continue; }
    for (std::size_t j = 0; j + 1 < s.accesses.size(); ++j) {
      auto const u = s.accesses[j].op, v = s.accesses[j + 1].op;
      if (v < u + 2) { continue; }
      delta[u + 1] += static_cast<std::int64_t>(s.bytes);
      delta[v] -= static_cast<std::int64_t>(s.bytes);
    }
    if (scope == swap_scope::any_kind_wrap && may_wrap(analysis, s.id)) {
      delta[0] += static_cast<std::int64_t>(s.bytes);  // [0, first - 1] and [last + 1, n - 1]
      delta[s.accesses.front().op] -= static_cast<std::int64_t>(s.bytes);
      delta[s.accesses.back().op + 1] += static_cast<std::int64_t>(s.bytes);
      delta[n] -= static_cast<std::int64_t>(s.bytes);
    }
  }
  std::vector<std::uint64_t> off(n);
  std::int64_t run = 0;
  for (std::size_t i = 0; i < n; ++i) {
    run += delta[i];
    off[i] = static_cast<std::uint64_t>(run);
  }
  return off;
}

/// @brief The least device budget any swap schedule moving storages of `scope` can fit (under
/// the simulator's memory enforcement; swap_scope::activations bounds activation-only policies,
/// not search_swap, whose any-kind variant moves parameters, gradients and temporaries too): the
/// maximum over ops of the live bytes at the op's start peak minus what may be off then
/// (offloadable_bytes), and the bytes the trace needs after its last op (less every wrappable
/// storage for any_kind_wrap). Exact: offloading every gap after its last use and prefetching it
/// just before its next use reaches it.
/// @param analysis The recorded iteration's facts.
/// @param scope Which storages may leave the device.
/// @return Bytes.
[[nodiscard]] inline std::uint64_t swap_bound_bytes(trace_analysis const& analysis,
                                                    swap_scope scope = swap_scope::activations)
{
  auto const steps    = analysis.memory_steps();
  auto const n        = analysis.op_count();
  auto const off      = offloadable_bytes(analysis, scope);
  std::uint64_t bound = steps[n].live_peak;
  if (scope == swap_scope::any_kind_wrap) { bound -= wrappable_bytes(analysis); }
  for (std::size_t i = 0; i < n; ++i) { bound = std::max(bound, steps[i].live_peak - off[i]); }
  return bound;
}

/// @brief The least device budget any keep / swap / recompute schedule can fit, whatever it
/// moves (any storage kind) and however it restores it: swap_bound_bytes(analysis,
/// swap_scope::any_kind), or with `wrap` swap_bound_bytes(analysis, swap_scope::any_kind_wrap).
///
/// Rules every schedule obeys (swap entries in sim/schedule.hpp, recompute entries, DTR-like
/// evictions): a storage can be off the device only inside a gap between two consecutive
/// accesses u < v with an op between (it is not there before its first access, it is still
/// needed at v, and after its last access it stays until the trace frees it). An op needs its
/// reads resident while it runs and its outputs and workspace allocated: the allocations and
/// frees of op i's start step are op i's own (the trace records an op when it returns, after the
/// allocations it made), so the storages op i accesses are on the device through its whole step,
/// restored before it by a prefetch or a re-run (as the simulator and the allocator's replay do).
/// So at the peak of op i's start step the device holds every storage live then except those in
/// a gap u < i < v, the figure swap_bound_bytes takes, and after the last op nothing can be away.
/// A recompute entry therefore frees no more than the swap of its gap would: recomputing buys
/// time on the link, never memory below the any-kind swap bound. The figure is exact: the swap
/// schedule that offloads every gap after its last use and prefetches it just before its next
/// use reaches it (tests/swap/swap_bounds_test.cpp checks both by brute force over every swap
/// and recompute schedule of small traces). With `wrap`, schedules may also use wrap gaps (a
/// persistent storage away across the iteration boundary, restored by a prefetch, never a
/// recompute): those storages may be away at the ops their wrap gap holds and after the last op.
/// @param analysis The recorded iteration's facts.
/// @param wrap Whether schedules may use wrap gaps.
/// @return Bytes.
[[nodiscard]] inline std::uint64_t memory_lower_bound_bytes(trace_analysis const& analysis,
                                                            bool wrap = false)
{
  return swap_bound_bytes(analysis, wrap ? swap_scope::any_kind_wrap : swap_scope::any_kind);
}

/// @brief What an iteration-time lower bound may assume of the schedules it bounds.
struct time_bound_options {
  /// The largest compression ratio (bytes / wire bytes) any swapped storage may have; default:
  /// the cost model's configured codec (1 without one).
  std::optional<double> link_ratio;
  /// Whether schedules may recompute (drop a storage and re-run the ops that wrote it).
  bool recompute = true;
  /// Whether schedules may use wrap gaps (sim/schedule.hpp): the memory floor is then the wrap
  /// one, and the time bound the weaker one of iteration_time_lower_bound's proof.
  bool wrap = false;
  /// Per-storage encodings (swap/encoding_choice.hpp), as search, search_swap and with_encodings
  /// give them: each gap of each storage (and each wrap entry) crosses at the best of the
  /// encodings a schedule may give its entry there, choose_encoding's under these options, raw or
  /// link_ratio's (link and codec kernel seconds per byte: iteration_time_lower_bound), instead
  /// of one ratio for every storage. None: every storage at link_ratio.
  std::optional<encoding_options> encodings{};
};

/// @brief The least seconds per byte of recomputation: min over ops that write something of
/// (op time / bytes the op writes). Re-running op p restores at most the bytes p writes and costs
/// its op time on the compute stream, so restoring b bytes by recomputation costs >= rho x b.
/// Infinite when no op writes anything.
/// @param analysis The recorded iteration's facts.
/// @return Seconds per byte.
[[nodiscard]] inline double recompute_seconds_per_byte(trace_analysis const& analysis)
{
  auto const ops = analysis.trace().ops();
  auto const st  = analysis.trace().storages();
  double rho     = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    std::vector<storage_id> w(ops[i].writes.begin(), ops[i].writes.end());
    std::sort(w.begin(), w.end());
    w.erase(std::unique(w.begin(), w.end()), w.end());
    std::uint64_t bytes = 0;
    for (auto const id : w) { bytes += st[id].bytes; }
    if (bytes > 0) { rho = std::min(rho, analysis.op_seconds()[i] / static_cast<double>(bytes)); }
  }
  return rho;
}

namespace detail {

/// min over s in [0, x] of max(before, d s) + max(after + rho (x - s), h s): s bytes swapped, x - s
/// recomputed. Convex and piecewise linear in s, so the minimum is at an end or a kink.
[[nodiscard]] inline double split_time(double x, double before, double after, double d, double h,
                                       double rho)
{
  auto f = [&](double s) {
    double const rec = std::isinf(rho) ? (x - s > 0 ? rho : 0.0) : rho * (x - s);
    return std::max(before, d * s) + std::max(after + rec, h * s);
  };
  double best = f(x);
  if (std::isinf(rho)) { return best; }
  for (double const s : {0.0, before / d, (after + rho * x) / (h + rho)}) {
    best = std::min(best, f(std::clamp(s, 0.0, x)));
  }
  return best;
}

/// min over s in [0, x] of max(total + rho (x - s), d s, h s): the wrap form of split_time, where
/// a swapped byte may cross the link in either direction before or after the peak (see
/// iteration_time_lower_bound). Convex and piecewise linear in s.
[[nodiscard]] inline double split_time_wrap(double x, double total, double d, double h, double rho)
{
  auto f = [&](double s) {
    double const rec = std::isinf(rho) ? (x - s > 0 ? rho : 0.0) : rho * (x - s);
    return std::max({total + rec, d * s, h * s});
  };
  double best = f(x);
  if (std::isinf(rho)) { return best; }
  double const link = std::max(d, h);
  for (double const s : {0.0, (total + rho * x) / (link + rho)}) {
    best = std::min(best, f(std::clamp(s, 0.0, x)));
  }
  return best;
}

}  // namespace detail

/// @brief A lower bound on the iteration time of any keep / swap / recompute schedule that fits
/// `budget` (infinite below memory_lower_bound_bytes, with or without recompute). Every figure is
/// the cost model's.
///
/// Proof. Every op runs once at its op time on one compute stream, so the time is >= C, the
/// compute time. Take op i and x = (bytes live at its start step's peak) - budget > 0: at the
/// moment tau that peak is taken, x bytes of storages live then are off the device, each inside a
/// gap u < i < v (memory_lower_bound_bytes). Say s of them were swapped and x - s dropped for
/// recomputation. Before tau: ops 0..i-1 ran (C_<i), and the s swapped bytes crossed the D2H
/// link (after their last use, and their release waits for the copy): at least s / (ratio x
/// D2H bandwidth). After tau: ops i..n-1 run (C_>=i), and so do the re-runs that restore the
/// x - s dropped bytes, at least rho x (x - s) (recompute_seconds_per_byte), on the same stream;
/// beside them the s swapped bytes cross the H2D link before the op that needs them. So
/// time >= max(C_<i, D(s)) + max(C_>=i + rho (x - s), H(s)), and the bound is the maximum over
/// ops of its minimum over s in [0, x] (s = x without recompute), and C. Left out, as they only
/// add: link latency, codec kernels, the bytes a recompute's reads need, and which storages may
/// be recomputed at all (any may, here) — so the bound is weak, never above what a schedule
/// achieves. With options.wrap, a swapped byte in a wrap gap crossed D2H in the previous
/// iteration's tail (head half) or crosses H2D in the next one's head (tail half), so neither
/// link need be before or after tau; what holds is that every moved byte crosses each link once
/// per iteration (the simulator ends an iteration once its wrap offloads are done) and the
/// compute stream runs C plus the re-runs: time >= max(C + rho (x - s), D(s), H(s)). Assumed, as in
/// the simulator: every swap-out crosses the link (no clean host copy is reused), and a recompute
/// costs the op times of the ops it re-runs.
///
/// Strengthened (issue 22 item 7; detail/time_bound.hpp): the figure above is the floor, and the
/// bound is the largest, over the ops over the budget, of the least time op i's relaxation
/// allows, where (1) only storages that may be re-run (act / temp, every writer up to the gap
/// recomputable) are dropped, each priced at its chain's op times (its writers, and the writers
/// of an input it must rebuild because its value is gone by then) shared in proportion to the
/// bytes they restore at op i (cheapest first: a convex R), not at the trace's cheapest seconds
/// per byte; and (2) wrap gaps give each link its side of tau (a head entry is offloaded
/// after its last access and prefetched before its first, both after tau for i < first; a tail
/// entry both before tau for i > last: the simulator starts an iteration with wrapped storages on
/// the host and ends it once their offloads are done), instead of letting both fall anywhere.
/// tests/swap/swap_bounds_test.cpp checks it against every schedule of small traces, with
/// recompute and wrap entries; it is never above the bound with fewer moves allowed.
///
/// With options.encodings (issue 22 items 4 and 7) each gap of each storage holds each copy
/// engine for at least its bytes x the engine's seconds per byte at its best encoding there (the
/// one choose_encoding allows its entry, raw, or link_ratio's): wire bytes over the link's rate,
/// plus the codec kernel's time per byte where it has one (the simulator runs encode and D2H on
/// one engine, H2D and decode on the other; per-entry launch and latency are left out, and
/// link_ratio's encoding is taken to need no kernel). A link window holds at most the bytes of
/// the fewest seconds per byte first (detail/time_bound.hpp, link_pools). Where every storage has
/// the same figures it is the bound at its ratio (bit for bit the raw one where no encoding
/// applies); the compute-time floor and the first proof above take the largest ratio of any
/// storage.
/// @param analysis The recorded iteration's facts.
/// @param budget Device bytes the iteration must fit in.
/// @param options Which moves the bound allows.
/// @return Seconds.
[[nodiscard]] inline double iteration_time_lower_bound(trace_analysis const& analysis,
                                                       std::uint64_t budget,
                                                       time_bound_options const& options = {});

/// @brief iteration_time_lower_bound at each of `budgets` (the same values, bit for bit), in one
/// pass over the ops for all of them: what a sweep of budgets (stash-plan's --frontier) calls.
/// @param analysis The recorded iteration's facts.
/// @param budgets Device bytes the iteration must fit in, any order.
/// @param options Which moves the bound allows.
/// @return Seconds, one per budget.
[[nodiscard]] inline std::vector<double> iteration_time_lower_bounds(
    trace_analysis const& analysis, std::span<std::uint64_t const> budgets,
    time_bound_options const& options = {})
{
  auto const floor_bytes = memory_lower_bound_bytes(analysis, options.wrap);
  auto const steps       = analysis.memory_steps();
  auto const& model      = analysis.model();
  auto const& hw         = model.hw();
  double ratio =
      std::max(1.0, options.link_ratio.value_or(model.encoding_ratio(swap_encoding::configured)));
  std::optional<detail::link_pools> pools;
  if (options.encodings) {
    auto const& enc = *options.encodings;
    // Per byte: the link at ratio r, and a codec kernel's time on the same engine (its launch is
    // per entry: left out). Raw and link_ratio's encoding are taken to need no kernel.
    double const kernel = 1.0 / (hw.device_bytes_per_s * model.params().codec_bandwidth_fraction);
    pools               = detail::link_pools_of(analysis, options.wrap, [&](swap_entry const& e) {
      auto const chosen = choose_encoding(analysis, e, enc);
      double const r    = model.encoding_ratio(chosen);
      double const c    = model.encode_time(e.bytes, chosen) > 0 ? kernel : 0.0;  // raw: no kernel
      return detail::link_cost{std::min(1.0 / (ratio * hw.pcie_d2h_bytes_per_s),
                                                      1.0 / (r * hw.pcie_d2h_bytes_per_s) + c),
                               std::min(1.0 / (ratio * hw.pcie_h2d_bytes_per_s),
                                                      1.0 / (r * hw.pcie_h2d_bytes_per_s) + c),
                               std::max(ratio, r)};
    });
    if (pools->d2h.size() <= 1) {  // one class for every storage: the bound at its ratio
      auto uniform = options;
      uniform.encodings.reset();
      uniform.link_ratio = pools->ratio.empty() ? ratio : pools->ratio.front();
      return iteration_time_lower_bounds(analysis, budgets, uniform);
    }
    ratio = *std::max_element(pools->ratio.begin(), pools->ratio.end());  // the floor below
  }
  double const d     = 1.0 / (ratio * hw.pcie_d2h_bytes_per_s);
  double const h     = 1.0 / (ratio * hw.pcie_h2d_bytes_per_s);
  double const rho   = options.recompute ? recompute_seconds_per_byte(analysis)
                                         : std::numeric_limits<double>::infinity();
  double const total = analysis.compute_seconds();
  std::vector<double> out(budgets.size(), std::numeric_limits<double>::infinity());
  std::vector<std::size_t> open;  // the budgets at or above the memory floor
  std::vector<std::uint64_t> open_budgets;
  std::vector<double> floors;
  for (std::size_t b = 0; b < budgets.size(); ++b) {
    if (budgets[b] < floor_bytes) { continue; }
    double best = total;
    for (std::size_t i = 0; i < analysis.op_count(); ++i) {
      if (steps[i].live_peak <= budgets[b]) { continue; }
      auto const x        = static_cast<double>(steps[i].live_peak - budgets[b]);
      double const before = analysis.op_start(i);
      best =
          std::max(best, options.wrap ? detail::split_time_wrap(x, total, d, h, rho)
                                      : detail::split_time(x, before, total - before, d, h, rho));
    }
    open.push_back(b);
    open_budgets.push_back(budgets[b]);
    floors.push_back(best);
  }
  auto const per_op =
      pools ? detail::per_op_time_bounds_enc(analysis, open_budgets, *pools, options.recompute,
                                             std::move(floors))
            : detail::per_op_time_bounds(analysis, open_budgets, d, h, options.recompute,
                                         options.wrap, std::move(floors));
  std::vector<double> fewer;  // more moves never raise it, to the last bit
  if (options.recompute || options.wrap) {
    fewer = iteration_time_lower_bounds(
        analysis, open_budgets,
        pools ? time_bound_options{options.link_ratio, false, false, options.encodings}
              : time_bound_options{ratio, false, false});
  }
  for (std::size_t k = 0; k < open.size(); ++k) {
    out[open[k]] = fewer.empty() ? per_op[k] : std::min(per_op[k], fewer[k]);
  }
  return out;
}

[[nodiscard]] inline double iteration_time_lower_bound(trace_analysis const& analysis,
                                                       std::uint64_t budget,
                                                       time_bound_options const& options)
{
  return iteration_time_lower_bounds(analysis, std::span<std::uint64_t const>(&budget, 1), options)
      .front();
}

}  // namespace stash
