// The offload manager's randomized stress body, shared by the host-backend test (CPU, in CI) and
// the CUDA-backend test (gpu label): the same schedules on both backends.
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/offload_manager.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace stash::test {

/// What a stress run did.
struct stress_counts {
  std::uint64_t tensors{0};
  std::uint64_t acquires{0};
  std::uint64_t full_pool_retries{0};
};

/// Runs `steps` random operations (create, offload, prefetch, acquire and check, acquire and
/// rewrite, release) over `streams`. `fill(stream, ptr, bytes, id, version)` and
/// `check(stream, ptr, bytes, id, version)` queue work that writes / verifies a tensor's pattern.
/// A full pool is a legal outcome: the run waits for all streams and retries, as a user would.
/// Every tensor still alive at the end is checked once more and released.
template <class Manager, class Backend, class Fill, class Check>
stress_counts run_offload_stress(Manager& m, Backend& backend,
                                 std::vector<typename Backend::stream> const& streams,
                                 std::uint64_t seed, int steps, std::size_t max_bytes, Fill fill,
                                 Check check)
{
  struct tracked {
    tensor_handle h;
    std::size_t bytes;
    std::uint32_t version;
    bool alive;
  };
  std::vector<tracked> tensors;
  stress_counts counts;
  std::mt19937_64 rng(seed);
  auto sync_all = [&] {
    for (auto s : streams) { backend.synchronize(s); }
    m.synchronize();
  };
  // A full pool is legal: wait for every stream and retry, as a user would. A block freed on one
  // stream is reused by another only once that stream got there, so a tight pool can be full
  // until then; after a wait for everything, every freed block is reusable. (Up to three waits;
  // one is enough: before the final sweep below retried too, its prefetches on demand, which
  // follow releases on another stream, made this test fail about once in fifteen runs.)
  auto with_retry = [&](auto&& op) {
    for (int attempt = 0;; ++attempt) {
      try {
        op();
        return;
      } catch (out_of_memory const&) {
        if (attempt == 3) { throw; }
        ++counts.full_pool_retries;
        sync_all();
      }
    }
  };
  for (int step = 0; step < steps; ++step) {
    int const action = std::uniform_int_distribution<int>(0, 9)(rng);
    auto const s = streams[std::uniform_int_distribution<std::size_t>(0, streams.size() - 1)(rng)];
    std::vector<std::size_t> alive;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].alive) { alive.push_back(i); }
    }
    bool const create = (action < 2 && alive.size() < 40) || alive.empty();
    std::size_t const pick =
        alive.empty() ? 0
                      : alive[std::uniform_int_distribution<std::size_t>(0, alive.size() - 1)(rng)];
    std::size_t const n = std::uniform_int_distribution<std::size_t>(1, max_bytes)(rng);
    auto run            = [&] {
      if (create) {
        auto h = m.create(n, s);
        fill(s, m.acquire(h, s), n, h.index(), 0u);
        tensors.push_back({h, n, 0, true});
        return;
      }
      auto& t = tensors[pick];
      switch (action) {
        case 2:
        case 3:
          // offload_async orders after `s` and after the tensor's last stream.
          if (m.state(t.h) == tensor_state::resident) { m.offload_async(t.h, s); }
          break;
        case 4:
          m.prefetch_async(t.h);
          break;
        case 5:
        case 6:
        case 7: {
          void* p = m.acquire(t.h, s);
          check(s, p, t.bytes, t.h.index(), t.version);
          if (action == 7) {  // rewrite it: the next check expects the new version
            ++t.version;
            fill(s, p, t.bytes, t.h.index(), t.version);
          }
          ++counts.acquires;
          break;
        }
        default:
          m.release(t.h);
          t.alive = false;
          break;
      }
    };
    with_retry(run);
  }
  for (auto& t : tensors) {
    if (!t.alive) { continue; }
    with_retry(
        [&] { check(streams[0], m.acquire(t.h, streams[0]), t.bytes, t.h.index(), t.version); });
    backend.synchronize(streams[0]);
    m.release(t.h);
  }
  sync_all();
  counts.tensors = tensors.size();
  return counts;
}

}  // namespace stash::test
