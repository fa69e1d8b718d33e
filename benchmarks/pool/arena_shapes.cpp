// bench_arena_shapes: lifetime_arena on a transformer whose sequence length changes from step to
// step. The steps are data/traces/transformer_encoder_b8.trace (batch 8, 12 heads, sequence 512)
// with every storage resized to the step's sequence length (stash_tools::scaled_iteration:
// attention scores with its square, token activations with it, parameters unchanged; the
// storages the trace never frees are allocated once, before the steps). Reports, per arena
// mode, the fallbacks, re-plans and the arena's footprint against each step's own optimum (the
// search planner's plan of that step alone). Prints Markdown.
//
//   bench_arena_shapes [--trace FILE] [--steps N]
//
// Addresses are virtual (stash::virtual_upstream): nothing is allocated for real.
#include <stash/core/virtual_upstream.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/pool/search_planner.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash_tools/planner_workloads.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>
#include <vector>

#ifndef STASH_DATA_DIR
#define STASH_DATA_DIR "data"
#endif

namespace {

using arena_t             = stash::lifetime_arena<stash::virtual_upstream, stash::search_planner>;
cudaStream_t const stream = reinterpret_cast<cudaStream_t>(0x1000);

struct mode {
  char const* name;
  stash::lifetime_arena_options options;
  bool max_first;  // the first step runs at the longest sequence (a warm-up at the largest shape)
};

struct outcome {
  std::uint64_t fallbacks{}, replans{};
  std::size_t final_arena{}, peak_reserved{};
};

outcome run(mode const& m, std::vector<std::uint64_t> const& lengths,
            std::map<std::uint64_t, std::vector<stash_tools::alloc_step>> const& steps)
{
  arena_t arena(stash::virtual_upstream{}, m.options);
  std::vector<std::uint64_t> order = lengths;
  if (m.max_first) {
    order.insert(order.begin(), *std::max_element(lengths.begin(), lengths.end()));
  }
  std::map<std::uint64_t, std::pair<void*, std::size_t>> live;
  for (auto len : order) {
    arena.begin_iteration();
    for (auto const& st : steps.at(len)) {
      if (st.bytes > 0) {
        live[st.id] = {arena.allocate_async(st.bytes, stream), st.bytes};
      } else {
        auto const [p, n] = live.at(st.id);
        arena.deallocate_async(p, n, stream);
        live.erase(st.id);
      }
    }
    arena.end_iteration();
  }
  return {arena.stats().fallbacks, arena.replans(), arena.arena_bytes(),
          arena.stats().peak_reserved_bytes};
}

}  // namespace

int main(int argc, char** argv)
{
  std::string trace_path = std::string(STASH_DATA_DIR) + "/traces/transformer_encoder_b8.trace";
  std::size_t n_steps    = 24;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--trace" && i + 1 < argc) {
      trace_path = argv[++i];
    } else if (a == "--steps" && i + 1 < argc) {
      n_steps = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--trace FILE] [--steps N]\n", argv[0]);
      return 2;
    }
  }
  try {
    auto const tr = stash::read_trace(trace_path);
    stash_tools::sequence_scaling const scaling{8, 12, 512, 4};
    // Sequence lengths 128..512 in steps of 64, in a fixed scrambled order (7 distinct values).
    std::vector<std::uint64_t> lengths;
    for (std::size_t i = 0; i < n_steps; ++i) { lengths.push_back(64 * (2 + (i * 5 + 3) % 7)); }
    std::map<std::uint64_t, std::vector<stash_tools::alloc_step>> steps;
    std::map<std::uint64_t, std::uint64_t> optimum, lower;
    for (auto len : lengths) {
      if (steps.count(len) != 0) { continue; }
      steps[len]    = stash_tools::scaled_iteration(tr, scaling, len);
      auto const in = stash_tools::step_intervals(steps[len]);
      stash::search_stats stats;
      optimum[len] =
          stash::search_planner{}.plan(in, stash::cuda_allocation_alignment, stats).footprint;
      lower[len] = stats.lower_bound;
    }
    double mean_opt = 0;
    for (auto len : lengths) { mean_opt += static_cast<double>(optimum[len]); }
    mean_opt /= static_cast<double>(lengths.size());
    auto const max_opt = optimum.rbegin()->second;

    std::printf("## lifetime_arena under changing shapes (%s)\n\n", trace_path.c_str());
    std::printf("steps: %zu, sequence lengths:", lengths.size());
    for (auto len : lengths) { std::printf(" %llu", (unsigned long long)len); }
    std::printf("\n\n| seq | step optimum (search) B | L B |\n|---:|---:|---:|\n");
    for (auto const& [len, fp] : optimum) {
      std::printf("| %llu | %llu | %llu |\n", (unsigned long long)len, (unsigned long long)fp,
                  (unsigned long long)lower[len]);
    }
    std::vector<mode> modes;
    auto add = [&](char const* name, stash::arena_sizes sizes, unsigned record, unsigned classes,
                   bool max_first) {
      stash::lifetime_arena_options o;
      o.sizes             = sizes;
      o.record_iterations = record;
      o.size_classes      = classes;
      modes.push_back({name, o, max_first});
    };
    add("exact (default)", stash::arena_sizes::exact, 1, 0, false);
    add("largest", stash::arena_sizes::largest, 1, 0, false);
    add("largest, 4 size classes", stash::arena_sizes::largest, 1, 4, false);
    add("largest, 3 steps recorded", stash::arena_sizes::largest, 3, 0, false);
    add("largest, warm-up step at 512", stash::arena_sizes::largest, 1, 0, true);
    std::printf(
        "\nmax step optimum: %llu B; mean step optimum: %.0f B\n\n"
        "| arena mode | fallbacks | re-plans | final arena B | arena / max step optimum | "
        "arena / mean step optimum | peak reserved B |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n",
        (unsigned long long)max_opt, mean_opt);
    for (auto const& m : modes) {
      auto const r = run(m, lengths, steps);
      std::printf("| %s | %llu | %llu | %zu | %.4f | %.4f | %zu |\n", m.name,
                  (unsigned long long)r.fallbacks, (unsigned long long)r.replans, r.final_arena,
                  double(r.final_arena) / double(max_opt), double(r.final_arena) / mean_opt,
                  r.peak_reserved);
    }
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_arena_shapes: %s\n", e.what());
    return 1;
  }
  return 0;
}
