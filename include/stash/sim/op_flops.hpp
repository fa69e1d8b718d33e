/**
 * @file op_flops.hpp
 * @brief FLOP and byte counts of a trace's ops, derived from storage sizes alone.
 *
 * Traces carry no shapes, so FLOPs are derived only where sizes determine them exactly; every
 * other op is left at 0 FLOPs and costed by the bytes it touches (a memory-bound roofline).
 *  - `aten::mm(A, B) -> C` and `aten::addmm(bias, A, B) -> C`: with A = MxK, B = KxN, C = MxN
 *    elements, |A||B||C| = (MKN)^2, so FLOPs = 2 sqrt(|A||B||C|), exact for any shapes.
 *  - `aten::convolution(X, W[, b]) -> Y`: FLOPs = 2 |Y| |W| / K, K = output channels (also exact
 *    for grouped and depthwise convolutions). K = |b| when the conv has a bias; otherwise K = the
 *    size of the first `param` storage read by the first later op that reads Y (the BatchNorm
 *    weight in torchvision models). If K cannot be found or does not divide |Y| and |W|: 0.
 *  - `aten::convolution_backward(dY, X, W) -> (dX?, dW?, db?)`: the forward conv's FLOPs (the
 *    latest conv that read W) once per computed dX and dW (a result sized like X or like W).
 *  - `aten::bmm` and everything else: 0 (its batch count is not recoverable from sizes).
 * Element counts are bytes / element size (the header's dtype; 4 bytes for float32).
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stash {

/// @brief Work of one op: FLOPs (0 = not derivable) and bytes read plus bytes written.
struct op_work {
  double flops{};         ///< floating-point operations, 0 when not derivable from sizes
  std::uint64_t bytes{};  ///< bytes of the storages it reads plus those it writes, as listed
  bool view{};            ///< writes nothing: a view or metadata op that launches no kernel
};

/// @brief Element size in bytes from the trace header's `dtype` (float32 when absent).
/// stash::logic_error for a dtype it does not know.
/// @param t The trace.
/// @return Bytes per element.
[[nodiscard]] inline std::uint64_t trace_element_bytes(trace const& t)
{
  auto const dtype = t.header_value("dtype").value_or("float32");
  if (dtype == "float32" || dtype == "int32") { return 4; }
  if (dtype == "float16" || dtype == "bfloat16") { return 2; }
  if (dtype == "float64" || dtype == "int64") { return 8; }
  STASH_FAIL("trace header dtype '" + std::string(dtype) +
             "' is not one the cost model knows "
             "(float32, float16, bfloat16, float64, int32, int64)");
}

/// @brief FLOPs and bytes of every op of `t`, indexed by op index (see the file comment).
/// @param t The trace.
/// @return One estimate per op of `t`.
// Kept whole (~70 lines): one branch per op kind with its FLOP and byte formula, side by side so
// they can be compared with each other and with the file comment.
[[nodiscard]] inline std::vector<op_work> estimate_op_work(trace const& t)
{
  auto const ops      = t.ops();
  auto const storages = t.storages();
  double const elem   = static_cast<double>(trace_element_bytes(t));
  auto elements = [&](storage_id id) { return static_cast<double>(storages[id].bytes) / elem; };
  auto divides  = [](double whole, double part) {
    return part >= 1.0 && std::fmod(whole, part) == 0.0;
  };

  std::vector<op_work> work(ops.size());
  std::unordered_map<storage_id, double> conv_flops_by_weight;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto const& o = ops[i];
    auto& w       = work[i];
    for (auto const* list : {&o.reads, &o.writes}) {
      std::vector<storage_id> seen;
      for (auto const id : *list) {
        bool dup = false;
        for (auto const s : seen) { dup = dup || s == id; }
        if (!dup) {
          seen.push_back(id);
          w.bytes += storages[id].bytes;
        }
      }
    }
    w.view                      = o.writes.empty();
    std::string_view const name = o.name;
    if ((name == "aten::mm" && o.reads.size() >= 2 && !o.writes.empty()) ||
        (name == "aten::addmm" && o.reads.size() >= 3 && !o.writes.empty())) {
      std::size_t const first = name == "aten::mm" ? 0 : 1;
      w.flops = 2.0 * std::sqrt(elements(o.reads[first]) * elements(o.reads[first + 1]) *
                                elements(o.writes[0]));
    } else if (name == "aten::convolution" && o.reads.size() >= 2 && !o.writes.empty()) {
      auto const y = o.writes[0];
      double k     = 0;
      if (o.reads.size() >= 3) {
        k = elements(o.reads[2]);
      } else {
        for (std::size_t j = i + 1; j < ops.size() && k == 0; ++j) {
          bool reads_y = false;
          for (auto const id : ops[j].reads) { reads_y = reads_y || id == y; }
          if (!reads_y) { continue; }
          for (auto const id : ops[j].reads) {
            if (storages[id].kind == storage_kind::param) {
              k = elements(id);
              break;
            }
          }
          if (k == 0) { k = -1; }  // the consumer has no param: give up rather than guess
        }
      }
      double const wt = elements(o.reads[1]);
      if (k > 0 && divides(elements(y), k) && divides(wt, k)) {
        w.flops                          = 2.0 * elements(y) / k * wt;
        conv_flops_by_weight[o.reads[1]] = w.flops;
      }
    } else if (name == "aten::convolution_backward" && o.reads.size() >= 3) {
      auto const found = conv_flops_by_weight.find(o.reads[2]);
      if (found != conv_flops_by_weight.end()) {
        auto const x_bytes = storages[o.reads[1]].bytes;
        auto const w_bytes = storages[o.reads[2]].bytes;
        int computed       = 0;
        for (auto const id : o.writes) {
          if (storages[id].bytes == x_bytes || storages[id].bytes == w_bytes) { ++computed; }
        }
        w.flops = found->second * static_cast<double>(std::clamp(computed, 1, 2));
      }
    }
  }
  return work;
}

}  // namespace stash
