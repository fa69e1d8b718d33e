// Per-tensor encodings executed: with a transfer_set in the Codec slot, each scheduled offload
// runs the codec its schedule entry names, on the host backend, along a real training step whose
// every read is checked (lossless bytes identical, Gist's Binarize sign-exact, fp16 within its
// rounding), and what the slot cannot run travels raw and is counted.
#include "codec/codec_test_support.hpp"
#include "support/allocator_drive.hpp"
#include "support/argmax_step.hpp"
#include "support/data.hpp"
#include "support/encoded_step.hpp"

#include <stash/allocator.hpp>
#include <stash/codec/bitmask.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/range_mask.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/pool_argmax_transfer.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/encoding_choice.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/swap/vdnn.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using stash::test::read_check;

// A user policy: vdnn_all's schedule with each entry's encoding chosen from the trace.
struct vdnn_all_encoded {
  stash::encoding_options options{};
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "vdnn_all_encoded"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& a, std::uint64_t budget) const
  {
    return stash::with_encodings(a, stash::vdnn_all{}.plan(a, budget), options);
  }
};
static_assert(stash::swap_policy<vdnn_all_encoded>);

// Entries of the schedule in force per encoding, and how each storage's reads are checked.
struct schedule_view {
  std::map<stash::swap_encoding, std::uint64_t> count;
  std::vector<read_check> checks;
};

template <class Allocator>
schedule_view view_of(Allocator const& alloc, stash::trace const& t)
{
  schedule_view v;
  v.checks.assign(t.storages().size(), read_check::exact);
  auto const& recorded = *alloc.recorded_trace();
  for (auto const& e : alloc.current_schedule().entries) {
    REQUIRE(e.id < t.storages().size());
    // Persistent storages (allocated before the first iteration) stay put.
    if (recorded.storages()[e.id].label.starts_with("persistent#")) { continue; }
    ++v.count[e.encoding];
    // The recording numbers storages as the trace does (persistent ones first, then in order).
    REQUIRE(recorded.storages()[e.id].label == t.storages()[e.id].label);
    if (e.encoding == stash::swap_encoding::bitmask) { v.checks[e.id] = read_check::sign; }
    if (e.encoding == stash::swap_encoding::fp16) { v.checks[e.id] = read_check::fp16; }
  }
  return v;
}

// Swaps the storages labelled x and u as range_mask from their write (the clamp's clone of its
// input) to their read (hardtanh's backward).
struct clamp_step_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "clamp_step"; }
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const& analysis,
                                     std::uint64_t budget) const
  {
    std::vector<stash::swap_entry> entries;
    for (auto const& life : analysis.lifetimes().storages) {
      auto const& label = analysis.trace().storages()[life.id].label;
      if (label != "x" && label != "u") { continue; }
      std::uint64_t const w = life.accesses.at(0).op;
      std::uint64_t const r = life.accesses.at(1).op;
      entries.push_back(
          stash::swap_entry{life.id, w, r, w + 1, r, life.bytes, stash::swap_encoding::range_mask});
    }
    return stash::make_schedule(analysis, "clamp_step", budget, std::move(entries));
  }
};
static_assert(stash::swap_policy<clamp_step_policy>);

}  // namespace

TEST_CASE(
    "allocator<transfer_set<zvc, bitmask>>: each entry runs its codec; zvc exact, Binarize "
    "sign-exact")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator_options o;
  using codecs = stash::transfer_set<stash::zvc<float>, stash::bitmask, stash::two_value<float>>;
  stash::allocator<host_caching, vdnn_all_encoded, codecs, stash::host_backend> alloc(backend, pool,
                                                                                      o);
  REQUIRE(stash::test::drive(alloc, backend, s, t, 1) == 0);  // recorded, then planned
  auto const v = view_of(alloc, t);
  auto const n = [&](stash::swap_encoding e) { return v.count.contains(e) ? v.count.at(e) : 0; };
  REQUIRE(n(stash::swap_encoding::zvc) > 0);
  REQUIRE(n(stash::swap_encoding::bitmask) > 0);
  // The classifier's dropout masks (bernoulli_ then div_.Scalar): two_value, whose transfer
  // writes the driver's data unchanged where it is not two-valued, so it stays exact.
  REQUIRE(n(stash::swap_encoding::two_value) > 0);
  // The slot carries zvc, bitmask, two_value and raw copies: only pool_argmax entries fall back.
  CHECK(alloc.stats().encoding_fallbacks == n(stash::swap_encoding::pool_argmax));

  std::uint64_t inexact = 0;
  CHECK(stash::test::drive(alloc, backend, s, t, 2, v.checks, &inexact) == 0);
  CHECK(alloc.stats().deviations == 0);
  CHECK(alloc.stats().scheduled_offloads == 2 * alloc.current_schedule().entries.size());
  CHECK(alloc.stats().offload.decode_failures == 0);
  CHECK(inexact > 0);  // Binarize ran: its readers saw 1.0f / 0.0f, not the values
  auto const& st = alloc.stats().offload;
  CHECK(st.bytes_encoded < st.bytes_encoded_source);  // the codecs shrank what crossed
  MESSAGE("alexnet (1/64 scale), vdnn_all + chosen encodings: "
          << n(stash::swap_encoding::zvc) << " zvc, " << n(stash::swap_encoding::bitmask)
          << " bitmask, " << n(stash::swap_encoding::raw) << " raw, "
          << n(stash::swap_encoding::pool_argmax) << " pool_argmax (raw) entries; "
          << st.bytes_encoded_source << " B offloaded as " << st.bytes_encoded << " B");
}

TEST_CASE("allocator<transfer_set<..., fp16>>: lossy only where the policy opted in, within fp16")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator_options o;
  vdnn_all_encoded policy;
  policy.options.lossy_activations = stash::swap_encoding::fp16;
  using codecs                     = stash::transfer_set<void, stash::zvc<float>, stash::bitmask,
                                     stash::precision<float, stash::fp16>>;
  stash::allocator<host_caching, vdnn_all_encoded, codecs, stash::host_backend> alloc(backend, pool,
                                                                                      o, policy);
  REQUIRE(stash::test::drive(alloc, backend, s, t, 1) == 0);
  auto const v = view_of(alloc, t);
  auto const n = [&](stash::swap_encoding e) { return v.count.contains(e) ? v.count.at(e) : 0; };
  REQUIRE(n(stash::swap_encoding::fp16) > 0);
  CHECK(n(stash::swap_encoding::zvc) > 0);  // lossless where the trace allows it, still
  // Not in the slot: pool_argmax and two_value (the dropout masks) travel raw.
  CHECK(alloc.stats().encoding_fallbacks ==
        n(stash::swap_encoding::pool_argmax) + n(stash::swap_encoding::two_value));
  std::uint64_t inexact = 0;
  CHECK(stash::test::drive(alloc, backend, s, t, 2, v.checks, &inexact) == 0);
  CHECK(inexact > 0);  // fp16 rounded some values (odd integers above 2048)
  CHECK(alloc.stats().deviations == 0);
  CHECK(alloc.stats().offload.decode_failures == 0);
  MESSAGE("alexnet (1/64 scale), vdnn_all with fp16 opted in for activations: "
          << n(stash::swap_encoding::fp16) << " fp16, " << n(stash::swap_encoding::zvc) << " zvc, "
          << n(stash::swap_encoding::bitmask) << " bitmask, " << n(stash::swap_encoding::raw)
          << " raw entries");
}

TEST_CASE("allocator<search_swap{.encodings}>: the registered planner's encodings replay exactly")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/vgg16_b32.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator_options o;
  o.device_budget = stash::test::scaled_peak(t) * 3 / 4;
  stash::search_swap policy;
  policy.max_refinements = 4;
  policy.encodings       = stash::encoding_options{};  // lossless codecs only
  using codecs           = stash::transfer_set<void, stash::zvc<float>, stash::bitmask>;
  stash::allocator<host_caching, stash::search_swap, codecs, stash::host_backend> alloc(
      backend, pool, o, policy);
  REQUIRE(stash::test::drive(alloc, backend, s, t, 1) == 0);
  auto const v = view_of(alloc, t);
  REQUIRE_FALSE(v.count.empty());
  CHECK_FALSE(v.count.contains(stash::swap_encoding::configured));  // each entry names one
  CHECK(stash::test::drive(alloc, backend, s, t, 2, v.checks) == 0);
  CHECK(alloc.stats().deviations == 0);
  CHECK(alloc.stats().scheduled_offloads > 0);
  CHECK(alloc.stats().offload.decode_failures == 0);
}

TEST_CASE("allocator<zvc>: encodings the Codec slot does not carry travel raw, bytes exact")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator_options o;
  stash::allocator<host_caching, vdnn_all_encoded, stash::zvc<float>, stash::host_backend> alloc(
      backend, pool, o);
  REQUIRE(stash::test::drive(alloc, backend, s, t, 1) == 0);
  auto const v = view_of(alloc, t);
  auto const n = [&](stash::swap_encoding e) { return v.count.contains(e) ? v.count.at(e) : 0; };
  REQUIRE(n(stash::swap_encoding::bitmask) > 0);
  // zvc runs as zvc; bitmask, pool_argmax and two_value are not in the slot.
  CHECK(alloc.stats().encoding_fallbacks == n(stash::swap_encoding::bitmask) +
                                                n(stash::swap_encoding::pool_argmax) +
                                                n(stash::swap_encoding::two_value));
  std::uint64_t inexact = 0;
  CHECK(stash::test::drive(alloc, backend, s, t, 2, {}, &inexact) == 0);  // every read exact
  CHECK(inexact == 0);
  CHECK(alloc.stats().scheduled_offloads == 2 * alloc.current_schedule().entries.size());
}

TEST_CASE("allocator: a hand-written step's bitmask and zvc entries run on the host backend")
{
  stash::host_backend backend;
  host_caching pool;
  stash::allocator_stats stats;
  auto const r =
      stash::test::run_encoded_step<host_caching,
                                    stash::transfer_set<stash::zvc<float>, stash::bitmask>>(
          backend, pool, 10'001, 3, &stats);
  CHECK(r.iterations == 3);
  CHECK(r.exact_c_reads == 3);
  CHECK(r.exact_b_reads == 3);  // zvc: lossless
  CHECK(r.mask_a_reads == 2);   // replayed iterations: a came back as its sign mask
  CHECK(stats.scheduled_offloads == 4);
  CHECK(stats.encoding_fallbacks == 0);
  CHECK(stats.deviations == 0);
  // zvc shrank b (two thirds zeros) and Binarize a: the codecs ran, not raw copies.
  CHECK(r.moved.bytes_encoded * 2 < r.moved.bytes_encoded_source);
}

TEST_CASE("allocator_options::default_encoding picks the set's member at run time")
{
  auto const t     = stash::read_trace(stash::test::data_path("traces/alexnet_b128.trace"));
  using codecs     = stash::transfer_set<stash::zvc<float>, stash::precision<float, stash::fp16>>;
  using alloc_type = stash::allocator<host_caching, stash::vdnn_all, codecs, stash::host_backend>;
  struct outcome {
    std::uint64_t fallbacks, entries, inexact;
    stash::offload_stats moved;
  };
  auto run = [&](std::optional<stash::swap_encoding> encoding) {
    stash::host_backend backend;
    auto const s = backend.create_stream();
    host_caching pool;
    stash::allocator_options o;
    o.default_encoding = encoding;
    alloc_type alloc(backend, pool, o);
    REQUIRE(stash::test::drive(alloc, backend, s, t, 1) == 0);
    std::vector<read_check> checks(t.storages().size(), read_check::fp16);
    outcome r{};
    CHECK(stash::test::drive(alloc, backend, s, t, 2, checks, &r.inexact) == 0);
    CHECK(alloc.stats().scheduled_offloads > 0);
    r.fallbacks = alloc.stats().encoding_fallbacks;
    r.entries   = alloc.stats().scheduled_offloads / 2;  // two replayed iterations
    r.moved     = alloc.stats().offload;
    return r;
  };
  auto const zvc = run(std::nullopt);  // member 0: zvc, lossless, smaller
  CHECK(zvc.fallbacks == 0);
  CHECK(zvc.inexact == 0);
  CHECK(zvc.moved.bytes_encoded < zvc.moved.bytes_encoded_source);
  auto const raw = run(stash::swap_encoding::raw);
  CHECK(raw.fallbacks == 0);
  CHECK(raw.inexact == 0);
  CHECK(raw.moved.bytes_encoded == raw.moved.bytes_encoded_source);
  auto const fp16 = run(stash::swap_encoding::fp16);
  CHECK(fp16.fallbacks == 0);
  CHECK(fp16.inexact > 0);  // fp16 ran: some values rounded
  CHECK(fp16.moved.bytes_encoded < fp16.moved.bytes_encoded_source * 6 / 10);
  // Not in the set: every entry travels raw, exact, and is counted.
  auto const missing = run(stash::swap_encoding::bf16);
  CHECK(missing.fallbacks == missing.entries);
  CHECK(missing.inexact == 0);
  CHECK(missing.moved.bytes_encoded == missing.moved.bytes_encoded_source);
}

TEST_CASE("allocator: bitmask or pool_argmax cannot be the default encoding")
{
  stash::host_backend backend;
  host_caching pool;
  using alloc_type =
      stash::allocator<host_caching, stash::vdnn_all, stash::transfer_set<void, stash::bitmask>,
                       stash::host_backend>;
  for (auto e : {stash::swap_encoding::bitmask, stash::swap_encoding::pool_argmax,
                 stash::swap_encoding::configured}) {
    stash::allocator_options o;
    o.default_encoding = e;
    CHECK_THROWS_AS(alloc_type(backend, pool, o), stash::logic_error);
  }
}

TEST_CASE("allocator: argmax exact, max-pool indices cross as 4 bits each on the host backend")
{
  stash::host_backend backend;
  host_caching pool;
  stash::allocator_stats stats;
  using codecs = stash::transfer_set<stash::zvc<float>, stash::pool_argmax>;
  auto const r = stash::test::run_argmax_step<host_caching, codecs>(backend, pool, 3, &stats);
  REQUIRE(r.iterations == 3);
  // Every index tensor comes back bit-identical, whichever way it travelled.
  CHECK(r.exact_reads == r.reads);
  CHECK(stats.scheduled_offloads == 2 * 4);
  CHECK(stats.deviations == 0);
  // j (a geometry of another size) and u (none) were refused when planned: raw, counted.
  CHECK(stats.encoding_fallbacks == 2);
  CHECK(r.moved.decode_failures == 0);
  // On the wire per replayed iteration: i as 32 + 4 ceil(n/8) bytes; j and u raw (8n); k, whose
  // indices are not its geometry's windows, unchanged after a header (32 + 8n).
  std::uint64_t const n        = r.outputs;
  std::uint64_t const argmax_i = 32 + 4 * ((n + 7) / 8);
  CHECK(r.moved.bytes_encoded_source == n * 8 * 4 * 2);  // 4 tensors, 2 replayed iterations
  CHECK(r.moved.bytes_encoded == 2 * (argmax_i + 8 * n + (32 + 8 * n) + 8 * n));
  MESSAGE("max-pool indices of " << n << " outputs (" << 8 * n << " B): " << argmax_i
                                 << " B on the wire as pool_argmax");
}

TEST_CASE("allocator: a replayed index tensor without its geometry travels raw, counted, exact")
{
  stash::host_backend backend;
  host_caching pool;
  stash::allocator_stats stats;
  using codecs = stash::transfer_set<void, stash::pool_argmax>;
  // i is described when recorded (planned as pool_argmax), not in the two replayed iterations.
  auto const r =
      stash::test::run_argmax_step<host_caching, codecs>(backend, pool, 3, &stats, false);
  CHECK(r.exact_reads == r.reads);
  CHECK(stats.encoding_fallbacks == 2 + 2);  // j and u when planned, i at each replayed offload
  std::uint64_t const n = r.outputs;
  CHECK(r.moved.bytes_encoded == 2 * (8 * n + 8 * n + (32 + 8 * n) + 8 * n));
}

TEST_CASE("pool_argmax_transfer refuses tensors it cannot encode before taking memory")
{
  using transfer = stash::pool_argmax_transfer;
  stash::pool_geometry const g{4, 8, 8, 2, 2, 2, 2};  // 64 outputs
  constexpr std::size_t bytes = 64 * sizeof(std::int64_t);
  CHECK(transfer::host_bytes(bytes, g) == 32 + bytes);
  CHECK_THROWS_AS((void)transfer::host_bytes(bytes - 8, g), stash::logic_error);
  stash::pool_geometry wide = g;
  wide.window_w             = 5;
  CHECK_THROWS_AS((void)transfer::host_bytes(bytes, wide), stash::logic_error);
  // 2^61 + 8 outputs: outputs() * 8 wraps to exactly `bytes` (and host_bytes' 32 + 8 * outputs()
  // to 32 + bytes), so only the geometry's own overflow check stops the encoder from running over
  // 2^61 indices of a 64-index tensor.
  stash::pool_geometry const wrapping{(std::size_t{1} << 61) + 64, 1, 1, 1, 1, 1, 1};
  REQUIRE(wrapping.outputs() * sizeof(std::int64_t) == bytes);
  CHECK_THROWS_AS((void)transfer::host_bytes(bytes, wrapping), stash::logic_error);
  // Through the manager: refused with logic_error, the tensor stays resident and intact.
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching device_pool, host_pool;
  stash::offload_manager<stash::host_backend, host_caching, host_caching,
                         stash::transfer_set<stash::raw_transfer, transfer>>
      m(backend, device_pool, host_pool);
  auto const h = m.allocate_async(bytes, s);
  std::vector<std::int64_t> const values(64, 3);
  backend.copy_async(m.acquire_async(h, s), values.data(), bytes, s);
  // No descriptor: the member that needs one is refused by the manager, before its host_bytes.
  CHECK_FALSE(m.accepts(bytes, 1));
  CHECK_THROWS_AS((void)m.host_slot_bytes(bytes, 1), stash::logic_error);
  CHECK_THROWS_AS(m.offload_async(h, s, 1), stash::logic_error);
  CHECK_THROWS_AS(m.offload_async(h, s, 1, wide), stash::logic_error);
  CHECK(m.state(h) == stash::tensor_state::resident);
  std::vector<std::int64_t> back(64);
  backend.copy_async(back.data(), m.acquire_async(h, s), bytes, s);
  backend.synchronize(s);
  CHECK(back == values);
  // Described, it goes and comes back exact (each window's row 1, column 0: position 2).
  std::vector<std::int64_t> indices(64);
  for (std::size_t o = 0; o < 64; ++o) {
    std::size_t const q = o % 16;
    indices[o]          = static_cast<std::int64_t>((q / 4 * 2 + 1) * 8 + q % 4 * 2);
  }
  backend.copy_async(m.acquire_async(h, s), indices.data(), bytes, s);
  m.offload_async(h, s, 1, g);
  m.synchronize();
  CHECK(m.state(h) == stash::tensor_state::offloaded);  // the host sees the copy complete
  CHECK(m.stats().bytes_encoded == 32 + 4 * 8);
  backend.copy_async(back.data(), m.acquire_async(h, s), bytes, s);
  backend.synchronize(s);
  m.synchronize();
  CHECK(back == indices);
  m.deallocate_async(h);
}

TEST_CASE(
    "pool_argmax_transfer: indices outside their windows travel unchanged; corruption is loud")
{
  using transfer = stash::pool_argmax_transfer;
  // Indices of a 3x3/2 pool over 9x9 maps described as a 2x2/2 pool over 8x8 (4x4 outputs each).
  stash::pool_geometry const truth{3, 9, 9, 3, 3, 2, 2};
  stash::pool_geometry const described{3, 8, 8, 2, 2, 2, 2};
  REQUIRE(truth.outputs() == described.outputs());
  auto const in           = stash::test::pool_input(std::size_t{3} * 9 * 9, 5);
  auto const indices      = stash::test::max_pool_indices(in, truth);
  std::size_t const n     = indices.size();
  std::size_t const bytes = n * sizeof(std::int64_t);
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching device_pool, host_pool;
  stash::offload_manager<stash::host_backend, host_caching, host_caching,
                         stash::transfer_set<stash::raw_transfer, transfer>>
      m(backend, device_pool, host_pool);
  auto const h = m.allocate_async(bytes, s);
  backend.copy_async(m.acquire_async(h, s), indices.data(), bytes, s);
  m.offload_async(h, s, 1, described);
  (void)m.host_copy(h);                          // waits for the copy, counts its size
  CHECK(m.stats().bytes_encoded == 32 + bytes);  // written unchanged, after a header
  std::vector<std::int64_t> back(n, -1);
  backend.copy_async(back.data(), m.acquire_async(h, s), bytes, s);
  backend.synchronize(s);
  m.synchronize();
  CHECK(back == indices);
  // A host copy whose count was corrupted is refused: zeros and codec_error, not data.
  m.offload_async(h, s, 1, described);
  auto const again = m.host_copy(h);
  const_cast<std::byte&>(again[16]) ^= std::byte{0x10};  // element count 48 -> 32
  backend.copy_async(back.data(), m.acquire_async(h, s), bytes, s);
  backend.synchronize(s);
  CHECK_THROWS_AS(m.synchronize(), stash::codec_error);
  CHECK(back == std::vector<std::int64_t>(n, 0));
  m.deallocate_async(h);
}

TEST_CASE("allocator: ReLU6's saved input crosses as range_mask, hardtanh's gradient bitwise exact")
{
  // MobileNet's in-place ReLU6 keeps a clone of its input x for hardtanh_backward(grad, x, 0, 6).
  // x is described with ReLU6's bounds: 1 bit per element on the wire. u, the same values
  // undescribed, cannot be encoded: it travels raw (exact), counted once, when planned.
  stash::host_backend backend;
  host_caching pool;
  using codecs     = stash::transfer_set<stash::zvc<float>, stash::range_mask>;
  using alloc_type = stash::allocator<host_caching, clamp_step_policy, codecs, stash::host_backend>;
  using ids        = std::vector<stash::tensor_handle>;
  std::size_t const n     = 4099;
  std::size_t const bytes = n * sizeof(float);
  auto const specials     = stash::test::range_mask_special_cases(0.0f, 6.0f);
  std::vector<float> xv(n);
  for (std::size_t i = 0; i < n; ++i) {
    xv[i] = i < specials.size() ? std::bit_cast<float>(specials[i])
                                : -2.0f + static_cast<float>(i * 7919 % 1000) / 100.0f;
  }
  std::vector<float> const grad(n, 0.25f);
  auto const expected = stash::test::hardtanh_backward(grad, xv, 0.0f, 6.0f);
  auto const s        = backend.create_stream();
  alloc_type alloc(backend, pool, stash::allocator_options{});
  std::vector<float> got_x(n), got_u(n);
  for (int it = 0; it < 3; ++it) {
    CAPTURE(it);
    alloc.begin_iteration();
    alloc.phase(stash::phase::forward);
    auto const x   = alloc.allocate_async(bytes, stash::storage_kind::act, "x", s,
                                          stash::range_bounds{0.0f, 6.0f});
    auto const u   = alloc.allocate_async(bytes, stash::storage_kind::act, "u", s);
    auto const out = alloc.op("aten::clone", ids{}, ids{x, u}, s);
    backend.copy_async(out[0], xv.data(), bytes, s);
    backend.copy_async(out[1], xv.data(), bytes, s);
    auto const y = alloc.allocate_async(bytes, stash::storage_kind::act, "y", s);
    (void)alloc.op("aten::hardtanh_", ids{}, ids{y}, s);
    (void)alloc.op("aten::sum", ids{y}, ids{}, s);
    alloc.phase(stash::phase::backward);
    auto const back = alloc.op("aten::hardtanh_backward", ids{x, u}, ids{}, s);
    backend.copy_async(got_x.data(), back[0], bytes, s);
    backend.copy_async(got_u.data(), back[1], bytes, s);
    for (auto h : {x, u, y}) { alloc.deallocate_async(h); }
    alloc.end_iteration();
    backend.synchronize(s);
    alloc.synchronize();
    CHECK(stash::test::bitwise_equal(stash::test::hardtanh_backward(grad, got_x, 0.0f, 6.0f),
                                     expected));
    CHECK(stash::test::bitwise_equal(got_u, xv));
    if (it > 0) {  // replayed: x came back as 0 or 2 (range_mask ran), not as its values
      std::size_t other = 0;
      for (float const v : got_x) { other += v != 0.0f && v != 2.0f; }
      CHECK(other == 0);
    }
  }
  auto const& st = alloc.stats();
  CHECK(st.scheduled_offloads == 2 * 2);
  CHECK(st.encoding_fallbacks == 1);  // u, when planned
  CHECK(st.offload.decode_failures == 0);
  // Per replayed iteration: x as 40 + 4 ceil(n/32) bytes, u raw.
  CHECK(st.offload.bytes_encoded == 2 * ((40 + 4 * ((n + 31) / 32)) + bytes));
}

TEST_CASE("allocator: range_mask cannot be the default encoding (nor, statically, member 0)")
{
  using alloc_type =
      stash::allocator<host_caching, stash::vdnn_all, stash::transfer_set<void, stash::range_mask>,
                       stash::host_backend>;
  static_assert(stash::detail::sign_or_index_only(stash::swap_encoding::range_mask));
  stash::host_backend backend;
  host_caching pool;
  stash::allocator_options o;
  CHECK_NOTHROW(alloc_type(backend, pool, o));  // the control: the same allocator, no default
  o.default_encoding = stash::swap_encoding::range_mask;
  CHECK_THROWS_AS(alloc_type(backend, pool, o), stash::logic_error);
}

}  // namespace STASH_UNITY_ID
