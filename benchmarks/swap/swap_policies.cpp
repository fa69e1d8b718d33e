// The swap policies on the recorded traces: planned and simulated device peak, reduction,
// predicted slowdown and offloaded bytes, per hardware preset; then AutoSwap's largest peak
// reduction with zero predicted slowdown. Prints Markdown.
//
//   swap_policies [DATA_DIR]      (default: the repository's data/ folder)
#include <stash/codec/zvc.hpp>
#include <stash/core/units.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/trace/trace_reader.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace {

double mib(std::uint64_t bytes)
{
  return static_cast<double>(bytes) / static_cast<double>(stash::MiB);
}

struct row_result {
  stash::schedule plan;
  stash::sim_result sim;
};

row_result run(std::string const& policy, stash::trace_analysis const& a, std::uint64_t budget)
{
  auto plan = stash::plan_by_name(policy, a, budget);
  // vDNN's figures report the peak a schedule reaches: the budget is not enforced here (see
  // stash-plan --frontier for every policy with the budget enforced).
  auto sim = stash::simulate(a, plan, stash::sim_options{false, stash::sim_memory::unconstrained});
  return {std::move(plan), std::move(sim)};
}

// Peak over events of the device bytes of kind act/input (the feature maps vDNN manages), under
// the planned curve's rules.
std::uint64_t feature_map_peak(stash::trace_analysis const& a, stash::schedule const& s)
{
  auto const& t     = a.trace();
  auto const& ops   = a.ops();
  auto const events = t.events();
  auto is_map       = [&](stash::storage_id id) {
    auto const k = t.storages()[id].kind;
    return k == stash::storage_kind::act || k == stash::storage_kind::input;
  };
  std::vector<std::int64_t> delta(events.size() + 1, 0);
  for (auto const& e : s.entries) {
    if (!is_map(e.id)) { continue; }
    auto const w = stash::planned_off_window(e, ops);
    if (w.after < w.last) {
      delta[w.after + 1] -= static_cast<std::int64_t>(e.bytes);
      delta[w.last + 1] += static_cast<std::int64_t>(e.bytes);
    }
  }
  std::int64_t live = 0, best = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    auto const& ev = events[i];
    if (ev.kind == stash::event_kind::alloc && is_map(ev.index)) {
      live += static_cast<std::int64_t>(t.storages()[ev.index].bytes);
    }
    if (ev.kind == stash::event_kind::free && is_map(ev.index)) {
      live -= static_cast<std::int64_t>(t.storages()[ev.index].bytes);
    }
    live += delta[i];
    best = std::max(best, live);
  }
  return static_cast<std::uint64_t>(best);
}

void print_row(std::string const& trace_name, std::string const& hw, std::string const& label,
               row_result const& r, stash::sim_result const& base, stash::trace_analysis const& a)
{
  auto const maps      = feature_map_peak(a, r.plan);
  auto const base_maps = feature_map_peak(a, stash::make_schedule(a, "none", 0, {}));
  double const reduction =
      1.0 - static_cast<double>(r.sim.device_peak) / static_cast<double>(base.device_peak);
  double const slowdown = r.sim.iteration_s / base.iteration_s - 1.0;
  std::printf(
      "| %s | %s | %s | %.0f | %.0f | %.0f | %.1f%% | %.0f | %.1f%% | %.2f | %+.1f%% | %.0f | %zu "
      "|%s\n",
      trace_name.c_str(), hw.c_str(), label.c_str(), mib(r.plan.budget), mib(r.plan.device_peak),
      mib(r.sim.device_peak), 100.0 * reduction, mib(maps),
      100.0 * (1.0 - static_cast<double>(maps) / static_cast<double>(base_maps)),
      1e3 * r.sim.iteration_s, 100.0 * slowdown, mib(r.plan.offloaded_bytes()),
      r.plan.entries.size(), r.plan.note.empty() ? "" : (" " + r.plan.note).c_str());
}

// ZVC's compression ratio over the post-ReLU feature maps in data/activations (final point).
std::optional<double> measured_zvc_ratio(std::string const& data)
{
  std::uint64_t raw = 0, encoded = 0;
  for (int k = 1; k <= 5; ++k) {
    std::ifstream in(data + "/activations/netA_final_relu" + std::to_string(k) + ".f32",
                     std::ios::binary);
    if (!in) { return std::nullopt; }
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<float> values(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
    std::vector<std::byte> out(stash::zvc<float>::max_compressed_bytes(values.size()));
    encoded += stash::zvc<float>::host_encode(std::span<float const>(values), out);
    raw += values.size() * sizeof(float);
  }
  return stash::codec_ratio_of(raw, encoded);
}

}  // namespace

int main(int argc, char** argv)
try {
  std::string const data                = argc > 1 ? argv[1] : STASH_DATA_DIR;
  std::vector<std::string> const traces = {"alexnet_b128", "vgg16_b32", "resnet18_b32",
                                           "mobilenet_v2_b32", "transformer_encoder_b8"};
  std::printf(
      "| trace | hw | policy | budget MiB | planned peak MiB | sim peak MiB | reduction | "
      "feature-map peak MiB | map reduction | iteration ms | slowdown | offloaded MiB | swaps |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (auto const& name : traces) {
    auto const t = stash::read_trace(data + "/traces/" + name + ".trace");
    for (auto const& hw : stash::hardware_presets) {
      stash::cost_model const model(hw);
      stash::trace_analysis const a(t, model);  // once per trace and preset, for every policy
      auto const base = run("no_swap", a, hw.device_memory_bytes);
      print_row(name, std::string(hw.name), "no_swap", base, base.sim, a);
      for (auto const* policy : {"vdnn_conv", "vdnn_all"}) {
        print_row(name, std::string(hw.name), policy, run(policy, a, hw.device_memory_bytes),
                  base.sim, a);
      }
      for (double const f : {0.75, 0.5}) {
        auto const budget =
            static_cast<std::uint64_t>(f * static_cast<double>(base.sim.device_peak));
        char label[64];
        std::snprintf(label, sizeof(label), "vdnn_dyn @%.0f%%", 100 * f);
        print_row(name, std::string(hw.name), label, run("vdnn_dyn", a, budget), base.sim, a);
        std::snprintf(label, sizeof(label), "auto_swap @%.0f%%", 100 * f);
        print_row(name, std::string(hw.name), label, run("auto_swap", a, budget), base.sim, a);
      }
    }
  }

  std::printf("\n## AutoSwap: largest peak reduction with zero predicted slowdown\n\n");
  std::printf(
      "Budgets from 100%% down to 20%% of the no_swap peak in 1%% steps; the best "
      "simulated peak among schedules whose simulated iteration time equals no_swap's.\n\n");
  std::printf(
      "| trace | hw | score | budget %% | sim peak MiB | reduction | offloaded MiB | swaps |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|\n");
  for (auto const& name : traces) {
    auto const t = stash::read_trace(data + "/traces/" + name + ".trace");
    for (auto const& hw : stash::hardware_presets) {
      stash::cost_model const model(hw);
      stash::trace_analysis const a(t, model);
      auto const base = run("no_swap", a, hw.device_memory_bytes);
      for (auto const* policy : {"auto_swap", "auto_swap_wdoa", "auto_swap_aoa", "auto_swap_doa"}) {
        std::optional<row_result> best;
        int best_pct = 100;
        for (int pct = 100; pct >= 20; --pct) {
          auto const budget =
              static_cast<std::uint64_t>(pct / 100.0 * static_cast<double>(base.sim.device_peak));
          auto r = run(policy, a, budget);
          if (r.sim.iteration_s > base.sim.iteration_s * (1 + 1e-12)) { continue; }
          if (!best || r.sim.device_peak < best->sim.device_peak) {
            best     = std::move(r);
            best_pct = pct;
          }
        }
        double const reduction = 1.0 - static_cast<double>(best->sim.device_peak) /
                                           static_cast<double>(base.sim.device_peak);
        std::printf("| %s | %s | %s | %d | %.0f | %.1f%% | %.0f | %zu |\n", name.c_str(),
                    std::string(hw.name).c_str(), policy, best_pct, mib(best->sim.device_peak),
                    100 * reduction, mib(best->plan.offloaded_bytes()), best->plan.entries.size());
      }
    }
  }

  if (auto const ratio = measured_zvc_ratio(data)) {
    std::printf("\n## With a codec: ZVC ratio measured on data/activations (final): %.3f\n\n",
                *ratio);
    std::printf(
        "| trace | hw | policy | budget MiB | planned peak MiB | sim peak MiB | reduction | "
        "feature-map peak MiB | map reduction | iteration ms | slowdown | offloaded MiB | swaps "
        "|\n");
    std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (auto const* name : {"alexnet_b128", "vgg16_b32"}) {
      auto const t   = stash::read_trace(data + "/traces/" + name + ".trace");
      auto const& hw = stash::hardware_preset("pcie3_x16");
      stash::cost_params params;
      params.use_codec   = true;
      params.codec_ratio = *ratio;
      stash::cost_model const model(hw, params);
      stash::trace_analysis const a(t, model);
      auto const base = run("no_swap", a, hw.device_memory_bytes);
      for (auto const* policy : {"vdnn_conv", "vdnn_all"}) {
        print_row(name, "pcie3_x16+zvc", policy, run(policy, a, hw.device_memory_bytes), base.sim,
                  a);
      }
    }
  }
  return 0;
} catch (std::exception const& e) {
  std::fprintf(stderr, "swap_policies: %s\n", e.what());
  return 1;
}
