// The facade's host-side cost: each recorded trace replayed through stash::allocator on the host
// backend, iteration after iteration, and the wall time per trace event (allocate, free, op,
// phase) of the replayed iterations, for each pool, without a schedule (no_swap) and with one
// (search_swap at 75% of the peak, whose offloads and prefetches then run on the host backend's
// worker threads). Sizes are scaled down (--scale) so the data itself costs little; what is left
// is the bookkeeping a training loop pays per call. Measured on this machine; prints Markdown.
//
//   bench_facade_overhead [--scale N] [--iterations N] [DATA_DIR]
#include <stash/allocator.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/pool/stream_order.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace_driver.hpp>
#include <stash/trace/trace_reader.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using host_arena =
    stash::lifetime_arena<stash::host_upstream, stash::greedy_planner, stash::host_stream_order>;
using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;

struct measured {
  double ns_per_event{};
  std::uint64_t events{};   // per iteration
  std::uint64_t entries{};  // of the schedule (offloads per iteration)
};

// Best of three timed rounds of `iterations` replayed iterations, after warm-up iterations that
// record, plan and let an iteration-aware pool settle.
template <class Pool, class Policy>
measured run(stash::trace const& t, std::uint64_t scale, int iterations, std::uint64_t budget)
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  Pool pool;
  stash::allocator_options o;
  o.device_budget = budget;
  stash::allocator<Pool, Policy, void, stash::host_backend> alloc(backend, pool, o);
  stash::trace_driver<decltype(alloc)> driver(alloc, t, s, scale);
  driver.run(5);
  backend.synchronize(s);
  // Events of one iteration: everything from the first phase marker on (the driver replays
  // those each iteration; what comes before is allocated once).
  auto const all    = t.events();
  auto const first  = std::find_if(all.begin(), all.end(), [](stash::trace_event const& e) {
    return e.kind == stash::event_kind::phase;
  });
  auto const events = static_cast<std::uint64_t>(all.end() - first);
  double best       = 1e300;
  for (int round = 0; round < 3; ++round) {
    auto const t0 = std::chrono::steady_clock::now();
    driver.run(iterations);
    backend.synchronize(s);
    double const ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ns);
  }
  alloc.synchronize();
  measured m;
  m.events       = events;
  m.ns_per_event = best / (static_cast<double>(iterations) * static_cast<double>(events));
  m.entries      = alloc.current_schedule().entries.size();
  return m;
}

}  // namespace

int main(int argc, char** argv)
try {
  std::uint64_t scale = 1024;
  int iterations      = 5;
  std::string data    = STASH_DATA_DIR;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
      scale = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else {
      data = argv[i];
    }
  }
  std::printf("scale 1/%llu, %d timed iterations per round, best of 3 rounds\n\n",
              static_cast<unsigned long long>(scale), iterations);
  std::printf(
      "| trace | events/iteration | arena, no schedule | arena, search_swap 75%% | caching, no "
      "schedule | caching, search_swap 75%% |\n|---|---:|---:|---:|---:|---:|\n");
  for (auto const* name : {"alexnet_b128", "vgg16_b32", "resnet18_b32", "mobilenet_v2_b32",
                           "transformer_encoder_b8", "squeezenet1_1_b64", "shufflenet_v2_x1_0_b64",
                           "efficientnet_b0_b32", "regnet_y_400mf_b64"}) {
    auto const t      = stash::read_trace(data + "/traces/" + name + ".trace");
    auto const budget = stash::analyze_lifetimes(t).peak_live_bytes / scale * 3 / 4;
    auto const a1     = run<host_arena, stash::no_swap>(t, scale, iterations, budget);
    auto const a2     = run<host_arena, stash::search_swap>(t, scale, iterations, budget);
    auto const c1     = run<host_caching, stash::no_swap>(t, scale, iterations, budget);
    auto const c2     = run<host_caching, stash::search_swap>(t, scale, iterations, budget);
    std::printf("| %s | %llu | %.0f ns | %.0f ns (%llu swaps) | %.0f ns | %.0f ns |\n", name,
                static_cast<unsigned long long>(a1.events), a1.ns_per_event, a2.ns_per_event,
                static_cast<unsigned long long>(a2.entries), c1.ns_per_event, c2.ns_per_event);
  }
  return 0;
} catch (std::exception const& e) {
  std::fprintf(stderr, "bench_facade_overhead: %s\n", e.what());
  return 1;
}
