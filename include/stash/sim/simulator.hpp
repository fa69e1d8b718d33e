/**
 * @file simulator.hpp
 * @brief A discrete-event model of one training iteration under a swap schedule, on a device
 * with no more memory than the schedule's budget: a compute stream running the trace's ops in
 * order, a D2H and an H2D copy engine beside it, and the device memory they share.
 *
 * Model (the named parameters live in cost_model.hpp; every time is a prediction):
 *  - Memory steps (trace_analysis::memory_steps): the frees right after op i, before any
 *    allocation, are returned when op i ends; the other events before op i (allocations and the
 *    frees among them, in trace order) are taken when op i starts, which needs their running peak
 *    free. Op 0's step holds everything allocated before it (parameters, inputs); the events after
 *    the last op form a final step when it has ended.
 *  - Compute runs op i once op i-1 ended, every prefetch op i waits for has arrived, and op i's
 *    step fits in the budget. Waiting for memory is a stall of cause `memory`: it ends when
 *    offloads release enough bytes.
 *  - Each copy engine runs its copies one at a time in issue order (one CUDA stream per
 *    direction). An offload issued at op a starts when compute reaches op a (op a-1 ended) and the
 *    D2H engine is free; it never waits for memory. Its bytes are released when both its copy
 *    (encode kernel first, if a codec is modelled) and op last_use finished. A prefetch issued at
 *    op p starts when compute reaches op p, the H2D engine is free and the storage's own offload
 *    finished, and takes its bytes when it starts: if they do not fit, the H2D engine waits for
 *    releases (and the copies queued behind it with it). Its decode kernel runs after the copy.
 *  - Codec kernels also slow the compute stream by cost_params::codec_compute_share of their time
 *    (they share the device's SMs and memory bandwidth): the encode is charged to op offload_at,
 *    the decode to op next_use.
 *  - Events are granted in time order; releases due at a time come before grants at that time,
 *    and at equal times a prefetch is granted before compute.
 *  - Recompute entries (schedule.hpp) run on the compute stream once op at-1 ended, in their
 *    order, before op `at` takes its step; they do not wait for op at's prefetches. Each needs
 *    its storage's bytes plus its transient bytes free (a memory stall otherwise), runs for its
 *    chain's time (recompute_chain.hpp, priced by the cost model), then keeps the storage's bytes
 *    and returns the transient ones. Its storage's bytes are released when op last_use ends.
 *    sim_result::recompute_s sums their time, apart from compute_s and the stalls. A batch also
 *    waits for the prefetches of the swap entries whose next_use is one of its re-run uses that
 *    is not an access of the storage (schedule.hpp, re-run uses): a stall of the prefetch's
 *    cause, as an op's. An entry leaving right after the batch at its last_use (an early
 *    departure, schedule.hpp) releases its bytes when the batch has ended (and its copy, if it
 *    has one, has finished), before op last_use takes its step. A redrop swap entry copies
 *    nothing: it occupies no copy engine, charges no encode, and releases its bytes when the
 *    batch ends (early) or when compute reaches op offload_at (late); its prefetch waits for no
 *    offload.
 *  - Wrap entries (schedule.hpp) model the steady state of a replayed iteration. Their storages
 *    start it on the host: op 0's step leaves them out, and their prefetch, issued at op
 *    prefetch_at (0: at the start), queues on the H2D engine with the others without waiting for
 *    an offload (that of the previous iteration is done: see next). Their offload is issued at op
 *    offload_at (op count: when the last op ends) behind the others on the D2H engine and releases
 *    its bytes as any offload. The iteration ends when its last op has ended and every wrap
 *    offload has finished; the remainder is a stall of the final step (cause offload_pending,
 *    the next iteration's prefetch waiting for it). Chosen over letting the tail overlap the next
 *    iteration's head because one iteration is simulated, not two: a tail that is still copying
 *    when the next iteration starts would hold device bytes that iteration's op 0 step does not
 *    count, so the model charges it here instead, an upper bound on the time and never an
 *    optimistic one on the memory. The encode of an offload issued at the op count is not charged
 *    to compute (no op follows it).
 *  - When neither compute nor the H2D head can ever proceed (what they wait for does not fit and
 *    no release is pending), the iteration does not fit: sim_result::fits is false and
 *    sim_result::failure says where.
 * sim_memory::unconstrained lifts the budget (nothing waits for memory) and reports the peak the
 * schedule reaches, as vDNN's figures do.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stash {

/// @brief Why the compute stream waited before an op.
enum class stall_cause : std::uint8_t {
  transfer,         ///< the prefetch was issued too late to finish in time
  h2d_busy,         ///< the prefetch queued behind other prefetches on the H2D engine
  offload_pending,  ///< the prefetch had to wait for the storage's own offload to finish
  memory,           ///< the op (or its prefetch) waited for offloads to release device memory
};

/// @brief Number of stall causes (for arrays indexed by the enum).
inline constexpr std::size_t stall_cause_count = 4;

/// @brief Spelling of a stall cause.
/// @param c The cause.
/// @return The name.
[[nodiscard]] constexpr std::string_view to_string(stall_cause c) noexcept
{
  switch (c) {
    case stall_cause::transfer:
      return "transfer";
    case stall_cause::h2d_busy:
      return "h2d_busy";
    case stall_cause::offload_pending:
      return "offload_pending";
    case stall_cause::memory:
      return "memory";
  }
  return "?";
}

/// @brief One stall of the compute stream (an op that waited for a prefetch and for memory has
/// one record of each).
struct stall_record {
  std::uint64_t op{};                 ///< the op that waited (op count = the final step)
  double seconds{};                   ///< how long it waited
  std::optional<storage_id> storage;  ///< the prefetch it waited for last, if it was one
  stall_cause cause{};                ///< what held it back
};

/// @brief Which resource a timeline span occupies.
enum class sim_resource : std::uint8_t { compute, d2h, h2d };

/// @brief One span of the timeline: an op, a stall, an offload or a prefetch.
struct timeline_span {
  /// @brief What a span is.
  enum class kind_t : std::uint8_t { op, stall, offload, prefetch, recompute };
  kind_t kind{};            ///< what happened
  sim_resource resource{};  ///< where
  double start{};           ///< seconds from the iteration's start
  double end{};             ///< seconds from the iteration's start
  std::uint64_t index{};    ///< op index (op, stall), schedule entry index (offload, prefetch)
                            ///< or recompute entry index (recompute)
};

/// @brief Whether the device has only the schedule's budget.
enum class sim_memory : std::uint8_t {
  enforce_budget,  ///< allocations and prefetches wait for memory; the peak never exceeds it
  unconstrained,   ///< nothing waits for memory; the peak the schedule reaches is reported
};

/// @brief Options of a simulation.
struct sim_options {
  bool record_timeline = true;                        ///< fill sim_result::timeline
  sim_memory memory    = sim_memory::enforce_budget;  ///< see sim_memory
  bool validate        = true;  ///< validate the schedule first (planners skip it for their own)
};

/// @brief Where an iteration that does not fit its budget got stuck.
struct sim_failure {
  std::uint64_t op{};                 ///< the op compute had reached (op count = the final step)
  std::optional<storage_id> storage;  ///< set when the blocked request was this prefetch
  std::uint64_t needed_bytes{};       ///< bytes the blocked request needed
  std::uint64_t free_bytes{};         ///< bytes free in the budget when it got stuck
};

/// @brief What one simulated iteration did.
struct sim_result {
  bool fits = true;                    ///< the iteration completes within the budget
  std::optional<sim_failure> failure;  ///< where it got stuck when it does not fit
  double iteration_s{};                ///< end of the last op (infinite when it does not fit)
  double compute_s{};    ///< sum of op times (the iteration time without stalls or recomputes)
  double recompute_s{};  ///< time the compute stream spent re-running ops for recompute entries
  double stall_s{};      ///< total time the compute stream waited
  std::array<double, stall_cause_count> stall_by_cause{};  ///< stall_s by stall_cause
  std::vector<stall_record> stalls;                        ///< in op order
  std::uint64_t device_peak{};                             ///< max device bytes over the iteration
  std::uint64_t d2h_bytes{};            ///< bytes over the link device-to-host (after the codec)
  std::uint64_t h2d_bytes{};            ///< bytes over the link host-to-device (after the codec)
  std::vector<double> op_start;         ///< start time of each op
  std::vector<double> op_end;           ///< end time of each op
  std::vector<timeline_span> timeline;  ///< ops, stalls, offloads, prefetches (if recorded)
};

namespace detail {

/// One simulated iteration (see the file comment); run() once.
class simulation {
 public:
  // `chains`: when not null, the re-run chains are taken from it (the same chains).
  simulation(trace_analysis const& a, schedule const& s, sim_options const& o,
             chain_memo* chains = nullptr)
      : a_(a),
        chains_(chains),
        entries_(s.entries),
        recomputes_(s.recomputes),
        shared_reruns_(s.shared_reruns),
        options_(o),
        steps_(a.memory_steps()),
        n_(a.op_count())
  {
    budget_ = o.memory == sim_memory::unconstrained ? std::numeric_limits<std::uint64_t>::max()
                                                    : s.budget;
    if (std::any_of(entries_.begin(), entries_.end(), [](swap_entry const& e) { return e.wrap; })) {
      wrap_steps_ = steps_without_wraps();
      steps_      = wrap_steps_;
    }
    index_entries();
    r_.op_start.assign(n_, 0.0);
    r_.op_end.assign(n_, 0.0);
  }

  [[nodiscard]] sim_result run()
  {
    if (n_ > 0) { issue(0, 0.0); }
    for (;;) {
      auto const c = compute_request();
      auto const h = h2d_request();
      if (c == inf && h == inf) {
        fail();
        return std::move(r_);
      }
      bool const h2d_turn = h <= c;
      double const now    = h2d_turn ? h : c;
      apply_releases(now);
      std::uint64_t const need = h2d_turn ? entries_[h2d_queue_[h2d_head_]].bytes : step_need();
      if (need > budget_ || used_ > budget_ - need) {  // blocked until the next release
        (h2d_turn ? h_after_ : c_after_) = releases_.empty() ? inf : releases_.top().time;
        continue;
      }
      if (h2d_turn) {
        grant_prefetch(now);
      } else if (grant_compute(now)) {
        return std::move(r_);
      }
    }
  }

 private:
  static constexpr double inf = std::numeric_limits<double>::infinity();
  struct release {
    double time;
    std::uint64_t bytes;
    bool operator>(release const& o) const noexcept { return time > o.time; }
  };

  // The memory steps with op 0's leaving out the wrap entries' storages (on the host at the
  // start of a replayed iteration); only op 0's step holds storages allocated before op 0.
  [[nodiscard]] std::vector<memory_step> steps_without_wraps() const
  {
    std::vector<memory_step> steps(steps_.begin(), steps_.end());
    auto const& t = a_.trace();
    std::vector<char> away(t.storages().size(), 0);
    for (auto const& e : entries_) { away[e.id] = e.wrap ? 1 : away[e.id]; }
    auto const events = t.events();
    std::int64_t run = 0, peak = 0;
    for (std::uint64_t j = 0; n_ > 0 && j < a_.ops().event[0]; ++j) {
      if (events[j].kind == event_kind::phase || away[events[j].index] != 0) { continue; }
      auto const bytes = static_cast<std::int64_t>(t.storages()[events[j].index].bytes);
      run += events[j].kind == event_kind::alloc ? bytes : -bytes;
      peak = std::max(peak, run);
    }
    steps[0].start_peak = static_cast<std::uint64_t>(peak);
    steps[0].start_net  = run;
    steps[0].live_peak  = static_cast<std::uint64_t>(peak);
    return steps;
  }

  void index_entries()
  {
    auto const m = entries_.size();
    // op count: a wrap entry's offload when the last op ends
    offloads_at_.build(n_ + 1, m, [&](std::size_t k) { return entries_[k].offload_at; });
    prefetches_at_.build(n_ + 1, m, [&](std::size_t k) { return entries_[k].prefetch_at; });
    waits_at_.build(n_, m, [&](std::size_t k) { return entries_[k].next_use; });
    release_after_.resize(n_);
    extra_s_.assign(n_ + 1, 0.0);
    double const share = a_.model().params().codec_compute_share;
    for (std::uint32_t k = 0; k < m; ++k) {
      auto const& e = entries_[k];
      if (!e.redrop) {
        extra_s_[e.offload_at] += share * a_.model().encode_time(e.bytes, e.encoding);
      }
      extra_s_[e.next_use] += share * a_.model().decode_time(e.bytes, e.encoding);
    }
    // the prefetches a batch of re-runs waits for: those ending at a re-run use only
    auto const batch_waits = [&](std::size_t k) {
      auto const& e = entries_[k];
      return !e.wrap && e.next_use < n_ && !is_access(a_, e.id, e.next_use);
    };
    // Read only while a batch of re-runs is pending: none without recompute entries, where the
    // access test per entry (a binary search in its storage's accesses) would be wasted.
    std::vector<std::uint32_t> waiting;
    for (std::uint32_t k = 0; k < m && !recomputes_.empty(); ++k) {
      if (batch_waits(k)) { waiting.push_back(k); }
    }
    build_subset(rc_waits_at_, waiting, [&](std::uint32_t k) { return entries_[k].next_use; });
    auto const rm = recomputes_.size();
    recomputes_at_.build(n_, rm, [&](std::size_t k) { return recomputes_[k].at; });
    // recompute entries released when op last_use ends, or (early departures) after its batch
    std::vector<std::uint32_t> late_rc, early_rc, early_sw;
    for (std::uint32_t k = 0; k < rm; ++k) {
      (early_departure(a_, recomputes_[k]) ? early_rc : late_rc).push_back(k);
    }
    for (std::uint32_t k = 0; k < m; ++k) {
      if (early_departure(a_, entries_[k])) { early_sw.push_back(k); }
    }
    build_subset(rc_release_after_, late_rc,
                 [&](std::uint32_t k) { return recomputes_[k].last_use; });
    build_subset(rc_early_at_, early_rc, [&](std::uint32_t k) { return recomputes_[k].last_use; });
    build_subset(sw_early_at_, early_sw, [&](std::uint32_t k) { return entries_[k].last_use; });
    price_reruns();
    d2h_end_.assign(m, inf);
    issued_.assign(m, inf);
    ready_.assign(m, inf);
    cause_.assign(m, stall_cause::transfer);
    granted_.assign(m, false);
    h2d_queue_.reserve(m);
  }

  // Each recompute entry's re-run seconds and transient bytes (its chain's; shared in a batch
  // with schedule::shared_reruns).
  void price_reruns()
  {
    rc_seconds_.reserve(recomputes_.size());
    rc_transient_.reserve(recomputes_.size());
    for (std::uint32_t k = 0; k < recomputes_.size(); ++k) {
      auto const& e = recomputes_[k];
      std::optional<recompute_chain> own;
      auto const& chain = chains_ != nullptr
                              ? (*chains_)(e.id, e.last_use, e.at)
                              : own.emplace(recompute_chain_of(a_, e.id, e.last_use, e.at));
      rc_seconds_.push_back(chain.seconds);
      rc_transient_.push_back(chain.transient_bytes);
    }
    if (shared_reruns_) { rc_seconds_ = shared_rerun_seconds(a_, recomputes_, chains_); }
  }

  // `buckets` over the items `subset` (indices), keyed by `key_of(index)`.
  template <class Buckets, class Key>
  void build_subset(Buckets& buckets, std::vector<std::uint32_t> const& subset, Key&& key_of) const
  {
    buckets.build(n_, subset.size(), [&](std::size_t j) { return key_of(subset[j]); });
    for (auto& k : buckets.items) { k = subset[k]; }
  }

  void span(timeline_span::kind_t kind, sim_resource res, double from, double to, std::uint64_t i)
  {
    if (options_.record_timeline) { r_.timeline.push_back(timeline_span{kind, res, from, to, i}); }
  }

  void push_release(double time, std::uint64_t bytes)
  {
    if (bytes > 0) { releases_.push(release{time, bytes}); }
  }

  // Compute reached op `op` at `when`: its offloads start on the D2H engine, its prefetches join
  // the H2D queue.
  void issue(std::size_t op, double when)
  {
    auto const& model = a_.model();
    for (auto const k : offloads_at_[op]) {
      auto const& e    = entries_[k];
      bool const early = early_departure(a_, e);  // released after the batch (grant_recompute)
      if (e.redrop) {  // nothing copied: dropped now (late) or after the batch (early)
        d2h_end_[k] = when;
        if (!early) { push_release(when, e.bytes); }
        continue;
      }
      double const start = std::max(when, d2h_free_);
      d2h_end_[k]        = start + model.offload_time(e.bytes, e.encoding);
      d2h_free_          = d2h_end_[k];
      r_.d2h_bytes += model.wire_bytes(e.bytes, e.encoding);
      span(timeline_span::kind_t::offload, sim_resource::d2h, start, d2h_end_[k], k);
      if (early) { continue; }
      if (e.last_use < op) {
        push_release(std::max(d2h_end_[k], r_.op_end[e.last_use]), e.bytes);
      } else {
        release_after_[e.last_use].push_back(k);  // released once op last_use has ended
      }
    }
    for (auto const k : prefetches_at_[op]) {
      issued_[k] = when;
      h2d_queue_.push_back(k);
    }
  }

  // When compute may take its next step (infinite while a prefetch it needs is not granted).
  [[nodiscard]] double compute_request()
  {
    prefetch_ready_ = c_ready_;
    last_wait_.reset();
    if (recompute_pending()) {
      for (auto const k : rc_waits_at_[i_]) {
        if (!granted_[k]) { return inf; }
        if (ready_[k] > prefetch_ready_) {
          prefetch_ready_ = ready_[k];
          last_wait_      = k;
        }
      }
      return std::max(prefetch_ready_, c_after_);
    }
    if (i_ < n_) {
      for (auto const k : waits_at_[i_]) {
        if (!granted_[k]) { return inf; }
        if (ready_[k] > prefetch_ready_) {
          prefetch_ready_ = ready_[k];
          last_wait_      = k;
        }
      }
    }
    return std::max(prefetch_ready_, c_after_);
  }

  // When the head of the H2D queue may start (infinite when the queue is empty).
  [[nodiscard]] double h2d_request() const
  {
    if (h2d_head_ >= h2d_queue_.size()) { return inf; }
    auto const k = h2d_queue_[h2d_head_];
    return std::max({issued_[k], h2d_free_, own_offload_end(k), h_after_});
  }

  // When the offload entry k's prefetch waits for ends: a wrap entry's was the previous
  // iteration's, done when this one started.
  [[nodiscard]] double own_offload_end(std::uint32_t k) const
  {
    return entries_[k].wrap ? 0.0 : d2h_end_[k];
  }

  [[nodiscard]] bool recompute_pending() const noexcept
  {
    return i_ < n_ && rc_pos_ < recomputes_at_[i_].size();
  }

  [[nodiscard]] std::uint64_t step_need() const noexcept
  {
    if (recompute_pending()) {
      auto const k = recomputes_at_[i_][rc_pos_];
      return recomputes_[k].bytes + rc_transient_[k];
    }
    return steps_[i_].start_peak;
  }

  // Runs the next recompute entry of op i_ from `now`.
  void grant_recompute(double now)
  {
    auto const k = recomputes_at_[i_][rc_pos_];
    if (last_wait_) {
      stall(c_ready_, prefetch_ready_, entries_[*last_wait_].id, cause_[*last_wait_]);
    }
    stall(prefetch_ready_, now, std::nullopt, stall_cause::memory);
    r_.device_peak = std::max(r_.device_peak, used_ + recomputes_[k].bytes + rc_transient_[k]);
    used_ += recomputes_[k].bytes;
    double const end = now + rc_seconds_[k];
    r_.recompute_s += rc_seconds_[k];
    span(timeline_span::kind_t::recompute, sim_resource::compute, now, end, k);
    c_ready_ = end;
    c_after_ = 0;
    h_after_ = std::min(h_after_, now);
    ++rc_pos_;
    if (rc_pos_ == recomputes_at_[i_].size()) {  // the batch is over: early departures leave
      for (auto const j : sw_early_at_[i_]) {
        push_release(std::max(d2h_end_[j], end), entries_[j].bytes);
      }
      for (auto const j : rc_early_at_[i_]) { push_release(end, recomputes_[j].bytes); }
    }
  }

  void apply_releases(double now)
  {
    while (!releases_.empty() && releases_.top().time <= now) {
      used_ -= releases_.top().bytes;
      releases_.pop();
    }
  }

  void grant_prefetch(double now)
  {
    auto const& model  = a_.model();
    auto const k       = h2d_queue_[h2d_head_];
    double const plain = std::max({issued_[k], h2d_free_, own_offload_end(k)});
    if (now > plain) {
      cause_[k] = stall_cause::memory;
    } else if (plain > issued_[k]) {
      cause_[k] =
          own_offload_end(k) >= h2d_free_ ? stall_cause::offload_pending : stall_cause::h2d_busy;
    }
    used_ += entries_[k].bytes;
    r_.device_peak = std::max(r_.device_peak, used_);
    ready_[k]      = now + model.prefetch_time(entries_[k].bytes, entries_[k].encoding);
    h2d_free_      = ready_[k];
    granted_[k]    = true;
    r_.h2d_bytes += model.wire_bytes(entries_[k].bytes, entries_[k].encoding);
    span(timeline_span::kind_t::prefetch, sim_resource::h2d, now, ready_[k], k);
    ++h2d_head_;
    h_after_ = 0;
    c_after_ = std::min(c_after_, now);  // a blocked compute re-checks from now
  }

  void stall(double from, double to, std::optional<storage_id> storage, stall_cause c)
  {
    if (to <= from) { return; }
    r_.stalls.push_back(stall_record{i_, to - from, storage, c});
    r_.stall_s += to - from;
    r_.stall_by_cause[static_cast<std::size_t>(c)] += to - from;
    span(timeline_span::kind_t::stall, sim_resource::compute, from, to, i_);
  }

  // Runs op i_ (or the final step) from `now`; true when the iteration is over.
  bool grant_compute(double now)
  {
    if (recompute_pending()) {
      grant_recompute(now);
      return false;
    }
    auto const& step = steps_[i_];
    r_.device_peak   = std::max(r_.device_peak, used_ + step.start_peak);
    used_ = static_cast<std::uint64_t>(static_cast<std::int64_t>(used_) + step.start_net);
    if (last_wait_) {
      stall(c_ready_, prefetch_ready_, entries_[*last_wait_].id, cause_[*last_wait_]);
    }
    stall(prefetch_ready_, now, std::nullopt, stall_cause::memory);
    c_after_ = 0;
    h_after_ = std::min(h_after_, now);  // a blocked H2D head re-checks from now
    if (i_ == n_) {
      r_.iteration_s = n_ > 0 ? std::max(r_.op_end[n_ - 1], now) : now;
      wait_for_wrap_offloads();
      return true;
    }
    double const duration = a_.op_seconds()[i_] + extra_s_[i_];
    r_.op_start[i_]       = now;
    r_.op_end[i_]         = now + duration;
    r_.compute_s += duration;
    span(timeline_span::kind_t::op, sim_resource::compute, now, r_.op_end[i_], i_);
    push_release(r_.op_end[i_], step.end_free);
    for (auto const k : release_after_[i_]) {
      push_release(std::max(d2h_end_[k], r_.op_end[i_]), entries_[k].bytes);
    }
    for (auto const k : rc_release_after_[i_]) {
      push_release(r_.op_end[i_], recomputes_[k].bytes);
    }
    c_ready_ = r_.op_end[i_];
    ++i_;
    rc_pos_ = 0;
    issue(i_, c_ready_);  // at the op count: the wrap offloads issued when the last op ends
    return false;
  }

  // The iteration ends once every wrap offload has finished (see the file comment).
  void wait_for_wrap_offloads()
  {
    std::optional<std::uint32_t> last;
    for (std::uint32_t k = 0; k < entries_.size(); ++k) {
      if (entries_[k].wrap && (!last || d2h_end_[k] >= d2h_end_[*last])) { last = k; }
    }
    if (!last || d2h_end_[*last] <= r_.iteration_s) { return; }
    stall(r_.iteration_s, d2h_end_[*last], entries_[*last].id, stall_cause::offload_pending);
    r_.iteration_s = d2h_end_[*last];
  }

  void fail()
  {
    sim_failure f;
    f.op = i_;
    if (c_after_ != inf && h2d_head_ < h2d_queue_.size()) {  // compute waits for this prefetch
      auto const k   = h2d_queue_[h2d_head_];
      f.storage      = entries_[k].id;
      f.needed_bytes = entries_[k].bytes;
    } else {
      f.needed_bytes = step_need();
    }
    f.free_bytes   = budget_ >= used_ ? budget_ - used_ : 0;
    r_.fits        = false;
    r_.failure     = f;
    r_.iteration_s = inf;
  }

  trace_analysis const& a_;
  chain_memo* chains_;  // the re-run chains, kept across simulations (or null)
  std::vector<swap_entry> const& entries_;
  std::vector<recompute_entry> const& recomputes_;
  bool shared_reruns_;  // schedule::shared_reruns: re-runs priced by shared_rerun_seconds
  sim_options options_;
  std::span<memory_step const> steps_;
  std::vector<memory_step> wrap_steps_;  // steps_ when the schedule has wrap entries
  std::size_t n_;
  std::uint64_t budget_{};
  sim_result r_;

  // The entries (or recompute entries) keyed by an op, each key's in index order: one array and
  // its offsets (a counting sort), not a vector per op, which the planners' thousands of
  // simulations per plan of a long trace spent a large part of their time allocating and freeing.
  struct op_buckets {
    std::vector<std::uint32_t> first, items;  // key i's items: items[first[i], first[i + 1])
    template <class Key>
    void build(std::size_t keys, std::size_t m, Key&& key_of)
    {
      first.assign(keys + 1, 0);
      for (std::size_t k = 0; k < m; ++k) { ++first[key_of(k) + 1]; }
      for (std::size_t i = 0; i < keys; ++i) { first[i + 1] += first[i]; }
      items.resize(m);
      std::vector<std::uint32_t> next(first.begin(), first.end() - 1);
      for (std::size_t k = 0; k < m; ++k) {
        items[next[key_of(k)]++] = static_cast<std::uint32_t>(k);
      }
    }
    [[nodiscard]] std::span<std::uint32_t const> operator[](std::size_t i) const
    {
      return {items.data() + first[i], items.data() + first[i + 1]};
    }
  };
  op_buckets offloads_at_, prefetches_at_, waits_at_;
  std::vector<std::vector<std::uint32_t>> release_after_;  // filled as offloads are issued
  std::vector<double> extra_s_;                            // codec kernel time charged to each op
  op_buckets recomputes_at_, rc_release_after_;
  op_buckets rc_waits_at_;  // swap entries a batch of re-runs waits for (index_entries)
  op_buckets rc_early_at_, sw_early_at_;  // entries leaving right after the batch at an op
  std::vector<double> rc_seconds_;
  std::vector<std::uint64_t> rc_transient_;
  std::size_t rc_pos_{0};  // recompute entries of op i_ already run
  std::vector<double> d2h_end_, issued_, ready_;
  std::vector<stall_cause> cause_;
  std::vector<bool> granted_;
  std::vector<std::uint32_t> h2d_queue_;
  std::size_t h2d_head_{0};
  std::priority_queue<release, std::vector<release>, std::greater<>> releases_;
  std::uint64_t used_{0};
  double d2h_free_{0}, h2d_free_{0};
  double c_ready_{0};  // end of the previous op
  double c_after_{0};  // compute may not be granted before this (memory retry time)
  double h_after_{0};  // the H2D head may not start before this (memory retry time)
  double prefetch_ready_{0};
  std::optional<std::uint32_t> last_wait_;
  std::size_t i_{0};  // next op to start (n_ = the final step)
};

}  // namespace detail

/// @brief Simulates one iteration of the analysed trace under schedule `s` on the analysis's cost
/// model, on a device of `s.budget` bytes unless `options.memory` lifts it. Validates `s` first
/// (stash::schedule_error) unless `options.validate` is false.
/// @param analysis The recorded iteration's facts.
/// @param s The schedule.
/// @param options Settings.
/// @return The simulated iteration.
[[nodiscard]] inline sim_result simulate(trace_analysis const& analysis, schedule const& s,
                                         sim_options const& options = {})
{
  if (options.validate) { validate_schedule(analysis, s); }
  return detail::simulation(analysis, s, options).run();
}

namespace detail {

// simulate without validating `s` (the caller did), the re-run chains taken from `chains` (the
// same chains).
[[nodiscard]] inline sim_result simulate_unvalidated(trace_analysis const& analysis,
                                                     schedule const& s, sim_options options,
                                                     chain_memo& chains)
{
  options.validate = false;
  return simulation(analysis, s, options, &chains).run();
}

}  // namespace detail

}  // namespace stash
