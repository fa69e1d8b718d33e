/**
 * @file policies.hpp
 * @brief stash-plan's swap-policy section: each policy's schedule for one trace and budget,
 * simulated on a hardware preset against the no_swap baseline.
 */
#pragma once

#include <stash_tools/stash_plan/options.hpp>

#include <stash/core/units.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/auto_swap.hpp>
#include <stash/swap/encoding_choice.hpp>
#include <stash/swap/joint_search.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/swap_bounds.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace stash_plan {

/// @brief One stall of the compute stream, described for people.
struct stall_summary {
  std::uint64_t op{};
  std::string op_name;
  double ms{};
  std::string storage;  ///< label of the storage waited for ("#id" when unlabelled; empty: memory)
  std::string cause;    ///< stash::to_string(stall_cause)
};

/// @brief Entries of one encoding in a schedule: how many, and their bytes on the device and on
/// the link.
struct encoding_use {
  std::string encoding;
  std::size_t entries{};
  std::uint64_t bytes{};
  std::uint64_t wire_bytes{};
};

/// @brief One policy's outcome.
struct policy_result {
  std::string name;
  std::optional<std::string> error;      ///< the policy or simulator refused; other fields unset
  bool fits{};                           ///< the simulated iteration completes within the budget
  std::optional<std::string> stuck;      ///< where it got stuck when it does not fit
  std::uint64_t device_peak_bytes{};     ///< planned (copies instantaneous)
  std::uint64_t simulated_peak_bytes{};  ///< timed by the simulator, budget enforced
  std::uint64_t offloaded_bytes{};
  std::size_t entries{};
  double iteration_ms{};
  double stall_ms{};
  std::size_t recompute_entries{};  ///< storages recomputed instead of kept or swapped
  std::uint64_t recomputed_bytes{};
  double recompute_ms{};  ///< time the compute stream spends re-running ops (predicted)
  std::size_t stall_count{};
  std::vector<stall_summary> top_stalls;  ///< longest first, at most 3
  std::vector<encoding_use> encodings;    ///< with --codec auto: the choice per encoding
  std::string note;
};

/// @brief The swap-policy section of a trace's report.
struct policy_section {
  std::string hardware;
  std::uint64_t budget_bytes{};
  std::string budget_origin;  ///< how the budget was chosen, for the text output
  std::optional<codec_choice> codec;
  std::uint64_t baseline_peak_bytes{};
  std::uint64_t swap_bound_bytes{};  ///< least budget any swap schedule fits (any storage kind)
  std::uint64_t swap_bound_activations_bytes{};  ///< the same when only activations move
  std::uint64_t memory_bound_bytes{};  ///< least budget any keep/swap/recompute schedule fits
  double
      time_lower_bound_ms{};  ///< no keep/swap/recompute schedule is faster (infinite: none fits)
  double swap_time_lower_bound_ms{};  ///< no swap schedule without wraps is faster (inf: none fits)
  double baseline_ms{};
  std::vector<policy_result> policies;
};

/// @brief The budget for `t`: --budget resolved against the no_swap peak, or the preset's
/// device memory when none was given.
[[nodiscard]] inline std::uint64_t resolve_budget(options const& opt,
                                                  stash::cost_model const& model,
                                                  std::uint64_t baseline_peak,
                                                  std::string* origin = nullptr)
{
  if (!opt.budget) {
    if (origin) { *origin = "device memory of " + std::string(model.hw().name); }
    return model.hw().device_memory_bytes;
  }
  if (origin) {
    if (opt.budget->bytes) {
      *origin = "given";
    } else {
      char text[64];
      std::snprintf(text, sizeof(text), "%g%% of the no_swap peak", opt.budget->percent);
      *origin = text;
    }
  }
  return opt.budget->resolve(baseline_peak);
}

/// @brief The policies to run: --policy's list, or all of them when only --budget was given.
[[nodiscard]] inline std::vector<std::string> requested_policies(options const& opt)
{
  if (!opt.policies.empty()) { return opt.policies; }
  auto const names = stash::swap_policy_names();
  return {names.begin(), names.end()};
}

/// @brief A storage's label, or "#id" when it has none.
[[nodiscard]] inline std::string storage_name(stash::trace const& t, stash::storage_id id)
{
  auto const& label = t.storages()[id].label;
  return label.empty() ? "#" + std::to_string(id) : label;
}

/// @brief An op's name; the step after the last op is "(end of the iteration)".
[[nodiscard]] inline std::string op_name(stash::trace const& t, std::uint64_t op)
{
  return op < t.ops().size() ? t.ops()[op].name : std::string("(end of the iteration)");
}

/// @brief Where a simulated iteration got stuck, for people.
[[nodiscard]] inline std::string describe_failure(stash::trace const& t,
                                                  stash::sim_failure const& f)
{
  return (f.storage ? "the prefetch of '" + storage_name(t, *f.storage) + "' before op #" +
                          std::to_string(f.op) + " " + op_name(t, f.op) + " needs "
                    : "the allocations before op #" + std::to_string(f.op) + " " +
                          op_name(t, f.op) + " need ") +
         stash::format_bytes(f.needed_bytes) + " with " + stash::format_bytes(f.free_bytes) +
         " free and nothing left to release";
}

/// @brief The encodings --codec auto and --lossy allow (lossless unless --lossy opts in).
[[nodiscard]] inline stash::encoding_options encoding_options_of(options const& opt)
{
  return stash::encoding_options{.lossy_activations = opt.lossy_activations};
}

/// @brief The schedule of policy `name` for `budget`; with --codec auto (or --lossy), every entry
/// with the encoding the trace and --lossy allow, and search_swap and search searching with them.
/// `search` runs on `threads` worker threads (joint_search::threads: the same plan for any count).
[[nodiscard]] inline stash::schedule plan_policy(std::string const& name,
                                                 stash::trace_analysis const& analysis,
                                                 std::uint64_t budget, options const& opt,
                                                 unsigned threads = 1)
{
  if (name == stash::joint_search::name()) {
    stash::joint_search search;
    if (opt.auto_encodings) { search.encodings = encoding_options_of(opt); }
    search.redrop  = opt.redrop;  // --no-redrop
    search.threads = threads;
    return search.plan(analysis, budget);
  }
  if (!opt.auto_encodings) { return stash::plan_by_name(name, analysis, budget); }
  auto const enc = encoding_options_of(opt);
  if (name == stash::search_swap::name()) {
    return stash::search_swap{.encodings = enc}.plan(analysis, budget);
  }
  return stash::with_encodings(analysis, stash::plan_by_name(name, analysis, budget), enc);
}

/// @brief plan_policy(name, analysis, b, opt) for every b of `budgets`, in their order: the same
/// schedules, with AutoSwap's greedy run once for the whole sweep (auto_swap::plan_budgets,
/// search_swap::plan_budgets) instead of once per budget.
/// @param name The policy's registry name.
/// @param analysis The recorded iteration's facts.
/// @param budgets Device bytes, one plan each.
/// @param opt stash-plan's options (--codec auto: per-entry encodings).
/// @param sweeps AutoSwap's sweeps over `budgets`, shared across the policies of one frontier
/// (search_swap's seeds and the AutoSwap policies), or null.
/// @return The schedules, one per budget in the order of `budgets`.
[[nodiscard]] inline std::vector<stash::schedule> plan_policy_budgets(
    std::string const& name, stash::trace_analysis const& analysis,
    std::vector<std::uint64_t> const& budgets, options const& opt,
    stash::auto_swap_sweeps* sweeps = nullptr)
{
  std::optional<stash::encoding_options> enc;
  if (opt.auto_encodings) { enc = encoding_options_of(opt); }
  if (name == stash::search_swap::name()) {
    return stash::search_swap{.encodings = enc}.plan_budgets(analysis, budgets, sweeps);
  }
  for (auto const score : {stash::auto_swap_score::swdoa, stash::auto_swap_score::doa,
                           stash::auto_swap_score::aoa, stash::auto_swap_score::wdoa}) {
    stash::auto_swap const policy{.score = score};
    if (name != policy.name()) { continue; }
    auto out = sweeps != nullptr && std::ranges::equal(sweeps->budgets(), budgets)
                   ? sweeps->of(score)
                   : policy.plan_budgets(analysis, budgets);
    if (enc) {
      for (auto& s : out) { s = stash::with_encodings(analysis, std::move(s), *enc); }
    }
    return out;
  }
  std::vector<stash::schedule> out;
  out.reserve(budgets.size());
  for (auto const b : budgets) { out.push_back(plan_policy(name, analysis, b, opt)); }
  return out;
}

/// @brief Entries, bytes and wire bytes of `s` per encoding, in order of first use.
[[nodiscard]] inline std::vector<encoding_use> encodings_of(stash::schedule const& s,
                                                            stash::cost_model const& model)
{
  std::vector<encoding_use> uses;
  for (auto const& e : s.entries) {
    auto const name = std::string(stash::to_string(e.encoding));
    auto it         = std::find_if(uses.begin(), uses.end(),
                                   [&](encoding_use const& u) { return u.encoding == name; });
    if (it == uses.end()) { it = uses.insert(uses.end(), encoding_use{name, 0, 0, 0}); }
    ++it->entries;
    it->bytes += e.bytes;
    it->wire_bytes += model.wire_bytes(e.bytes, e.encoding);
  }
  return uses;
}

/// @brief What the time bounds may assume of the schedules the tool plans: every entry at the
/// configured codec's ratio, or with --codec auto each storage's gap at the best ratio of the
/// encodings it may take there (choose_encoding under --lossy's options, or raw); and wrap gaps,
/// which `search` may plan.
[[nodiscard]] inline stash::time_bound_options time_bound_options_of(options const& opt,
                                                                     stash::cost_model const& model)
{
  stash::time_bound_options bound;
  bound.link_ratio = model.encoding_ratio(stash::swap_encoding::configured);
  if (opt.auto_encodings) { bound.encodings = encoding_options_of(opt); }
  bound.wrap = true;  // `search` plans wrap entries (joint_search::wrap, on by default)
  return bound;
}

/// @brief Plans and simulates every requested policy on `t`.
[[nodiscard]] inline policy_section run_policies(stash::trace const& t, options const& opt)
{
  auto const model = make_cost_model(opt);
  stash::trace_analysis const analysis(t, model);  // once, for every policy
  policy_section section;
  section.hardware            = opt.hardware;
  section.codec               = opt.codec;
  section.baseline_peak_bytes = analysis.peak_live_bytes();
  section.budget_bytes =
      resolve_budget(opt, model, section.baseline_peak_bytes, &section.budget_origin);
  section.swap_bound_bytes = stash::swap_bound_bytes(analysis, stash::swap_scope::any_kind);
  section.swap_bound_activations_bytes = stash::swap_bound_bytes(analysis);
  section.memory_bound_bytes = stash::memory_lower_bound_bytes(analysis, true);  // search wraps
  auto bound_opt             = time_bound_options_of(opt, model);
  section.time_lower_bound_ms =
      stash::iteration_time_lower_bound(analysis, section.budget_bytes, bound_opt) * 1e3;
  bound_opt.recompute = false;
  bound_opt.wrap      = false;  // the swap-only policies plan no wrap entries (only search)
  section.swap_time_lower_bound_ms =
      stash::iteration_time_lower_bound(analysis, section.budget_bytes, bound_opt) * 1e3;
  // no_swap with the budget lifted: the iteration on a device with room for everything.
  auto const baseline =
      stash::simulate(analysis, stash::plan_by_name("no_swap", analysis, section.budget_bytes),
                      stash::sim_options{false, stash::sim_memory::unconstrained});
  section.baseline_ms = baseline.iteration_s * 1e3;
  for (auto const& name : requested_policies(opt)) {
    policy_result p;
    p.name = name;
    try {
      auto const s = plan_policy(name, analysis, section.budget_bytes, opt, opt.threads);
      auto const r = stash::simulate(analysis, s, {false});
      p.fits       = r.fits;
      if (r.failure) { p.stuck = describe_failure(t, *r.failure); }
      p.device_peak_bytes    = s.device_peak;
      p.simulated_peak_bytes = r.device_peak;
      p.offloaded_bytes      = s.offloaded_bytes();
      p.entries              = s.entries.size();
      p.iteration_ms         = r.iteration_s * 1e3;
      p.stall_ms             = r.stall_s * 1e3;
      p.stall_count          = r.stalls.size();
      p.recompute_entries    = s.recomputes.size();
      p.recomputed_bytes     = s.recomputed_bytes();
      p.recompute_ms         = r.recompute_s * 1e3;
      p.note                 = s.note;
      if (opt.auto_encodings) { p.encodings = encodings_of(s, model); }
      auto stalls = r.stalls;
      std::stable_sort(stalls.begin(), stalls.end(),
                       [](auto const& a, auto const& b) { return a.seconds > b.seconds; });
      for (std::size_t k = 0; k < std::min<std::size_t>(3, stalls.size()); ++k) {
        auto const& st = stalls[k];
        p.top_stalls.push_back(
            stall_summary{st.op, op_name(t, st.op), st.seconds * 1e3,
                          st.storage ? storage_name(t, *st.storage) : std::string(),
                          std::string(stash::to_string(st.cause))});
      }
    } catch (std::exception const& e) {
      p.error = e.what();  // one policy's failure should not hide the others
    }
    section.policies.push_back(std::move(p));
  }
  return section;
}

/// @brief The policy --svg draws against no_swap: the only one asked for, else the fastest that
/// fits other than no_swap, else the one with the lowest planned peak. nullopt: only no_swap.
[[nodiscard]] inline std::optional<std::string> policy_to_draw(policy_section const& section)
{
  policy_result const* pick = nullptr;
  for (auto const& p : section.policies) {
    if (p.error || p.name == "no_swap") { continue; }
    if (pick == nullptr) {
      pick = &p;
    } else if (p.fits != pick->fits) {
      if (p.fits) { pick = &p; }
    } else if (p.fits ? p.iteration_ms < pick->iteration_ms
                      : p.device_peak_bytes < pick->device_peak_bytes) {
      pick = &p;
    }
  }
  if (pick == nullptr) { return std::nullopt; }
  return pick->name;
}

}  // namespace stash_plan
