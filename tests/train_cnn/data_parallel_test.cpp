// train_cnn's data-parallel bootstrap on the host: the rank environment of each launcher, the NCCL
// unique-id exchange through a file (threads of one process standing in for ranks), the sharding
// of global batches and the data-parallel flags.
#include <stash_tools/train_cnn/data_parallel.hpp>
#include <stash_tools/train_cnn/options.hpp>

#include "support/message_of.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace STASH_UNITY_ID {

namespace fs = std::filesystem;
using namespace train_cnn;
using stash::test::message_of;
using stash::test::temp_dir;
using namespace std::chrono_literals;

namespace {

env_lookup env_of(std::map<std::string, std::string> vars)
{
  return [vars = std::move(vars)](std::string const& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) { return std::nullopt; }
    return it->second;
  };
}

unique_id_bytes id_with(std::uint8_t seed)
{
  unique_id_bytes b{};
  for (std::size_t i = 0; i < b.size(); ++i) {
    b[i] = static_cast<std::uint8_t>(seed * 31 + i * 7);
  }
  return b;
}

void write_text(fs::path const& p, std::string const& text)
{
  std::ofstream f(p, std::ios::binary);
  f << text;
}

}  // namespace

// ---- rank environment ---------------------------------------------------------------------------

TEST_CASE("train_cnn data_parallel: no launcher variables is a single rank")
{
  rank_info const r = rank_from_environment(env_of({{"PATH", "/usr/bin"}, {"HOME", "/root"}}));
  CHECK(r.rank == 0);
  CHECK(r.world_size == 1);
  CHECK(r.local_rank == 0);
  CHECK(r.is_root());
  CHECK_FALSE(r.distributed());
  CHECK(r.launcher == known_launchers.size());
  CHECK(r.source.find("single rank") != std::string::npos);
}

TEST_CASE("train_cnn data_parallel: each launcher's variables")
{
  struct expected_ranks {
    std::map<std::string, std::string> vars;
    int rank, world, local;
    std::string_view launcher_word;
  };
  std::vector<expected_ranks> const cases = {
      {{{"STASH_RANK", "2"}, {"STASH_WORLD_SIZE", "4"}, {"STASH_LOCAL_RANK", "2"}},
       2,
       4,
       2,
       "stash"},
      {{{"OMPI_COMM_WORLD_RANK", "5"},
        {"OMPI_COMM_WORLD_SIZE", "8"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
       5,
       8,
       1,
       "Open MPI"},
      {{{"RANK", "3"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "3"}}, 3, 16, 3, "torchrun"},
      {{{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "3"}}, 7, 8, 3, "Slurm"},
      {{{"STASH_RANK", "0"}, {"STASH_WORLD_SIZE", "1"}}, 0, 1, 0, "stash"},
  };
  for (auto const& c : cases) {
    CAPTURE(c.launcher_word);
    rank_info const r = rank_from_environment(env_of(c.vars));
    CHECK(r.rank == c.rank);
    CHECK(r.world_size == c.world);
    CHECK(r.local_rank == c.local);
    CHECK(r.distributed() == (c.world > 1));
    REQUIRE(r.launcher < known_launchers.size());
    CHECK(known_launchers[r.launcher].launcher.find(c.launcher_word) != std::string_view::npos);
    // The source names every variable it read, with its value.
    for (auto const& [name, value] : c.vars) {
      CHECK(r.source.find(name + "=" + value) != std::string::npos);
    }
  }
}

TEST_CASE(
    "train_cnn data_parallel: precedence stash > mpirun > torchrun > Slurm; lower ones are not "
    "read")
{
  rank_info r = rank_from_environment(env_of({{"STASH_RANK", "1"},
                                              {"STASH_WORLD_SIZE", "2"},
                                              {"OMPI_COMM_WORLD_RANK", "6"},
                                              {"OMPI_COMM_WORLD_SIZE", "9"},
                                              {"RANK", "garbage"},
                                              {"SLURM_PROCID", "-3"}}));
  CHECK(r.rank == 1);
  CHECK(r.world_size == 2);
  r = rank_from_environment(env_of({{"OMPI_COMM_WORLD_RANK", "6"},
                                    {"OMPI_COMM_WORLD_SIZE", "9"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                    {"RANK", "1"},
                                    {"WORLD_SIZE", "2"},
                                    {"SLURM_PROCID", "0"},
                                    {"SLURM_NTASKS", "4"}}));
  CHECK(r.rank == 6);
  CHECK(r.world_size == 9);
  CHECK(r.local_rank == 2);
  r = rank_from_environment(
      env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}));
  CHECK(r.rank == 1);
  CHECK(r.world_size == 2);
  r = rank_from_environment(env_of({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}}));
  CHECK(r.rank == 3);
  CHECK(r.world_size == 4);
}

TEST_CASE("train_cnn data_parallel: local rank defaults to rank; empty variables count as unset")
{
  rank_info r = rank_from_environment(env_of({{"STASH_RANK", "3"}, {"STASH_WORLD_SIZE", "4"}}));
  CHECK(r.local_rank == 3);
  CHECK(r.source.find("STASH_LOCAL_RANK unset") != std::string::npos);
  r = rank_from_environment(
      env_of({{"STASH_RANK", ""}, {"STASH_WORLD_SIZE", ""}, {"RANK", "1"}, {"WORLD_SIZE", "3"}}));
  CHECK(r.rank == 1);
  CHECK(r.world_size == 3);
  r = rank_from_environment(
      env_of({{"STASH_RANK", "1"}, {"STASH_WORLD_SIZE", "2"}, {"STASH_LOCAL_RANK", ""}}));
  CHECK(r.local_rank == 1);
}

TEST_CASE(
    "train_cnn data_parallel: bad rank variables throw environment_error naming the variable and "
    "value")
{
  struct bad_env {
    std::map<std::string, std::string> vars;
    std::vector<std::string> says;  // all must appear in the message
  };
  std::vector<bad_env> const cases = {
      {{{"STASH_RANK", "abc"}, {"STASH_WORLD_SIZE", "2"}},
       {"STASH_RANK='abc'", "non-negative integer"}},
      {{{"STASH_RANK", "-1"}, {"STASH_WORLD_SIZE", "2"}}, {"STASH_RANK='-1'"}},
      {{{"STASH_RANK", "1.5"}, {"STASH_WORLD_SIZE", "2"}}, {"STASH_RANK='1.5'"}},
      {{{"STASH_RANK", " 1"}, {"STASH_WORLD_SIZE", "2"}}, {"STASH_RANK=' 1'"}},
      {{{"STASH_RANK", "0"}, {"STASH_WORLD_SIZE", "99999999999"}},
       {"STASH_WORLD_SIZE='99999999999'"}},
      {{{"STASH_RANK", "0"}, {"STASH_WORLD_SIZE", "0"}}, {"STASH_WORLD_SIZE=0", "out of range"}},
      {{{"STASH_RANK", "4"}, {"STASH_WORLD_SIZE", "4"}},
       {"STASH_RANK=4 is not below STASH_WORLD_SIZE=4"}},
      {{{"STASH_RANK", "1"}, {"STASH_WORLD_SIZE", "4"}, {"STASH_LOCAL_RANK", "4"}},
       {"STASH_LOCAL_RANK=4 is not below STASH_WORLD_SIZE=4"}},
      {{{"STASH_RANK", "1"}, {"STASH_WORLD_SIZE", "4"}, {"STASH_LOCAL_RANK", "x"}},
       {"STASH_LOCAL_RANK='x'"}},
      {{{"STASH_RANK", "1"}}, {"STASH_RANK is set (1)", "STASH_WORLD_SIZE is not"}},
      {{{"OMPI_COMM_WORLD_SIZE", "8"}},
       {"OMPI_COMM_WORLD_SIZE is set (8)", "OMPI_COMM_WORLD_RANK is not"}},
      {{{"OMPI_COMM_WORLD_RANK", "9"}, {"OMPI_COMM_WORLD_SIZE", "8"}},
       {"OMPI_COMM_WORLD_RANK=9 is not below OMPI_COMM_WORLD_SIZE=8"}},
      {{{"RANK", "0"}, {"WORLD_SIZE", "two"}}, {"WORLD_SIZE='two'"}},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "7"}}, {"SLURM_LOCALID=7"}},
  };
  for (auto const& c : cases) {
    CAPTURE(c.says.front());
    CHECK_THROWS_AS((void)rank_from_environment(env_of(c.vars)), environment_error);
    std::string const m = message_of([&] { (void)rank_from_environment(env_of(c.vars)); });
    for (auto const& s : c.says) { CHECK_MESSAGE(m.find(s) != std::string::npos, m); }
  }
}

TEST_CASE("train_cnn data_parallel: the run token comes from STASH_RUN_ID or the rank's launcher")
{
  auto token = [](std::map<std::string, std::string> vars) {
    auto const env = env_of(std::move(vars));
    return run_token_from_environment(env, rank_from_environment(env));
  };
  auto t = token({{"STASH_RANK", "0"},
                  {"STASH_WORLD_SIZE", "2"},
                  {"STASH_RUN_ID", "r42"},
                  {"SLURM_JOB_ID", "9"}});
  REQUIRE(t);
  CHECK(t->value == "r42");
  CHECK(t->source == "STASH_RUN_ID");
  // launch_dp.sh's variables without STASH_RUN_ID: no token (and no guess from an unrelated
  // launcher).
  CHECK_FALSE(token({{"STASH_RANK", "0"}, {"STASH_WORLD_SIZE", "2"}, {"SLURM_JOB_ID", "9"}}));
  t = token({{"OMPI_COMM_WORLD_RANK", "0"},
             {"OMPI_COMM_WORLD_SIZE", "2"},
             {"PMIX_NAMESPACE", "prterun-n1-123@1"}});
  REQUIRE(t);
  CHECK(t->value == "prterun-n1-123@1");
  CHECK(t->source == "PMIX_NAMESPACE");
  t = token({{"OMPI_COMM_WORLD_RANK", "0"},
             {"OMPI_COMM_WORLD_SIZE", "2"},
             {"OMPI_MCA_ess_base_jobid", "77"}});
  REQUIRE(t);
  CHECK(t->value == "77");
  t = token({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "none"}});
  CHECK_FALSE(t);
  t = token({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "abc"}});
  REQUIRE(t);
  CHECK(t->value == "abc");
  t = token({{"SLURM_PROCID", "0"},
             {"SLURM_NTASKS", "2"},
             {"SLURM_JOB_ID", "1234"},
             {"SLURM_STEP_ID", "3"}});
  REQUIRE(t);
  CHECK(t->value == "1234.3");
  CHECK(t->source == "SLURM_JOB_ID.SLURM_STEP_ID");
  CHECK_FALSE(token({}));
  CHECK_THROWS_AS((void)token({{"STASH_RUN_ID", "a\nb"}}), environment_error);
}

TEST_CASE("train_cnn data_parallel: the device of a rank")
{
  rank_info r;
  r.local_rank    = 3;
  r.world_size    = 8;
  auto const none = env_of({});
  CHECK(device_for(r, 4, none) == 3);
  // Each rank sees only its own GPU: its launcher restricted the visible devices.
  CHECK(device_for(r, 1, env_of({{"CUDA_VISIBLE_DEVICES", "GPU-5"}})) == 0);
  CHECK_THROWS_AS((void)device_for(r, 2, none), environment_error);
  CHECK(message_of([&] { (void)device_for(r, 2, none); }).find("local rank 3") !=
        std::string::npos);
}

TEST_CASE("train_cnn data_parallel: two ranks on one visible GPU are refused before NCCL starts")
{
  // Issue #15: every local rank used to map to device 0 on a one-GPU machine, and NCCL failed
  // much later with "Duplicate GPU detected".
  rank_info r;
  r.world_size    = 2;
  r.source        = "launch_dp.sh: STASH_RANK=1, STASH_WORLD_SIZE=2";
  auto const none = env_of({});
  CHECK(device_for(r, 1, none) == 0);  // local rank 0 owns the one GPU
  r.local_rank = 1;
  CHECK_THROWS_AS((void)device_for(r, 1, none), environment_error);
  auto const what = message_of([&] { (void)device_for(r, 1, none); });
  CHECK(what.find("local rank 1") != std::string::npos);
  CHECK(what.find("would share GPU 0") != std::string::npos);
  CHECK(what.find("Duplicate GPU detected") != std::string::npos);
  CHECK(what.find("CUDA_VISIBLE_DEVICES") != std::string::npos);
  // An empty CUDA_VISIBLE_DEVICES restricts nothing (and hides every GPU anyway).
  CHECK_THROWS_AS((void)device_for(r, 1, env_of({{"CUDA_VISIBLE_DEVICES", ""}})),
                  environment_error);
}

// ---- unique-id file
// -------------------------------------------------------------------------------

TEST_CASE("train_cnn data_parallel: the id file round-trips and a truncated one never parses")
{
  unique_id_bytes const id = id_with(5);
  std::string const text   = format_id_file("run-1 x", 4, id);
  std::string why;
  auto const c = parse_id_file(text, why);
  REQUIRE(c);
  CHECK(c->token == "run-1 x");
  CHECK(c->world_size == 4);
  CHECK(c->id == id);
  for (std::size_t n = 0; n < text.size(); ++n) {
    CAPTURE(n);
    CHECK_FALSE(parse_id_file(text.substr(0, n), why));
  }
  CHECK_FALSE(parse_id_file("hello\n", why));
  CHECK(why.find("not a stash NCCL id file") != std::string::npos);
  std::string upper = text;
  auto const at     = upper.find("\nid ") + 4;
  upper[at]         = 'A';
  CHECK_FALSE(parse_id_file(upper, why));
}

TEST_CASE("train_cnn data_parallel: rank 0 publishes, every other rank reads the same bytes")
{
  temp_dir dir;
  id_exchange x;
  x.file                   = dir.path / "nccl_id";
  x.token                  = "run-A";
  x.world_size             = 6;
  x.timeout                = 20s;
  unique_id_bytes const id = id_with(17);
  std::vector<unique_id_bytes> got(5);
  std::vector<std::string> errors(5);
  std::vector<std::thread> readers;
  for (int r = 1; r <= 5; ++r) {
    readers.emplace_back([&, r] {
      try {
        got[std::size_t(r - 1)] = wait_for_unique_id(x, r);
      } catch (std::exception const& e) {
        errors[std::size_t(r - 1)] = e.what();
      }
    });
  }
  std::this_thread::sleep_for(50ms);  // the readers are polling before the file exists
  std::thread writer([&] { publish_unique_id(x, id); });
  writer.join();
  for (auto& t : readers) { t.join(); }
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(errors[i].empty());
    CHECK(got[i] == id);
  }
  // Nothing but the id file is left (the temporary was renamed onto it).
  CHECK(dir.names() == std::vector<std::string>{"nccl_id"});
  // A reader that starts after the file is there gets it at once.
  CHECK(wait_for_unique_id(x, 3) == id);
  CHECK(remove_unique_id(x));
  CHECK(dir.names().empty());
}

TEST_CASE("train_cnn data_parallel: a stale id file from an earlier run is not taken")
{
  temp_dir dir;
  id_exchange x;
  x.file       = dir.path / "nccl_id";
  x.token      = "run-new";
  x.world_size = 4;
  x.timeout    = 20s;
  write_text(x.file,
             format_id_file("run-old", 4, id_with(1)));  // crashed earlier run, same world size
  unique_id_bytes const fresh = id_with(2);
  std::vector<unique_id_bytes> got(3);
  std::vector<std::thread> readers;
  for (int r = 1; r <= 3; ++r) {
    readers.emplace_back([&, r] { got[std::size_t(r - 1)] = wait_for_unique_id(x, r); });
  }
  std::this_thread::sleep_for(100ms);  // long enough for every reader to have seen the stale file
  publish_unique_id(x, fresh);
  for (auto& t : readers) { t.join(); }
  for (auto const& g : got) { CHECK(g == fresh); }

  // Same token but another world size is not this run's either.
  write_text(x.file, format_id_file("run-new", 8, id_with(3)));
  id_exchange quick = x;
  quick.timeout     = 50ms;
  CHECK_THROWS_AS((void)wait_for_unique_id(quick, 1), id_exchange_error);

  // Rank 0 removes only a file that holds its own run's id.
  write_text(x.file, format_id_file("run-other", 4, id_with(4)));
  CHECK_FALSE(remove_unique_id(x));
  CHECK(fs::exists(x.file));
}

TEST_CASE("train_cnn data_parallel: waiting past the timeout is a clear error")
{
  temp_dir dir;
  id_exchange x;
  x.file                 = dir.path / "nccl_id";
  x.token                = "run-B";
  x.world_size           = 2;
  x.timeout              = 150ms;
  auto const t0          = std::chrono::steady_clock::now();
  std::string const none = message_of([&] { (void)wait_for_unique_id(x, 1); });
  CHECK(std::chrono::steady_clock::now() - t0 >= 150ms);
  CHECK_MESSAGE(none.find("rank 1: timed out after 0.1 s") != std::string::npos, none);
  CHECK(none.find(x.file.string()) != std::string::npos);
  CHECK(none.find("no such file") != std::string::npos);
  CHECK_THROWS_AS((void)wait_for_unique_id(x, 1), id_exchange_error);

  write_text(x.file, format_id_file("run-A", 2, id_with(9)));
  std::string const stale = message_of([&] { (void)wait_for_unique_id(x, 1); });
  CHECK_MESSAGE(stale.find("another run (token 'run-A'") != std::string::npos, stale);
  CHECK(stale.find("this run's token is 'run-B'") != std::string::npos);

  write_text(x.file, "garbage\n");
  std::string const junk = message_of([&] { (void)wait_for_unique_id(x, 1); });
  CHECK_MESSAGE(junk.find("not a stash NCCL id file") != std::string::npos, junk);
}

TEST_CASE("train_cnn data_parallel: publishing into a missing folder names the path")
{
  temp_dir dir;
  id_exchange x;
  x.file  = dir.path / "no" / "such" / "nccl_id";
  x.token = "t";
  CHECK_THROWS_AS(publish_unique_id(x, id_with(0)), id_exchange_error);
  std::string const m = message_of([&] { publish_unique_id(x, id_with(0)); });
  CHECK(m.find(x.file.string()) != std::string::npos);
  CHECK(m.find("No such file") != std::string::npos);
}

// ---- sharding
// ---------------------------------------------------------------------------------------

TEST_CASE("train_cnn data_parallel: the ranks' slices of a global batch are disjoint and cover it")
{
  std::size_t const samples = 1000;
  std::vector<std::size_t> order(samples);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  for (int world : {1, 2, 3, 4, 8}) {
    for (std::size_t per_rank : {std::size_t{1}, std::size_t{7}, std::size_t{32}}) {
      CAPTURE(world);
      CAPTURE(per_rank);
      std::size_t const steps = steps_per_epoch(samples, per_rank, world);
      CHECK(steps == samples / (per_rank * std::size_t(world)));
      std::set<std::size_t> epoch_seen;
      for (std::size_t step = 0; step < steps; ++step) {
        std::multiset<std::size_t> step_seen;
        for (int r = 0; r < world; ++r) {
          rank_info ri;
          ri.rank          = r;
          ri.world_size    = world;
          auto const slice = rank_batch(order, step, per_rank, ri);
          CHECK(slice.size() == per_rank);
          step_seen.insert(slice.begin(), slice.end());
          // Deterministic: a pure function of the order, the step and the rank.
          auto const again = rank_batch(order, step, per_rank, ri);
          CHECK(std::equal(slice.begin(), slice.end(), again.begin(), again.end()));
        }
        // The union is exactly global batch `step`, each sample once.
        std::size_t const global = per_rank * std::size_t(world);
        std::multiset<std::size_t> const expected(
            order.begin() + std::ptrdiff_t(step * global),
            order.begin() + std::ptrdiff_t((step + 1) * global));
        CHECK(step_seen == expected);
        epoch_seen.insert(step_seen.begin(), step_seen.end());
      }
      CHECK(epoch_seen.size() ==
            steps * per_rank * std::size_t(world));  // no sample twice in an epoch
    }
  }
  // One rank slices exactly as the single-GPU loop always did: order[step * B, (step + 1) * B).
  rank_info const single;
  auto const s = rank_batch(order, 5, 32, single);
  CHECK(s.data() == order.data() + 5 * 32);
  rank_info last;
  last.rank       = 3;
  last.world_size = 4;
  CHECK_THROWS_AS((void)rank_batch(order, steps_per_epoch(samples, 32, 4), 32, last),
                  std::out_of_range);
}

TEST_CASE("train_cnn data_parallel: the test set splits evenly and completely")
{
  for (std::size_t count :
       {std::size_t{0}, std::size_t{3}, std::size_t{10}, std::size_t{10000}, std::size_t{10001}}) {
    for (int world : {1, 2, 3, 7, 16}) {
      CAPTURE(count);
      CAPTURE(world);
      std::size_t next = 0, smallest = count, largest = 0;
      for (int r = 0; r < world; ++r) {
        index_range const p = even_partition(count, r, world);
        CHECK(p.begin == next);  // contiguous, in rank order, no gap or overlap
        next += p.count;
        smallest = std::min(smallest, p.count);
        largest  = std::max(largest, p.count);
      }
      CHECK(next == count);
      CHECK(largest - smallest <= 1);
    }
  }
}

TEST_CASE("train_cnn data_parallel: the weight fingerprint sees a single flipped bit")
{
  std::vector<float> a(1000);
  std::iota(a.begin(), a.end(), 0.5f);
  std::vector<float> b = a;
  CHECK(fingerprint(a) == fingerprint(b));
  b[517] = std::nextafter(b[517], 1e9f);
  CHECK(fingerprint(a) != fingerprint(b));
  std::vector<float> const neg_zero{-0.0f}, pos_zero{0.0f};
  CHECK(fingerprint(neg_zero) != fingerprint(pos_zero));  // bitwise, not numeric, equality
}

// ---- flags
// ---------------------------------------------------------------------------------------------

TEST_CASE("train_cnn data_parallel: --nccl-id-file and --nccl-id-timeout")
{
  options o =
      parse_options({"data", "--nccl-id-file", "/shared/run1/id", "--nccl-id-timeout", "2.5"});
  CHECK(o.nccl_id_file == "/shared/run1/id");
  CHECK(o.nccl_id_timeout == doctest::Approx(2.5));
  o = parse_options({"data"});
  CHECK(o.nccl_id_file.empty());
  CHECK(o.nccl_id_timeout == doctest::Approx(120.0));
  CHECK_FALSE(o.nccl_always);
  CHECK(parse_options({"data", "--nccl-always"}).nccl_always);
  CHECK_THROWS_AS((void)parse_options({"data", "--nccl-id-file"}), usage_error);
  CHECK_THROWS_AS((void)parse_options({"data", "--nccl-id-file", ""}), usage_error);
  CHECK(message_of([] {
          (void)parse_options({"data", "--nccl-id-timeout", "0"});
        }).find("--nccl-id-timeout") != std::string::npos);
}

}  // namespace STASH_UNITY_ID
