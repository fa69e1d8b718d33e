// A small training step run through stash::allocator on any backend, with two storages swapped
// under explicit encodings: `a`, a ReLU output read after its gap only as threshold_backward's
// `self` (Gist's Binarize), and `b`, a ReLU output whose values are read after its gap (zvc).
// Values go in and come out by copies in the stream's order, so the same code checks the host
// backend (CPU tests) and the CUDA backend (gpu tests).
#pragma once

#include <stash/allocator.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/trace/trace.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace stash::test {

/// A policy that swaps the storages labelled "a" (bitmask) and "b" (zvc) over their one gap.
struct encoded_step_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "encoded_step"; }
  [[nodiscard]] schedule plan(trace_analysis const& analysis, std::uint64_t budget) const
  {
    std::vector<swap_entry> entries;
    for (auto const& life : analysis.lifetimes().storages) {
      auto const& label = analysis.trace().storages()[life.id].label;
      if (label != "a" && label != "b") { continue; }
      // The gap: between the second access (last forward use) and the third (backward use).
      std::uint64_t const u = life.accesses.at(1).op;
      std::uint64_t const v = life.accesses.at(2).op;
      entries.push_back(swap_entry{life.id, u, v, u + 1, v, life.bytes,
                                   label == "a" ? swap_encoding::bitmask : swap_encoding::zvc});
    }
    return make_schedule(analysis, "encoded_step", budget, std::move(entries));
  }
};

/// What run_encoded_step saw.
struct encoded_step_result {
  std::uint64_t exact_b_reads{0};  ///< backward reads of b identical to what was written
  std::uint64_t mask_a_reads{0};   ///< backward reads of a equal to (a > 0) as 1.0f / 0.0f
  std::uint64_t exact_c_reads{0};  ///< reads of c (never swapped) identical
  std::uint64_t iterations{0};
  offload_stats moved;  ///< the allocator's offload statistics at the end
};

namespace detail_encoded_step {

inline std::vector<float> relu_like(std::size_t n, unsigned seed)
{
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = (i * 2654435761u + seed) % 3 == 0 ? float((i + seed) % 1000) : 0.0f;
  }
  return v;
}

inline std::vector<float> mask_of(std::vector<float> const& v)
{
  std::vector<float> m(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) { m[i] = v[i] > 0.0f ? 1.0f : 0.0f; }
  return m;
}

}  // namespace detail_encoded_step

/// Runs `iterations` iterations (the first recorded) of n-float tensors through
/// allocator<Pool, encoded_step_policy, Codecs, Backend>; the policy's two entries run from the
/// second iteration on. Throws whatever the allocator throws.
template <class Pool, class Codecs, class Backend>
encoded_step_result run_encoded_step(Backend& backend, Pool& pool, std::size_t n, int iterations,
                                     allocator_stats* stats = nullptr)
{
  namespace d             = detail_encoded_step;
  using alloc_type        = allocator<Pool, encoded_step_policy, Codecs, Backend>;
  auto const s            = backend.create_stream();
  std::size_t const bytes = n * sizeof(float);
  alloc_type alloc(backend, pool, allocator_options{});
  auto const xv = d::relu_like(n, 1), av = d::relu_like(n, 2), bv = d::relu_like(n, 3),
             cv = d::relu_like(n, 4);
  auto const am = d::mask_of(av);
  auto const x  = alloc.allocate(bytes, storage_kind::input, "x", s);
  backend.copy_async(alloc.pointer(x, s), xv.data(), bytes, s);
  encoded_step_result r;
  std::vector<float> got_a(n), got_b(n), got_c(n);
  for (int it = 0; it < iterations; ++it) {
    using ids = std::vector<tensor_handle>;
    alloc.begin_iteration();
    alloc.phase(phase::forward);
    auto const a = alloc.allocate(bytes, storage_kind::act, "a", s);
    backend.copy_async(alloc.op("aten::relu", ids{x}, ids{a}, s)[1], av.data(), bytes, s);
    auto const b = alloc.allocate(bytes, storage_kind::act, "b", s);
    backend.copy_async(alloc.op("aten::relu", ids{a}, ids{b}, s)[1], bv.data(), bytes, s);
    auto const c = alloc.allocate(bytes, storage_kind::act, "c", s);
    backend.copy_async(alloc.op("aten::mul", ids{b}, ids{c}, s)[1], cv.data(), bytes, s);
    (void)alloc.op("aten::sum", ids{c}, ids{}, s);
    alloc.phase(phase::backward);
    auto const gc = alloc.allocate(bytes, storage_kind::temp, "gc", s);
    backend.copy_async(got_c.data(), alloc.op("aten::mul", ids{c}, ids{gc}, s)[0], bytes, s);
    auto const gb = alloc.allocate(bytes, storage_kind::temp, "gb", s);
    backend.copy_async(got_b.data(), alloc.op("aten::mul", ids{b, gc}, ids{gb}, s)[0], bytes, s);
    auto const ga = alloc.allocate(bytes, storage_kind::temp, "ga", s);
    backend.copy_async(got_a.data(),
                       alloc.op("aten::threshold_backward", ids{gb, a}, ids{ga}, s)[1], bytes, s);
    for (auto id : {a, b, c, gc, gb, ga}) { alloc.deallocate(id); }
    alloc.end_iteration();
    backend.synchronize(s);
    alloc.synchronize();
    r.exact_b_reads += got_b == bv;
    r.exact_c_reads += got_c == cv;
    r.mask_a_reads += got_a == am;
    ++r.iterations;
  }
  if (stats != nullptr) { *stats = alloc.stats(); }
  r.moved = alloc.offload_statistics();
  return r;
}

}  // namespace stash::test
