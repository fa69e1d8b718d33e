// A max-pool step run through stash::allocator on any backend: the pool writes its output and four
// int64 index tensors, all swapped over their gap as pool_argmax (Gist's 4-bit argmax), and the
// pool's backward reads them back. Each index tensor is described differently:
//   i  its true geometry                         -> encoded, 32 + 4 ceil(n/8) bytes cross
//   j  a geometry of another size                -> refused when planned: raw, counted
//   k  the right size, but not the pool's windows -> the encoder writes them unchanged (32 + 8n)
//   u  no description                            -> refused when planned: raw, counted
// Values go in and come out by copies in the stream's order, so the same code checks the host
// backend (CPU tests) and the CUDA backend (gpu tests).
#pragma once

#include "support/pool_indices.hpp"

#include <stash/allocator.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace stash::test {

/// A policy that swaps every storage labelled i, j, k or u as pool_argmax from its write (the pool
/// op) to its read (the pool's backward).
struct argmax_step_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "argmax_step"; }
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    std::vector<swap_entry> entries;
    for (auto const& life : analysis.lifetimes().storages) {
      auto const& label = analysis.trace().storages()[life.id].label;
      if (label != "i" && label != "j" && label != "k" && label != "u") { continue; }
      std::uint64_t const u = life.accesses.at(0).op;
      std::uint64_t const v = life.accesses.at(1).op;
      entries.push_back(
          swap_entry{life.id, u, v, u + 1, v, life.bytes, swap_encoding::pool_argmax});
    }
    return make_schedule(analysis, "argmax_step", budget, std::move(entries));
  }
};

/// What run_argmax_step saw.
struct argmax_step_result {
  std::uint64_t exact_reads{0};  ///< backward reads of i, j, k, u identical to what was written
  std::uint64_t reads{0};        ///< backward reads checked
  std::uint64_t iterations{0};
  std::size_t outputs{0};  ///< pool outputs (elements of each index tensor)
  offload_stats moved;     ///< the allocator's offload statistics at the end
};

/// Runs `iterations` iterations (the first recorded) of the step through
/// allocator<Pool, argmax_step_policy, Codecs, Backend>; throws whatever the allocator throws.
/// With `describe_i_in_replays` false, i is described only in the recorded iteration.
template <class Pool, class Codecs, class Backend>
argmax_step_result run_argmax_step(Backend& backend, Pool& pool, int iterations,
                                   allocator_stats* stats     = nullptr,
                                   bool describe_i_in_replays = true)
{
  using alloc_type = allocator<Pool, argmax_step_policy, Codecs, Backend>;
  using ids        = std::vector<tensor_handle>;
  using descriptor = typename alloc_type::descriptor_type;
  // 2x2 windows, stride 2 over 13x13 maps of 48 planes: 48 * 36 outputs.
  pool_geometry const g{48, 13, 13, 2, 2, 2, 2};
  // Another pool with as many outputs (3x3 windows, stride 2, 13x13): not g's windows.
  pool_geometry const other{48, 13, 13, 3, 3, 2, 2};
  pool_geometry const wrong_size{48, 13, 13, 2, 2, 1, 1};
  std::size_t const n      = g.outputs();
  std::size_t const bytes  = n * sizeof(std::int64_t);
  std::size_t const xbytes = g.planes * g.height * g.width * sizeof(float);
  auto const xv            = pool_input(g.planes * g.height * g.width, 1);
  auto const iv = max_pool_indices(xv, g), kv = max_pool_indices(xv, other);
  std::vector<float> const pv(n, 1.0f);
  auto const s = backend.create_stream();
  alloc_type alloc(backend, pool, allocator_options{});
  auto const x = alloc.allocate_async(xbytes, storage_kind::input, "x", s);
  backend.copy_async(alloc.acquire_async(x, s), xv.data(), xbytes, s);
  argmax_step_result r;
  r.outputs = n;
  std::vector<std::vector<std::int64_t>> got(4, std::vector<std::int64_t>(n));
  for (int it = 0; it < iterations; ++it) {
    alloc.begin_iteration();
    alloc.phase(phase::forward);
    auto const p          = alloc.allocate_async(n * sizeof(float), storage_kind::act, "p", s);
    bool const describe_i = it == 0 || describe_i_in_replays;
    auto const i          = alloc.allocate_async(bytes, storage_kind::act, "i", s,
                                        describe_i ? descriptor{g} : descriptor{});
    auto const j          = alloc.allocate_async(bytes, storage_kind::act, "j", s, wrong_size);
    auto const k          = alloc.allocate_async(bytes, storage_kind::act, "k", s, g);
    auto const u          = alloc.allocate_async(bytes, storage_kind::act, "u", s);
    auto const out = alloc.op("aten::max_pool2d_with_indices", ids{x}, ids{p, i, j, k, u}, s);
    backend.copy_async(out[1], pv.data(), n * sizeof(float), s);
    for (std::size_t t = 0; t < 4; ++t) {
      backend.copy_async(out[2 + t], (t == 2 ? kv : iv).data(), bytes, s);
    }
    auto const q = alloc.allocate_async(n * sizeof(float), storage_kind::act, "q", s);
    (void)alloc.op("aten::relu", ids{p}, ids{q}, s);
    (void)alloc.op("aten::sum", ids{q}, ids{}, s);
    alloc.phase(phase::backward);
    auto const gx = alloc.allocate_async(xbytes, storage_kind::temp, "gx", s);
    auto const back =
        alloc.op("aten::max_pool2d_with_indices_backward", ids{q, x, i, j, k, u}, ids{gx}, s);
    for (std::size_t t = 0; t < 4; ++t) {
      backend.copy_async(got[t].data(), back[2 + t], bytes, s);
    }
    for (auto id : {p, i, j, k, u, q, gx}) { alloc.deallocate_async(id); }
    alloc.end_iteration();
    backend.synchronize(s);
    alloc.synchronize();
    for (std::size_t t = 0; t < 4; ++t) {
      r.exact_reads += got[t] == (t == 2 ? kv : iv);
      ++r.reads;
    }
    ++r.iterations;
  }
  if (stats != nullptr) { *stats = alloc.stats(); }
  r.moved = alloc.stats().offload;
  return r;
}

}  // namespace stash::test
