// What the lifetime arena really takes when a swap policy offloads: each recorded trace is
// replayed through stash::allocator<lifetime_arena, Policy> on the host backend (worker threads,
// memcpy), and the arena's footprint is set against the schedule's planned device peak and the
// arena's footprint without swapping. Persistent storages (parameters, optimizer state) live
// outside the arena, so "arena + persistent" is what compares with the planned peak. Measured on
// the library's own code paths, at 1/SCALE of the recorded sizes; prints Markdown.
//
//   bench_arena_swap [--scale N] [--iterations N] [DATA_DIR]
#include <stash/allocator.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/vdnn.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace_driver.hpp>
#include <stash/trace/trace_reader.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using host_arena =
    stash::lifetime_arena<stash::host_upstream, stash::greedy_planner, stash::host_stream_order>;

struct outcome {
  std::uint64_t footprint{};       // arena bytes after the last iteration
  std::uint64_t persistent{};      // bytes allocated before the first iteration
  std::uint64_t planned_peak{};    // the schedule's device peak
  std::uint64_t fallbacks_last{};  // fallbacks in the last iteration
  std::uint64_t fence_waits{};
  std::uint64_t offloads{};
  std::uint64_t replans{};
  double seconds{};
};

template <class Policy>
outcome run(stash::trace const& t, std::uint64_t scale, int iterations)
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_arena pool;
  stash::allocator_options o;
  stash::allocator<host_arena, Policy, void, stash::host_backend> alloc(backend, pool, o);
  stash::trace_driver<decltype(alloc)> driver(alloc, t, s, scale);
  auto const t0 = std::chrono::steady_clock::now();
  driver.run(iterations - 1);
  auto const before = pool.stats().fallbacks;
  driver.run(1);
  backend.synchronize(s);
  alloc.synchronize();
  outcome r;
  r.seconds        = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.footprint      = pool.arena_bytes();
  r.persistent     = driver.persistent_bytes();
  r.planned_peak   = alloc.current_schedule().device_peak;
  r.fallbacks_last = pool.stats().fallbacks - before;
  r.fence_waits    = pool.fence_waits();
  r.offloads       = alloc.offload_statistics().offloads;
  r.replans        = pool.replans();
  return r;
}

double mib(double bytes) { return bytes / double(stash::MiB); }

}  // namespace

int main(int argc, char** argv)
{
  std::uint64_t scale = 16;
  int iterations      = 5;
  std::string data    = STASH_DATA_DIR;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--scale" && i + 1 < argc) {
      scale = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--iterations" && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else if (!a.empty() && a[0] != '-') {
      data = a;
    } else {
      std::fprintf(stderr, "usage: bench_arena_swap [--scale N] [--iterations N] [DATA_DIR]\n");
      return 2;
    }
  }
  if (scale == 0 || iterations < 4) {
    std::fprintf(
        stderr,
        "bench_arena_swap: --scale >= 1 and --iterations >= 4 (record, settle twice, replay)\n");
    return 2;
  }
  std::printf(
      "Arena footprint with swapping (host backend, sizes 1/%llu of the recording, %d iterations;"
      " MiB at recorded scale)\n\n",
      static_cast<unsigned long long>(scale), iterations);
  std::printf(
      "| trace | peak live L | persistent | arena, no swap | policy | planned device peak |"
      " arena + persistent | / planned | arena vs no swap | offloads | fence waits |"
      " fallbacks, last iter | replans | time |\n");
  std::printf("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  char const* traces[] = {"alexnet_b128", "vgg16_b32", "resnet18_b32", "mobilenet_v2_b32",
                          "transformer_encoder_b8"};
  for (char const* name : traces) {
    auto const t     = stash::read_trace(data + "/traces/" + name + ".trace");
    auto const L     = stash::analyze_lifetimes(t).peak_live_bytes;
    auto const base  = run<stash::no_swap>(t, scale, iterations);
    auto const up    = [&](std::uint64_t scaled) { return double(scaled) * double(scale); };
    auto const print = [&](char const* policy, outcome const& r) {
      double const total = up(r.footprint + r.persistent);
      std::printf(
          "| %s | %.1f | %.1f | %.1f | %s | %.1f | %.1f | %.3f | %+.1f%% | %llu | %llu | %llu | "
          "%llu | %.2f s |\n",
          name, mib(double(L)), mib(up(r.persistent)), mib(up(base.footprint)), policy,
          mib(up(r.planned_peak)), mib(total),
          r.planned_peak == 0 ? 0.0 : total / up(r.planned_peak),
          -100.0 * (1.0 - double(r.footprint) / double(base.footprint)),
          static_cast<unsigned long long>(r.offloads),
          static_cast<unsigned long long>(r.fence_waits),
          static_cast<unsigned long long>(r.fallbacks_last),
          static_cast<unsigned long long>(r.replans), r.seconds);
    };
    print("vdnn_conv", run<stash::vdnn_conv>(t, scale, iterations));
    print("vdnn_all", run<stash::vdnn_all>(t, scale, iterations));
    std::fflush(stdout);
  }
  return 0;
}
