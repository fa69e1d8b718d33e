// Host-side microbenchmark: allocate/deallocate pairs per second when a real training step's
// allocation sequence is replayed through lifetime_arena (after it has learned the iteration) and
// through caching_pool. Both run over virtual_upstream (addresses, no memory), so the figures are
// the pools' own bookkeeping cost.
//
// Usage: bench_replay_throughput [TRACE] [ITERATIONS]
//   default: data/traces/resnet18_b32.trace, 200 iterations
#include <stash/core/virtual_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_reader.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// Replays the iteration part of `t` (storages allocated after the first phase marker) `iterations`
// times; returns the seconds spent in allocate/deallocate and the number of pairs.
template <class Pool, class Begin, class End>
std::pair<double, std::uint64_t> replay(stash::trace const& t, Pool& pool, int iterations,
                                        Begin begin, End end)
{
  std::vector<void*> ptrs(t.storages().size(), nullptr);
  std::size_t first = 0;
  for (; first < t.events().size(); ++first) {
    auto const& e = t.events()[first];
    if (e.kind == stash::event_kind::phase) { break; }
    if (e.kind == stash::event_kind::alloc) {
      ptrs[e.index] = pool.allocate_async(t.storages()[e.index].bytes, nullptr);
    }
  }
  std::uint64_t pairs = 0;
  auto const t0       = std::chrono::steady_clock::now();
  for (int it = 0; it < iterations; ++it) {
    begin();
    for (std::size_t k = first; k < t.events().size(); ++k) {
      auto const& e = t.events()[k];
      if (e.kind == stash::event_kind::alloc) {
        ptrs[e.index] = pool.allocate_async(t.storages()[e.index].bytes, nullptr);
      } else if (e.kind == stash::event_kind::free) {
        pool.deallocate_async(ptrs[e.index], t.storages()[e.index].bytes, nullptr);
        ptrs[e.index] = nullptr;
        ++pairs;
      }
    }
    end();
  }
  double const seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {seconds, pairs};
}

}  // namespace

int main(int argc, char** argv)
{
  std::string const path =
      argc > 1 ? argv[1] : std::string(STASH_DATA_DIR) + "/traces/resnet18_b32.trace";
  int const iterations = argc > 2 ? std::atoi(argv[2]) : 200;
  auto const t         = stash::read_trace(path);

  stash::caching_pool<stash::virtual_upstream, stash::immediate_order> caching;
  auto const [cs, cp] = replay(
      t, caching, iterations, [] {}, [] {});

  stash::lifetime_arena<stash::virtual_upstream, stash::greedy_planner, stash::immediate_order>
      arena;
  auto const [as, ap] = replay(
      t, arena, iterations, [&] { arena.begin_iteration(); }, [&] { arena.end_iteration(); });

  std::printf("trace %s, %d iterations, %llu alloc/free pairs each pool\n", path.c_str(),
              iterations, static_cast<unsigned long long>(cp));
  std::printf(
      "| pool | pairs/s | ns per pair | reserved after the run | peak reserved | fallbacks |\n"
      "|---|---:|---:|---:|---:|---:|\n");
  std::printf("| caching_pool | %.3g | %.1f | %zu | %zu | - |\n", double(cp) / cs,
              cs / double(cp) * 1e9, caching.stats().reserved_bytes,
              caching.stats().peak_reserved_bytes);
  std::printf("| lifetime_arena | %.3g | %.1f | %zu | %zu | %llu |\n", double(ap) / as,
              as / double(ap) * 1e9, arena.stats().reserved_bytes,
              arena.stats().peak_reserved_bytes,
              static_cast<unsigned long long>(arena.stats().fallbacks));
  std::printf("(lifetime_arena's first iteration is its recording, served by its fallback pool)\n");
  return 0;
}
