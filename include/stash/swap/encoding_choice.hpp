/**
 * @file encoding_choice.hpp
 * @brief Per-tensor encodings (Gist and cDMA chosen per storage): for each swap entry, the
 * encoding the trace's own semantics allow, so each storage crosses the link as small as it
 * exactly can.
 *
 * Rules, lossless unless the user opts in (first that applies):
 *  - pool_argmax: the storage holds max-pool indices (the second result of
 *    aten::max_pool2d_with_indices): a 4-bit window argmax replaces the int64 index.
 *  - bitmask (Gist's Binarize): it is a ReLU-like output and every access from the entry's next
 *    use on reads it as `self` of aten::threshold_backward, which needs only its sign (view ops
 *    that write nothing, such as aten::detach, read no values and do not count; any other op
 *    does, even one that writes no tensor, e.g. aten::_local_scalar_dense).
 *  - bitmask, as a lossless codec of values: its last write before the gap is a Bernoulli draw
 *    (aten::bernoulli, bernoulli_ and their overloads: every element 0 or 1 in the tensor's own
 *    type, as an unscaled dropout mask), the trace does not say its tensors are other than
 *    float32 (header `dtype`, when present, is float32), and the storage was made from a tensor
 *    of its own size (its first write reads one: empty_like(x), bernoulli(x); not a bool mask
 *    made as empty_like(x, dtype=bool), nor one made from a shape alone): Binarize's decoding
 *    (1.0f where x > 0, else 0.0f) gives back exactly those values, whatever reads them. A mask
 *    scaled after the draw (PyTorch's CPU dropout divides it by 1 - p in place) holds
 *    {0, 1/(1-p)}: see two_value.
 *  - two_value (lossless, 1 bit per element + one value): its last write before the gap is an
 *    in-place scaling by a scalar (aten::mul_.Scalar, aten::div_.Scalar: every element times or
 *    over one number, reading no other tensor), and its writes since the last Bernoulli draw are
 *    all such scalings, with the same float32 / own-size guards as above (PyTorch's CPU dropout:
 *    bernoulli_ then div_ by 1 - p). Every element is then 0 * k or 1 * k: at most two values,
 *    the trace does not record k, and the codec takes c from the data. This is a prediction the
 *    codec checks: data with a third bit pattern (a negative k makes 0 * k = -0.0, a k of 0 or
 *    inf gives NaN) is refused by its encoder and travels raw, so nothing is lost.
 *  - bitmask, for LeakyReLU: every access from the entry's next use on reads it as `self` of
 *    aten::leaky_relu_backward (view ops aside), which needs only its sign (`self > 0 ? grad :
 *    grad * negative_slope`; with self_is_result the output, of the same sign), whatever wrote
 *    it, and the trace's tensors may be taken to be float32: Binarize's 1.0f / 0.0f give the same
 *    gradient.
 *  - range_mask (Gist's Binarize for a clamp, 1 bit per element): every access from the entry's
 *    next use on reads it as `self` of aten::hardtanh_backward (view ops aside, as for bitmask),
 *    which needs only whether each element lies inside the clamp's (min, max) (ReLU6 = hardtanh
 *    in place on a copy PyTorch saves for the backward), and the trace's tensors may be taken to
 *    be float32. The codec needs the bounds, which a trace does not record: the loop describes
 *    the tensor at allocate_async() (range_bounds); undescribed, it travels raw.
 *  - zvc (cDMA): it is a ReLU-like output (its last write before the gap is aten::relu, relu_,
 *    threshold, threshold_, hardtanh or hardtanh_): zeros are common.
 *  - the lossy encoding the user chose for activations (fp16, bf16, fp8), if any, for any other
 *    storage of kind act but max-pool indices (int64: a float format would round them to garbage,
 *    and stash::allocator refuses it for indices described at allocation; they travel raw when
 *    lossless codecs are off);
 *  - raw otherwise.
 * Ratios come from the cost model (cost_model::encoding_ratio): measured (zvc, a parameter) or
 * fixed by the format (bitmask and two_value 32, pool_argmax 16, reduced precision by its width).
 */
#pragma once

#include <stash/sim/cost_model.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace stash {

/// @brief What encodings an encoding choice may use.
struct encoding_options {
  /// Use zvc, bitmask, two_value, range_mask and pool_argmax where the trace says they are exact.
  bool lossless_codecs = true;
  /// A lossy encoding (fp16, bf16 or fp8_e4m3) for activations no lossless rule covers; none by
  /// default (lossy formats only where the user opts in).
  std::optional<swap_encoding> lossy_activations;
};

namespace detail {

[[nodiscard]] inline bool relu_like(std::string_view op) noexcept
{
  constexpr std::array<std::string_view, 6> names = {"aten::relu",      "aten::relu_",
                                                     "aten::threshold", "aten::threshold_",
                                                     "aten::hardtanh",  "aten::hardtanh_"};
  return std::find(names.begin(), names.end(), op) != names.end();
}

// The last op at or before `u` that writes storage `id`, if any.
[[nodiscard]] inline std::optional<std::uint64_t> last_write(storage_lifetime const& s,
                                                             std::uint64_t u)
{
  std::optional<std::uint64_t> w;
  for (auto const& acc : s.accesses) {
    if (acc.op > u) { break; }
    if (acc.write) { w = acc.op; }
  }
  return w;
}

// An aten view op: it returns an alias of its input and reads no values. Only names known to be
// views count: an op that writes no tensor may still read values (aten::_local_scalar_dense,
// aten::equal, a copy to the host).
[[nodiscard]] inline bool view_op(std::string_view op) noexcept
{
  constexpr std::array<std::string_view, 20> names = {"aten::detach",
                                                      "aten::alias",
                                                      "aten::view",
                                                      "aten::_reshape_alias",
                                                      "aten::_unsafe_view",
                                                      "aten::reshape",
                                                      "aten::t",
                                                      "aten::transpose.int",
                                                      "aten::permute",
                                                      "aten::expand",
                                                      "aten::as_strided",
                                                      "aten::slice.Tensor",
                                                      "aten::split.Tensor",
                                                      "aten::select.int",
                                                      "aten::squeeze",
                                                      "aten::squeeze.dim",
                                                      "aten::unsqueeze",
                                                      "aten::narrow",
                                                      "aten::unflatten.int",
                                                      "aten::flatten.using_ints"};
  return std::find(names.begin(), names.end(), op) != names.end();
}

// Every access from op `v` on reads `id` as `self` (the second read) of `reader`, or through a view
// op that writes nothing (e.g. aten::detach: it reads no values); at least one such read.
[[nodiscard]] inline bool read_only_as_self_of(trace const& t, storage_lifetime const& s,
                                               std::uint64_t v, std::string_view reader)
{
  bool any = false;
  for (auto const& acc : s.accesses) {
    if (acc.op < v) { continue; }
    auto const& op = t.ops()[acc.op];
    if (!acc.write && op.writes.empty() && view_op(op.name)) { continue; }
    if (acc.write || op.name != reader || op.reads.size() < 2 || op.reads[1] != s.id ||
        op.reads[0] == s.id) {
      return false;
    }
    any = true;
  }
  return any;
}

// ReLU's backward reads only the sign of its `self`: Binarize is exact for it.
[[nodiscard]] inline bool sign_only_after(trace const& t, storage_lifetime const& s,
                                          std::uint64_t v)
{
  return read_only_as_self_of(t, s, v, "aten::threshold_backward");
}

// LeakyReLU's backward reads only the sign of its `self` (`self > 0 ? grad : grad * slope`), its
// input or, in place, its output: Binarize is exact for it, whatever wrote the storage.
[[nodiscard]] inline bool leaky_sign_only_after(trace const& t, storage_lifetime const& s,
                                                std::uint64_t v)
{
  return read_only_as_self_of(t, s, v, "aten::leaky_relu_backward");
}

// hardtanh's backward (ReLU6's) reads only whether its `self` lies inside (min, max).
[[nodiscard]] inline bool range_only_after(trace const& t, storage_lifetime const& s,
                                           std::uint64_t v)
{
  return read_only_as_self_of(t, s, v, "aten::hardtanh_backward");
}

// A Bernoulli draw (aten::bernoulli, aten::bernoulli.p, aten::bernoulli_.float, ...): it
// writes 0 or 1 into every element of its output.
[[nodiscard]] inline bool bernoulli_draw(std::string_view op) noexcept
{
  return op == "aten::bernoulli" || op.starts_with("aten::bernoulli.") ||
         op == "aten::bernoulli_" || op.starts_with("aten::bernoulli_.");
}

// Whether `s` has the element size of a tensor it was made from: its first write is by an op
// that reads another storage of the same bytes (empty_like(x), bernoulli(x)). A mask made as
// empty_like(x, dtype=bool) is a quarter of x's bytes, and one made from a shape alone (empty)
// says nothing of its type: neither is taken to hold floats.
[[nodiscard]] inline bool sized_like_its_source(trace const& t, storage_lifetime const& s)
{
  if (s.accesses.empty() || !s.accesses.front().write) { return false; }
  auto const& op   = t.ops()[s.accesses.front().op];
  auto const bytes = t.storages()[s.id].bytes;
  return std::any_of(op.reads.begin(), op.reads.end(),
                     [&](storage_id r) { return r != s.id && t.storages()[r].bytes == bytes; });
}

// Whether the trace's tensors may be taken to be float32 (the element type zvc and bitmask
// read): its header names no other dtype.
[[nodiscard]] inline bool float32_trace(trace const& t) noexcept
{
  auto const dtype = t.header_value("dtype");
  return !dtype || *dtype == "float32";
}

// An in-place scaling of `id` by a scalar (aten::mul_.Scalar, aten::div_.Scalar): it reads and
// writes `id` alone, every element times or over the same number.
[[nodiscard]] inline bool scalar_scale_in_place(trace const& t, std::uint64_t op_index,
                                                storage_id id)
{
  auto const& op = t.ops()[op_index];
  if (op.name != "aten::mul_.Scalar" && op.name != "aten::div_.Scalar") { return false; }
  return op.writes.size() == 1 && op.writes[0] == id &&
         std::all_of(op.reads.begin(), op.reads.end(), [&](storage_id r) { return r == id; });
}

// Whether the writes of `s` up to op `u` end with a Bernoulli draw followed by at least one
// in-place scalar scaling and nothing else: every element then holds 0 * k or 1 * k.
[[nodiscard]] inline bool scaled_bernoulli(trace const& t, storage_lifetime const& s,
                                           std::uint64_t u)
{
  enum class state { other, drawn, scaled };
  state st = state::other;
  for (auto const& acc : s.accesses) {
    if (acc.op > u) { break; }
    if (!acc.write) { continue; }
    if (bernoulli_draw(t.ops()[acc.op].name)) {
      st = state::drawn;
    } else if (st != state::other && scalar_scale_in_place(t, acc.op, s.id)) {
      st = state::scaled;
    } else {
      st = state::other;
    }
  }
  return st == state::scaled;
}

[[nodiscard]] inline bool max_pool_indices(trace const& t, storage_lifetime const& s)
{
  if (s.accesses.empty() || !s.accesses.front().write) { return false; }
  auto const& op = t.ops()[s.accesses.front().op];
  return op.name == "aten::max_pool2d_with_indices" && op.writes.size() >= 2 &&
         op.writes[1] == s.id;
}

}  // namespace detail

/// @brief The encoding of entry `e` under `options` (see the file comment).
/// @param analysis The recorded iteration's facts.
/// @param e The entry.
/// @param options Which encodings are allowed.
/// @return The entry's encoding.
[[nodiscard]] inline swap_encoding choose_encoding(trace_analysis const& analysis,
                                                   swap_entry const& e,
                                                   encoding_options const& options = {})
{
  auto const& t      = analysis.trace();
  auto const& s      = analysis.lifetimes().storages[e.id];
  bool const indices = detail::max_pool_indices(t, s);
  if (options.lossless_codecs) {
    if (indices) { return swap_encoding::pool_argmax; }
    auto const w = detail::last_write(s, e.last_use);
    if (w && detail::bernoulli_draw(t.ops()[*w].name) && detail::float32_trace(t) &&
        detail::sized_like_its_source(t, s)) {
      return swap_encoding::bitmask;
    }
    if (w && detail::scaled_bernoulli(t, s, e.last_use) && detail::float32_trace(t) &&
        detail::sized_like_its_source(t, s)) {
      return swap_encoding::two_value;
    }
    if (detail::float32_trace(t) && detail::range_only_after(t, s, e.next_use)) {
      return swap_encoding::range_mask;
    }
    if (detail::float32_trace(t) && detail::leaky_sign_only_after(t, s, e.next_use)) {
      return swap_encoding::bitmask;
    }
    if (w && detail::relu_like(t.ops()[*w].name)) {
      return detail::sign_only_after(t, s, e.next_use) ? swap_encoding::bitmask
                                                       : swap_encoding::zvc;
    }
  }
  if (options.lossy_activations && s.kind == storage_kind::act && !indices) {
    return *options.lossy_activations;
  }
  return swap_encoding::raw;
}

/// @brief `s` with every entry's encoding chosen (choose_encoding) and its planned peak
/// unchanged (encodings change the time, not the bytes resident on the device).
/// @param analysis The recorded iteration's facts.
/// @param s The schedule.
/// @param options Which encodings are allowed.
/// @return `s` with each entry's encoding chosen.
[[nodiscard]] inline schedule with_encodings(trace_analysis const& analysis, schedule s,
                                             encoding_options const& options = {})
{
  for (auto& e : s.entries) { e.encoding = choose_encoding(analysis, e, options); }
  return s;
}

}  // namespace stash
