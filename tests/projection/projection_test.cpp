// The multi-device projection on a four-layer chain whose costs can be worked out by hand.
//
// Machine: 1 GB/s device memory, efficiencies 1, no launch cost, so an op takes (bytes read +
// written) ns. Trace (batch 4): params w0..w3 (400 B), input x0 and activations x1..x4 (1600 B).
// Forward op i reads x_i, w_i, writes x_{i+1}: 3600 ns. Backward op i reads g_{i+1} (x4 for
// i = 3), x_i, w_i, writes w_i.grad (400 B) and g_i (1600 B temp): 5600 ns, in order 3, 2, 1, 0.
// Optimizer op i reads w_i, w_i.grad, writes w_i: 1200 ns.
// Whole step: forward+backward 36.8 us, optimizer 4.8 us; peak 12000 B (at backward op 2).
#include <stash/projection/cluster.hpp>
#include <stash/projection/projection.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash_tools/projection_print.hpp>

#include "support/approx.hpp"
#include "support/data.hpp"

#include <doctest/doctest.h>

#include <sstream>

namespace STASH_UNITY_ID {

namespace {

std::string const chain = R"(# stash-trace v1 model=chain batch=4 dtype=float32
t 0 400 param w0
t 1 400 param w1
t 2 400 param w2
t 3 400 param w3
t 4 1600 input x0
p forward
t 5 1600 act x1
o aten::lin 4,0 5
t 6 1600 act x2
o aten::lin 5,1 6
t 7 1600 act x3
o aten::lin 6,2 7
t 8 1600 act x4
o aten::lin 7,3 8
p backward
t 9 400 grad w3.grad
t 10 1600 temp g3
o aten::lin_backward 8,7,3 9,10
f 8
t 11 400 grad w2.grad
t 12 1600 temp g2
o aten::lin_backward 10,6,2 11,12
f 10
f 7
t 13 400 grad w1.grad
t 14 1600 temp g1
o aten::lin_backward 12,5,1 13,14
f 12
f 6
t 15 400 grad w0.grad
t 16 1600 temp g0
o aten::lin_backward 14,4,0 15,16
f 14
f 5
f 16
p optimizer
o aten::add_ 0,15 0
o aten::add_ 1,13 1
o aten::add_ 2,11 2
o aten::add_ 3,9 3
f 9
f 11
f 13
f 15
)";

stash::hardware const unit_hw{"unit", "test", 1e9, 1e9, 0.0, 1e9, 1e12, 0.0, 1ull << 30};

stash::cluster test_cluster(std::uint32_t nodes, std::uint32_t gpus)
{
  stash::cluster c;
  c.nodes         = nodes;
  c.gpus_per_node = gpus;
  c.intra         = stash::link_spec{"intra", 1e9, 1e-6};
  c.inter         = stash::link_spec{"net", 0.5e9, 5e-6};
  c.hw            = unit_hw;
  return c;
}

stash::projection_params test_params(std::vector<std::uint64_t> devices, std::uint32_t max_mp)
{
  stash::projection_params p;
  p.dataset_samples         = 100;
  p.micro_batches           = 1;
  p.max_mp                  = max_mp;
  p.device_counts           = std::move(devices);
  p.bucket_bytes            = 1ull << 30;  // one bucket
  p.cost.compute_efficiency = 1.0;
  p.cost.memory_efficiency  = 1.0;
  return p;
}

auto const gns = stash::statistical_efficiency::gradient_noise(1000, 4);

stash::projection_config const& find(stash::projection_result const& r, std::uint64_t dp,
                                     std::uint64_t mp)
{
  for (auto const& c : r.configs) {
    if (c.dp == dp && c.mp == mp) { return c; }
  }
  FAIL("no config dp=" << dp << " mp=" << mp);
  return r.configs.front();
}

}  // namespace

TEST_CASE("cluster spec: the issue's example and its defaults")
{
  auto const c =
      stash::parse_cluster_spec("nodes=16,gpus=8,intra=nvlink,inter_gbps=100,latency_us=5");
  CHECK(c.nodes == 16);
  CHECK(c.gpus_per_node == 8);
  CHECK(c.devices() == 128);
  CHECK(c.intra.name == "nvlink");
  CHECK(c.intra.bytes_per_s == doctest::Approx(450e9));
  CHECK(c.inter.bytes_per_s == doctest::Approx(12.5e9));  // 100 Gbit/s
  CHECK(c.inter.latency_s == stash::test::approx_s(5e-6));
  CHECK(c.hw.name == stash::default_cluster_hardware);
  auto const one = stash::parse_cluster_spec("gpus=4,intra=pcie5,intra_gbps=80,hw=pcie4_x16");
  CHECK(one.nodes == 1);
  CHECK(one.intra.bytes_per_s == doctest::Approx(10e9));
  CHECK(one.hw.name == "pcie4_x16");
  // The printed form parses back to the same cluster.
  auto const again = stash::parse_cluster_spec(stash::to_spec(c));
  CHECK(again.devices() == c.devices());
  CHECK(again.intra.bytes_per_s == doctest::Approx(c.intra.bytes_per_s));
  CHECK(again.inter.latency_s == doctest::Approx(c.inter.latency_s));
}

TEST_CASE("cluster spec: clear errors")
{
  CHECK_THROWS_WITH_AS(stash::parse_cluster_spec("nodes=2,gpus=8"),
                       doctest::Contains("inter_gbps is required"), stash::logic_error);
  CHECK_THROWS_WITH_AS(stash::parse_cluster_spec("nodes=2,colour=red"),
                       doctest::Contains("unknown key 'colour'"), stash::logic_error);
  CHECK_THROWS_WITH_AS(stash::parse_cluster_spec("gpus=x"),
                       doctest::Contains("'gpus=x' must be a positive integer"),
                       stash::logic_error);
  CHECK_THROWS_WITH_AS(stash::parse_cluster_spec("gpus=0"), doctest::Contains("positive integer"),
                       stash::logic_error);
  CHECK_THROWS_WITH_AS(stash::parse_cluster_spec("gpus=2,gpus=4"), doctest::Contains("given twice"),
                       stash::logic_error);
  CHECK_THROWS_WITH_AS(stash::parse_cluster_spec("intra=infiniband"),
                       doctest::Contains("unknown intra-node link 'infiniband'"),
                       stash::logic_error);
  CHECK_THROWS_WITH_AS(stash::parse_cluster_spec("gpus=2,,nodes=1"),
                       doctest::Contains("is not key=value"), stash::logic_error);
  CHECK_THROWS_WITH_AS(stash::parse_cluster_spec("nodes=2,inter_gbps=-1"),
                       doctest::Contains("must be positive"), stash::logic_error);
  CHECK_THROWS_WITH_AS(stash::parse_cluster_spec("hw=tpu"),
                       doctest::Contains("unknown hardware preset"), stash::logic_error);
}

TEST_CASE("statistical efficiency: gradient-noise form and table")
{
  // steps(4) = 1000 (1 + 4/4) = 2000 steps of 4 samples over 100 samples = 80 epochs.
  CHECK(*gns.epochs(4, 100) == doctest::Approx(80));
  auto const table = stash::statistical_efficiency::table({{16, 20}, {4, 10}});
  CHECK(*table.epochs(4, 100) == doctest::Approx(10));
  CHECK(*table.epochs(8, 100) == doctest::Approx(15));  // halfway in log(batch)
  CHECK_FALSE(table.epochs(32, 100).has_value());
  CHECK_THROWS_AS((void)stash::statistical_efficiency::table({{4, 1}, {4, 2}}), stash::logic_error);
}

TEST_CASE("batch scaling: per-sample storages scale, parameters and scalars do not")
{
  auto const t = stash::parse_trace(chain, "chain");
  auto const s = stash::detail::scale_trace_batch(t, 2);
  CHECK(s.header_value("batch") == "2");
  CHECK(s.storages()[0].bytes == 400);   // param
  CHECK(s.storages()[4].bytes == 800);   // input
  CHECK(s.storages()[5].bytes == 800);   // act
  CHECK(s.storages()[9].bytes == 400);   // grad
  CHECK(s.storages()[10].bytes == 800);  // backward temp
}

TEST_CASE("one device: step = sum of op times, time to train = steps(B) x step")
{
  auto const t = stash::parse_trace(chain, "chain");
  auto const r = stash::project(t, test_cluster(1, 1), gns, test_params({1}, 1));
  REQUIRE(r.configs.size() == 1);
  auto const& c = r.configs[0];
  CHECK(c.policy == "no_swap");
  CHECK(c.device_peak_bytes == 12000);
  CHECK(c.step_s == stash::test::approx_s(41.6e-6));
  CHECK(c.allreduce_s == 0);
  CHECK(c.steps_per_epoch == 25);
  CHECK(*c.epochs_to_target == doctest::Approx(80));
  CHECK(*c.time_to_train_s == stash::test::approx_s(2000 * 41.6e-6));
  CHECK(c.best);
  REQUIRE(r.best.has_value());
}

TEST_CASE("pure data parallelism: ring all-reduce inside a node, exposed after backward")
{
  auto const t = stash::parse_trace(chain, "chain");
  auto const r = stash::project(t, test_cluster(1, 2), gns, test_params({2}, 1));
  REQUIRE(r.configs.size() == 1);
  auto const& c = r.configs[0];
  CHECK(c.dp == 2);
  CHECK(c.global_batch == 8);
  // One 1600 B bucket once backward ends: 2(N-1) 1 us + 2(N-1)/N 1600 B / 1 GB/s = 3.6 us.
  CHECK(c.allreduce_s == stash::test::approx_s(3.6e-6));
  CHECK(c.allreduce_exposed_s == stash::test::approx_s(3.6e-6));
  CHECK(c.step_s == stash::test::approx_s(36.8e-6 + 3.6e-6 + 4.8e-6));
  CHECK(c.steps_per_epoch == 13);  // ceil(100 / 8)
}

TEST_CASE("pure data parallelism: per-gradient buckets overlap backward")
{
  auto const t   = stash::parse_trace(chain, "chain");
  auto p         = test_params({2}, 1);
  p.bucket_bytes = 400;
  auto const r   = stash::project(t, test_cluster(1, 2), gns, p);
  auto const& c  = r.configs.at(0);
  // Four 400 B buckets of 2 us + 0.4 us, ready at 5.6, 11.2, 16.8, 22.4 us: the ring is idle
  // between them, so only the last one (2.4 us) runs past the end of backward.
  CHECK(c.allreduce_s == stash::test::approx_s(4 * 2.4e-6));
  CHECK(c.allreduce_exposed_s == stash::test::approx_s(2.4e-6));
  CHECK(c.step_s == stash::test::approx_s(36.8e-6 + 2.4e-6 + 4.8e-6));
}

TEST_CASE("pure data parallelism across nodes runs at the network rate and latency")
{
  auto const t  = stash::parse_trace(chain, "chain");
  auto const r  = stash::project(t, test_cluster(2, 2), gns, test_params({4}, 1));
  auto const& c = r.configs.at(0);
  // N = 4: 6 x 5 us + 1.5 x 1600 B / 0.5 GB/s = 30 + 4.8 us.
  CHECK(c.allreduce_s == stash::test::approx_s(34.8e-6));
  CHECK(c.step_s == stash::test::approx_s(36.8e-6 + 34.8e-6 + 4.8e-6));
}

TEST_CASE("model parallelism: an even split of four equal layers into two stages")
{
  auto const t = stash::parse_trace(chain, "chain");
  auto const r = stash::project(t, test_cluster(1, 2), gns, test_params({2}, 2));
  REQUIRE(r.configs.size() == 2);
  auto const& mp = find(r, 1, 2);
  CHECK(mp.global_batch == 4);
  // Each stage: 2 x (3600 + 5600) ns, and receives one 1600 B tensor (x2 forward, g2 backward)
  // over the 1 GB/s, 1 us link: (m + k - 1) x (18.4 + 2.6) us, plus 2 x 1200 ns of optimizer.
  CHECK(mp.boundary_s == stash::test::approx_s(2.6e-6));
  CHECK(mp.pipeline_s == stash::test::approx_s(2 * 21.0e-6));
  CHECK(mp.step_s == stash::test::approx_s(42.0e-6 + 2.4e-6));
  // Stage 0 peaks at 9200 B (w0, w1, x0, x1, x2, w1.grad, g1 and the received g2), stage 1 at
  // 8000 B; one device would hold 12000 B.
  CHECK(mp.device_peak_bytes == 9200);
  CHECK(find(r, 2, 1).device_peak_bytes == 12000);
  // Smaller global batch, fewer epochs: steps(4) x 44.4 us vs steps(8) x 45.2 us per step.
  CHECK(*mp.time_to_train_s == stash::test::approx_s(2000 * 44.4e-6));
  auto const& dp = find(r, 2, 1);
  CHECK(*dp.epochs_to_target == doctest::Approx(1000 * 1.5 * 8 / 100.0));
  CHECK(mp.best != dp.best);
}

TEST_CASE("model parallelism with micro-batches: per-micro-batch times at the smaller batch")
{
  auto const t    = stash::parse_trace(chain, "chain");
  auto p          = test_params({2}, 2);
  p.micro_batches = 2;
  auto const r    = stash::project(t, test_cluster(1, 2), gns, p);
  auto const& mp  = find(r, 1, 2);
  CHECK(mp.micro_batches == 2);
  // At batch 2: forward 2000 ns, backward 3200 ns per layer; 800 B crosses: 1 + 0.8 us.
  CHECK(mp.pipeline_s == stash::test::approx_s(3 * (10.4e-6 + 1.8e-6)));
  CHECK(mp.step_s == stash::test::approx_s(3 * 12.2e-6 + 2.4e-6));
  CHECK(mp.device_peak_bytes == 9200);  // all micro-batches' activations stay, as at batch 4
}

TEST_CASE("budget: offload only when it brings the simulated peak under the budget")
{
  auto const t          = stash::parse_trace(chain, "chain");
  auto p                = test_params({2}, 2);
  p.device_budget_bytes = 10000;  // stage split (9200) fits, one device (12000) does not
  auto const r          = stash::project(t, test_cluster(1, 2), gns, p);
  auto const& mp        = find(r, 1, 2);
  CHECK(mp.fits);
  CHECK(mp.policy == "no_swap");
  auto const& dp = find(r, 2, 1);
  if (dp.fits) {
    CHECK(dp.offload);
    CHECK(dp.policy != "no_swap");
    CHECK(dp.device_peak_bytes <= 10000);
    CHECK(dp.offload_stall_s >= 0);
  } else {
    CHECK(dp.policy.empty());
  }
  p.device_budget_bytes = 1000;  // below the parameters and input: nothing can fit
  auto const none       = stash::project(t, test_cluster(1, 2), gns, p);
  CHECK_FALSE(none.best.has_value());
  for (auto const& c : none.configs) {
    CHECK_FALSE(c.fits);
    CHECK(c.policy.empty());
  }
}

TEST_CASE("projection output: assumptions, table, JSON rows and SVG")
{
  auto const t = stash::parse_trace(chain, "chain");
  auto const r = stash::project(t, test_cluster(1, 2), gns, test_params({1, 2}, 2));
  CHECK(r.configs.size() == 3);
  std::ostringstream table, json, svg;
  stash_tools::print_projection_table(table, r);
  CHECK(table.str().find("# statistical_efficiency: steps(B) = S_min (1 + B_noise / B), S_min = "
                         "1000, B_noise = 4") != std::string::npos);
  CHECK(table.str().find("# micro_batches (mp > 1): 1") != std::string::npos);
  stash_tools::write_projection_configs_json(json, r);
  CHECK(json.str().rfind("[{\"dp\":1,\"mp\":1,\"devices\":1,", 0) == 0);
  CHECK(json.str().find("\"best\":true") != std::string::npos);
  stash_tools::write_projection_svg(svg, r);
  CHECK(svg.str().find("MP 2") != std::string::npos);
}

TEST_CASE("projection of a recorded trace: every configuration is consistent")
{
  auto const t = stash::read_trace(stash::test::data_path("traces/resnet18_b32.trace"));
  auto const c = stash::parse_cluster_spec("nodes=2,gpus=4,intra=nvlink,inter_gbps=100");
  auto const r = stash::project(t, c, stash::statistical_efficiency::gradient_noise(30000, 4096));
  REQUIRE(r.best.has_value());
  for (auto const& cfg : r.configs) {
    CHECK(cfg.dp * cfg.mp == cfg.devices);
    CHECK(cfg.step_s > 0);
    CHECK(cfg.device_peak_bytes > 0);
    if (cfg.mp == 1) { CHECK(cfg.boundary_s == 0); }
    if (cfg.dp == 1) { CHECK(cfg.allreduce_s == 0); }
  }
  // Splitting the model lowers the per-device peak.
  std::uint64_t peak_mp1 = 0, peak_mp8 = 0;
  for (auto const& cfg : r.configs) {
    if (cfg.devices == 8 && cfg.mp == 1) { peak_mp1 = cfg.device_peak_bytes; }
    if (cfg.devices == 8 && cfg.mp == 8) { peak_mp8 = cfg.device_peak_bytes; }
  }
  CHECK(peak_mp8 < peak_mp1);
}

}  // namespace STASH_UNITY_ID
