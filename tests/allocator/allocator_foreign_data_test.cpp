// Lossy members never round data that is not theirs (GPU review, fifth read, T2/T3): a codec set
// shaped like train_cnn's CUDA set (zvc, fp16, bf16, fp8_e4m3; no pool_argmax), with a lossy
// default encoding and a policy that offloads everything over its gap, on the host backend. int64
// max-pool indices and u8 labels described with their element type come back bit-exact (they
// travel through a lossless member or raw, counted as encoding fallbacks); float activations are
// still rounded (the lossy member runs where it may); and the same indices undescribed are rounded
// as floats, which is why they must be described. With pool_argmax in the set, indices described
// by their geometry are refused by the lossy member too.
#include "support/pool_indices.hpp"

#include <stash/allocator.hpp>
#include <stash/codec/element_type.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/pool_argmax_transfer.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;

// Swaps every storage labelled p, i, u or l over its first gap, in the configured encoding (what
// auto_swap and search plan when no per-tensor encoding is asked for).
struct swap_all_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "swap_all"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& analysis,
                                     std::uint64_t budget) const
  {
    std::vector<stash::swap_entry> entries;
    for (auto const& life : analysis.lifetimes().storages) {
      auto const& label = analysis.trace().storages()[life.id].label;
      if (label != "p" && label != "i" && label != "u" && label != "l") { continue; }
      std::uint64_t const a = life.accesses.at(0).op;
      std::uint64_t const b = life.accesses.at(1).op;
      entries.push_back(
          stash::swap_entry{life.id, a, b, a + 1, b, life.bytes, stash::swap_encoding::configured});
    }
    return stash::make_schedule(analysis, "swap_all", budget, std::move(entries));
  }
};

// What came back at the backward op, per tensor, in the last replayed iteration.
struct round_trip {
  bool indices_exact{false};     // i, described
  bool undescribed_exact{true};  // u, the same indices undescribed
  bool labels_exact{false};      // l, described u8
  bool floats_exact{true};       // p, float32 activations
  stash::allocator_stats stats{};
};

// Three iterations (one recorded, two replayed) of a pool step through allocator<..., Codecs>
// whose default encoding is `lossy`; `describe_i` is the index tensor's descriptor.
template <class Codecs, class Describe>
round_trip run_step(stash::swap_encoding lossy, Describe describe_i)
{
  using alloc_type = stash::allocator<host_caching, swap_all_policy, Codecs, stash::host_backend>;
  using descriptor = typename alloc_type::descriptor_type;
  using ids        = std::vector<stash::tensor_handle>;
  stash::pool_geometry const g{16, 12, 12, 2, 2, 2, 2};
  std::size_t const n = g.outputs();
  auto const x        = stash::test::pool_input(g.planes * g.height * g.width, 3);
  auto const iv       = stash::test::max_pool_indices(x, g);
  std::vector<float> pv(n);
  for (std::size_t k = 0; k < n; ++k) { pv[k] = 1.0f + float(k) / 3.0f; }  // not all in fp8
  std::vector<std::uint8_t> lv(128);
  for (std::size_t k = 0; k < lv.size(); ++k) { lv[k] = std::uint8_t(k % 10); }

  stash::host_backend backend;
  host_caching pool;
  stash::allocator_options o;
  o.default_encoding = lossy;
  alloc_type alloc(backend, pool, o);
  auto const s = backend.create_stream();
  round_trip r;
  std::vector<std::int64_t> gi(n), gu(n);
  std::vector<std::uint8_t> gl(lv.size());
  std::vector<float> gp(n);
  for (int it = 0; it < 3; ++it) {
    alloc.begin_iteration();
    alloc.phase(stash::phase::forward);
    auto const l = alloc.allocate_async(lv.size(), stash::storage_kind::input, "l", s,
                                        descriptor{stash::element_type::u8});
    backend.copy_async(alloc.op("stage", ids{}, ids{l}, s)[0], lv.data(), lv.size(), s);
    auto const p   = alloc.allocate_async(n * sizeof(float), stash::storage_kind::act, "p", s);
    auto const i   = alloc.allocate_async(n * 8, stash::storage_kind::act, "i", s, describe_i(g));
    auto const u   = alloc.allocate_async(n * 8, stash::storage_kind::act, "u", s);
    auto const out = alloc.op("aten::max_pool2d_with_indices", ids{}, ids{p, i, u}, s);
    backend.copy_async(out[0], pv.data(), n * sizeof(float), s);
    backend.copy_async(out[1], iv.data(), n * 8, s);
    backend.copy_async(out[2], iv.data(), n * 8, s);
    auto const q = alloc.allocate_async(n * sizeof(float), stash::storage_kind::act, "q", s);
    (void)alloc.op("aten::relu", ids{}, ids{q}, s);
    (void)alloc.op("aten::sum", ids{q}, ids{}, s);
    alloc.phase(stash::phase::backward);
    auto const back = alloc.op("aten::max_pool2d_with_indices_backward", ids{p, i, u, l}, ids{}, s);
    backend.copy_async(gp.data(), back[0], n * sizeof(float), s);
    backend.copy_async(gi.data(), back[1], n * 8, s);
    backend.copy_async(gu.data(), back[2], n * 8, s);
    backend.copy_async(gl.data(), back[3], lv.size(), s);
    for (auto id : {l, p, i, u, q}) { alloc.deallocate_async(id); }
    alloc.end_iteration();
    backend.synchronize(s);
    alloc.synchronize();
  }
  r.indices_exact     = gi == iv;
  r.undescribed_exact = gu == iv;
  r.labels_exact      = gl == lv;
  r.floats_exact      = std::memcmp(gp.data(), pv.data(), n * sizeof(float)) == 0;
  r.stats             = alloc.stats();
  return r;
}

}  // namespace

TEST_CASE("allocator: a lossy default encoding never rounds tensors described as other data")
{
  using codecs = stash::transfer_set<stash::zvc<float>, stash::precision<float, stash::fp16>,
                                     stash::precision<float, stash::bf16>,
                                     stash::precision<float, stash::fp8_e4m3>>;
  using descriptor =
      stash::allocator<host_caching, swap_all_policy, codecs, stash::host_backend>::descriptor_type;
  for (auto lossy :
       {stash::swap_encoding::fp16, stash::swap_encoding::bf16, stash::swap_encoding::fp8_e4m3}) {
    CAPTURE(lossy);
    auto const r = run_step<codecs>(
        lossy, [](stash::pool_geometry const&) { return descriptor{stash::element_type::i64}; });
    CHECK(r.stats.scheduled_offloads == 2 * 4);  // p, i, u, l in each replayed iteration
    CHECK(r.indices_exact);
    CHECK(r.labels_exact);
    CHECK(r.stats.encoding_fallbacks == 2);  // i and l, refused when planned: raw
    // The lossy member ran where it may: the floats were rounded, and so were the indices no one
    // described (taken to be floats).
    CHECK_FALSE(r.floats_exact);
    CHECK_FALSE(r.undescribed_exact);
  }
}

TEST_CASE("allocator: with pool_argmax in the set, a lossy default still refuses the indices")
{
  using codecs = stash::transfer_set<stash::zvc<float>, stash::precision<float, stash::fp16>,
                                     stash::pool_argmax>;
  using descriptor =
      stash::allocator<host_caching, swap_all_policy, codecs, stash::host_backend>::descriptor_type;
  auto const r = run_step<codecs>(stash::swap_encoding::fp16,
                                  [](stash::pool_geometry const& g) { return descriptor{g}; });
  CHECK(r.indices_exact);  // refused by fp16 (their geometry says int64): raw
  CHECK(r.labels_exact);
  CHECK(r.stats.encoding_fallbacks == 2);
  CHECK_FALSE(r.floats_exact);
}

}  // namespace STASH_UNITY_ID
