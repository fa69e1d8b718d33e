// The recorder, the writer and the trace model: recording equals what the reader makes of the
// written file, misuse throws logic_error and changes nothing, enums convert both ways, and a
// large synthetic trace survives the round trip.
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash/trace/trace_recorder.hpp>
#include <stash/trace/trace_writer.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

using stash::phase;
using stash::storage_kind;

TEST_CASE("storage_kind and phase convert to and from their trace spelling")
{
  for (auto const kind : stash::all_storage_kinds) {
    CHECK(stash::storage_kind_from_string(stash::to_string(kind)) == kind);
  }
  CHECK(stash::to_string(storage_kind::optstate) == "optstate");
  CHECK(stash::to_string(storage_kind::act) == "act");
  CHECK_FALSE(stash::storage_kind_from_string("activation").has_value());
  CHECK_FALSE(stash::storage_kind_from_string("").has_value());
  for (auto const p : {phase::forward, phase::backward, phase::optimizer}) {
    CHECK(stash::phase_from_string(stash::to_string(p)) == p);
  }
  CHECK(stash::to_string(phase::backward) == "backward");
  CHECK_FALSE(stash::phase_from_string("Forward").has_value());
}

TEST_CASE("a recording equals what the reader makes of the file it writes")
{
  stash::trace_recorder rec;
  rec.set_header("model", "toy");
  rec.set_header("batch", "4");
  rec.set_header("note", "");  // empty values are allowed and survive
  auto const w = rec.allocate(64, storage_kind::param, "fc.weight");
  auto const m = rec.allocate(64, storage_kind::optstate, "fc.weight.momentum");
  auto const x = rec.allocate(16, storage_kind::input, "x");
  rec.phase(phase::forward);
  auto const y = rec.allocate(32, storage_kind::act, "fc/addmm with spaces");
  rec.op("aten::addmm", {x, w}, {y});
  auto const ws = rec.allocate(8, storage_kind::temp);  // no label
  rec.deallocate(ws);
  rec.op("aten::empty", {}, {});
  rec.phase(phase::backward);
  auto const g = rec.allocate(64, storage_kind::grad, "fc.weight.grad");
  rec.op("aten::mm", {y, x}, {g});
  rec.deallocate(y);
  rec.phase(phase::optimizer);
  rec.op("aten::add_.Tensor", {m, g}, {m});
  rec.op("aten::add_.Tensor", {w, m}, {w});
  rec.deallocate(g);

  auto const& recorded = rec.trace();
  CHECK(recorded.storages().size() == 6);
  CHECK(recorded.ops().size() == 5);
  CHECK(recorded.events().size() == 17);
  CHECK(recorded.header_value("batch") == "4");

  auto const path = std::filesystem::temp_directory_path() / "stash_trace_recorder_test.trace";
  rec.write(path);
  auto const reread = stash::read_trace(path);
  CHECK(reread == recorded);
  CHECK(reread.storages()[ws].label.empty());
  CHECK(reread.storages()[y].label == "fc/addmm with spaces");
  CHECK(reread.header_value("note") == "");
  std::filesystem::remove(path);

  // Writing to a stream gives the same text as to_trace_text.
  std::ostringstream out;
  stash::write_trace(out, recorded);
  CHECK(out.str() == stash::to_trace_text(recorded));
  CHECK(out.str().rfind("# stash-trace v1 model=toy batch=4 note=\nt 0 64 param fc.weight\n", 0) ==
        0);

  // Moving the trace out leaves an equal value.
  auto const copy  = recorded;
  auto const moved = std::move(rec).trace();
  CHECK(moved == copy);
}

TEST_CASE("recorder misuse throws logic_error and leaves the recording unchanged")
{
  stash::trace_recorder rec;
  rec.set_header("model", "toy");
  auto const a = rec.allocate(10, storage_kind::temp, "a");
  auto const b = rec.allocate(20, storage_kind::temp, "b");
  rec.deallocate(a);
  auto const before = rec.trace();

  auto expect_rejected = [&](auto&& misuse, char const* what) {
    CAPTURE(what);
    CHECK_THROWS_AS(misuse(), stash::logic_error);
    CHECK(rec.trace() == before);
  };
  expect_rejected([&] { rec.deallocate(a); }, "double free");
  expect_rejected([&] { rec.deallocate(b + 1); }, "free of an unknown id");
  expect_rejected([&] { rec.op("aten::x", {b, a}, {}); }, "op reading a freed id");
  expect_rejected([&] { rec.op("aten::x", {b}, {a}); }, "op writing a freed id");
  expect_rejected([&] { rec.op("aten::x", {42}, {}); }, "op on an unknown id");
  expect_rejected([&] { rec.op("aten x", {b}, {}); }, "op name with a blank");
  expect_rejected([&] { rec.op("", {b}, {}); }, "empty op name");
  expect_rejected([&] { (void)rec.allocate(1, storage_kind::temp, "two\nlines"); },
                  "label with a line break");
  expect_rejected([&] { (void)rec.allocate(1, storage_kind::temp, " padded"); },
                  "label with a leading blank");
  expect_rejected([&] { (void)rec.allocate(1, static_cast<storage_kind>(17)); }, "invalid kind");
  expect_rejected([&] { rec.phase(static_cast<phase>(9)); }, "invalid phase");
  expect_rejected([&] { rec.set_header("model", "again"); }, "duplicate header key");
  expect_rejected([&] { rec.set_header("a=b", "c"); }, "header key with '='");
  expect_rejected([&] { rec.set_header("k", "two words"); }, "header value with a blank");

  try {
    rec.deallocate(a);
  } catch (stash::logic_error const& e) {
    CHECK(std::string(e.what()).find("double free of storage id 0") != std::string::npos);
  }
  // The recorder still works after rejected calls.
  rec.op("aten::relu_", {b}, {b});
  CHECK(rec.trace().ops().size() == 1);
}

TEST_CASE("a 10 MB synthetic trace survives record, write, read and analysis")
{
  // A deterministic stand-in for a big model: layers of forward ops whose outputs are freed in
  // backward, workspaces around each op, and persistent parameters.
  stash::trace_recorder rec;
  rec.set_header("model", "synthetic");
  std::uint64_t state = 12345;
  auto next           = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  std::vector<stash::storage_id> params, acts;
  for (int i = 0; i < 2000; ++i) {
    params.push_back(rec.allocate(4 * (1 + next() % 100000), storage_kind::param,
                                  "layers." + std::to_string(i) + ".weight"));
  }
  rec.phase(phase::forward);
  std::uint64_t act_bytes = 0;
  stash::storage_id prev  = params[0];
  for (int i = 0; i < 70000; ++i) {
    auto const ws = rec.allocate(1 + next() % 4096, storage_kind::temp, "block/op.ws");
    rec.deallocate(ws);
    auto const bytes = 4 * (1 + next() % 1000000);
    act_bytes += bytes;
    auto const out =
        rec.allocate(bytes, storage_kind::act, "block." + std::to_string(i) + "/linear");
    rec.op("aten::addmm", {prev, params[static_cast<std::size_t>(i) % params.size()]}, {out});
    acts.push_back(out);
    prev = out;
  }
  rec.phase(phase::backward);
  for (auto it = acts.rbegin(); it != acts.rend(); ++it) {
    rec.op("aten::mm_backward", {*it}, {});
    rec.deallocate(*it);
  }
  auto const& recorded = rec.trace();
  auto const text      = stash::to_trace_text(recorded);
  CHECK(text.size() > 10'000'000);

  auto const reread = stash::parse_trace(std::string_view(text), "synthetic");
  CHECK(reread == recorded);
  auto const life = stash::analyze_lifetimes(reread);
  CHECK(life.activation_bytes == act_bytes);
  CHECK(life.peak_phase == phase::forward);
  CHECK(life.peak_live_bytes == stash::peak_live_bytes(stash::lifetime_intervals(reread)));
}

}  // namespace STASH_UNITY_ID
