/**
 * @file checkpoint.hpp
 * @brief `checkpoint`: gradient checkpointing as PyTorch users do it (Chen et al. 2016's sqrt(n)
 * segments), expressed as recompute entries and timed by the same simulator.
 *
 * The forward ops are cut into `segments` runs of consecutive ops (default: ceil(sqrt(number of
 * forward ops))). An activation written first in segment j and read by no forward op of a later
 * segment lives inside its segment: it is dropped after its last forward access and rematerialised
 * with the rest of its segment before the first backward op that needs any of them (one batch,
 * in forward order, so a re-run reads what an earlier one of the batch rematerialised). Segment
 * inputs (activations a later segment reads) are kept. An activation whose re-run is impossible
 * (recompute_chain.hpp: a writer that may not be re-run, a read freed before backward) is kept,
 * as checkpoint would have to, and so is one whose re-run would first rebuild an input the
 * device no longer holds (recompute_chain::transients, which `search` and `dtr` use): the
 * baseline stays the plain segment scheme. It does not look at the budget: like
 * torch.utils.checkpoint, it frees what it frees, and fits or not.
 */
#pragma once

#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/detail/recompute_set.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stash {

/// @brief Gradient checkpointing over sqrt(n) segments (see the file comment).
struct checkpoint {
  /// Number of forward segments; 0: ceil(sqrt(number of forward ops)).
  std::size_t segments = 0;

  /// @brief Registry name.
  /// @return "checkpoint".
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "checkpoint"; }

  /// @brief The checkpointing schedule of the analysed trace (`budget` is only recorded).
  /// @param a The recorded iteration's facts.
  /// @param budget Device bytes the iteration must fit in.
  /// @return The schedule.
  [[nodiscard]] schedule plan(trace_analysis const& a, std::uint64_t budget) const
  {
    auto const seg = segment_of_ops(a);
    struct candidate {
      storage_id id;
      std::uint64_t first_write, last_forward, next_use;
      std::size_t segment;
    };
    std::vector<candidate> candidates;
    for (auto const& s : a.lifetimes().storages) {
      if (s.kind != storage_kind::act || s.accesses.empty() || !s.accesses.front().write) {
        continue;
      }
      auto const home = seg[s.accesses.front().op];
      if (home == none) { continue; }
      std::optional<std::size_t> last;  // index of its last forward access
      bool boundary = false;
      for (std::size_t k = 0; k < s.accesses.size(); ++k) {
        auto const j = seg[s.accesses[k].op];
        if (j == none) { break; }
        boundary = boundary || j > home;
        last     = k;
      }
      if (boundary || !last || *last + 1 >= s.accesses.size()) { continue; }
      candidates.push_back(candidate{s.id, s.accesses.front().op, s.accesses[*last].op,
                                     s.accesses[*last + 1].op, home});
    }
    std::vector<std::uint64_t> batch_at(segment_count(a),
                                        std::numeric_limits<std::uint64_t>::max());
    for (auto const& c : candidates) {
      batch_at[c.segment] = std::min(batch_at[c.segment], c.next_use);
    }
    std::stable_sort(
        candidates.begin(), candidates.end(),
        [](candidate const& x, candidate const& y) { return x.first_write < y.first_write; });
    detail::recompute_set set(a, {});
    for (auto const& c : candidates) {
      recompute_entry const e{c.id, c.last_forward, c.next_use, batch_at[c.segment],
                              a.trace().storages()[c.id].bytes};
      auto const chain = recompute_chain_of(a, e.id, e.last_use, e.at);
      if (!chain.transients.empty()) { continue; }  // kept (see the file comment)
      (void)set.try_add(e, chain);
    }
    auto s = make_schedule(a, std::string(name()), budget, {}, set.entries());
    s.note = std::to_string(segment_count(a)) + " segments";
    return s;
  }

 private:
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

  [[nodiscard]] static std::size_t forward_ops(trace_analysis const& a)
  {
    return static_cast<std::size_t>(
        std::count(a.ops().phase.begin(), a.ops().phase.end(), std::optional{phase::forward}));
  }

  [[nodiscard]] std::size_t segment_count(trace_analysis const& a) const
  {
    auto const n = forward_ops(a);
    if (segments > 0) {
      return std::max<std::size_t>(1, std::min(segments, std::max<std::size_t>(n, 1)));
    }
    return std::max<std::size_t>(
        1, static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(n)))));
  }

  // The segment of each forward op; `none` for the others.
  [[nodiscard]] std::vector<std::size_t> segment_of_ops(trace_analysis const& a) const
  {
    auto const n     = forward_ops(a);
    auto const count = segment_count(a);
    auto const size  = std::max<std::size_t>(1, (n + count - 1) / count);
    std::vector<std::size_t> seg(a.op_count(), none);
    std::size_t k = 0;
    for (std::size_t i = 0; i < a.op_count(); ++i) {
      if (a.ops().phase[i] == phase::forward) { seg[i] = k++ / size; }
    }
    return seg;
  }
};

}  // namespace stash
