// train_cnn's command line, parsed on the host (no CUDA), so the tests can check it on a CPU.
#pragma once

#include <stash_tools/size.hpp>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace train_cnn {

/// @brief A bad command line; the message says which argument and why.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief The swap policies train_cnn instantiates (stash/swap/*.hpp). The last three also
/// recompute (they drop storages and re-run their producers): the shared network (cnn.hpp) gives
/// every layer op its re-run callable, in the CPU and the CUDA build alike.
enum class policy_kind : std::uint8_t {
  no_swap,
  vdnn_all,
  vdnn_conv,
  vdnn_dyn,
  auto_swap,
  search_swap,
  search,
  checkpoint,
  dtr
};
/// @brief How offloaded activations travel: raw copies, stash's zero-value compression
/// (lossless), or float32 rounded to fp16, bf16 or fp8 e4m3 (stash::precision, lossy); on the CPU
/// build also Gist's 1-bit mask where only a sign is read (bitmask) and the planner's per-tensor
/// choice (auto: 4-bit pool argmax, bitmask, zvc or raw), both lossless.
enum class codec_kind : std::uint8_t { none, zvc, fp16, bf16, fp8_e4m3, bitmask, auto_ };
/// @brief Where train_cnn runs: the GPU when one is found (automatic), or the one named.
enum class device_kind : std::uint8_t { automatic, cpu, cuda };
/// @brief The network --arch names (see cnn.hpp).
enum class cnn_arch : std::uint8_t { vgg, resnet };

inline constexpr std::array<std::string_view, 9> policy_names = {
    "no_swap",     "vdnn_all", "vdnn_conv",  "vdnn_dyn", "auto_swap",
    "search_swap", "search",   "checkpoint", "dtr"};

/// @brief Whether the policy plans recomputes (keep / swap / recompute), not only swaps.
[[nodiscard]] constexpr bool recomputes(policy_kind p) noexcept
{
  return p == policy_kind::search || p == policy_kind::checkpoint || p == policy_kind::dtr;
}
inline constexpr std::array<std::string_view, 7> codec_names = {
    "none", "zvc", "fp16", "bf16", "fp8_e4m3", "bitmask", "auto"};

/// @brief Whether the codec rounds what it stores (main.cu checks this against the stash type's
/// `lossless` at compile time).
[[nodiscard]] constexpr bool is_lossy(codec_kind c) noexcept
{
  return c == codec_kind::fp16 || c == codec_kind::bf16 || c == codec_kind::fp8_e4m3;
}

/// @brief What --check compares between the run without offload and the run with it.
enum class check_kind : std::uint8_t {
  bitwise,   ///< lossless codec: every weight must be bitwise identical
  accuracy,  ///< lossy codec: test accuracies may differ by at most --accuracy-margin points
};

/// @brief The comparison --check makes for `c`: a lossy codec cannot keep the weights bitwise.
[[nodiscard]] constexpr check_kind check_kind_for(codec_kind c) noexcept
{
  return is_lossy(c) ? check_kind::accuracy : check_kind::bitwise;
}

/// @brief --check-steps when not given: 50 steps prove a bitwise comparison (the first difference
/// would persist), while an accuracy comparison needs a model past the steep start of its learning
/// curve, where a small perturbation moves test accuracy by whole points: one epoch.
inline constexpr long default_bitwise_check_steps = 50;

[[nodiscard]] inline std::string_view to_string(policy_kind p) noexcept
{
  return policy_names[static_cast<std::size_t>(p)];
}
[[nodiscard]] inline std::string_view to_string(codec_kind c) noexcept
{
  return codec_names[static_cast<std::size_t>(c)];
}

/// @brief Everything the command line sets.
struct options {
  std::string data_dir;  ///< folder with the IDX files (plain or .gz)
  policy_kind policy = policy_kind::vdnn_conv;
  codec_kind codec   = codec_kind::none;
  std::optional<std::uint64_t> budget;   ///< emulated device size (bytes); none: the whole GPU
  std::optional<double> budget_percent;  ///< --budget P%: P percent of the recorded step's peak
  device_kind device = device_kind::automatic;
  cnn_arch arch      = cnn_arch::vgg;
  bool json          = false;  ///< CPU build: one JSON object on stdout instead of the text
  long every         = 50;     ///< CPU build: a progress line every N steps
  std::string trace_out;       ///< CPU build: write the recorded first step's trace here
  int batch          = 128;
  int width          = 1;  ///< channel / unit multiplier of the network
  int epochs         = 2;
  long max_steps     = 0;  ///< per epoch; 0: the whole training set
  double lr          = 0.02;
  double momentum    = 0.9;
  std::uint64_t seed = 1;
  bool check         = false;       ///< run with and without offload and compare (check_kind_for)
  std::optional<long> check_steps;  ///< none: check_steps_for's default
  double accuracy_margin = 1.0;     ///< --check with a lossy codec: allowed |test acc diff|, points
  int progress           = -1;      ///< -1: when stderr is a terminal; 0 off; 1 on
  std::string nccl_id_file;         ///< data parallel: where rank 0 leaves NCCL's unique id
  double nccl_id_timeout = 120;     ///< seconds a rank waits for that file
  bool nccl_always       = false;   ///< a communicator and its all-reduce even with one rank
  bool help              = false;
};

/// @brief The usage text.
[[nodiscard]] inline std::string usage()
{
  return "usage: train_cnn DATA_DIR [options]\n"
         "  DATA_DIR           folder with Fashion-MNIST's IDX files, plain or .gz\n"
         "                     (apt-get install dataset-fashion-mnist: "
         "/usr/share/datasets/fashion-mnist)\n"
         "  --policy NAME      swap policy: no_swap, vdnn_all, vdnn_conv (default), vdnn_dyn, "
         "auto_swap,\n"
         "                     search_swap; CPU build also search (keep / swap / recompute),\n"
         "                     checkpoint, dtr (they re-run layers instead of keeping outputs)\n"
         "  --codec NAME       none or raw (raw copies, default), zvc (zero-value compression on "
         "the "
         "GPU;\n"
         "                     both lossless), or fp16, bf16, fp8_e4m3 (activations rounded on "
         "the\n"
         "                     GPU to that format while they are off the device: lossy);\n"
         "                     CPU build: none, zvc, bitmask (Gist's 1-bit ReLU mask where only\n"
         "                     the sign is read), auto (the planner's per-tensor choice: pool\n"
         "                     argmax, bitmask, zvc or raw; all lossless), and fp16, bf16,\n"
         "                     fp8_e4m3 (auto's lossless choices, that format for the other\n"
         "                     activations: lossy)\n"
         "  --device cpu|cuda  where to train (default: cuda when a GPU is found, else cpu;\n"
         "                     the CPU build runs oneDNN and needs --device cpu or no GPU)\n"
         "  --arch vgg|resnet  the network (resnet: batch norm and residual adds; CPU build)\n"
         "  --json             CPU build: print one JSON object (progress, summary) instead\n"
         "  --every N          CPU build: a progress line every N steps (default 50)\n"
         "  --trace-out PATH   CPU build: write the recorded first step as a stash trace\n"
         "  --budget BYTES|P%  (P%: P percent of the recorded step's peak, CPU build)\n"
         "                     emulate a GPU of this size (e.g. 64MiB, 1.5GiB, 200000000): the "
         "swap\n"
         "                     policy plans for it, and from the second step on (the first is\n"
         "                     recorded without offload) device bytes in use may not exceed it\n"
         "  --batch N          mini-batch size (default 128)\n"
         "  --width N          multiply every layer's channels / units by N (default 1)\n"
         "  --epochs N         epochs (default 2)\n"
         "  --steps N          at most N steps per epoch (default: the whole training set)\n"
         "  --lr X             SGD learning rate (default 0.02)\n"
         "  --momentum X       SGD momentum (default 0.9)\n"
         "  --seed N           shuffling and initialisation seed (default 1)\n"
         "  --check            train --check-steps steps without offload and with the chosen\n"
         "                     policy/codec, deterministic cuDNN algorithms, and compare: with a\n"
         "                     lossless codec the weights bitwise, with a lossy one the test\n"
         "                     accuracies (exit 1 when they differ / differ by more than the "
         "margin)\n"
         "  --check-steps N    steps of --check (default 50; one epoch with a lossy codec)\n"
         "  --accuracy-margin PP  --check with a lossy codec: the largest allowed difference in "
         "test\n"
         "                     accuracy, in percentage points (default 1.0; 0 to 100; a lossless\n"
         "                     codec is compared bitwise and does not use it)\n"
         "  --progress/--no-progress  progress bar on stderr (default: when stderr is a terminal)\n"
         "  --nccl-id-file PATH  data parallel (rank and world size from "
         "STASH_RANK/STASH_WORLD_SIZE,\n"
         "                     mpirun, torchrun or srun variables): the file, on a file system "
         "every\n"
         "                     rank sees, through which rank 0 hands NCCL's unique id to the "
         "others\n"
         "                     (launch_dp.sh passes a fresh one; see README.md)\n"
         "  --nccl-id-timeout S  seconds a rank waits for rank 0's id file (default 120)\n"
         "  --nccl-always      with a single rank too, build the NCCL communicator and all-reduce\n"
         "                     every step (tests the data-parallel path on one GPU: the weights\n"
         "                     must be bitwise those of a run without it)\n"
         "  --help\n";
}

/// @brief Bytes in the tools' one size grammar (stash_tools::parse_size: e.g. 200000000, 64MiB,
/// 64M, 1.5GiB, 2GB). A budget of zero bytes is refused.
/// @param text The size.
/// @param what The option, for the error.
/// @throws usage_error "<what>: '<text>' <why>" for anything else.
[[nodiscard]] inline std::uint64_t parse_bytes(std::string_view text,
                                               std::string_view what = "--budget")
{
  std::uint64_t bytes = 0;
  try {
    bytes = stash_tools::parse_size(text);
  } catch (stash_tools::size_error const& e) {
    throw usage_error(std::string(what) + ": '" + std::string(text) + "' " + e.what() +
                      " (expected " + std::string(stash_tools::size_examples) + ")");
  }
  if (bytes == 0) {
    throw usage_error(std::string(what) + ": '" + std::string(text) + "' is zero bytes");
  }
  return bytes;
}

/// @brief A positive integer option.
[[nodiscard]] inline long parse_positive(std::string_view text, std::string_view what, long max)
{
  long v               = 0;
  auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < 1 || v > max) {
    throw usage_error(std::string(what) + ": '" + std::string(text) + "' is not an integer in 1.." +
                      std::to_string(max));
  }
  return v;
}

/// @brief A real option in [lo, hi].
[[nodiscard]] inline double parse_real(std::string_view text, std::string_view what, double lo,
                                       double hi)
{
  double v             = 0;
  auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || !(v >= lo && v <= hi)) {
    // %g: the bounds as the user would type them ("[0, 100]", not "[0.000000, 100.000000]").
    std::array<char, 64> bounds{};
    std::snprintf(bounds.data(), bounds.size(), "[%g, %g]", lo, hi);
    throw usage_error(std::string(what) + ": '" + std::string(text) + "' is not a number in " +
                      bounds.data());
  }
  return v;
}

/// @brief The policy called `name`; usage_error listing the known ones otherwise.
[[nodiscard]] inline policy_kind parse_policy(std::string_view name)
{
  std::string known;
  for (std::size_t i = 0; i < policy_names.size(); ++i) {
    if (policy_names[i] == name) { return static_cast<policy_kind>(i); }
    known += (i == 0 ? "" : ", ") + std::string(policy_names[i]);
  }
  throw usage_error("--policy: unknown swap policy '" + std::string(name) + "' (known: " + known +
                    ")");
}

/// @brief The codec called `name`; usage_error listing the known ones otherwise.
[[nodiscard]] inline codec_kind parse_codec(std::string_view name)
{
  if (name == "raw") { return codec_kind::none; }
  for (std::size_t i = 0; i < codec_names.size(); ++i) {
    if (codec_names[i] == name) { return static_cast<codec_kind>(i); }
  }
  std::string known;
  for (std::size_t i = 0; i < codec_names.size(); ++i) {
    known += (i == 0 ? "" : ", ") + std::string(codec_names[i]);
  }
  throw usage_error("--codec: unknown codec '" + std::string(name) + "' (known: " + known +
                    "; raw is none; train_cnn instantiates only these)");
}

/// @brief The steps --check trains: --check-steps when given, otherwise 50 for a bitwise
/// comparison and one epoch (`steps_per_epoch`) for an accuracy comparison.
[[nodiscard]] inline long check_steps_for(options const& o, long steps_per_epoch) noexcept
{
  if (o.check_steps) { return *o.check_steps; }
  return check_kind_for(o.codec) == check_kind::accuracy ? steps_per_epoch
                                                         : default_bitwise_check_steps;
}

/// @brief Why the CUDA build cannot run `o` (empty: it can): the options only the CPU build has.
[[nodiscard]] inline std::string cpu_only_option(options const& o)
{
  if (o.codec == codec_kind::bitmask || o.codec == codec_kind::auto_) {
    return "--codec " + std::string(to_string(o.codec));
  }
  if (o.budget_percent) { return "--budget P%"; }
  if (o.json) { return "--json"; }
  if (!o.trace_out.empty()) { return "--trace-out"; }
  return {};
}

/// @brief Parses the arguments after the program name.
[[nodiscard]] inline options parse_options(std::vector<std::string> const& args)
{
  options o;
  bool have_dir = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string const& a = args[i];
    auto value           = [&]() -> std::string const& {
      if (i + 1 >= args.size()) { throw usage_error(a + ": needs a value"); }
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--policy") {
      o.policy = parse_policy(value());
    } else if (a == "--codec") {
      o.codec = parse_codec(value());
    } else if (a == "--budget") {
      std::string const& v = value();
      if (!v.empty() && v.back() == '%') {
        o.budget_percent = parse_real(std::string_view(v).substr(0, v.size() - 1), a, 1.0, 100.0);
      } else {
        o.budget = parse_bytes(v);
      }
    } else if (a == "--device") {
      std::string const& v = value();
      if (v != "cpu" && v != "cuda") {
        throw usage_error("--device: '" + v + "' is not cpu or cuda");
      }
      o.device = v == "cpu" ? device_kind::cpu : device_kind::cuda;
    } else if (a == "--arch") {
      std::string const& v = value();
      if (v != "vgg" && v != "resnet") {
        throw usage_error("--arch: '" + v + "' is not vgg or resnet");
      }
      o.arch = v == "vgg" ? cnn_arch::vgg : cnn_arch::resnet;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--every") {
      o.every = parse_positive(value(), a, 1L << 40);
    } else if (a == "--trace-out") {
      o.trace_out = value();
    } else if (a == "--batch") {
      o.batch = static_cast<int>(parse_positive(value(), a, 65536));
    } else if (a == "--width") {
      o.width = static_cast<int>(parse_positive(value(), a, 64));
    } else if (a == "--epochs") {
      o.epochs = static_cast<int>(parse_positive(value(), a, 100000));
    } else if (a == "--steps") {
      o.max_steps = parse_positive(value(), a, 1L << 40);
    } else if (a == "--lr") {
      o.lr = parse_real(value(), a, 0.0, 10.0);
    } else if (a == "--momentum") {
      o.momentum = parse_real(value(), a, 0.0, 0.999999);
    } else if (a == "--seed") {
      o.seed = static_cast<std::uint64_t>(parse_positive(value(), a, 1L << 62));
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--check-steps") {
      o.check_steps = parse_positive(value(), a, 1L << 30);
    } else if (a == "--accuracy-margin") {
      o.accuracy_margin = parse_real(value(), a, 0.0, 100.0);
    } else if (a == "--progress") {
      o.progress = 1;
    } else if (a == "--no-progress") {
      o.progress = 0;
    } else if (a == "--nccl-id-file") {
      o.nccl_id_file = value();
      if (o.nccl_id_file.empty()) { throw usage_error("--nccl-id-file: the path is empty"); }
    } else if (a == "--nccl-always") {
      o.nccl_always = true;
    } else if (a == "--nccl-id-timeout") {
      o.nccl_id_timeout = parse_real(value(), a, 0.001, 86400.0);
    } else if (a.starts_with("-")) {
      throw usage_error("unknown option '" + a + "' (see --help)");
    } else if (!have_dir) {
      o.data_dir = a;
      have_dir   = true;
    } else {
      throw usage_error("unexpected argument '" + a + "': only one DATA_DIR is taken");
    }
  }
  if (!o.help && !have_dir) {
    throw usage_error(
        "missing DATA_DIR (Fashion-MNIST's folder; apt-get install dataset-fashion-mnist "
        "puts it in /usr/share/datasets/fashion-mnist)");
  }
  return o;
}

}  // namespace train_cnn
