/**
 * @file projection.hpp
 * @brief Projected time to train on a cluster, for every data-parallel x model-parallel
 * configuration, with and without stash's offload: the "Beyond one GPU" projection (after Pal et
 * al., IEEE Micro 2019, who found hybrid DP x MP beats DP alone at scale).
 *
 * Model (every number below is a field of projection_params, cluster or cost_params, and is
 * listed in projection_result::assumptions):
 *  - Batch. Each data-parallel replica processes `replica_batch` samples per step (default: the
 *    trace's batch); the global batch is dp x replica_batch. The trace is rescaled to that batch
 *    (detail/batch_scaling.hpp: activations, inputs and forward/backward temporaries linear in
 *    the batch, parameters, gradients and optimizer state constant; op FLOPs/bytes follow).
 *  - Model parallelism over mp devices: the forward ops are split into mp contiguous stages by an
 *    exact dynamic program balancing stage time under the memory budget
 *    (detail/stage_split.hpp). Stages run as a GPipe-style synchronous pipeline of
 *    `micro_batches` micro-batches (1 when mp = 1): pipeline time = (m + mp - 1) x
 *    max_s(T_s + C_s), where T_s is stage s's forward+backward time for one micro-batch (the
 *    trace rescaled to replica_batch / m) and C_s the time to receive the storages it reads from
 *    other stages for one micro-batch (latency + bytes / rate of the link between the two
 *    devices; stages of a replica occupy consecutive devices, node by node; not overlapped with
 *    compute). The device of stage s holds its own parameters, state and the activations of all
 *    m micro-batches: its memory is the peak of its stage trace at replica_batch.
 *  - Data parallelism over dp replicas: each stage's gradients (bytes = its `param` storages)
 *    are all-reduced among the dp devices holding that stage, as a ring: per bucket
 *    2(N-1) x latency + 2(N-1)/N x bytes / rate. Gradients are packed into buckets of
 *    `bucket_bytes` in the order backward produces them (as PyTorch DDP does), and a bucket
 *    starts when its last gradient is produced in the last micro-batch's backward and the
 *    previous bucket is done, so the all-reduce overlaps the rest of backward; only what runs
 *    past the end of backward (E_s) is exposed. A ring inside one node runs on the intra-node
 *    link; one that spans nodes runs at min(intra rate, inter rate x share), share = the
 *    stage's bytes / the bytes of all stages placed on the same node (their rings share the
 *    node's network in proportion to their load, so they finish together), with the larger of
 *    the two latencies. A ring's devices are ordered node by node, so it enters and leaves each
 *    node once.
 *  - Step = pipeline time + max_s(E_s + O_s) + max_s(offload stall_s), O_s = the stage's
 *    optimizer ops.
 *  - stash: a stage whose peak exceeds the budget is planned with each swap policy
 *    (policy_registry.hpp) at the budget and simulated (simulator.hpp); it fits when the
 *    simulated device peak is within the budget. The configuration uses the one policy that
 *    fits all its over-budget stages with the smallest largest stall; that stall is the offload
 *    cost.
 *  - Statistical efficiency: epochs to reach the target at global batch B, from a table or from
 *    the gradient-noise-scale form steps(B) = S_min (1 + B_noise / B), epochs = steps(B) B / D
 *    for a dataset of D samples. Steps per epoch = ceil(D / B); time to train = epochs x steps
 *    per epoch x step time.
 * Configurations: for each device count (default: powers of two up to the cluster, and the whole
 * cluster), each power-of-two mp <= min(max_mp, devices, forward ops) dividing it. The best is
 * the fitting configuration with the smallest time to train.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/projection/cluster.hpp>
#include <stash/projection/detail/batch_scaling.hpp>
#include <stash/projection/detail/stage_split.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace stash {

/// @brief One row of a user-given statistical-efficiency table.
struct epochs_point {
  double global_batch{};  ///< global batch size
  double epochs{};        ///< epochs to reach the target at that batch
};

/// @brief Epochs to reach the target as a function of the global batch size.
class statistical_efficiency {
 public:
  /// @brief steps(B) = s_min_steps (1 + b_noise / B) (McCandlish et al.'s gradient-noise form).
  /// @param s_min_steps Steps at an infinite batch (> 0).
  /// @param b_noise The gradient-noise scale in samples (>= 0).
  /// @return The efficiency model.
  /// @throws stash::logic_error For a value out of range or not finite.
  [[nodiscard]] static statistical_efficiency gradient_noise(double s_min_steps, double b_noise)
  {
    STASH_EXPECTS(s_min_steps > 0 && std::isfinite(s_min_steps),
                  "statistical efficiency: S_min must be positive");
    STASH_EXPECTS(b_noise >= 0 && std::isfinite(b_noise),
                  "statistical efficiency: B_noise must be >= 0");
    statistical_efficiency e;
    e.s_min_   = s_min_steps;
    e.b_noise_ = b_noise;
    return e;
  }
  /// @brief A table of (global batch, epochs), interpolated linearly in log(batch); batches
  /// outside the table have no estimate. Needs at least one point, distinct positive batches.
  /// @param points (global batch, epochs) pairs, batches ascending.
  /// @return The efficiency model.
  /// @throws stash::logic_error For an empty table, a non-positive value or batches not ascending.
  [[nodiscard]] static statistical_efficiency table(std::vector<epochs_point> points)
  {
    STASH_EXPECTS(!points.empty(), "statistical efficiency: the table is empty");
    std::sort(points.begin(), points.end(),
              [](epochs_point a, epochs_point b) { return a.global_batch < b.global_batch; });
    for (std::size_t i = 0; i < points.size(); ++i) {
      STASH_EXPECTS(points[i].global_batch > 0 && points[i].epochs > 0 &&
                        std::isfinite(points[i].global_batch) && std::isfinite(points[i].epochs),
                    "statistical efficiency: table batches and epochs must be positive and finite");
      STASH_EXPECTS(i == 0 || points[i].global_batch > points[i - 1].global_batch,
                    "statistical efficiency: table batch " +
                        std::to_string(points[i].global_batch) + " appears twice");
    }
    statistical_efficiency e;
    e.table_ = std::move(points);
    return e;
  }

  /// @brief Epochs to target at `global_batch` for a dataset of `dataset_samples`; nullopt
  /// outside a table's range.
  /// @param global_batch The global batch in samples.
  /// @param dataset_samples Samples per epoch.
  /// @return The epochs, or nullopt outside a table's range.
  [[nodiscard]] std::optional<double> epochs(double global_batch, double dataset_samples) const
  {
    if (table_.empty()) {
      return s_min_ * (1.0 + b_noise_ / global_batch) * global_batch / dataset_samples;
    }
    if (global_batch < table_.front().global_batch || global_batch > table_.back().global_batch) {
      return std::nullopt;
    }
    for (std::size_t i = 0; i + 1 < table_.size(); ++i) {
      auto const& a = table_[i];
      auto const& b = table_[i + 1];
      if (global_batch <= b.global_batch) {
        double const w =
            std::log(global_batch / a.global_batch) / std::log(b.global_batch / a.global_batch);
        return a.epochs + w * (b.epochs - a.epochs);
      }
    }
    return table_.back().epochs;  // a one-row table at exactly its batch
  }

  /// @brief The model and its parameters, for printing.
  /// @return One line naming the model and its parameters.
  [[nodiscard]] std::string describe() const
  {
    if (table_.empty()) {
      return "steps(B) = S_min (1 + B_noise / B), S_min = " + format(s_min_) +
             ", B_noise = " + format(b_noise_);
    }
    std::string out = "table (global batch: epochs, log-linear between rows)";
    for (auto const& p : table_) { out += " " + format(p.global_batch) + ":" + format(p.epochs); }
    return out;
  }

 private:
  static std::string format(double v)
  {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  statistical_efficiency() = default;
  double s_min_{}, b_noise_{};
  std::vector<epochs_point> table_;
};

/// @brief The projection's own assumptions (the cluster and cost model carry the rest).
struct projection_params {
  /// Samples per epoch (default: ImageNet-1k's training set, 1,281,167 images).
  std::uint64_t dataset_samples = 1'281'167;
  /// Samples per data-parallel replica and step; 0 = the trace's recorded batch.
  std::uint64_t replica_batch = 0;
  /// Pipeline micro-batches per step when mp > 1 (GPipe suggests m >= 4 mp); must divide the
  /// replica batch.
  std::uint32_t micro_batches = 4;
  /// Largest model-parallel degree tried.
  std::uint32_t max_mp = 8;
  /// Per-device memory budget in bytes; 0 = the device preset's memory.
  std::uint64_t device_budget_bytes = 0;
  /// Gradient bucket size of the overlapped all-reduce (PyTorch DDP's default, 25 MiB).
  std::uint64_t bucket_bytes = 25ull << 20;
  /// Whether over-budget configurations may use a swap policy.
  bool try_offload = true;
  /// Device counts to project; empty = powers of two up to the cluster, plus the whole cluster.
  std::vector<std::uint64_t> device_counts;
  /// Cost model of one device (efficiencies, codec).
  cost_params cost;
};

/// @brief One projected configuration.
struct projection_config {
  std::uint64_t dp{};                 ///< data-parallel degree (replicas)
  std::uint64_t mp{};                 ///< model-parallel degree (pipeline stages per replica)
  std::uint64_t devices{};            ///< dp x mp
  std::uint64_t global_batch{};       ///< dp x replica batch
  std::uint32_t micro_batches{};      ///< pipeline micro-batches (1 when mp = 1)
  bool fits{};                        ///< fits the budget as is or with `policy`
  bool offload{};                     ///< fits only with a swap policy
  std::string policy;                 ///< "no_swap" when it fits as is, the swap policy, or empty
  std::uint64_t device_peak_bytes{};  ///< largest per-device peak (with the policy, if any)
  double step_s{};                    ///< time per step
  double pipeline_s{};                ///< (m + mp - 1) x slowest stage per micro-batch
  double boundary_s{};                ///< largest per-micro-batch stage-boundary receive time
  double allreduce_s{};               ///< largest full all-reduce time of a stage (overlap aside)
  double allreduce_exposed_s{};       ///< largest all-reduce time left after backward
  double offload_stall_s{};           ///< largest simulated offload stall of a stage
  std::uint64_t steps_per_epoch{};    ///< ceil(dataset / global batch)
  std::optional<double> epochs_to_target;  ///< from the statistical-efficiency model
  std::optional<double> time_to_train_s;   ///< epochs x steps per epoch x step
  bool best{};  ///< the fitting configuration with the least time to train
};

/// @brief What project() found, with the assumptions it used.
struct projection_result {
  std::vector<std::pair<std::string, std::string>> assumptions;  ///< name, value
  std::vector<projection_config> configs;                        ///< by devices, then mp
  std::optional<std::size_t> best;                               ///< index into configs
};

namespace detail {

/// Everything about one model-parallel degree that does not depend on dp.
struct stage_analysis {
  std::vector<double> compute_s;           // per stage: forward+backward per micro-batch
  std::vector<double> backward_s;          // per stage: backward per micro-batch
  std::vector<double> optimizer_s;         // per stage
  std::vector<double> receive_s;           // per stage, per micro-batch
  std::vector<std::uint64_t> param_bytes;  // per stage
  std::vector<std::vector<std::pair<double, std::uint64_t>>> grads;  // (ready time in bwd, bytes)
  std::vector<std::uint64_t> peak;  // per stage, as is, at replica batch
  bool fits_as_is{};
  std::string policy;  // best fitting policy when !fits_as_is
  bool fits_with_policy{};
  std::uint64_t policy_peak{};  // largest per-stage peak with that policy
  double policy_stall_s{};      // largest stall with it
};

[[nodiscard]] inline std::string format_number(double v)
{
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

[[nodiscard]] inline double link_time(link_spec const& l, double bytes)
{
  return l.latency_s + bytes / l.bytes_per_s;
}

// What every step of project() reads: the inputs, the budget and batch they resolve to, the
// trace's units, and the rescaled traces with their op times (one per distinct batch, built on
// first use).
struct projection_context {
  trace const& t;
  cluster const& c;
  projection_params const& params;
  cost_model model;
  unit_map units;
  std::uint64_t recorded{};
  std::uint64_t batch{};
  std::uint64_t budget{};
  std::uint64_t g{};  // GPUs per node
  std::map<std::uint64_t, std::pair<trace, std::vector<double>>> scaled;

  projection_context(trace const& tr, cluster const& cl, projection_params const& p)
      : t(tr),
        c(cl),
        params(p),
        model(cl.hw, p.cost),
        units(assign_units(tr)),
        recorded(recorded_batch(tr)),
        batch(p.replica_batch == 0 ? recorded : p.replica_batch),
        budget(p.device_budget_bytes == 0 ? cl.hw.device_memory_bytes : p.device_budget_bytes),
        g(static_cast<std::uint64_t>(cl.gpus_per_node))
  {
  }

  // The trace rescaled to batch `b`, with its op times.
  std::pair<trace, std::vector<double>> const& at_batch(std::uint64_t b)
  {
    auto it = scaled.find(b);
    if (it == scaled.end()) {
      auto tr    = scale_trace_batch(t, b);
      auto times = model.op_times(tr);
      it         = scaled.emplace(b, std::make_pair(std::move(tr), std::move(times))).first;
    }
    return it->second;
  }
};

// Checked before anything is derived from the inputs.
inline void check_projection_inputs(trace const& t, cluster const& c,
                                    projection_params const& params)
{
  auto const batch = params.replica_batch == 0 ? recorded_batch(t) : params.replica_batch;
  STASH_EXPECTS(params.dataset_samples > 0, "projection: dataset_samples must be positive");
  STASH_EXPECTS(params.micro_batches > 0 && batch % params.micro_batches == 0,
                "projection: micro_batches (" + std::to_string(params.micro_batches) +
                    ") must divide the replica batch (" + std::to_string(batch) + ")");
  STASH_EXPECTS(params.max_mp > 0 && params.bucket_bytes > 0,
                "projection: max_mp and bucket_bytes must be positive");
  STASH_EXPECTS(c.nodes > 0 && c.gpus_per_node > 0 && c.intra.bytes_per_s > 0 &&
                    c.inter.bytes_per_s > 0 && c.intra.latency_s >= 0 && c.inter.latency_s >= 0,
                "projection: cluster counts and link rates must be positive");
}

// The full-batch time and non-temporary bytes of each unit: what split_units balances.
inline stage_split split_into_stages(projection_context& ctx, std::uint64_t k)
{
  auto const& [full, full_times] = ctx.at_batch(ctx.batch);
  auto const& units              = ctx.units;
  std::vector<double> unit_time(units.units, 0.0);
  std::vector<std::uint64_t> unit_mem(units.units, 0);
  for (std::size_t i = 0; i < ctx.t.ops().size(); ++i) {
    unit_time[units.op_unit[i]] += full_times[i];
  }
  for (std::size_t id = 0; id < full.storages().size(); ++id) {
    auto const kind = full.storages()[id].kind;
    if (kind != storage_kind::temp) {
      unit_mem[units.storage_unit[id]] += full.storages()[id].bytes;
    }
  }
  return split_units(unit_time, unit_mem, k, ctx.budget);
}

// Per stage and micro-batch: compute, backward and optimizer time, what it receives from other
// stages (each storage once), its parameter bytes and when in backward each gradient is ready.
inline void time_stages(projection_context& ctx, std::uint64_t k, stage_split const& split,
                        stage_analysis& a)
{
  auto const& t                    = ctx.t;
  auto const& units                = ctx.units;
  std::uint32_t const m            = k == 1 ? 1 : ctx.params.micro_batches;
  auto const& [micro, micro_times] = ctx.at_batch(ctx.batch / m);
  auto const stage_of_op      = [&](std::size_t op) { return split.unit_stage[units.op_unit[op]]; };
  auto const stage_of_storage = [&](storage_id id) {
    return split.unit_stage[units.storage_unit[id]];
  };
  a.compute_s.assign(k, 0);
  a.backward_s.assign(k, 0);
  a.optimizer_s.assign(k, 0);
  a.receive_s.assign(k, 0);
  a.param_bytes.assign(k, 0);
  a.grads.assign(k, {});
  std::vector<std::vector<bool>> received(k, std::vector<bool>(t.storages().size(), false));
  std::vector<bool> grad_seen(t.storages().size(), false);
  // Placement of replica 0: stage s on device s, node s / g.
  auto const stage_link = [&](std::size_t from, std::size_t to) -> link_spec const& {
    return from / ctx.g == to / ctx.g ? ctx.c.intra : ctx.c.inter;
  };
  for (std::size_t i = 0; i < t.ops().size(); ++i) {
    auto const s  = stage_of_op(i);
    auto const ph = units.op_phase[i];
    if (ph == phase::optimizer) {
      a.optimizer_s[s] += micro_times[i];
    } else {
      a.compute_s[s] += micro_times[i];
    }
    if (ph == phase::backward) { a.backward_s[s] += micro_times[i]; }
    auto const& o = t.ops()[i];
    for (auto const* list : {&o.reads, &o.writes}) {
      for (auto const id : *list) {
        auto const owner = stage_of_storage(id);
        if (owner != s && !received[s][id]) {
          received[s][id] = true;
          a.receive_s[s] +=
              link_time(stage_link(owner, s), static_cast<double>(micro.storages()[id].bytes));
        }
      }
    }
    if (ph == phase::backward) {
      for (auto const id : o.writes) {
        if (t.storages()[id].kind == storage_kind::grad && !grad_seen[id] &&
            stage_of_storage(id) == s) {
          grad_seen[id] = true;
          a.grads[s].emplace_back(a.backward_s[s], t.storages()[id].bytes);
        }
      }
    }
  }
  for (std::size_t id = 0; id < t.storages().size(); ++id) {
    if (t.storages()[id].kind == storage_kind::param) {
      a.param_bytes[stage_of_storage(id)] += t.storages()[id].bytes;
    }
  }
}

// The swap policy (other than no_swap) that makes every over-budget stage fit with the least
// stall, if any: sets fits_with_policy, policy, policy_peak and policy_stall_s.
inline void choose_offload_policy(std::vector<trace_analysis> const& stage_analyses,
                                  std::uint64_t budget, stage_analysis& a)
{
  auto const k = stage_analyses.size();
  for (auto const name : swap_policy_names()) {
    if (name == "no_swap") { continue; }
    bool ok            = true;
    std::uint64_t peak = 0;
    double stall       = 0;
    for (std::size_t s = 0; s < k && ok; ++s) {
      if (a.peak[s] <= budget) {
        peak = std::max(peak, a.peak[s]);
        continue;
      }
      try {
        auto const plan = plan_by_name(name, stage_analyses[s], budget);
        auto const sim  = simulate(stage_analyses[s], plan, sim_options{false});
        ok              = sim.fits;  // completes within the budget
        peak            = std::max(peak, sim.device_peak);
        stall           = std::max(stall, sim.iteration_s - sim.compute_s);
      } catch (logic_error const&) {
        ok = false;  // a policy that cannot plan this stage does not make it fit
      }
    }
    if (ok && (!a.fits_with_policy || stall < a.policy_stall_s)) {
      a.fits_with_policy = true;
      a.policy           = std::string(name);
      a.policy_peak      = peak;
      a.policy_stall_s   = stall;
    }
  }
}

// Memory per stage at the replica batch, then offload for the stages over budget.
inline void fit_stages(projection_context& ctx, std::uint64_t k, stage_split const& split,
                       stage_analysis& a)
{
  auto const& full = ctx.at_batch(ctx.batch).first;
  std::vector<trace> stage_traces;
  a.peak.assign(k, 0);
  for (std::size_t s = 0; s < k; ++s) {
    stage_traces.push_back(k == 1 ? full : stage_trace(full, ctx.units, split.unit_stage, s));
  }
  std::vector<trace_analysis> stage_analyses;  // one analysis per stage, shared by the policies
  stage_analyses.reserve(k);
  for (std::size_t s = 0; s < k; ++s) {
    stage_analyses.emplace_back(stage_traces[s], ctx.model);
    a.peak[s] = stage_analyses[s].peak_live_bytes();
  }
  a.fits_as_is = *std::max_element(a.peak.begin(), a.peak.end()) <= ctx.budget;
  if (!a.fits_as_is && ctx.params.try_offload) {
    choose_offload_policy(stage_analyses, ctx.budget, a);
  }
}

// Everything about model-parallel degree k that does not depend on dp.
inline stage_analysis analyse_stages(projection_context& ctx, std::uint64_t k)
{
  auto const split = split_into_stages(ctx, k);
  stage_analysis a;
  time_stages(ctx, k, split, a);
  fit_stages(ctx, k, split, a);
  return a;
}

inline std::vector<std::pair<std::string, std::string>> projection_assumptions(
    projection_context const& ctx, statistical_efficiency const& efficiency)
{
  auto const& params = ctx.params;
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](std::string name, std::string value) {
    out.emplace_back(std::move(name), std::move(value));
  };
  add("model", std::string(ctx.t.header_value("model").value_or("?")));
  add("cluster", to_spec(ctx.c));
  add("device_budget_bytes", std::to_string(ctx.budget));
  add("recorded_batch", std::to_string(ctx.recorded));
  add("replica_batch", std::to_string(ctx.batch));
  add("micro_batches (mp > 1)", std::to_string(params.micro_batches));
  add("dataset_samples", std::to_string(params.dataset_samples));
  add("statistical_efficiency", efficiency.describe());
  add("bucket_bytes", std::to_string(params.bucket_bytes));
  add("compute_efficiency", format_number(params.cost.compute_efficiency));
  add("memory_efficiency", format_number(params.cost.memory_efficiency));
  add("batch_scaling", "act/input/forward-backward temp sizes x b/B, params/grads/optstate fixed");
  add("pipeline", "GPipe: (m + mp - 1) x slowest stage per micro-batch, transfers not overlapped");
  add("allreduce",
      "ring per stage, 2(N-1) latency + 2(N-1)/N bytes/rate per bucket, overlapped "
      "with the last micro-batch's backward; multi-node rings share the node network");
  add("offload", params.try_offload ? "swap policies planned at the budget, simulated" : "off");
  return out;
}

// The device counts to project: the given ones, or powers of two up to the cluster plus the
// whole cluster.
inline std::vector<std::uint64_t> projection_device_counts(projection_context const& ctx)
{
  std::vector<std::uint64_t> counts = ctx.params.device_counts;
  if (counts.empty()) {
    for (std::uint64_t d = 1; d <= ctx.c.devices(); d *= 2) { counts.push_back(d); }
    if (counts.back() != ctx.c.devices()) { counts.push_back(ctx.c.devices()); }
  }
  return counts;
}

// The ring that all-reduces stage s's gradients over its dp replicas (devices r*k + s): the
// node's link, or, across nodes, a share of the node network proportional to the stage's bytes.
inline link_spec allreduce_ring(projection_context const& ctx, stage_analysis const& a,
                                std::uint64_t dp, std::uint64_t k, std::size_t s)
{
  auto const& c         = ctx.c;
  auto const g          = ctx.g;
  auto const first_node = s / g, last_node = ((dp - 1) * k + s) / g;
  link_spec ring = c.intra;
  if (first_node != last_node) {
    // The node's network carries the rings of every stage placed on that node; each
    // gets a share proportional to its bytes, so all finish as one ring of their total.
    std::uint64_t node_bytes = 0;
    for (std::size_t q = 0; q < k; ++q) {
      if (q / g == s / g) { node_bytes += a.param_bytes[q]; }
    }
    double const share =
        node_bytes == 0 ? 1.0
                        : static_cast<double>(a.param_bytes[s]) / static_cast<double>(node_bytes);
    ring = link_spec{"ring", std::min(c.intra.bytes_per_s, c.inter.bytes_per_s * share),
                     std::max(c.intra.latency_s, c.inter.latency_s)};
  }
  return ring;
}

// Stage s's all-reduce over dp replicas: its full time and the part left after backward.
inline std::pair<double, double> allreduce_times(projection_context const& ctx,
                                                 stage_analysis const& a, std::uint64_t dp,
                                                 std::uint64_t k, std::size_t s)
{
  link_spec const ring = allreduce_ring(ctx, a, dp, k, s);
  double const nd      = static_cast<double>(dp);
  auto ar_time         = [&](double bytes) {
    return 2.0 * (nd - 1.0) * ring.latency_s + 2.0 * (nd - 1.0) / nd * bytes / ring.bytes_per_s;
  };
  // Buckets in production order; bytes of params without gradients (BatchNorm
  // statistics) go with the last bucket, since the issue counts all param bytes.
  double ring_free = 0, total = 0, bucket = 0, ready = 0;
  std::uint64_t grad_bytes = 0;
  for (auto const& [when, bytes] : a.grads[s]) {
    grad_bytes += bytes;
    bucket += static_cast<double>(bytes);
    ready = when;
    if (bucket >= static_cast<double>(ctx.params.bucket_bytes)) {
      ring_free = std::max(ring_free, ready) + ar_time(bucket);
      total += ar_time(bucket);
      bucket = 0;
    }
  }
  bucket += static_cast<double>(a.param_bytes[s] > grad_bytes ? a.param_bytes[s] - grad_bytes : 0);
  if (bucket > 0) {
    ring_free = std::max(ring_free, a.backward_s[s]) + ar_time(bucket);
    total += ar_time(bucket);
  }
  return {total, std::max(0.0, ring_free - a.backward_s[s])};
}

// One configuration: d devices as d/k replicas of a k-stage pipeline.
inline projection_config project_config(projection_context const& ctx,
                                        statistical_efficiency const& efficiency,
                                        stage_analysis const& a, std::uint64_t d, std::uint64_t k)
{
  auto const& params = ctx.params;
  projection_config cfg;
  cfg.dp            = d / k;
  cfg.mp            = k;
  cfg.devices       = d;
  cfg.global_batch  = cfg.dp * ctx.batch;
  cfg.micro_batches = k == 1 ? 1 : params.micro_batches;
  cfg.fits          = a.fits_as_is || a.fits_with_policy;
  cfg.offload       = !a.fits_as_is && a.fits_with_policy;
  cfg.policy        = a.fits_as_is ? "no_swap" : a.fits_with_policy ? a.policy : "";
  cfg.device_peak_bytes =
      cfg.offload ? a.policy_peak : *std::max_element(a.peak.begin(), a.peak.end());
  cfg.offload_stall_s = cfg.offload ? a.policy_stall_s : 0.0;

  double slowest = 0, tail = 0;
  for (std::size_t s = 0; s < k; ++s) {
    slowest        = std::max(slowest, a.compute_s[s] + a.receive_s[s]);
    cfg.boundary_s = std::max(cfg.boundary_s, a.receive_s[s]);
    double exposed = 0;
    if (cfg.dp > 1) {
      auto const [total, left] = allreduce_times(ctx, a, cfg.dp, k, s);
      exposed                  = left;
      cfg.allreduce_s          = std::max(cfg.allreduce_s, total);
    }
    cfg.allreduce_exposed_s = std::max(cfg.allreduce_exposed_s, exposed);
    tail                    = std::max(tail, exposed + a.optimizer_s[s]);
  }
  cfg.pipeline_s       = static_cast<double>(cfg.micro_batches + k - 1) * slowest;
  cfg.step_s           = cfg.pipeline_s + tail + cfg.offload_stall_s;
  auto const samples   = static_cast<double>(params.dataset_samples);
  cfg.steps_per_epoch  = (params.dataset_samples + cfg.global_batch - 1) / cfg.global_batch;
  cfg.epochs_to_target = efficiency.epochs(static_cast<double>(cfg.global_batch), samples);
  if (cfg.epochs_to_target) {
    cfg.time_to_train_s =
        *cfg.epochs_to_target * static_cast<double>(cfg.steps_per_epoch) * cfg.step_s;
  }
  return cfg;
}

// Marks the fitting configuration with the least time to train (the first of equals).
inline void mark_best(projection_result& r)
{
  for (std::size_t i = 0; i < r.configs.size(); ++i) {
    auto const& cfg = r.configs[i];
    if (!cfg.fits || !cfg.time_to_train_s) { continue; }
    if (!r.best || *cfg.time_to_train_s < *r.configs[*r.best].time_to_train_s) { r.best = i; }
  }
  if (r.best) { r.configs[*r.best].best = true; }
}

}  // namespace detail

/// @brief Projects training of the model in `t` on `c` (see the file comment).
/// @param t One recorded iteration of the model.
/// @param c The cluster.
/// @param efficiency Epochs to the target accuracy as a function of the global batch.
/// @param params The projection's own assumptions.
/// @throws stash::logic_error for inconsistent parameters.
/// @return The projected configurations.
[[nodiscard]] inline projection_result project(trace const& t, cluster const& c,
                                               statistical_efficiency const& efficiency,
                                               projection_params const& params = {})
{
  detail::check_projection_inputs(t, c, params);
  detail::projection_context ctx(t, c, params);
  projection_result r;
  r.assumptions = detail::projection_assumptions(ctx, efficiency);
  std::map<std::uint64_t, detail::stage_analysis> by_k;
  for (auto const d : detail::projection_device_counts(ctx)) {
    STASH_EXPECTS(d >= 1 && d <= c.devices(), "projection: device count " + std::to_string(d) +
                                                  " is outside the cluster's 1.." +
                                                  std::to_string(c.devices()));
    for (std::uint64_t k = 1; k <= std::min<std::uint64_t>({params.max_mp, d, ctx.units.units});
         k *= 2) {
      if (d % k != 0) { continue; }
      auto it = by_k.find(k);
      if (it == by_k.end()) { it = by_k.emplace(k, detail::analyse_stages(ctx, k)).first; }
      r.configs.push_back(detail::project_config(ctx, efficiency, it->second, d, k));
    }
  }
  detail::mark_best(r);
  return r;
}

}  // namespace stash
