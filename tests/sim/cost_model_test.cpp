// The cost model on hand-made traces: FLOPs derived from sizes, the roofline, transfer and codec
// times, and the hardware presets.
#include "support/approx.hpp"
#include "support/data.hpp"

#include <stash/core/error.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/op_flops.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <string>

namespace STASH_UNITY_ID {

namespace {

// Round numbers so every time can be worked out by hand: 1 GB/s everywhere, 1 TFLOP/s.
stash::hardware const round_hw{"round", "test machine", 1e9, 2e9, 1e-6, 1e9, 1e12, 2e-6, 1u << 30};

stash::cost_params exact()
{
  stash::cost_params p;
  p.compute_efficiency = 1.0;
  p.memory_efficiency  = 1.0;
  return p;
}

// conv: X = 2x3x4x4 (96 elements), W = 8x3x3x3 (216), b = 8, Y = 2x8x4x4 (256).
// FLOPs = 2 N K P Q C r s = 2*2*8*16*3*9 = 13824.
std::string const conv_trace = R"(# stash-trace v1 model=conv dtype=float32
t 0 864 param w
t 1 32 param b
t 2 384 input x
p forward
t 3 1024 act y
o aten::convolution 2,0,1 3
o aten::relu_ 3 3
p backward
t 4 384 temp dx
t 5 864 grad w.grad
t 6 32 grad b.grad
o aten::convolution_backward 3,2,0 4,5,6
o aten::t 0 -
)";

}  // namespace

TEST_CASE("FLOPs of a biased convolution and its backward follow from sizes")
{
  auto const t    = stash::parse_trace(conv_trace, "conv");
  auto const work = stash::estimate_op_work(t);
  REQUIRE(work.size() == 4);
  CHECK(work[0].flops == doctest::Approx(13824.0));
  CHECK(work[0].bytes == 384 + 864 + 32 + 1024);
  CHECK_FALSE(work[0].view);
  CHECK(work[1].flops == 0.0);                           // elementwise: bytes only
  CHECK(work[1].bytes == 2 * 1024);                      // reads and writes y
  CHECK(work[2].flops == doctest::Approx(2 * 13824.0));  // dX and dW
  CHECK(work[3].view);
}

TEST_CASE("a convolution without bias takes its channel count from the next op's parameter")
{
  auto const t    = stash::parse_trace(R"(# stash-trace v1 model=conv dtype=float32
t 0 864 param w
t 1 32 param bn.weight
t 2 384 input x
p forward
t 3 1024 act y
o aten::convolution 2,0 3
t 4 1024 act z
o aten::native_batch_norm 3,1 4
)",
                                       "conv_bn");
  auto const work = stash::estimate_op_work(t);
  CHECK(work[0].flops == doctest::Approx(13824.0));
}

TEST_CASE("a convolution whose channel count cannot be found is costed by bytes")
{
  auto const t = stash::parse_trace(R"(# stash-trace v1 model=conv dtype=float32
t 0 864 param w
t 1 384 input x
p forward
t 2 1024 act y
o aten::convolution 1,0 2
o aten::relu_ 2 2
)",
                                    "conv_relu");
  CHECK(stash::estimate_op_work(t)[0].flops == 0.0);
}

TEST_CASE("mm and addmm FLOPs are exact for any shapes")
{
  // A = 2x3, B = 3x4, C = 2x4: 2 M K N = 48.
  auto const t    = stash::parse_trace(R"(# stash-trace v1 model=mm dtype=float32
t 0 24 input a
t 1 48 param b
t 2 16 param bias
t 3 32 act c
o aten::mm 0,1 3
t 4 32 act d
o aten::addmm 2,0,1 4
)",
                                       "mm");
  auto const work = stash::estimate_op_work(t);
  CHECK(work[0].flops == doctest::Approx(48.0));
  CHECK(work[1].flops == doctest::Approx(48.0));
}

TEST_CASE("op time is launch overhead plus the roofline maximum")
{
  stash::cost_model const model(round_hw, exact());
  // Memory-bound: 4000 B at 1 GB/s = 4 us > 1000 FLOPs at 1 TFLOP/s = 1 ns.
  CHECK(model.op_time({1000.0, 4000, false}) == stash::test::approx_s(2e-6 + 4e-6));
  // Compute-bound: 1e7 FLOPs = 10 us > 4 us.
  CHECK(model.op_time({1e7, 4000, false}) == stash::test::approx_s(2e-6 + 10e-6));
  CHECK(model.op_time({1e7, 4000, true}) == 0.0);  // views launch no kernel

  auto p      = exact();
  p.use_flops = false;
  CHECK(stash::cost_model(round_hw, p).op_time({1e7, 4000, false}) == stash::test::approx_s(6e-6));
  p                    = exact();
  p.compute_efficiency = 0.5;
  CHECK(stash::cost_model(round_hw, p).op_time({1e7, 4000, false}) == stash::test::approx_s(22e-6));
}

TEST_CASE("transfer time is latency plus wire bytes over the link, codec time on top")
{
  stash::cost_model const plain(round_hw, exact());
  CHECK(plain.d2h_time(1000000) == stash::test::approx_s(1e-6 + 1e-3));
  CHECK(plain.h2d_time(1000000) == stash::test::approx_s(1e-6 + 0.5e-3));
  CHECK(plain.encode_time(1000000) == 0.0);
  CHECK(plain.wire_bytes(1000000) == 1000000);

  auto p        = exact();
  p.use_codec   = true;
  p.codec_ratio = 4.0;
  stash::cost_model const coded(round_hw, p);
  CHECK(coded.wire_bytes(1000000) == 250000);
  CHECK(coded.d2h_time(1000000) == stash::test::approx_s(1e-6 + 0.25e-3));
  // 1 MB at half of 1 GB/s plus one launch.
  CHECK(coded.encode_time(1000000) == stash::test::approx_s(2e-6 + 2e-3));
  CHECK(coded.offload_time(1000000) ==
        stash::test::approx_s(coded.encode_time(1000000) + coded.d2h_time(1000000)));
  // A prefetch is the H2D copy of the 250 kB on the wire (at 2 GB/s), then the decode kernel.
  CHECK(coded.decode_time(1000000) == stash::test::approx_s(2e-6 + 2e-3));
  CHECK(coded.prefetch_time(1000000) == stash::test::approx_s((1e-6 + 0.125e-3) + (2e-6 + 2e-3)));
  CHECK(plain.prefetch_time(1000000) == stash::test::approx_s(1e-6 + 0.5e-3));
  CHECK(stash::codec_ratio_of(1000, 250) == doctest::Approx(4.0));
  CHECK_THROWS_AS((void)stash::codec_ratio_of(1000, 0), stash::logic_error);
}

TEST_CASE("bad cost parameters are rejected with what is wrong")
{
  auto p               = exact();
  p.compute_efficiency = 1.5;
  CHECK_THROWS_WITH_AS(stash::cost_model(round_hw, p), doctest::Contains("compute_efficiency"),
                       stash::logic_error);
  p             = exact();
  p.codec_ratio = 0;
  CHECK_THROWS_WITH_AS(stash::cost_model(round_hw, p), doctest::Contains("codec_ratio"),
                       stash::logic_error);
  auto hw                 = round_hw;
  hw.pcie_h2d_bytes_per_s = 0;
  CHECK_THROWS_AS(stash::cost_model{hw}, stash::logic_error);
}

TEST_CASE("hardware presets are found by name, unknown names list the known ones")
{
  for (auto const* name : {"pcie3_x16", "pcie4_x16", "pcie5_x16", "h100_sxm"}) {
    auto const& hw = stash::hardware_preset(name);
    CHECK(hw.name == name);
    CHECK(hw.pcie_d2h_bytes_per_s > 0);
    CHECK(hw.device_bytes_per_s > hw.pcie_d2h_bytes_per_s);
  }
  // vDNN's measured figures for its Titan X platform.
  CHECK(stash::hardware_preset("pcie3_x16").pcie_d2h_bytes_per_s == doctest::Approx(12.8e9));
  CHECK(stash::hardware_preset("pcie3_x16").device_bytes_per_s == doctest::Approx(336.5e9));
  CHECK(stash::hardware_preset("pcie4_x16").pcie_h2d_bytes_per_s >
        stash::hardware_preset("pcie3_x16").pcie_h2d_bytes_per_s);
  CHECK_THROWS_WITH_AS((void)stash::hardware_preset("pcie7"),
                       doctest::Contains("known: pcie3_x16, pcie4_x16"), stash::logic_error);
}

TEST_CASE("an unknown dtype is a clear error")
{
  auto const t = stash::parse_trace("# stash-trace v1 dtype=complex32\nt 0 8 temp a\n", "dtype");
  CHECK_THROWS_WITH_AS((void)stash::estimate_op_work(t), doctest::Contains("complex32"),
                       stash::logic_error);
}

TEST_CASE("conv FLOPs derived from the recorded traces match the published model sizes")
{
  // Published per-image multiply-accumulates of the conv layers at 224x224: VGG-16 15.35 G,
  // ResNet-18 1.81 G (2 FLOPs each). The traces hold batch 32 and no shapes at all.
  auto conv_gflop_per_image = [](char const* name) {
    auto const t    = stash::read_trace(stash::test::data_path(std::string("traces/") + name));
    auto const work = stash::estimate_op_work(t);
    double flops    = 0;
    for (std::size_t i = 0; i < work.size(); ++i) {
      if (t.ops()[i].name == "aten::convolution") { flops += work[i].flops; }
    }
    return flops / 32 / 1e9;
  };
  CHECK(conv_gflop_per_image("vgg16_b32.trace") == doctest::Approx(2 * 15.35).epsilon(0.02));
  CHECK(conv_gflop_per_image("resnet18_b32.trace") == doctest::Approx(2 * 1.81).epsilon(0.02));
}

}  // namespace STASH_UNITY_ID
