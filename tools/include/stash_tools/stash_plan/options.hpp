/**
 * @file options.hpp
 * @brief stash-plan's command line: the options struct, the parsers of sizes, budgets and
 * numbers, the multi-device projection's options (`--cluster` and its efficiency model), and
 * the codec-ratio measurement behind `--activations`.
 *
 * Parsing never prints or exits: a bad command line throws stash_plan::usage_error, whose
 * message names the option and the offending text, so main() can print it with the usage and
 * tests can check it.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/error.hpp>
#include <stash/pool/search_planner.hpp>
#include <stash/projection/cluster.hpp>
#include <stash/projection/projection.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/swap/policy_registry.hpp>

#include <stash_tools/parallel_tasks.hpp>
#include <stash_tools/size.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace stash_plan {

/// @brief A bad command line (unknown option, missing or malformed value). what() says which
/// option and what was wrong with its value.
class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// @brief A device-memory budget: absolute bytes, or a share of the no_swap peak of each input
/// (the grammar of stash_tools/size.hpp).
using budget_spec = stash_tools::budget_spec;

/// @brief The codec assumed for offloaded data: a label and the ratio uncompressed / wire bytes.
struct codec_choice {
  std::string name;    ///< what --codec said ("zvc", ...)
  double ratio{1.0};   ///< fixed by --ratio or measured from --activations
  std::string source;  ///< "fixed" or "measured on N files"
};

/// @brief The multi-device projection (--cluster): the cluster, the statistical-efficiency
/// model and the projection's parameters. device_budget_bytes stays 0 here; an absolute
/// --budget or a percentage of each trace's no_swap peak is resolved per input.
struct projection_request {
  std::string spec;                          ///< --cluster as given
  stash::cluster cluster;                    ///< parsed from `spec`
  stash::statistical_efficiency efficiency;  ///< --gns or --epochs-table
  stash::projection_params params;           ///< --dataset, --replica-batch, ...
};

/// @brief Everything the command line asks for.
struct options {
  bool json = false;
  std::vector<std::string> files;
  std::uint64_t search_nodes = stash::default_search_nodes;  ///< --search-nodes, per input
  std::optional<std::chrono::milliseconds> search_time_cap;  ///< --search-ms: safety cap only
  bool times = true;                   ///< print measured wall times (--no-times clears it)
  std::optional<budget_spec> budget;   ///< --budget
  std::vector<std::string> policies;   ///< --policy (expanded for "all")
  std::string hardware = "pcie3_x16";  ///< --hw
  std::optional<codec_choice> codec;   ///< --codec with --ratio / --activations
  bool auto_encodings = false;         ///< --codec auto: each swapped storage gets its own encoding
  /// `search` plans second departures (joint_search::redrop, on by default); --no-redrop
  /// turns it off (--redrop, the default, is still accepted).
  bool redrop = true;
  std::optional<double> zvc_ratio;  ///< --codec auto --activations: zvc's measured ratio
  /// --lossy activations=ENC: the lossy encoding activations may take (implies --codec auto)
  std::optional<stash::swap_encoding> lossy_activations;
  std::optional<std::string> svg;  ///< --svg FILE
  bool frontier = false;           ///< --frontier: every policy from the swap bound to 100%
  /// --threads: --frontier's worker threads (1: one plan after the other) and `search`'s
  /// (joint_search::threads, where a frontier does not already spread its plans); the output is
  /// the same for any count. Default: the machine's hardware threads, at most 8.
  unsigned threads = stash_tools::default_threads();
  std::optional<projection_request> projection;  ///< --cluster with its efficiency model
  bool help = false;                             ///< -h / --help
  bool planners =
      true;  ///< run the planner section (always from the command line; tests may skip it)

  /// @brief True when the swap-policy section was asked for (--policy or --budget).
  [[nodiscard]] bool swap_requested() const noexcept
  {
    return budget.has_value() || !policies.empty();
  }
};

namespace detail {

/// Longest decimal the options take: 32 characters hold any double a person means to type; a
/// longer one is a paste error or hostile, and would overflow to infinity or underflow to 0.
inline constexpr std::size_t max_decimal_chars = 32;

// A finite non-negative decimal number filling all of `text` (no sign, no hex, no exponent
// surprises such as "inf"), at most max_decimal_chars long, or nullopt.
inline std::optional<double> parse_decimal(std::string_view text)
{
  if (text.empty() || text.size() > max_decimal_chars) { return std::nullopt; }
  bool dot   = false;
  bool digit = false;
  for (char const c : text) {
    if (c == '.') {
      if (dot) { return std::nullopt; }
      dot = true;
    } else if (c >= '0' && c <= '9') {
      digit = true;
    } else {
      return std::nullopt;
    }
  }
  if (!digit) { return std::nullopt; }
  std::string const copy(text);
  double const value = std::strtod(copy.c_str(), nullptr);
  if (!std::isfinite(value)) { return std::nullopt; }  // strtod overflow gives HUGE_VAL
  return value;
}

}  // namespace detail

/// @brief Parses a size in the tools' one grammar (stash_tools::parse_size: e.g. 1048576,
/// 512MiB, 1.5 GiB, 8GB). `what` names the option in the error.
/// @param text The size.
/// @param what The option, e.g. "--budget".
/// @throws usage_error "<what>: '<text>' <why>" when `text` is not a size.
[[nodiscard]] inline std::uint64_t parse_bytes(std::string_view text, std::string_view what)
{
  try {
    return stash_tools::parse_size(text);
  } catch (stash_tools::size_error const& e) {
    throw usage_error(std::string(what) + ": '" + std::string(text) + "' " + e.what() +
                      " (expected " + std::string(stash_tools::size_examples) + ")");
  }
}

/// @brief Parses --budget: a size (see parse_bytes) or a percentage "70%" of the no_swap peak.
/// A zero budget is refused: no iteration runs in zero bytes.
/// @param text The budget.
/// @throws usage_error naming --budget and the text when it is not a budget, or is zero.
[[nodiscard]] inline budget_spec parse_budget(std::string_view text)
{
  budget_spec spec;
  try {
    spec = stash_tools::parse_budget(text);
  } catch (stash_tools::size_error const& e) {
    throw usage_error("--budget: '" + std::string(text) + "' " + e.what());
  }
  if (spec.bytes && *spec.bytes == 0) {
    throw usage_error("--budget: '" + std::string(text) + "' is zero bytes");
  }
  return spec;
}

/// @brief Parses a whole number of search nodes for --search-nodes (0: the greedy plan only).
[[nodiscard]] inline std::uint64_t parse_search_nodes(std::string_view text)
{
  bool const digits =
      !text.empty() && text.size() <= 18 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    throw usage_error("--search-nodes: '" + std::string(text) +
                      "' is not a whole number of nodes (at most 18 digits)");
  }
  return std::stoull(std::string(text));
}

/// @brief Parses a whole number of milliseconds for --search-ms.
[[nodiscard]] inline std::chrono::milliseconds parse_milliseconds(std::string_view text,
                                                                  std::string_view what)
{
  bool const digits =
      !text.empty() && text.size() <= 9 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    throw usage_error(std::string(what) + ": '" + std::string(text) +
                      "' is not a whole number of milliseconds (at most 9 digits)");
  }
  return std::chrono::milliseconds(std::stoll(std::string(text)));
}

/// @brief Parses a positive whole number (at most 18 digits) for the projection's counts.
[[nodiscard]] inline std::uint64_t parse_count(
    std::string_view text, std::string_view what,
    std::uint64_t max = std::numeric_limits<std::uint64_t>::max())
{
  bool const digits =
      !text.empty() && text.size() <= 18 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  std::uint64_t const value = digits ? std::stoull(std::string(text)) : 0;
  if (!digits || value == 0 || value > max) {
    throw usage_error(
        std::string(what) + ": '" + std::string(text) + "' is not a positive whole number" +
        (max < std::numeric_limits<std::uint64_t>::max() ? " (at most " + std::to_string(max) + ")"
                                                         : std::string()));
  }
  return value;
}

/// @brief Parses --cluster SPEC (stash::parse_cluster_spec); its stash::logic_error becomes a
/// usage_error carrying the same what().
[[nodiscard]] inline stash::cluster parse_cluster(std::string const& spec)
{
  try {
    return stash::parse_cluster_spec(spec);
  } catch (stash::logic_error const& e) {
    throw usage_error(e.what());
  }
}

/// @brief Parses --gns S_MIN,B_NOISE: the gradient-noise efficiency model.
[[nodiscard]] inline stash::statistical_efficiency parse_gns(std::string_view text)
{
  auto const comma = text.find(',');
  auto const s_min =
      comma == std::string_view::npos ? std::nullopt : detail::parse_decimal(text.substr(0, comma));
  auto const noise = comma == std::string_view::npos
                         ? std::nullopt
                         : detail::parse_decimal(text.substr(comma + 1));
  if (!s_min || !noise) {
    throw usage_error("--gns: '" + std::string(text) +
                      "' is not S_MIN,B_NOISE (two numbers, e.g. 13648.8,8192)");
  }
  try {
    return stash::statistical_efficiency::gradient_noise(*s_min, *noise);
  } catch (stash::logic_error const& e) {
    throw usage_error("--gns: '" + std::string(text) + "': " + e.what());
  }
}

/// @brief Parses --epochs-table B:E,B:E,...: epochs to target at each global batch.
[[nodiscard]] inline stash::statistical_efficiency parse_epochs_table(std::string_view text)
{
  std::vector<stash::epochs_point> points;
  std::size_t pos = 0;
  while (true) {
    auto const comma = text.find(',', pos);
    auto const item =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    auto const colon  = item.find(':');
    auto const batch  = colon == std::string_view::npos
                            ? std::nullopt
                            : detail::parse_decimal(item.substr(0, colon));
    auto const epochs = colon == std::string_view::npos
                            ? std::nullopt
                            : detail::parse_decimal(item.substr(colon + 1));
    if (!batch || !epochs) {
      throw usage_error("--epochs-table: '" + std::string(item) + "' in '" + std::string(text) +
                        "' is not BATCH:EPOCHS (e.g. 256:90,4096:131)");
    }
    points.push_back(stash::epochs_point{*batch, *epochs});
    if (comma == std::string_view::npos) { break; }
    pos = comma + 1;
  }
  try {
    return stash::statistical_efficiency::table(std::move(points));
  } catch (stash::logic_error const& e) {
    throw usage_error("--epochs-table: '" + std::string(text) + "': " + e.what());
  }
}

/// @brief Parses --ratio: a finite number >= 1 is typical, but anything positive is accepted
/// (a ratio below 1 models a codec that expands the data).
[[nodiscard]] inline double parse_ratio(std::string_view text)
{
  auto const value = detail::parse_decimal(text);
  if (!value || *value <= 0) {
    throw usage_error("--ratio: '" + std::string(text) +
                      "' is not a positive number (uncompressed / compressed bytes, e.g. 2.5)");
  }
  return *value;
}

/// @brief The ratio raw / zvc-encoded bytes over raw float32 files, summed over all of them.
/// Throws usage_error for a file that cannot be read, is not a regular file (a directory, a
/// FIFO), is empty or is not whole float32s.
[[nodiscard]] inline double measure_zvc_ratio(std::vector<std::string> const& files)
{
  std::uint64_t raw     = 0;
  std::uint64_t encoded = 0;
  for (auto const& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) { throw usage_error("--activations: cannot open '" + file + "'"); }
    // A directory opens, but reading it throws std::ios_base::failure from inside libstdc++ (found
    // by tests/fuzz/stash_plan_args); a FIFO or a device would block or never end.
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
      throw usage_error("--activations: '" + file + "' is not a regular file");
    }
    std::vector<char> bytes;
    try {
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } catch (std::ios_base::failure const& e) {
      throw usage_error("--activations: cannot read '" + file + "': " + e.what());
    }
    if (bytes.empty() || bytes.size() % sizeof(float) != 0) {
      throw usage_error("--activations: '" + file + "' has " + std::to_string(bytes.size()) +
                        " bytes, not a positive multiple of 4 (raw float32 expected)");
    }
    std::vector<float> values(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    // One buffer per file, as the offload path would compress one storage.
    auto const out = stash::host_encode_vector<stash::zvc<float>>(std::span<float const>(values));
    raw += bytes.size();
    encoded += out.size();
  }
  return stash::codec_ratio_of(raw, encoded);
}

/// @brief Parses --lossy: a comma-separated list of KIND=ENCODING, the storage kinds that may
/// cross the link in reduced precision (stash::encoding_options). KIND is `activations` (or
/// `act`); the planner keeps parameters, gradients, optimizer state, inputs and temporaries
/// lossless, so naming one of those is refused rather than ignored. ENCODING is fp16, bf16 or
/// fp8_e4m3.
/// @throws usage_error "--lossy: item N 'TEXT': <why>" for a malformed or unsupported item.
[[nodiscard]] inline stash::swap_encoding parse_lossy(std::string_view text)
{
  if (text.empty()) { throw usage_error("--lossy: empty list (expected e.g. activations=fp16)"); }
  std::optional<stash::swap_encoding> activations;
  std::size_t item = 0;
  for (std::size_t start = 0; start <= text.size(); ++item) {
    auto const end   = std::min(text.find(',', start), text.size());
    auto const piece = text.substr(start, end - start);
    start            = end + 1;
    auto const where =
        "--lossy: item " + std::to_string(item + 1) + " '" + std::string(piece) + "': ";
    auto const eq = piece.find('=');
    if (eq == std::string_view::npos) { throw usage_error(where + "expected KIND=ENCODING"); }
    auto const kind     = piece.substr(0, eq);
    auto const encoding = piece.substr(eq + 1);
    if (kind != "activations" && kind != "act") {
      constexpr std::array<std::string_view, 13> lossless = {
          "param",     "params", "parameters", "grad", "grads", "gradients",  "optstate",
          "optimizer", "input",  "inputs",     "temp", "temps", "temporaries"};
      if (std::find(lossless.begin(), lossless.end(), kind) != lossless.end()) {
        throw usage_error(where + "the planner weighs lossy encodings for activations only; '" +
                          std::string(kind) + "' stays lossless");
      }
      throw usage_error(where + "unknown storage kind '" + std::string(kind) +
                        "' (known: activations)");
    }
    std::optional<stash::swap_encoding> chosen;
    for (auto const e :
         {stash::swap_encoding::fp16, stash::swap_encoding::bf16, stash::swap_encoding::fp8_e4m3}) {
      if (stash::to_string(e) == encoding) { chosen = e; }
    }
    if (!chosen) {
      throw usage_error(where + "unknown lossy encoding '" + std::string(encoding) +
                        "' (known: fp16, bf16, fp8_e4m3)");
    }
    if (activations) { throw usage_error(where + "activations are already given an encoding"); }
    activations = chosen;
  }
  return *activations;
}

/// @brief Parses argv[1..argc). Throws usage_error for anything malformed; `help` is set for
/// -h/--help (the other arguments are then not checked further). Does not require FILEs.
[[nodiscard]] inline options parse_args(std::vector<std::string> const& args)
{
  options opt;
  std::optional<std::string> codec_name;
  std::optional<double> ratio;
  std::vector<std::string> activations;
  bool hw_given      = false;
  bool threads_given = false;
  bool options_done  = false;
  std::optional<std::string> cluster_spec;
  std::optional<stash::cluster> cluster;
  std::optional<stash::statistical_efficiency> efficiency;
  std::string efficiency_option;  // the option that set `efficiency`
  stash::projection_params params;
  std::vector<std::string> projection_options;  // given, for the "needs --cluster" message
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string const& arg = args[i];
    auto value             = [&]() -> std::string const& {
      if (i + 1 >= args.size()) { throw usage_error(arg + ": missing value"); }
      return args[++i];
    };
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      opt.files.push_back(arg);
    } else if (arg == "--") {
      options_done = true;
    } else if (arg == "-h" || arg == "--help") {
      opt.help = true;
      return opt;
    } else if (arg == "--json") {
      opt.json = true;
    } else if (arg == "--search-nodes") {
      opt.search_nodes = parse_search_nodes(value());
    } else if (arg == "--search-ms") {
      auto const cap = parse_milliseconds(value(), "--search-ms");
      opt.search_time_cap =
          cap.count() == 0 ? std::nullopt : std::optional<std::chrono::milliseconds>(cap);
    } else if (arg == "--no-times") {
      opt.times = false;
    } else if (arg == "--redrop") {
      opt.redrop = true;
    } else if (arg == "--no-redrop") {
      opt.redrop = false;
    } else if (arg == "--budget") {
      opt.budget = parse_budget(value());
    } else if (arg == "--policy") {
      auto const& name = value();
      auto const known = stash::swap_policy_names();
      if (name == "all") {
        opt.policies.assign(known.begin(), known.end());
      } else if (std::find(known.begin(), known.end(), name) != known.end()) {
        if (std::find(opt.policies.begin(), opt.policies.end(), name) == opt.policies.end()) {
          opt.policies.push_back(name);
        }
      } else {
        std::string list;
        for (auto const n : known) { list += (list.empty() ? "" : ", ") + std::string(n); }
        throw usage_error("--policy: unknown policy '" + name + "' (known: " + list + ", all)");
      }
    } else if (arg == "--hw") {
      auto const& name = value();
      try {
        (void)stash::hardware_preset(name);
      } catch (stash::logic_error const&) {
        throw usage_error("--hw: unknown hardware preset '" + name +
                          "' (known: " + stash::hardware_preset_names() + ")");
      }
      opt.hardware = name;
      hw_given     = true;
    } else if (arg == "--codec") {
      codec_name = value();
      if (codec_name->empty()) { throw usage_error("--codec: empty name"); }
    } else if (arg == "--ratio") {
      ratio = parse_ratio(value());
    } else if (arg == "--lossy") {
      opt.lossy_activations = parse_lossy(value());
    } else if (arg == "--activations") {
      // Takes every following argument up to the next option (or "--"): several files.
      while (i + 1 < args.size() && !(args[i + 1].size() >= 2 && args[i + 1][0] == '-')) {
        activations.push_back(args[++i]);
      }
      if (activations.empty()) { throw usage_error("--activations: missing FILE"); }
    } else if (arg == "--svg") {
      opt.svg = value();
    } else if (arg == "--frontier") {
      opt.frontier = true;
    } else if (arg == "--threads") {
      opt.threads   = static_cast<unsigned>(parse_count(value(), arg, 256));
      threads_given = true;
    } else if (arg == "--cluster") {
      cluster_spec = value();
      cluster      = parse_cluster(*cluster_spec);
    } else if (arg == "--gns" || arg == "--epochs-table") {
      auto const& text = value();
      if (efficiency) {
        throw usage_error(arg + ": the efficiency model is already set by " + efficiency_option +
                          "; give one of --gns and --epochs-table");
      }
      efficiency        = arg == "--gns" ? parse_gns(text) : parse_epochs_table(text);
      efficiency_option = arg;
      projection_options.push_back(arg);
    } else if (arg == "--dataset") {
      params.dataset_samples = parse_count(value(), arg);
      projection_options.push_back(arg);
    } else if (arg == "--replica-batch") {
      params.replica_batch = parse_count(value(), arg);
      projection_options.push_back(arg);
    } else if (arg == "--micro-batches") {
      params.micro_batches = static_cast<std::uint32_t>(parse_count(value(), arg, 1u << 20));
      projection_options.push_back(arg);
    } else if (arg == "--max-mp") {
      params.max_mp = static_cast<std::uint32_t>(parse_count(value(), arg, 1u << 20));
      projection_options.push_back(arg);
    } else {
      throw usage_error("unknown option '" + arg + "'");
    }
  }
  if (ratio && !activations.empty()) {
    throw usage_error("--ratio and --activations both set the codec ratio; give one");
  }
  if ((ratio || !activations.empty()) && !codec_name) {
    codec_name = "zvc";  // the codec --activations measures; a bare --ratio is labelled alike
  }
  if (opt.lossy_activations) {
    if (codec_name && *codec_name != "auto") {
      throw usage_error(
          "--lossy chooses an encoding per storage: it needs --codec auto (or no "
          "--codec), not --codec " +
          *codec_name);
    }
    codec_name = "auto";
  }
  if (codec_name && *codec_name == "auto") {
    if (ratio) {
      throw usage_error(
          "--codec auto chooses an encoding per storage; --ratio does not apply "
          "(--activations measures zvc's ratio for it)");
    }
    opt.auto_encodings = true;
    if (!activations.empty()) { opt.zvc_ratio = measure_zvc_ratio(activations); }
  } else if (codec_name) {
    if (!activations.empty()) {
      if (*codec_name != "zvc") {
        throw usage_error("--activations measures the host zvc codec, but --codec is '" +
                          *codec_name + "'; use --ratio R for other codecs");
      }
      opt.codec = codec_choice{*codec_name, measure_zvc_ratio(activations),
                               "measured on " + std::to_string(activations.size()) + " file" +
                                   (activations.size() == 1 ? "" : "s")};
    } else if (ratio) {
      opt.codec = codec_choice{*codec_name, *ratio, "fixed"};
    } else {
      throw usage_error("--codec " + *codec_name +
                        ": give its compression ratio with --ratio R, or --activations FILE... "
                        "to measure zvc's");
    }
  }
  if (cluster) {
    if (!efficiency) {
      throw usage_error(
          "--cluster needs an efficiency model: --gns S_MIN,B_NOISE or "
          "--epochs-table B:E,B:E,...");
    }
    if (opt.codec) {
      // Offloads in the projection pass through the same codec as in the simulation.
      params.cost.use_codec   = true;
      params.cost.codec_ratio = opt.codec->ratio;
    }
    opt.projection =
        projection_request{*cluster_spec, std::move(*cluster), std::move(*efficiency), params};
  } else if (!projection_options.empty()) {
    throw usage_error(projection_options.front() +
                      " only applies to the projection: add --cluster SPEC");
  }
  if (hw_given && opt.projection && !opt.swap_requested() && !opt.svg && !opt.frontier) {
    throw usage_error(
        "--hw sets the simulated device, not the cluster's: give hw=PRESET in the "
        "--cluster SPEC");
  }
  if (threads_given && !opt.frontier && !opt.swap_requested()) {
    throw usage_error(
        "--threads sets the worker threads of --frontier and of --policy search: add --frontier, "
        "--policy or --budget");
  }
  // The cost model only feeds the simulator, which runs for the policy section and --svg (and
  // the codec also the projection's offloads).
  bool const codec_unused = (opt.codec || opt.auto_encodings) && !opt.projection;
  if ((codec_unused || hw_given) && !opt.swap_requested() && !opt.svg && !opt.frontier) {
    throw usage_error(std::string(!codec_unused           ? "--hw"
                                  : opt.lossy_activations ? "--lossy"
                                                          : "--codec") +
                      " only affects simulated times: add --policy NAME|all, --budget or --svg");
  }
  return opt;
}

/// @brief The cost model the options describe.
[[nodiscard]] inline stash::cost_model make_cost_model(options const& opt)
{
  stash::cost_params params;
  if (opt.codec) {
    params.use_codec   = true;
    params.codec_ratio = opt.codec->ratio;
  }
  if (opt.zvc_ratio) { params.zvc_ratio = *opt.zvc_ratio; }
  return stash::cost_model(stash::hardware_preset(opt.hardware), params);
}

}  // namespace stash_plan
