// train_cnn's data-parallel bootstrap, host only (no CUDA, no NCCL types), so that the tests can
// run it on a CPU:
//   - which rank this process is, of how many, and its rank on the node, from the environment a
//     launcher sets (stash's own variables, Open MPI's mpirun, torchrun, Slurm's srun);
//   - the exchange of NCCL's unique id through a file every rank can read (rank 0 writes it, the
//     others wait for it), with a run token so that a file left by an earlier run is never taken;
//   - which samples of each global batch a rank trains on.
// The NCCL id travels as an opaque 128-byte array (NCCL_UNIQUE_ID_BYTES); nccl_comm.cuh checks
// the size against ncclUniqueId at compile time.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace train_cnn {

/// @brief The rank environment is unusable (a variable is malformed, out of range or missing its
/// partner); the message names the variable and its value. train_cnn exits 2 on it.
class environment_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief The NCCL unique id could not be written or did not arrive in time; the message names the
/// file and what was found there. train_cnn exits 1 on it.
class id_exchange_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief Looks an environment variable up; nullopt when unset. Tests pass their own.
using env_lookup = std::function<std::optional<std::string>(std::string const&)>;

/// @brief The process environment (std::getenv).
[[nodiscard]] inline env_lookup process_environment()
{
  return [](std::string const& name) -> std::optional<std::string> {
    char const* v =
        std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): read at start-up only
    if (v == nullptr) { return std::nullopt; }
    return std::string(v);
  };
}

/// @brief The variables one launcher sets, and the ones that identify one of its runs.
struct launcher_variables {
  std::string_view launcher;
  std::string_view rank;
  std::string_view world_size;
  std::string_view local_rank;
  /// Per-run identifiers this launcher sets (same on every rank, new for every run), tried in order
  /// after STASH_RUN_ID.
  std::array<std::string_view, 2> run_ids;
};

/// @brief The launchers train_cnn knows, in order of precedence: the first one with its rank or
/// world size variable set is used, the others are not looked at.
inline constexpr std::array<launcher_variables, 4> known_launchers = {{
    {"stash (launch_dp.sh or by hand)",
     "STASH_RANK",
     "STASH_WORLD_SIZE",
     "STASH_LOCAL_RANK",
     {"", ""}},
    {"mpirun (Open MPI)",
     "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK",
     {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", {"TORCHELASTIC_RUN_ID", ""}},
    {"Slurm (srun)", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", {"SLURM_JOB_ID", ""}},
}};

/// @brief Largest world size accepted (a sanity bound against typos, far above any real job).
inline constexpr int max_world_size = 1 << 20;

/// @brief Where this process sits in the data-parallel job.
struct rank_info {
  int rank             = 0;
  int world_size       = 1;
  int local_rank       = 0;  ///< rank on this node: picks the GPU
  std::string source   = "single rank (no launcher variables set)";  ///< which variables said so
  std::size_t launcher = known_launchers.size();  ///< index into known_launchers; size() when none

  /// @brief Rank 0 prints, writes the NCCL id and removes it again.
  [[nodiscard]] bool is_root() const noexcept { return rank == 0; }
  /// @brief More than one rank: there is a communicator to build.
  [[nodiscard]] bool distributed() const noexcept { return world_size > 1; }
};

namespace detail {

// A decimal integer in [lo, hi] from a variable: digits only, no sign, no spaces, no overflow.
inline int env_int(std::string_view name, std::string const& value, int lo, int hi)
{
  bool digits = !value.empty() && value.size() <= 9;
  for (char c : value) { digits = digits && c >= '0' && c <= '9'; }
  if (!digits) {
    throw environment_error(std::string(name) + "='" + value + "' is not a " +
                            (lo > 0 ? "positive" : "non-negative") + " integer");
  }
  long const v = std::stol(value);
  if (v < lo || v > hi) {
    throw environment_error(std::string(name) + "=" + value + " is out of range (" +
                            std::to_string(lo) + ".." + std::to_string(hi) + ")");
  }
  return static_cast<int>(v);
}

// An empty variable counts as unset: `STASH_RANK= train_cnn ...` is how a shell clears one.
inline std::optional<std::string> non_empty(env_lookup const& env, std::string_view name)
{
  if (name.empty()) { return std::nullopt; }
  auto v = env(std::string(name));
  if (v && v->empty()) { return std::nullopt; }
  return v;
}

}  // namespace detail

/// @brief This process's rank, world size and local rank from the environment (see
/// known_launchers for the variables and their precedence). Nothing set: a single rank. Throws
/// environment_error naming the variable when one is malformed, when a rank or world size is set
/// without its partner, or when rank or local rank is not below the world size. A launcher that
/// sets no local rank variable gets local rank = rank (one node).
[[nodiscard]] inline rank_info rank_from_environment(env_lookup const& env)
{
  for (std::size_t l = 0; l < known_launchers.size(); ++l) {
    auto const& vars = known_launchers[l];
    auto const rank  = detail::non_empty(env, vars.rank);
    auto const world = detail::non_empty(env, vars.world_size);
    if (!rank && !world) { continue; }
    if (!rank || !world) {
      auto const set   = rank ? vars.rank : vars.world_size;
      auto const unset = rank ? vars.world_size : vars.rank;
      throw environment_error(std::string(set) + " is set (" + (rank ? *rank : *world) + ") but " +
                              std::string(unset) + " is not: set both for " +
                              std::string(vars.launcher) + ", or neither for a single rank");
    }
    rank_info r;
    r.launcher   = l;
    r.world_size = detail::env_int(vars.world_size, *world, 1, max_world_size);
    r.rank       = detail::env_int(vars.rank, *rank, 0, max_world_size);
    if (r.rank >= r.world_size) {
      throw environment_error(std::string(vars.rank) + "=" + *rank + " is not below " +
                              std::string(vars.world_size) + "=" + *world +
                              " (ranks count from 0)");
    }
    r.source = std::string(vars.launcher) + ": " + std::string(vars.rank) + "=" + *rank + ", " +
               std::string(vars.world_size) + "=" + *world;
    if (auto const local = detail::non_empty(env, vars.local_rank)) {
      r.local_rank = detail::env_int(vars.local_rank, *local, 0, max_world_size);
      if (r.local_rank >= r.world_size) {
        throw environment_error(std::string(vars.local_rank) + "=" + *local + " is not below " +
                                std::string(vars.world_size) + "=" + *world);
      }
      r.source += ", " + std::string(vars.local_rank) + "=" + *local;
    } else {
      r.local_rank = r.rank;
      r.source +=
          " (" + std::string(vars.local_rank) + " unset: local rank = rank, one node assumed)";
    }
    return r;
  }
  return rank_info{};
}

/// @brief The GPU a rank uses: its local rank, or device 0 when the process sees a single device
/// and CUDA_VISIBLE_DEVICES is set (a launcher that gives each rank its own device). Throws
/// environment_error, before NCCL is started, when the local rank has no device of its own: in
/// particular when a second rank on the node would share device 0 with the first because the
/// process sees one GPU and nothing restricted its visibility (NCCL would fail later with
/// "Duplicate GPU detected").
[[nodiscard]] inline int device_for(rank_info const& r, int device_count, env_lookup const& env)
{
  if (r.local_rank < device_count) { return r.local_rank; }
  std::string const who = "local rank " + std::to_string(r.local_rank) + " (" + r.source + ")";
  if (device_count == 1) {
    if (detail::non_empty(env, "CUDA_VISIBLE_DEVICES")) { return 0; }
    throw environment_error(
        who +
        " would share GPU 0 with local rank 0: this process sees 1 CUDA device and "
        "CUDA_VISIBLE_DEVICES is unset, so every rank on this node would use the same GPU "
        "(NCCL: \"Duplicate GPU detected\"); start at most one rank per GPU, or give each "
        "rank its own CUDA_VISIBLE_DEVICES");
  }
  throw environment_error(who + " has no GPU: this process sees " + std::to_string(device_count) +
                          " CUDA devices; start at most one rank per GPU on each node");
}

/// @brief What tells this run's id file from any other's: a value every rank of one run shares
/// and no other run has.
struct run_token {
  std::string value;
  std::string source;  ///< the variable it came from
};

/// @brief The run token: STASH_RUN_ID when set (launch_dp.sh sets it), otherwise the per-run
/// identifier the rank's launcher sets (Open MPI: PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid;
/// torchrun: TORCHELASTIC_RUN_ID unless "none"; Slurm: SLURM_JOB_ID.SLURM_STEP_ID). nullopt when
/// there is none. A token may not hold control characters (it is one line of the id file).
[[nodiscard]] inline std::optional<run_token> run_token_from_environment(env_lookup const& env,
                                                                         rank_info const& r)
{
  auto checked = [](std::string value, std::string source) {
    for (char c : value) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        throw environment_error(
            source + " holds a control character; a run token must be one printable line");
      }
    }
    return run_token{std::move(value), std::move(source)};
  };
  if (auto v = detail::non_empty(env, "STASH_RUN_ID")) { return checked(*v, "STASH_RUN_ID"); }
  if (r.launcher >= known_launchers.size()) { return std::nullopt; }
  for (auto const name : known_launchers[r.launcher].run_ids) {
    auto v = detail::non_empty(env, name);
    if (!v || (name == "TORCHELASTIC_RUN_ID" && *v == "none")) { continue; }
    std::string source(name);
    if (name == "SLURM_JOB_ID") {
      // One job runs many steps (srun calls); the step tells them apart.
      if (auto step = detail::non_empty(env, "SLURM_STEP_ID")) {
        *v += "." + *step;
        source += ".SLURM_STEP_ID";
      }
    }
    return checked(*v, source);
  }
  return std::nullopt;
}

// ---- NCCL unique id exchange through a shared file
// ------------------------------------------------

/// @brief Bytes of ncclUniqueId (NCCL_UNIQUE_ID_BYTES).
inline constexpr std::size_t unique_id_size = 128;
/// @brief ncclUniqueId as opaque bytes.
using unique_id_bytes = std::array<std::uint8_t, unique_id_size>;

/// @brief Where and for which run the id is exchanged.
struct id_exchange {
  std::filesystem::path file;  ///< on a file system every rank sees
  std::string token;           ///< run_token::value
  int world_size = 1;
  std::chrono::milliseconds timeout{
      std::chrono::seconds(120)};  ///< how long a rank waits for rank 0
};

/// @brief An id file's content, once parsed.
struct id_file_content {
  std::string token;
  int world_size = 0;
  unique_id_bytes id{};
};

/// @brief First line of an id file.
inline constexpr std::string_view id_file_magic = "stash-nccl-unique-id 1";

/// @brief The id file's text: magic, token, world size, the id in hex, and an end marker (so a
/// truncated copy never parses).
[[nodiscard]] inline std::string format_id_file(std::string_view token, int world_size,
                                                unique_id_bytes const& id)
{
  static constexpr char hex[] = "0123456789abcdef";
  std::string s;
  s += id_file_magic;
  s += "\ntoken ";
  s += token;
  s += "\nworld " + std::to_string(world_size) + "\nid ";
  for (auto b : id) {
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  s += "\nend\n";
  return s;
}

/// @brief Parses an id file's text; nullopt (with `why` set) when it is not a complete one.
[[nodiscard]] inline std::optional<id_file_content> parse_id_file(std::string const& text,
                                                                  std::string& why)
{
  std::istringstream in(text);
  std::string line;
  auto field = [&](std::string_view key) -> std::optional<std::string> {
    if (!std::getline(in, line) || !line.starts_with(std::string(key) + " ")) {
      why = "no '" + std::string(key) + "' line";
      return std::nullopt;
    }
    return line.substr(key.size() + 1);
  };
  if (!std::getline(in, line) || line != id_file_magic) {
    why = "not a stash NCCL id file (first line is not '" + std::string(id_file_magic) + "')";
    return std::nullopt;
  }
  id_file_content c;
  auto token = field("token");
  if (!token) { return std::nullopt; }
  c.token    = *token;
  auto world = field("world");
  if (!world) { return std::nullopt; }
  try {
    c.world_size = detail::env_int("world", *world, 1, max_world_size);
  } catch (environment_error const& e) {
    why = e.what();
    return std::nullopt;
  }
  auto id = field("id");
  if (!id) { return std::nullopt; }
  if (id->size() != 2 * unique_id_size) {
    why = "the id has " + std::to_string(id->size()) + " hex digits, not " +
          std::to_string(2 * unique_id_size);
    return std::nullopt;
  }
  auto nibble = [](char ch) -> int {
    if (ch >= '0' && ch <= '9') { return ch - '0'; }
    if (ch >= 'a' && ch <= 'f') { return ch - 'a' + 10; }
    return -1;
  };
  for (std::size_t i = 0; i < unique_id_size; ++i) {
    int const hi = nibble((*id)[2 * i]), lo = nibble((*id)[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      why = "the id is not lowercase hex";
      return std::nullopt;
    }
    c.id[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  // The final newline too: a file cut anywhere, even just before it, does not parse.
  if (!std::getline(in, line) || line != "end" || !text.ends_with("\nend\n")) {
    why = "no 'end' line (truncated)";
    return std::nullopt;
  }
  return c;
}

/// @brief Rank 0: writes the id for this run. The text goes to a temporary file next to `file`
/// (same file system), is flushed to disk and renamed over `file`, so a reader sees either no
/// file, the previous one, or this one complete, never a partial write. Throws id_exchange_error
/// naming the path when it cannot.
inline void publish_unique_id(id_exchange const& x, unique_id_bytes const& id)
{
  namespace fs           = std::filesystem;
  std::string const text = format_id_file(x.token, x.world_size, id);
  std::random_device rd;
  fs::path tmp = x.file;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  auto fail = [&](std::string const& what) {
    int const err = errno;
    std::error_code ec;
    fs::remove(tmp, ec);
    throw id_exchange_error("rank 0: cannot write the NCCL unique id to " + x.file.string() + ": " +
                            what + ": " + std::strerror(err));
  };
  int const fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);  // NOLINT: POSIX varargs
  if (fd < 0) { fail("open " + tmp.string()); }
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t const n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) { continue; }
    if (n <= 0) {
      ::close(fd);
      fail("write " + tmp.string());
    }
    done += static_cast<std::size_t>(n);
  }
  // Readers on other nodes see the data no later than the name (NFS close-to-open).
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("fsync " + tmp.string());
  }
  if (::close(fd) != 0) { fail("close " + tmp.string()); }
  if (::rename(tmp.c_str(), x.file.c_str()) != 0) { fail("rename " + tmp.string()); }
}

/// @brief Ranks other than 0: waits until `file` holds an id written for this run (same token
/// and world size) and returns it. A file from another run (a different token or world size) or
/// one that does not parse is left alone and waited past. Polls with a growing interval (1 ms to
/// 100 ms). Throws id_exchange_error after `timeout`, saying what the file held last.
[[nodiscard]] inline unique_id_bytes wait_for_unique_id(id_exchange const& x, int rank)
{
  using clock         = std::chrono::steady_clock;
  auto const deadline = clock::now() + x.timeout;
  auto interval       = std::chrono::milliseconds(1);
  std::string last    = "no such file";
  for (;;) {
    std::ifstream in(x.file, std::ios::binary);
    if (in) {
      std::string const text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      std::string why;
      if (auto c = parse_id_file(text, why)) {
        if (c->token == x.token && c->world_size == x.world_size) { return c->id; }
        last = "an id from another run (token '" + c->token + "', world size " +
               std::to_string(c->world_size) + "; this run's token is '" + x.token +
               "', world size " + std::to_string(x.world_size) + ")";
      } else {
        last = "a file that is not a complete id: " + why;
      }
    }
    if (clock::now() >= deadline) {
      auto const ms = std::chrono::duration_cast<std::chrono::milliseconds>(x.timeout).count();
      throw id_exchange_error(
          "rank " + std::to_string(rank) + ": timed out after " + std::to_string(ms / 1000) + "." +
          std::to_string(ms % 1000 / 100) + " s waiting for rank 0 to write the NCCL id to " +
          x.file.string() + "; found " + last +
          ". Is rank 0 running with the same --nccl-id-file, on a file system every rank "
          "sees, and with the same run token?");
    }
    auto const left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    std::this_thread::sleep_for(std::clamp(left, std::chrono::milliseconds(0), interval));
    interval = std::min(interval * 2, std::chrono::milliseconds(100));
  }
}

/// @brief Rank 0, once every rank has joined the communicator (so has read the file): removes the
/// file if it still holds this run's id, leaving one that another run has written since. Never
/// throws; returns whether it removed it.
inline bool remove_unique_id(id_exchange const& x) noexcept
{
  try {
    std::ifstream in(x.file, std::ios::binary);
    if (!in) { return false; }
    std::string const text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string why;
    auto const c = parse_id_file(text, why);
    if (!c || c->token != x.token) { return false; }
    std::error_code ec;
    return std::filesystem::remove(x.file, ec);
  } catch (...) {
    return false;
  }
}

// ---- sharding -----------------------------------------------------------------------------------

/// @brief Steps in one epoch: whole global batches of `per_rank` x `world_size` samples (the last
/// partial global batch is dropped, so every step allocates the same tensors).
[[nodiscard]] inline std::size_t steps_per_epoch(std::size_t samples, std::size_t per_rank,
                                                 int world_size)
{
  std::size_t const global = per_rank * static_cast<std::size_t>(world_size);
  return global == 0 ? 0 : samples / global;
}

/// @brief The sample order of an epoch: a permutation of [0, count) seeded by (seed, epoch), the
/// same in every run and on every rank (both builds draw their batches from it).
[[nodiscard]] inline std::vector<std::size_t> epoch_order(std::size_t count, std::uint64_t seed,
                                                          int epoch)
{
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 rng(seed * 1000003u + std::uint64_t(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

/// @brief The samples rank `r` trains on in step `step`: global batch `step` is
/// order[step * G, (step + 1) * G) with G = per_rank x world size, and rank r takes its r-th
/// contiguous slice of `per_rank` samples. Every rank shuffles `order` alike (same seed and epoch),
/// so the slices of one step are disjoint and together are the global batch. Throws
/// std::out_of_range past the end of `order`.
[[nodiscard]] inline std::span<std::size_t const> rank_batch(std::span<std::size_t const> order,
                                                             std::size_t step, std::size_t per_rank,
                                                             rank_info const& r)
{
  std::size_t const at =
      (step * static_cast<std::size_t>(r.world_size) + static_cast<std::size_t>(r.rank)) * per_rank;
  if (at + per_rank > order.size()) {
    throw std::out_of_range("rank_batch: step " + std::to_string(step) + " of rank " +
                            std::to_string(r.rank) + " needs samples up to " +
                            std::to_string(at + per_rank) + " of " + std::to_string(order.size()));
  }
  return order.subspan(at, per_rank);
}

/// @brief A contiguous range [begin, begin + count).
struct index_range {
  std::size_t begin = 0;
  std::size_t count = 0;
};

/// @brief Rank r's part of `count` items split into `world_size` contiguous parts whose sizes
/// differ by at most one (the first count % world_size parts get the extra one): the test set
/// each rank evaluates.
[[nodiscard]] inline index_range even_partition(std::size_t count, int rank, int world_size)
{
  auto const w = static_cast<std::size_t>(world_size), r = static_cast<std::size_t>(rank);
  std::size_t const base = count / w, extra = count % w;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

/// @brief FNV-1a over the bytes of `values`: a fingerprint of a replica's weights, compared across
/// ranks to show that they stayed identical.
[[nodiscard]] inline std::uint64_t fingerprint(std::span<float const> values) noexcept
{
  std::uint64_t h = 14695981039346656037ull;
  for (float v : values) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 4; ++i) {
      h ^= (bits >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace train_cnn
