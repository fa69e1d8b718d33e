/**
 * @file vdnn.hpp
 * @brief vDNN's policies (Rhu et al., MICRO 2016) on a recorded trace: vdnn_all, vdnn_conv and
 * vdnn_dyn.
 *
 * Mapping vDNN's layers onto aten ops:
 *  - A layer is a forward op that writes something and reads an `act` or `input` storage it does
 *    not also write; that storage is the layer's input feature map X. In-place activations
 *    (`relu_`) write what they read and so are not layers, as in vDNN. Conv layers are
 *    `aten::convolution` ops.
 *  - X is offloaded once, for the gap between its last forward access and its next access (in
 *    backward). The offload is issued when the first chosen layer reading X starts (so the copy
 *    overlaps that layer, which only reads X), or after the last forward write to X if one comes
 *    later; the device copy is released once the copy and X's last forward access finished
 *    (vDNN's reference count for non-linear graphs). X that is never used after forward is not
 *    offloaded.
 *  - Prefetch (vDNN's findPrefetchLayer): a layer's backward starts at the first backward access
 *    of its X. There, the layer's own X is fetched if it is not yet (on demand), then layers
 *    below it are searched downwards for the first one with an X offloaded and not yet
 *    prefetched, stopping at a conv layer that has none; that X's prefetch is issued at this
 *    point. Any X never picked is fetched on demand at its next use.
 *  - vdnn_dyn: vDNN profiled {no offload, conv, all} and then stepped layers down to leaner conv
 *    algorithms. stash has no algorithm choice, so vdnn_dyn here is the fastest (simulated
 *    iteration time) of no_swap, vdnn_conv and vdnn_all whose planned peak fits the budget, or
 *    the leanest one if none fits.
 */
#pragma once

#include <stash/sim/schedule.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/op_index.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stash {
namespace detail {

/// One vDNN layer: its forward op and its input feature maps.
struct vdnn_layer {
  std::uint64_t op{};
  bool conv{};
  std::vector<storage_id> inputs;
};

[[nodiscard]] inline std::vector<vdnn_layer> vdnn_layers(trace const& t, op_index const& ops)
{
  std::vector<vdnn_layer> layers;
  for (std::uint64_t i = 0; i < t.ops().size(); ++i) {
    auto const& o = t.ops()[i];
    if (ops.phase[i] != stash::phase::forward || o.writes.empty()) { continue; }
    vdnn_layer layer{i, o.name == "aten::convolution", {}};
    for (auto const id : o.reads) {
      auto const kind = t.storages()[id].kind;
      if (kind != storage_kind::act && kind != storage_kind::input) { continue; }
      if (std::find(o.writes.begin(), o.writes.end(), id) != o.writes.end()) { continue; }
      if (std::find(layer.inputs.begin(), layer.inputs.end(), id) != layer.inputs.end()) {
        continue;
      }
      layer.inputs.push_back(id);
    }
    if (!layer.inputs.empty()) { layers.push_back(std::move(layer)); }
  }
  return layers;
}

/// Index in `acc` of the last forward access, if any access follows it.
[[nodiscard]] inline std::optional<std::size_t> forward_gap(std::vector<storage_access> const& acc,
                                                            op_index const& ops)
{
  std::optional<std::size_t> last;
  for (std::size_t j = 0; j < acc.size(); ++j) {
    if (ops.phase[acc[j].op] == stash::phase::forward) { last = j; }
  }
  if (!last || *last + 1 >= acc.size()) { return std::nullopt; }
  return last;
}

// Kept whole (~70 lines): the offload candidates, each layer's backward start and the prefetch
// walk over the layers (the file comment's steps, in order) share the per-layer entry table.
[[nodiscard]] inline schedule plan_vdnn(trace_analysis const& analysis, std::uint64_t budget,
                                        bool conv_only, std::string_view name)
{
  auto const& t     = analysis.trace();
  auto const& life  = analysis.lifetimes();
  auto const& ops   = analysis.ops();
  auto const layers = vdnn_layers(t, ops);

  std::vector<swap_entry> entries;
  std::map<storage_id, std::size_t> entry_of;
  for (auto const& layer : layers) {
    if (conv_only && !layer.conv) { continue; }
    for (auto const x : layer.inputs) {
      if (entry_of.count(x) != 0) { continue; }
      auto const& acc = life.storages[x].accesses;
      auto const gap  = forward_gap(acc, ops);
      if (!gap) { continue; }
      auto const u = acc[*gap].op;
      auto const v = acc[*gap + 1].op;
      // Issue at the layer; if X is written later in forward, after that write instead.
      std::uint64_t a = layer.op;
      for (std::size_t j = 0; j <= *gap; ++j) {
        if (acc[j].write && acc[j].op >= a) { a = acc[j].op + 1; }
      }
      if (std::max(a, u) + 1 > v) { continue; }  // no room for a prefetch after the offload
      entry_of[x] = entries.size();
      entries.push_back(swap_entry{x, u, v, a, v, t.storages()[x].bytes});
    }
  }

  // Backward start of each layer: the first backward access of any of its inputs.
  std::vector<std::optional<std::uint64_t>> backward_at(layers.size());
  std::vector<std::vector<std::size_t>> owned(layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l) {
    for (auto const x : layers[l].inputs) {
      if (auto const gap = forward_gap(life.storages[x].accesses, ops)) {
        auto const b   = life.storages[x].accesses[*gap + 1].op;
        backward_at[l] = backward_at[l] ? std::min(*backward_at[l], b) : b;
      }
      if (auto const it = entry_of.find(x); it != entry_of.end()) {
        owned[l].push_back(it->second);
      }
    }
  }
  std::vector<bool> assigned(entries.size(), false);
  auto pending = [&](std::size_t l) {
    return std::any_of(owned[l].begin(), owned[l].end(),
                       [&](std::size_t k) { return !assigned[k]; });
  };
  auto fetch = [&](std::size_t l, std::uint64_t at) {
    for (auto const k : owned[l]) {
      if (assigned[k]) { continue; }
      auto& e       = entries[k];
      e.prefetch_at = std::clamp(at, std::max(e.last_use, e.offload_at) + 1, e.next_use);
      assigned[k]   = true;
    }
  };
  // The walk back from a layer stops at the first conv layer or layer with an entry left; a
  // layer that is neither never becomes one again, so later walks jump over it.
  std::vector<std::size_t> jump(layers.size() + 1);  // slot i + 1 is layer i; slot 0: none left
  std::iota(jump.begin(), jump.end(), std::size_t{0});
  auto stop_below = [&](std::size_t slot) {  // the slot of the walk's stop from slot - 1 down
    auto r = slot;
    while (r > 0 && (jump[r] != r || !(layers[r - 1].conv || pending(r - 1)))) {
      if (jump[r] == r) { jump[r] = r - 1; }
      r = jump[r];
    }
    for (auto s = slot; s != r;) { s = std::exchange(jump[s], r); }
    return r;
  };
  for (std::size_t curr = layers.size(); curr-- > 0;) {
    if (!backward_at[curr]) { continue; }
    fetch(curr, *backward_at[curr]);  // on demand: its own X must be back now
    if (auto const stop = stop_below(curr); stop > 0 && pending(stop - 1)) {
      fetch(stop - 1, *backward_at[curr]);
    }
  }
  // Entries never picked keep prefetch_at = next_use: fetched on demand.
  return make_schedule(analysis, std::string(name), budget, std::move(entries));
}

}  // namespace detail

/// @brief vDNN_all: offloads the input feature map of every layer.
struct vdnn_all {
  /// @brief Registry name.
  /// @return "vdnn_all".
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "vdnn_all"; }
  /// @brief Plans the offloads and vDNN's prefetches (the budget is only recorded).
  /// @param analysis The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    return detail::plan_vdnn(analysis, budget, false, name());
  }
};

/// @brief vDNN_conv: offloads the input feature maps of convolution layers only.
struct vdnn_conv {
  /// @brief Registry name.
  /// @return "vdnn_conv".
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "vdnn_conv"; }
  /// @brief Plans the offloads and vDNN's prefetches (the budget is only recorded).
  /// @param analysis The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    return detail::plan_vdnn(analysis, budget, true, name());
  }
};

/// @brief vDNN_dyn without algorithm choice: the fastest of no_swap, vdnn_conv and vdnn_all that
/// fits the budget (see the file comment); the leanest if none does.
struct vdnn_dyn {
  /// @brief Registry name.
  /// @return "vdnn_dyn".
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "vdnn_dyn"; }
  /// @brief Plans all three, simulates them on the analysis's cost model and keeps the best that
  /// fits.
  /// @param analysis The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    std::array<schedule, 3> options = {no_swap{}.plan(analysis, budget),
                                       vdnn_conv{}.plan(analysis, budget),
                                       vdnn_all{}.plan(analysis, budget)};
    auto const [k, fits]            = choice(analysis, options);
    return chosen(std::move(options[k]), fits);
  }

  /// @brief plan()'s choice among the schedules of no_swap, vdnn_conv and vdnn_all for one
  /// budget (those plans do not depend on the budget but for the one they record: a sweep of
  /// budgets plans them once).
  /// @param analysis The recorded iteration's facts.
  /// @param options no_swap's, vdnn_conv's and vdnn_all's schedules for the budget, in that order.
  /// @return The index of the chosen one, and whether any fits the budget.
  [[nodiscard]] static std::pair<std::size_t, bool> choice(trace_analysis const& analysis,
                                                           std::array<schedule, 3> const& options)
  {
    std::optional<std::size_t> best;
    double best_time = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < 3; ++i) {
      if (!options[i].fits()) { continue; }
      double const time = simulate(analysis, options[i], sim_options{false}).iteration_s;
      if (time < best_time) {
        best_time = time;
        best      = i;
      }
    }
    if (best) { return {*best, true}; }
    std::size_t leanest = 0;
    for (std::size_t i = 1; i < 3; ++i) {
      if (options[i].device_peak < options[leanest].device_peak) { leanest = i; }
    }
    return {leanest, false};
  }

  /// @brief The schedule plan() returns for its choice.
  /// @param s The chosen schedule (choice()'s index into its options).
  /// @param fits choice()'s second: whether any of the options fits the budget.
  /// @return `s` as vdnn_dyn's.
  [[nodiscard]] static schedule chosen(schedule s, bool fits)
  {
    s.note   = "chose " + s.policy + (fits ? "" : " (none fits the budget; leanest)");
    s.policy = std::string(name());
    return s;
  }
};

}  // namespace stash
