// The five shared PyTorch traces and the eleven MiniMalloc instances, checked against the
// independent figures in data/README.md (recorded by PyTorch's allocator and by MiniMalloc's
// authors, not computed by stash).
#include <stash/trace/lifetime.hpp>
#include <stash/trace/minimalloc_reader.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash/trace/trace_writer.hpp>

#include "support/data.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace STASH_UNITY_ID {

namespace {

struct trace_figures {
  char const* file;
  char const* model;
  std::uint64_t tensors;
  std::uint64_t ops;
  std::uint64_t peak_live_bytes;
  std::uint64_t act_bytes;
};

// data/README.md, table "Files".
constexpr trace_figures readme_table[] = {
    {"resnet18_b32.trace", "resnet18", 850, 540, 835'805'832, 690'781'704},
    {"vgg16_b32.trace", "vgg16", 378, 309, 4'047'764'968, 2'328'356'872},
    {"alexnet_b128.trace", "alexnet", 185, 177, 1'246'636'392, 402'825'224},
    {"mobilenet_v2_b32.trace", "mobilenet_v2", 2169, 1256, 2'552'162'196, 2'491'858'184},
    {"transformer_encoder_b8.trace", "transformer_encoder", 524, 781, 2'611'335'240, 2'315'606'568},
};

std::string slurp(std::string const& path)
{
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("the shared traces match data/README.md and round-trip byte for byte")
{
  for (auto const& row : readme_table) {
    CAPTURE(row.file);
    auto const path = stash::test::data_path(std::string("traces/") + row.file);
    auto const t    = stash::read_trace(path);
    CHECK(t.header_value("model") == row.model);
    CHECK(t.header_value("dtype") == "float32");
    CHECK(t.storages().size() == row.tensors);
    CHECK(t.ops().size() == row.ops);

    auto const life = stash::analyze_lifetimes(t);
    CHECK(life.peak_live_bytes == row.peak_live_bytes);
    CHECK(life.activation_bytes == row.act_bytes);

    // The README's definitions, restated: param/optstate/input are declared before forward and
    // never freed; grads are freed by zero_grad; every kind's bytes sum to the total.
    std::uint64_t total = 0;
    for (auto const& s : t.storages()) { total += s.bytes; }
    std::uint64_t by_kind = 0;
    for (auto const bytes : life.bytes_by_kind) { by_kind += bytes; }
    CHECK(by_kind == total);
    std::uint64_t live_at_peak = 0;
    for (auto const bytes : life.live_at_peak_by_kind) { live_at_peak += bytes; }
    CHECK(live_at_peak == life.peak_live_bytes);
    for (auto const& s : life.storages) {
      if (s.kind == stash::storage_kind::param || s.kind == stash::storage_kind::optstate ||
          s.kind == stash::storage_kind::input) {
        CHECK(s.persistent());
      }
      if (s.kind == stash::storage_kind::grad) { CHECK_FALSE(s.persistent()); }
    }
    REQUIRE(life.peak_phase.has_value());
    REQUIRE(life.peak_op.has_value());

    // The interval view gives the same lower bound as the event sweep.
    auto const intervals = stash::lifetime_intervals(t);
    REQUIRE(intervals.size() == t.storages().size());
    auto const peak = stash::peak_live(intervals);
    CHECK(peak.bytes == life.peak_live_bytes);
    CHECK(peak.time == *life.peak_event);

    // Writer: the same bytes as the file, and reading them back gives an equal trace.
    auto const original = slurp(path);
    auto const written  = stash::to_trace_text(t);
    CHECK(written.size() == original.size());
    CHECK(written == original);
    CHECK(stash::parse_trace(std::string_view(written), "rewritten") == t);
  }
}

TEST_CASE("the 11 MiniMalloc instances: row counts and lower bound against capacity")
{
  struct instance_figures {
    char name;
    std::size_t rows;    // data lines of the CSV
    double bound_ratio;  // data/README.md: 1 for 8 of 11; C, D, J below
  };
  constexpr instance_figures instances[] = {{'A', 154, 1.0},   {'B', 170, 1.0}, {'C', 203, 0.991},
                                            {'D', 213, 0.940}, {'E', 215, 1.0}, {'F', 296, 1.0},
                                            {'G', 308, 1.0},   {'H', 316, 1.0}, {'I', 374, 1.0},
                                            {'J', 409, 0.943}, {'K', 454, 1.0}};
  int at_capacity                        = 0;
  for (auto const& row : instances) {
    CAPTURE(row.name);
    auto const path =
        stash::test::data_path(std::string("minimalloc/") + row.name + ".1048576.csv");
    auto const instance = stash::read_minimalloc_csv(path);
    CHECK(instance.buffers.size() == row.rows);
    REQUIRE(instance.capacity == std::uint64_t{1048576});
    auto const bound = stash::peak_live_bytes(instance.buffers);
    CHECK(bound <= *instance.capacity);
    auto const ratio = static_cast<double>(bound) / static_cast<double>(*instance.capacity);
    // The README rounds to three decimals.
    CHECK(std::fabs(ratio - row.bound_ratio) < 0.0005);
    at_capacity += bound == *instance.capacity ? 1 : 0;
  }
  CHECK(at_capacity == 8);
}

}  // namespace STASH_UNITY_ID
