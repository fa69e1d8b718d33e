// Per-tensor encodings: each rule of encoding_choice.hpp on a hand-made trace, the cost model's
// ratios, and search_swap choosing them on a real trace.
#include "support/data.hpp"

#include <stash/codec/bitmask.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/simulator.hpp>
#include <stash/sim/trace_analysis.hpp>
#include <stash/swap/encoding_choice.hpp>
#include <stash/swap/search_swap.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

// r = relu(x) feeds a max pool (m, idx) and its backward; s = relu(m) is read after its gap only
// by a view (detach, which reads no values) and by threshold_backward as `self`; m is read again
// by a plain add.
std::string const encodings_trace = R"(# stash-trace v1 model=encodings
p forward
t 0 4000 input x
t 1 4000 act r
o aten::relu 0 1
t 2 1000 act m
t 3 2000 act idx
o aten::max_pool2d_with_indices 1 2,3
t 4 1000 act s
o aten::relu 2 4
t 5 1000 act h
o aten::mul 4 5
o aten::sum 5 -
p backward
t 6 1000 temp g
o aten::mul 5 6
o aten::detach 4 -
t 7 1000 temp g2
o aten::threshold_backward 6,4 7
t 8 4000 temp g3
o aten::max_pool2d_with_indices_backward 7,1,3 8
o aten::add 2,8 -
f 1
f 2
f 3
f 4
f 5
f 6
f 7
f 8
)";

stash::cost_model pcie4() { return stash::cost_model(stash::hardware_preset("pcie4_x16")); }

}  // namespace

TEST_CASE("encodings follow the trace's semantics")
{
  auto const t = stash::parse_trace(encodings_trace, "encodings");
  stash::trace_analysis const a(t, pcie4());
  auto entry = [&](stash::storage_id id, std::uint64_t u, std::uint64_t v) {
    return stash::swap_entry{id, u, v, u + 1, v, t.storages()[id].bytes};
  };
  // r: ReLU output whose max-pool backward needs its values after the gap: zvc.
  CHECK(stash::choose_encoding(a, entry(1, 1, 8)) == stash::swap_encoding::zvc);
  // idx: max-pool indices: a 4-bit argmax.
  CHECK(stash::choose_encoding(a, entry(3, 1, 8)) == stash::swap_encoding::pool_argmax);
  // s: ReLU output read after the gap only as threshold_backward's self (and by a view): its
  // sign suffices.
  CHECK(stash::choose_encoding(a, entry(4, 3, 6)) == stash::swap_encoding::bitmask);
  // From before the gap on, a value-reading op (mul) reads s: zvc.
  CHECK(stash::choose_encoding(a, entry(4, 2, 3)) == stash::swap_encoding::zvc);
  // m: a max-pool output (not ReLU-like): raw, unless lossy is opted in for activations.
  CHECK(stash::choose_encoding(a, entry(2, 2, 9)) == stash::swap_encoding::raw);
  stash::encoding_options lossy;
  lossy.lossy_activations = stash::swap_encoding::fp16;
  CHECK(stash::choose_encoding(a, entry(2, 2, 9), lossy) == stash::swap_encoding::fp16);
  // Lossless codecs off: everything raw.
  CHECK(stash::choose_encoding(a, entry(1, 1, 8), stash::encoding_options{false, {}}) ==
        stash::swap_encoding::raw);
  // Lossless codecs off, lossy opted in: activations are rounded, but never the int64 indices
  // (a float format would turn them into garbage: GPU review 2026-11-26, S1).
  stash::encoding_options const lossy_only{false, stash::swap_encoding::fp16};
  CHECK(stash::choose_encoding(a, entry(2, 2, 9), lossy_only) == stash::swap_encoding::fp16);
  CHECK(stash::choose_encoding(a, entry(3, 1, 8), lossy_only) == stash::swap_encoding::raw);
}

TEST_CASE("an op that writes no tensor but is not a view reads values: no Binarize")
{
  // s = relu(x) is read after its gap by aten::_local_scalar_dense (loss.item(): a value read
  // that writes no tensor) and by threshold_backward.
  auto const t = stash::parse_trace(R"(# stash-trace v1 model=scalar_read
p forward
t 0 4000 input x
t 1 4000 act s
o aten::relu 0 1
t 2 4000 act h
o aten::mul 1 2
p backward
o aten::_local_scalar_dense 1 -
t 3 4000 temp g
o aten::threshold_backward 2,1 3
f 1
f 2
f 3
)",
                                    "scalar_read");
  stash::trace_analysis const a(t, pcie4());
  stash::swap_entry const e{1, 1, 2, 2, 2, 4000};
  CHECK(stash::choose_encoding(a, e) == stash::swap_encoding::zvc);
}

namespace {

// ReLU6 as PyTorch records it in place: c = clone(b) (saved for the backward), then hardtanh_(b).
// c is read after its gap by a view and as hardtanh_backward's `self`; d = clone(b) is read as
// hardtanh_backward's `grad` too; b (hardtanh's output) feeds a mul and is read again by it.
std::string relu6_trace(std::string const& header)
{
  return "# stash-trace v1 model=relu6" + header + R"(
p forward
t 0 4000 input x
t 1 4000 act b
o aten::native_batch_norm 0 1
t 2 4000 act c
o aten::clone 1 2
t 3 4000 act d
o aten::clone 1 3
o aten::hardtanh_ 1 1
t 4 4000 act y
o aten::mul.Tensor 1,0 4
p backward
t 5 4000 temp g
o aten::mul.Tensor 4,1 5
o aten::detach 2 -
t 6 4000 temp g2
o aten::hardtanh_backward 5,2 6
t 7 4000 temp g3
o aten::hardtanh_backward 3,3 7
f 1
f 2
f 3
f 4
f 5
f 6
f 7
)";
}

}  // namespace

TEST_CASE("a copy only hardtanh's backward reads crosses as one bit per element (range_mask)")
{
  auto const t = stash::parse_trace(relu6_trace(""), "relu6");
  stash::trace_analysis const a(t, pcie4());
  auto entry = [&](stash::storage_id id, std::uint64_t u, std::uint64_t v) {
    return stash::swap_entry{id, u, v, u + 1, v, t.storages()[id].bytes};
  };
  // c: read after its gap only as hardtanh_backward's self (and by a view): whether each element
  // lies inside (min, max) suffices.
  CHECK(stash::choose_encoding(a, entry(2, 1, 6)) == stash::swap_encoding::range_mask);
  // d: hardtanh_backward reads it as its grad too (its values): raw.
  CHECK(stash::choose_encoding(a, entry(3, 2, 8)) == stash::swap_encoding::raw);
  // b: hardtanh's output, read by a mul after its gap: zvc, as every ReLU-like output.
  CHECK(stash::choose_encoding(a, entry(1, 4, 5)) == stash::swap_encoding::zvc);
  // Lossless codecs off: raw; a trace whose tensors are not float32: not a float mask.
  CHECK(stash::choose_encoding(a, entry(2, 1, 6), stash::encoding_options{false, {}}) ==
        stash::swap_encoding::raw);
  auto const half = stash::parse_trace(relu6_trace(" dtype=float16"), "relu6_half");
  stash::trace_analysis const ah(half, pcie4());
  CHECK(stash::choose_encoding(ah, entry(2, 1, 6)) == stash::swap_encoding::raw);
  auto const m = pcie4();
  CHECK(m.wire_bytes(32000, stash::swap_encoding::range_mask) == 1000);
  CHECK(stash::encoding_of_codec(stash::codec_ids::range_mask) == stash::swap_encoding::range_mask);
}

TEST_CASE("a storage only LeakyReLU's backward reads crosses as its sign (bitmask)")
{
  // a = conv(x) is read by leaky_relu and, after its gap, only as leaky_relu_backward's self;
  // b is made in place by leaky_relu_ and read the same way (self_is_result); c is read after
  // its gap by leaky_relu_backward and by a mul (its values).
  std::string const body = R"(
p forward
t 0 4000 input x
t 1 4000 act a
o aten::convolution 0 1
t 2 4000 act y
o aten::leaky_relu 1 2
t 3 4000 act b
o aten::convolution 2 3
o aten::leaky_relu_ 3 3
t 4 4000 act c
o aten::convolution 3 4
t 5 4000 act z
o aten::leaky_relu 4 5
o aten::sum 5 -
p backward
t 6 4000 temp g
o aten::leaky_relu_backward 5,4 6
o aten::mul.Tensor 4,6 6
o aten::leaky_relu_backward 6,3 6
o aten::leaky_relu_backward 6,1 6
f 1
f 2
f 3
f 4
f 5
f 6
)";
  auto const t           = stash::parse_trace("# stash-trace v1 model=leaky" + body, "leaky");
  stash::trace_analysis const a(t, pcie4());
  auto entry = [&](stash::storage_id id, std::uint64_t u, std::uint64_t v) {
    return stash::swap_entry{id, u, v, u + 1, v, t.storages()[id].bytes};
  };
  CHECK(stash::choose_encoding(a, entry(1, 1, 10)) == stash::swap_encoding::bitmask);  // a
  CHECK(stash::choose_encoding(a, entry(3, 4, 9)) == stash::swap_encoding::bitmask);   // b
  CHECK(stash::choose_encoding(a, entry(4, 5, 7)) == stash::swap_encoding::raw);       // c
  CHECK(stash::choose_encoding(a, entry(1, 1, 10), stash::encoding_options{false, {}}) ==
        stash::swap_encoding::raw);
  auto const half = stash::parse_trace("# stash-trace v1 model=leaky dtype=float16" + body, "h");
  stash::trace_analysis const ah(half, pcie4());
  CHECK(stash::choose_encoding(ah, entry(1, 1, 10)) == stash::swap_encoding::raw);
}

namespace {

// A dropout written as a draw: m = bernoulli_(empty_like(x)) holds 0 or 1 in every element; d is
// the same draw scaled in place by 1/(1-p) (PyTorch's CPU dropout), holding {0, 1/(1-p)}. Both
// are read by a mul in the forward and again in the backward.
std::string dropout_trace(std::string const& header)
{
  return "# stash-trace v1 model=dropout" + header + R"(
p forward
t 0 4000 input x
t 1 4000 act m
o aten::empty_like 0 1
o aten::bernoulli_.float 1 1
t 2 4000 act y
o aten::mul.Tensor 0,1 2
t 3 4000 act d
o aten::empty_like 2 3
o aten::bernoulli_.float 3 3
o aten::div_.Scalar 3 3
t 4 4000 act z
o aten::mul.Tensor 2,3 4
p backward
t 5 4000 temp g
o aten::mul.Tensor 4,3 5
t 6 4000 temp g2
o aten::mul.Tensor 5,1 6
f 1
f 2
f 3
f 4
f 5
f 6
)";
}

}  // namespace

TEST_CASE("a Bernoulli draw (0 or 1 in every element) crosses as one bit per element")
{
  auto const t = stash::parse_trace(dropout_trace(" dtype=float32"), "dropout");
  stash::trace_analysis const a(t, pcie4());
  // m's values are read after its gap by a mul (not only their sign): Binarize's decoding is
  // still exact, since every element is 0.0f or 1.0f.
  stash::swap_entry const m{1, 2, 8, 3, 8, 4000};
  CHECK(stash::choose_encoding(a, m) == stash::swap_encoding::bitmask);
  // d was scaled after the draw: {0, 1/(1-p)} would come back as {0, 1} from Binarize: it
  // crosses as two_value (one bit per element and the value), never bitmask.
  stash::swap_entry const d{3, 6, 7, 7, 7, 4000};
  CHECK(stash::choose_encoding(a, d) == stash::swap_encoding::two_value);
  // Lossless codecs off: raw.
  stash::encoding_options const none{false, std::nullopt};
  CHECK(stash::choose_encoding(a, m, none) == stash::swap_encoding::raw);
  // A trace that says its tensors are not float32: Binarize reads float32, so raw.
  auto const half = stash::parse_trace(dropout_trace(" dtype=float16"), "dropout16");
  stash::trace_analysis const ah(half, pcie4());
  CHECK(stash::choose_encoding(ah, m) == stash::swap_encoding::raw);
  // No dtype in the header: taken as float32, as for the ReLU rules.
  auto const plain = stash::parse_trace(dropout_trace(""), "dropout_plain");
  stash::trace_analysis const ap(plain, pcie4());
  CHECK(stash::choose_encoding(ap, m) == stash::swap_encoding::bitmask);

  // A draw into a quarter-sized tensor (empty_like(x, dtype=bool)) or into one made from a
  // shape alone (empty): its element type is not known to be float32, so raw.
  auto const other = stash::parse_trace(R"(# stash-trace v1 model=masks dtype=float32
p forward
t 0 4000 input x
t 1 1000 act b
o aten::empty_like 0 1
o aten::bernoulli_.float 1 1
t 2 4000 act e
o aten::empty - 2
o aten::bernoulli_.float 2 2
t 3 4000 act y
o aten::mul.Tensor 0,2 3
p backward
t 4 4000 temp g
o aten::mul.Tensor 3,2 4
o aten::sum 1 -
f 1
f 2
f 3
f 4
)",
                                        "masks");
  stash::trace_analysis const ao(other, pcie4());
  CHECK(stash::choose_encoding(ao, stash::swap_entry{1, 1, 6, 2, 6, 1000}) ==
        stash::swap_encoding::raw);
  CHECK(stash::choose_encoding(ao, stash::swap_entry{2, 4, 5, 5, 5, 4000}) ==
        stash::swap_encoding::raw);
  // ... though the same draw into empty_like(x) of x's size is Binarized (m above).

  // The premise: the host Binarize round-trips a 0/1 float buffer bit for bit.
  std::vector<float> draw(1000);
  for (std::size_t i = 0; i < draw.size(); ++i) { draw[i] = (i * 7919 % 10) < 9 ? 1.0f : 0.0f; }
  std::vector<std::byte> buf(stash::bitmask::max_compressed_bytes(draw.size()));
  stash::bitmask::host_encode(draw, buf);
  std::vector<float> back(draw.size(), -1.0f);
  CHECK(stash::bitmask::host_decode(buf, back) == draw.size());
  CHECK(std::memcmp(back.data(), draw.data(), draw.size() * sizeof(float)) == 0);
}

TEST_CASE("a Bernoulli draw scaled in place by scalars crosses as two_value")
{
  // Op indices: 0 empty_like, 1 bernoulli_, 2 div_.Scalar, 3 mul_.Scalar | 4 add_.Tensor |
  // 5 relu, 6 div_.Scalar | 7 empty_like, 8 bernoulli_, 9 div_.Scalar, 10 mul_.Tensor;
  // every storage is read after its gap by one mul at 11..14.
  auto const t = stash::parse_trace(R"(# stash-trace v1 model=scaled dtype=float32
p forward
t 0 4000 input x
t 1 4000 act a
o aten::empty_like 0 1
o aten::bernoulli_.float 1 1
o aten::div_.Scalar 1 1
o aten::mul_.Scalar 1 1
t 2 4000 act b
o aten::add_.Tensor 1,0 1
t 3 4000 act r
o aten::relu 0 3
o aten::div_.Scalar 3 3
t 4 4000 act c
o aten::empty_like 0 4
o aten::bernoulli_.float 4 4
o aten::div_.Scalar 4 4
o aten::mul_.Tensor 4,0 4
p backward
o aten::mul.Tensor 1,0 2
o aten::mul.Tensor 1,0 2
o aten::mul.Tensor 3,0 2
o aten::mul.Tensor 4,0 2
f 1
f 2
f 3
f 4
)",
                                    "scaled");
  stash::trace_analysis const a(t, pcie4());
  auto enc = [&](stash::storage_id id, std::uint64_t last, std::uint64_t next) {
    return stash::choose_encoding(a, stash::swap_entry{id, last, next, last + 1, next, 4000});
  };
  // Drawn, divided, multiplied by scalars: still {0, c}.
  CHECK(enc(1, 3, 11) == stash::swap_encoding::two_value);
  CHECK(enc(1, 2, 11) == stash::swap_encoding::two_value);
  // Before the scaling the draw is 0/1: Binarize is exact there.
  CHECK(enc(1, 1, 11) == stash::swap_encoding::bitmask);
  // A tensor added in place after the scaling: any values, raw.
  CHECK(enc(1, 4, 12) == stash::swap_encoding::raw);
  // A ReLU output divided by a scalar: no draw, and its last write is not the ReLU: raw.
  CHECK(enc(3, 6, 13) == stash::swap_encoding::raw);
  // mul_.Tensor reads another tensor: elementwise, not one scalar: raw.
  CHECK(enc(4, 10, 14) == stash::swap_encoding::raw);
  CHECK(enc(4, 9, 14) == stash::swap_encoding::two_value);
  // Lossless codecs off, or a trace of another dtype: raw.
  stash::encoding_options const none{false, std::nullopt};
  CHECK(stash::choose_encoding(a, stash::swap_entry{1, 3, 11, 4, 11, 4000}, none) ==
        stash::swap_encoding::raw);
  auto const half = stash::parse_trace(dropout_trace(" dtype=float16"), "dropout16");
  stash::trace_analysis const ah(half, pcie4());
  CHECK(stash::choose_encoding(ah, stash::swap_entry{3, 6, 7, 7, 7, 4000}) ==
        stash::swap_encoding::raw);

  // The premise, checked by the codec: a draw divided by 1 - p round-trips bit for bit; one
  // scaled by a negative number (0 * k = -0.0: three patterns) is refused, so it travels raw.
  std::vector<float> draw(1000);
  for (std::size_t i = 0; i < draw.size(); ++i) { draw[i] = (i * 7919 % 10) < 9 ? 1.0f : 0.0f; }
  auto scaled = draw;
  for (auto& x : scaled) { x /= 1.0f - 0.1f; }
  auto const buf  = stash::host_encode_vector<stash::two_value<float>>(scaled);
  auto const back = stash::host_decode_vector<stash::two_value<float>>(buf);
  REQUIRE(back.size() == scaled.size());
  CHECK(std::memcmp(back.data(), scaled.data(), scaled.size() * sizeof(float)) == 0);
  CHECK(buf.size() == 40 + 4 * 32);  // 1 bit per element: 4000 B as 168
  for (auto& x : draw) { x *= -2.0f; }
  CHECK_FALSE(stash::two_value<float>::two_value_of(draw).has_value());
}

TEST_CASE("the cost model prices each encoding by its ratio")
{
  auto const m = pcie4();
  CHECK(m.wire_bytes(32000, stash::swap_encoding::raw) == 32000);
  CHECK(m.wire_bytes(32000, stash::swap_encoding::configured) == 32000);  // no codec configured
  CHECK(m.wire_bytes(32000, stash::swap_encoding::bitmask) == 1000);
  CHECK(m.wire_bytes(32000, stash::swap_encoding::two_value) == 1000);
  CHECK(m.wire_bytes(32000, stash::swap_encoding::pool_argmax) == 2000);
  CHECK(m.wire_bytes(32000, stash::swap_encoding::fp16) == 16000);
  CHECK(m.wire_bytes(32000, stash::swap_encoding::fp8_e4m3) == 8000);
  CHECK(m.wire_bytes(32000, stash::swap_encoding::zvc) == 20000);  // declared ratio 1.6
  CHECK(m.encode_time(32000, stash::swap_encoding::raw) == 0.0);
  CHECK(m.encode_time(32000, stash::swap_encoding::zvc) > 0.0);
  CHECK(m.offload_time(1 << 24, stash::swap_encoding::bitmask) <
        m.offload_time(1 << 24, stash::swap_encoding::raw));
}

TEST_CASE("search_swap with per-tensor encodings moves fewer bytes over the link")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/vgg16_b32.trace"));
  stash::trace_analysis const a(t, pcie4());
  auto const budget = a.peak_live_bytes() * 3 / 4;
  stash::search_swap encoded;
  encoded.encodings = stash::encoding_options{};
  auto const plain  = stash::search_swap{}.plan(a, budget);
  auto const s      = encoded.plan(a, budget);
  auto const r      = stash::simulate(a, s);
  auto const rp     = stash::simulate(a, plain);
  REQUIRE(r.fits);
  REQUIRE(rp.fits);
  int zvc = 0;
  for (auto const& e : s.entries) {
    CHECK(e.encoding != stash::swap_encoding::configured);
    zvc += e.encoding == stash::swap_encoding::zvc ? 1 : 0;
  }
  CHECK(zvc > 0);
  CHECK(r.d2h_bytes < s.offloaded_bytes());
  MESSAGE("vgg16 at 75% on pcie4_x16: " << rp.iteration_s * 1e3 << " ms raw, "
                                        << r.iteration_s * 1e3 << " ms with encodings");
}

}  // namespace STASH_UNITY_ID
