/**
 * @file batch_scaling.hpp
 * @brief Rescaling a trace recorded at batch B to another batch b (internal to projection.hpp).
 *
 * Rule: a storage is batch-dependent when its kind is `act` or `input`, or it is a `temp`
 * allocated before the optimizer phase, AND its size is a multiple of B (a per-sample tensor;
 * scalars such as the loss or `scalar_arg_of_*` keep their size). Batch-dependent sizes become
 * bytes x b / B, exact in integers for per-sample tensors. Parameters, momentum buffers, gradients
 * and optimizer temporaries keep theirs. Ops are unchanged, so the cost model's FLOPs (derived
 * from sizes, op_flops.hpp) and bytes of forward and backward ops scale linearly in the batch
 * (mm/addmm: 2 sqrt(|A||B||C|) with A and C linear; conv: 2|Y||W|/K with Y linear), while the
 * optimizer's do not; kernel launch costs stay per op.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/trace/trace.hpp>

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace stash::detail {

/// The recorded batch: header key `batch`, a positive integer; stash::logic_error otherwise.
[[nodiscard]] inline std::uint64_t recorded_batch(trace const& t)
{
  auto const v = t.header_value("batch");
  STASH_EXPECTS(v.has_value(), "projection: the trace header has no 'batch' key");
  std::uint64_t b      = 0;
  auto const [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), b);
  STASH_EXPECTS(
      ec == std::errc() && ptr == v->data() + v->size() && b > 0,
      "projection: trace header batch='" + std::string(*v) + "' is not a positive integer");
  return b;
}

/// Whether storage `id` scales with the batch (see the file comment); `in_optimizer` = it was
/// allocated after the `p optimizer` marker.
[[nodiscard]] inline bool batch_dependent(storage_record const& s, bool in_optimizer,
                                          std::uint64_t recorded) noexcept
{
  bool const kind_scales = s.kind == storage_kind::act || s.kind == storage_kind::input ||
                           (s.kind == storage_kind::temp && !in_optimizer);
  return kind_scales && s.bytes % recorded == 0;
}

/// A copy of `t` as if recorded at batch `batch` (header `batch` rewritten).
[[nodiscard]] inline trace scale_trace_batch(trace const& t, std::uint64_t batch)
{
  STASH_EXPECTS(batch > 0, "projection: batch must be positive");
  auto const recorded = recorded_batch(t);
  trace out;
  out.reserve(t.storages().size(), t.ops().size(), t.events().size());
  for (auto const& h : t.header()) {
    out.add_header(h.key, h.key == "batch" ? std::to_string(batch) : h.value);
  }
  bool in_optimizer = false;
  for (auto const& e : t.events()) {
    switch (e.kind) {
      case event_kind::alloc: {
        auto const& s = t.storages()[e.index];
        auto bytes    = s.bytes;
        if (batch_dependent(s, in_optimizer, recorded)) {
          bytes = s.bytes / recorded * batch;  // exact: s.bytes is a multiple of recorded
        }
        (void)out.add_alloc(bytes, s.kind, s.label);
        break;
      }
      case event_kind::free:
        out.add_free(e.index);
        break;
      case event_kind::op: {
        auto const& o = t.ops()[e.index];
        (void)out.add_op(o.name, o.reads, o.writes);
        break;
      }
      case event_kind::phase:
        in_optimizer = e.phase_value() == phase::optimizer;
        out.add_phase(e.phase_value());
        break;
    }
  }
  return out;
}

}  // namespace stash::detail
