/**
 * @file options.hpp
 * @brief stash-plan's command line: the options struct, the parsers of sizes, budgets and
 * numbers, and the codec-ratio measurement behind `--activations`.
 *
 * Parsing never prints or exits: a bad command line throws stash_plan::usage_error, whose
 * message names the option and the offending text, so main() can print it with the usage and
 * tests can check it.
 */
#pragma once

#include <stash/codec/codec.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/swap/policy_registry.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace stash_plan {

/// @brief A bad command line (unknown option, missing or malformed value). what() says which
/// option and what was wrong with its value.
class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// @brief A device-memory budget: absolute bytes, or a share of the no_swap peak of each input.
struct budget_spec {
  std::optional<std::uint64_t> bytes;  ///< set for an absolute budget
  double percent{0};                   ///< used when `bytes` is unset: 70 means 70 %

  /// @brief The budget for an input whose no_swap peak is `baseline_peak`.
  [[nodiscard]] std::uint64_t resolve(std::uint64_t baseline_peak) const
  {
    if (bytes) { return *bytes; }
    return static_cast<std::uint64_t>(
      std::floor(static_cast<double>(baseline_peak) * percent / 100.0));
  }
};

/// @brief The codec assumed for offloaded data: a label and the ratio uncompressed / wire bytes.
struct codec_choice {
  std::string name;    ///< what --codec said ("zvc", ...)
  double ratio{1.0};   ///< fixed by --ratio or measured from --activations
  std::string source;  ///< "fixed" or "measured on N files"
};

/// @brief Everything the command line asks for.
struct options {
  bool json = false;
  std::vector<std::string> files;
  std::chrono::milliseconds search_budget{1000};  ///< per input file
  std::optional<budget_spec> budget;               ///< --budget
  std::vector<std::string> policies;               ///< --policy (expanded for "all")
  std::string hardware = "pcie3_x16";              ///< --hw
  std::optional<codec_choice> codec;               ///< --codec with --ratio / --activations
  std::optional<std::string> svg;                  ///< --svg FILE
  bool help = false;                               ///< -h / --help
  bool planners = true;  ///< run the planner section (always from the command line; tests may skip it)

  /// @brief True when the swap-policy section was asked for (--policy or --budget).
  [[nodiscard]] bool swap_requested() const noexcept { return budget.has_value() || !policies.empty(); }
};

namespace detail {

inline std::string lowercase(std::string_view text)
{
  std::string out(text);
  for (auto& c : out) { c = static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
  return out;
}

// A finite non-negative decimal number filling all of `text` (no sign, no hex, no exponent
// surprises such as "inf"), or nullopt.
inline std::optional<double> parse_decimal(std::string_view text)
{
  if (text.empty()) { return std::nullopt; }
  bool dot = false;
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
  return std::strtod(copy.c_str(), nullptr);
}

}  // namespace detail

/// @brief Parses a size: a number with an optional unit B, KiB, MiB, GiB, TiB (powers of 1024)
/// or KB, MB, GB, TB (powers of 1000), case-insensitive, optionally separated by one space.
/// "1.5GiB" is allowed; the result is rounded down to whole bytes. `what` names the option in
/// the error.
[[nodiscard]] inline std::uint64_t parse_bytes(std::string_view text, std::string_view what)
{
  auto fail = [&]() -> std::uint64_t {
    throw usage_error(std::string(what) + ": '" + std::string(text) +
                      "' is not a size (expected e.g. 1048576, 512MiB, 6GiB, 8GB)");
  };
  auto const split = text.find_first_not_of("0123456789.");
  auto const number = detail::parse_decimal(text.substr(0, split));
  if (!number) { return fail(); }
  std::string_view unit = split == std::string_view::npos ? std::string_view{} : text.substr(split);
  if (!unit.empty() && unit.front() == ' ') { unit.remove_prefix(1); }
  auto const u = detail::lowercase(unit);
  double scale = 0;
  if (u.empty() || u == "b") {
    scale = 1;
  } else if (u == "kib") {
    scale = 1024.0;
  } else if (u == "mib") {
    scale = 1024.0 * 1024;
  } else if (u == "gib") {
    scale = 1024.0 * 1024 * 1024;
  } else if (u == "tib") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else if (u == "kb") {
    scale = 1e3;
  } else if (u == "mb") {
    scale = 1e6;
  } else if (u == "gb") {
    scale = 1e9;
  } else if (u == "tb") {
    scale = 1e12;
  } else {
    return fail();
  }
  double const bytes = std::floor(*number * scale);
  // 2^64 is exactly representable; anything at or above it does not fit.
  if (!(bytes < 18446744073709551616.0)) {
    throw usage_error(std::string(what) + ": '" + std::string(text) + "' is too large");
  }
  return static_cast<std::uint64_t>(bytes);
}

/// @brief Parses --budget: a size (see parse_bytes) or a percentage "70%" of the no_swap peak.
/// A zero budget is refused: no iteration runs in zero bytes.
[[nodiscard]] inline budget_spec parse_budget(std::string_view text)
{
  budget_spec spec;
  if (!text.empty() && text.back() == '%') {
    auto const percent = detail::parse_decimal(text.substr(0, text.size() - 1));
    if (!percent) {
      throw usage_error("--budget: '" + std::string(text) +
                        "' is not a percentage (expected e.g. 70%)");
    }
    if (*percent <= 0) {
      throw usage_error("--budget: '" + std::string(text) + "' must be more than 0%");
    }
    spec.percent = *percent;
    return spec;
  }
  spec.bytes = parse_bytes(text, "--budget");
  if (*spec.bytes == 0) { throw usage_error("--budget: '" + std::string(text) + "' is zero bytes"); }
  return spec;
}

/// @brief Parses a positive whole number of milliseconds for --search-ms.
[[nodiscard]] inline std::chrono::milliseconds parse_milliseconds(std::string_view text,
                                                                  std::string_view what)
{
  bool const digits = !text.empty() && text.size() <= 9 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    throw usage_error(std::string(what) + ": '" + std::string(text) +
                      "' is not a whole number of milliseconds (at most 9 digits)");
  }
  return std::chrono::milliseconds(std::stoll(std::string(text)));
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
/// Throws usage_error for a file that cannot be read, is empty or is not whole float32s.
[[nodiscard]] inline double measure_zvc_ratio(std::vector<std::string> const& files)
{
  std::uint64_t raw = 0;
  std::uint64_t encoded = 0;
  for (auto const& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) { throw usage_error("--activations: cannot open '" + file + "'"); }
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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

/// @brief Parses argv[1..argc). Throws usage_error for anything malformed; `help` is set for
/// -h/--help (the other arguments are then not checked further). Does not require FILEs.
[[nodiscard]] inline options parse_args(std::vector<std::string> const& args)
{
  options opt;
  std::optional<std::string> codec_name;
  std::optional<double> ratio;
  std::vector<std::string> activations;
  bool hw_given     = false;
  bool options_done = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string const& arg = args[i];
    auto value = [&]() -> std::string const& {
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
    } else if (arg == "--search-ms") {
      opt.search_budget = parse_milliseconds(value(), "--search-ms");
    } else if (arg == "--budget") {
      opt.budget = parse_budget(value());
    } else if (arg == "--policy") {
      auto const& name  = value();
      auto const known  = stash::swap_policy_names();
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
    } else if (arg == "--activations") {
      // Takes every following argument up to the next option (or "--"): several files.
      while (i + 1 < args.size() && !(args[i + 1].size() >= 2 && args[i + 1][0] == '-')) {
        activations.push_back(args[++i]);
      }
      if (activations.empty()) { throw usage_error("--activations: missing FILE"); }
    } else if (arg == "--svg") {
      opt.svg = value();
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
  if (codec_name) {
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
  // The cost model only feeds the simulator, which runs for the policy section and --svg.
  if ((opt.codec || hw_given) && !opt.swap_requested() && !opt.svg) {
    throw usage_error(std::string(opt.codec ? "--codec" : "--hw") +
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
  return stash::cost_model(stash::hardware_preset(opt.hardware), params);
}

}  // namespace stash_plan
