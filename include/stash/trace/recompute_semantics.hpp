/**
 * @file recompute_semantics.hpp
 * @brief Which ops of a trace may be re-run to rematerialise a dropped storage: a documented
 * default table of aten op names, and per-trace declarations that override it.
 *
 * An op may be re-run when its writes are a function of its reads only: it writes no persistent
 * storage and no input it did not create, and it draws no random numbers the loop cannot replay.
 * The classes:
 *  - `yes`: pure; a re-run on the same reads gives bitwise the same outputs.
 *  - `skip_state`: pure once its writes to persistent storages are skipped. BatchNorm in training
 *    (`aten::native_batch_norm`) updates the running statistics: its re-run must NOT (the
 *    callable the loop gives for a re-run must pass no running statistics, or momentum 0). Its
 *    other outputs (the output, the saved mean and invstd) depend on the batch only.
 *  - `rng`: draws random numbers (dropout's `bernoulli_`); not recomputable unless the trace or
 *    the loop declares `yes` because it can replay the generator's state.
 *  - `no`: never re-run (the default for any op the table does not name).
 *
 * Declarations live in the trace header, so format v1 stays readable by every reader:
 *  - `recompute.<op name>=<yes|no|skip_state>` for every op of that name;
 *  - `recompute@<op index>=<yes|no|skip_state>` for one op (wins over the name).
 * A loop declares them through trace_recorder::declare_recompute. trace_reader rejects a
 * malformed declaration (unknown class, bad or out-of-range index) with a trace_error naming the
 * header line.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/trace/detail/parse.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stash {

/// @brief Whether an op may be re-run to rematerialise what it wrote (see the file comment).
enum class recompute_class : std::uint8_t { no, yes, skip_state, rng };

/// @brief The spelling used in trace headers ("no", "yes", "skip_state", "rng").
/// @param c The class.
/// @return Its spelling.
[[nodiscard]] constexpr std::string_view to_string(recompute_class c) noexcept
{
  switch (c) {
    case recompute_class::no:
      return "no";
    case recompute_class::yes:
      return "yes";
    case recompute_class::skip_state:
      return "skip_state";
    case recompute_class::rng:
      return "rng";
  }
  return "?";
}

/// @brief Parses a declared class; only "yes", "no" and "skip_state" may be declared.
/// @param text The declared spelling.
/// @return The class, or nullopt for anything else ("rng" included).
[[nodiscard]] constexpr std::optional<recompute_class> declared_recompute_class(
    std::string_view text) noexcept
{
  for (auto const c : {recompute_class::no, recompute_class::yes, recompute_class::skip_state}) {
    if (to_string(c) == text) { return c; }
  }
  return std::nullopt;
}

/// @brief True for the classes a planner may re-run (`yes`, `skip_state`).
/// @param c The class.
/// @return Whether a planner may re-run an op of that class.
[[nodiscard]] constexpr bool recomputable(recompute_class c) noexcept
{
  return c == recompute_class::yes || c == recompute_class::skip_state;
}

/// @brief Header key prefix of a declaration by op name.
inline constexpr std::string_view recompute_name_key = "recompute.";
/// @brief Header key prefix of a declaration by op index.
inline constexpr std::string_view recompute_index_key = "recompute@";

namespace detail {

struct recompute_default {
  std::string_view op;
  recompute_class cls;
};

// Sorted by name (binary search). Pure elementwise, reduction, linear-algebra, pooling,
// normalisation, padding, indexing, embedding and allocation ops, as the forward passes of CNNs
// and transformers (ViT, Swin, ConvNeXt, GPT-like decoders) call them below autograd; random
// draws are `rng`. Backward ops are pure too (their outputs are functions of their reads) though
// rarely worth re-running. Optimizer updates write persistent storages: the write rules refuse
// them whatever the table says. (Until 2026-11-28 the table held the 52 ops of data/traces'
// forward passes: a transformer recorded elsewhere could not re-run its attention's baddbmm or
// its token embedding.)
inline constexpr std::array<recompute_default, 157> recompute_defaults = {{
    {"aten::_adaptive_avg_pool2d", recompute_class::yes},
    {"aten::_adaptive_avg_pool2d_backward", recompute_class::yes},
    {"aten::_log_softmax", recompute_class::yes},
    {"aten::_log_softmax_backward_data", recompute_class::yes},
    {"aten::_softmax", recompute_class::yes},
    {"aten::_softmax_backward_data", recompute_class::yes},
    {"aten::_to_copy", recompute_class::yes},
    {"aten::abs", recompute_class::yes},
    {"aten::adaptive_max_pool2d", recompute_class::yes},
    {"aten::add.Scalar", recompute_class::yes},
    {"aten::add.Tensor", recompute_class::yes},
    {"aten::add_.Scalar", recompute_class::yes},
    {"aten::add_.Tensor", recompute_class::yes},
    {"aten::addbmm", recompute_class::yes},
    {"aten::addcdiv", recompute_class::yes},
    {"aten::addcmul", recompute_class::yes},
    {"aten::addmm", recompute_class::yes},
    {"aten::addmv", recompute_class::yes},
    {"aten::amax", recompute_class::yes},
    {"aten::amin", recompute_class::yes},
    {"aten::arange", recompute_class::yes},
    {"aten::arange.start", recompute_class::yes},
    {"aten::arange.start_step", recompute_class::yes},
    {"aten::avg_pool2d", recompute_class::yes},
    {"aten::baddbmm", recompute_class::yes},
    {"aten::bernoulli", recompute_class::rng},
    {"aten::bernoulli.p", recompute_class::rng},
    {"aten::bernoulli_", recompute_class::rng},
    {"aten::bernoulli_.float", recompute_class::rng},
    {"aten::bmm", recompute_class::yes},
    {"aten::cat", recompute_class::yes},
    {"aten::clamp", recompute_class::yes},
    {"aten::clamp_", recompute_class::yes},
    {"aten::clamp_max", recompute_class::yes},
    {"aten::clamp_min", recompute_class::yes},
    {"aten::clamp_min_", recompute_class::yes},
    {"aten::clone", recompute_class::yes},
    {"aten::constant_pad_nd", recompute_class::yes},
    {"aten::convolution", recompute_class::yes},
    {"aten::convolution_backward", recompute_class::yes},
    {"aten::copy_", recompute_class::yes},
    {"aten::cos", recompute_class::yes},
    {"aten::cumsum", recompute_class::yes},
    {"aten::div.Scalar", recompute_class::yes},
    {"aten::div.Tensor", recompute_class::yes},
    {"aten::div.Tensor_mode", recompute_class::yes},
    {"aten::div_.Scalar", recompute_class::yes},
    {"aten::div_.Tensor", recompute_class::yes},
    {"aten::elu", recompute_class::yes},
    {"aten::elu_", recompute_class::yes},
    {"aten::embedding", recompute_class::yes},
    {"aten::empty.memory_format", recompute_class::yes},
    {"aten::empty_like", recompute_class::yes},
    {"aten::empty_strided", recompute_class::yes},
    {"aten::erf", recompute_class::yes},
    {"aten::exp", recompute_class::yes},
    {"aten::expand_copy", recompute_class::yes},
    {"aten::exponential_", recompute_class::rng},
    {"aten::fill_.Scalar", recompute_class::yes},
    {"aten::flip", recompute_class::yes},
    {"aten::full", recompute_class::yes},
    {"aten::full_like", recompute_class::yes},
    {"aten::gather", recompute_class::yes},
    {"aten::gelu", recompute_class::yes},
    {"aten::gelu_", recompute_class::yes},
    {"aten::geometric_", recompute_class::rng},
    {"aten::hardsigmoid", recompute_class::yes},
    {"aten::hardsigmoid_", recompute_class::yes},
    {"aten::hardswish", recompute_class::yes},
    {"aten::hardswish_", recompute_class::yes},
    {"aten::hardtanh", recompute_class::yes},
    {"aten::hardtanh_", recompute_class::yes},
    {"aten::index.Tensor", recompute_class::yes},
    {"aten::index_select", recompute_class::yes},
    {"aten::leaky_relu", recompute_class::yes},
    {"aten::leaky_relu_", recompute_class::yes},
    {"aten::linalg_vector_norm", recompute_class::yes},
    {"aten::log", recompute_class::yes},
    {"aten::log_sigmoid_forward", recompute_class::yes},
    {"aten::masked_fill.Scalar", recompute_class::yes},
    {"aten::masked_fill.Tensor", recompute_class::yes},
    {"aten::masked_fill_.Scalar", recompute_class::yes},
    {"aten::masked_fill_.Tensor", recompute_class::yes},
    {"aten::max.dim", recompute_class::yes},
    {"aten::max_pool2d_with_indices", recompute_class::yes},
    {"aten::maximum", recompute_class::yes},
    {"aten::mean", recompute_class::yes},
    {"aten::mean.dim", recompute_class::yes},
    {"aten::minimum", recompute_class::yes},
    {"aten::mish", recompute_class::yes},
    {"aten::mm", recompute_class::yes},
    {"aten::mul.Scalar", recompute_class::yes},
    {"aten::mul.Tensor", recompute_class::yes},
    {"aten::mul_.Scalar", recompute_class::yes},
    {"aten::mul_.Tensor", recompute_class::yes},
    {"aten::multinomial", recompute_class::rng},
    {"aten::mv", recompute_class::yes},
    {"aten::native_batch_norm", recompute_class::skip_state},
    {"aten::native_dropout", recompute_class::rng},
    {"aten::native_group_norm", recompute_class::yes},
    {"aten::native_layer_norm", recompute_class::yes},
    {"aten::neg", recompute_class::yes},
    {"aten::new_empty", recompute_class::yes},
    {"aten::new_empty_strided", recompute_class::yes},
    {"aten::nll_loss_forward", recompute_class::yes},
    {"aten::normal_", recompute_class::rng},
    {"aten::ones", recompute_class::yes},
    {"aten::ones_like", recompute_class::yes},
    {"aten::pow.Scalar", recompute_class::yes},
    {"aten::pow.Tensor_Scalar", recompute_class::yes},
    {"aten::pow.Tensor_Tensor", recompute_class::yes},
    {"aten::rand", recompute_class::rng},
    {"aten::rand_like", recompute_class::rng},
    {"aten::randint", recompute_class::rng},
    {"aten::randn", recompute_class::rng},
    {"aten::randn_like", recompute_class::rng},
    {"aten::random_", recompute_class::rng},
    {"aten::random_.from", recompute_class::rng},
    {"aten::random_.to", recompute_class::rng},
    {"aten::randperm", recompute_class::rng},
    {"aten::reciprocal", recompute_class::yes},
    {"aten::relu", recompute_class::yes},
    {"aten::relu_", recompute_class::yes},
    {"aten::repeat", recompute_class::yes},
    {"aten::roll", recompute_class::yes},
    {"aten::rsqrt", recompute_class::yes},
    {"aten::rsub.Scalar", recompute_class::yes},
    {"aten::rsub.Tensor", recompute_class::yes},
    {"aten::scalar_tensor", recompute_class::yes},
    {"aten::sigmoid", recompute_class::yes},
    {"aten::sigmoid_", recompute_class::yes},
    {"aten::silu", recompute_class::yes},
    {"aten::silu_", recompute_class::yes},
    {"aten::sin", recompute_class::yes},
    {"aten::softplus", recompute_class::yes},
    {"aten::sqrt", recompute_class::yes},
    {"aten::stack", recompute_class::yes},
    {"aten::std.correction", recompute_class::yes},
    {"aten::sub.Scalar", recompute_class::yes},
    {"aten::sub.Tensor", recompute_class::yes},
    {"aten::sub_.Tensor", recompute_class::yes},
    {"aten::sum", recompute_class::yes},
    {"aten::sum.dim_IntList", recompute_class::yes},
    {"aten::tanh", recompute_class::yes},
    {"aten::tanh_", recompute_class::yes},
    {"aten::threshold_backward", recompute_class::yes},
    {"aten::tril", recompute_class::yes},
    {"aten::triu", recompute_class::yes},
    {"aten::uniform_", recompute_class::rng},
    {"aten::upsample_bilinear2d", recompute_class::yes},
    {"aten::upsample_nearest2d", recompute_class::yes},
    {"aten::var.correction", recompute_class::yes},
    {"aten::var_mean.correction", recompute_class::yes},
    {"aten::where.self", recompute_class::yes},
    {"aten::zero_", recompute_class::yes},
    {"aten::zeros", recompute_class::yes},
    {"aten::zeros_like", recompute_class::yes},
}};

}  // namespace detail

/// @brief The default table's class for `op_name` (`no` for a name it does not list).
/// @param op_name The op's name.
/// @return Its class in the default table.
[[nodiscard]] inline recompute_class default_recompute_class(std::string_view op_name) noexcept
{
  auto const& table = detail::recompute_defaults;
  auto const it     = std::lower_bound(table.begin(), table.end(), op_name,
                                       [](auto const& d, std::string_view n) { return d.op < n; });
  return it != table.end() && it->op == op_name ? it->cls : recompute_class::no;
}

/// @brief A header entry that declares recomputability, checked: the message of what is wrong
/// with it (empty when it is well formed or not a declaration). `op_count` bounds an op index;
/// pass nullopt while the ops are not known yet.
/// @param entry The header entry.
/// @param op_count The trace's op count, or nullopt.
/// @return What is wrong, or an empty string.
[[nodiscard]] inline std::string check_recompute_declaration(header_entry const& entry,
                                                             std::optional<std::size_t> op_count)
{
  std::string_view const key = entry.key;
  bool const by_name         = key.starts_with(recompute_name_key);
  bool const by_index        = key.starts_with(recompute_index_key);
  if (!by_name && !by_index) { return {}; }
  if (!declared_recompute_class(entry.value)) {
    return "bad recompute declaration '" + entry.key + "=" + entry.value +
           "': the value must be yes, no or skip_state";
  }
  auto const rest = key.substr(recompute_name_key.size());
  if (rest.empty()) {
    return "bad recompute declaration '" + entry.key + "': missing the op name or index";
  }
  if (by_index) {
    auto const index = detail::parse_u64(rest);
    if (!index) {
      return "bad recompute declaration '" + entry.key + "': '" + std::string(rest) +
             "' is not an op index";
    }
    if (op_count && *index >= *op_count) {
      return "bad recompute declaration '" + entry.key + "': op index " + std::string(rest) +
             " is out of range (the trace has " + std::to_string(*op_count) + " ops)";
    }
  }
  return {};
}

/// @brief Every op's class in `t`: the default table, overridden by declarations by name, then
/// by index. The trace must hold only well-formed declarations (check_recompute_declaration);
/// a malformed one throws stash::logic_error.
/// @param t The trace.
/// @return One class per op, by op index.
/// @throws stash::logic_error For a malformed declaration.
[[nodiscard]] inline std::vector<recompute_class> resolve_recompute_classes(trace const& t)
{
  auto const ops = t.ops();
  std::vector<recompute_class> result(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto const declared = t.header_value(std::string(recompute_name_key) + ops[i].name);
    result[i] =
        declared ? *declared_recompute_class(*declared) : default_recompute_class(ops[i].name);
  }
  for (auto const& entry : t.header()) {
    auto const problem = check_recompute_declaration(entry, ops.size());
    STASH_EXPECTS(problem.empty(), problem);
    if (entry.key.starts_with(recompute_index_key)) {
      auto const index =
          *detail::parse_u64(std::string_view(entry.key).substr(recompute_index_key.size()));
      result[index] = *declared_recompute_class(entry.value);
    }
  }
  return result;
}

}  // namespace stash
