#include <stash/trace/trace_driver.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {
// Records what the driver asks of an allocator.
struct recording_allocator {
  using stream_type = int;
  std::vector<std::string> calls;
  std::vector<std::size_t> sizes;
  std::uint64_t next{0};
  int iterations{0};

  void begin_iteration() { calls.push_back("begin"); }
  void end_iteration()
  {
    calls.push_back("end");
    ++iterations;
  }
  void phase(stash::phase) { calls.push_back("phase"); }
  std::uint64_t allocate_async(std::size_t bytes, stash::storage_kind, std::string const&, int)
  {
    calls.push_back("alloc");
    sizes.push_back(bytes);
    return next++;
  }
  void deallocate_async(std::uint64_t) { calls.push_back("free"); }
  void* pointer(std::uint64_t id, int) { return reinterpret_cast<void*>(0x1000 * (id + 1)); }
  std::vector<void*> op(std::string const&, std::span<std::uint64_t const> reads,
                        std::span<std::uint64_t const> writes, int)
  {
    calls.push_back("op");
    std::vector<void*> p;
    for (auto id : reads) { p.push_back(pointer(id, 0)); }
    for (auto id : writes) { p.push_back(pointer(id, 0)); }
    return p;
  }
};
}  // namespace

TEST_CASE("trace_driver: persistent storages once, the rest every iteration, sizes scaled")
{
  // w (a parameter) is allocated before the first phase: persistent.
  auto const t = stash::parse_trace(R"(# stash-trace v1 model=driver dtype=float32
t 0 4098 param w
p forward
t 1 1000 input x
t 2 4000 act a
o aten::linear 0,1 2
p backward
t 3 2 temp g
o aten::linear_backward 2 3
f 1
f 2
f 3
)",
                                    "driver_test");
  recording_allocator a;
  stash::trace_driver<recording_allocator> driver(a, t, 0, 4);
  std::uint64_t persistent = 0, per_iteration = 0, ops = 0;
  driver.on_allocate(
      [&](stash::storage_id, std::uint64_t, bool p) { ++(p ? persistent : per_iteration); });
  driver.on_op([&](stash::op_record const& op, std::span<void* const> ptrs) {
    CHECK(ptrs.size() == op.reads.size() + op.writes.size());
    ++ops;
  });
  driver.run(2);
  driver.run(1);
  CHECK(a.iterations == 3);
  std::uint64_t trace_ops = t.ops().size(), allocs = 0, before_phase = 0;
  bool seen_phase = false;
  for (auto const& e : t.events()) {
    if (e.kind == stash::event_kind::phase) { seen_phase = true; }
    if (e.kind == stash::event_kind::alloc) { ++(seen_phase ? allocs : before_phase); }
  }
  CHECK(persistent == before_phase);
  CHECK(per_iteration == 3 * allocs);
  CHECK(ops == 3 * trace_ops);
  std::uint64_t expected_persistent = 0;
  for (auto const& e : t.events()) {
    if (e.kind == stash::event_kind::phase) { break; }
    if (e.kind == stash::event_kind::alloc) {
      expected_persistent += std::max<std::uint64_t>(4, t.storages()[e.index].bytes / 4 / 4 * 4);
    }
  }
  CHECK(driver.persistent_bytes() == expected_persistent);
  CHECK(driver.persistent_bytes() == 1024);                    // 4098 / 4, rounded down to 4 B
  CHECK(std::count(a.sizes.begin(), a.sizes.end(), 4u) == 3);  // g: 2 / 4 rounds up to 4 B
  for (auto s : a.sizes) { CHECK(s % 4 == 0); }
  CHECK_THROWS_AS(stash::trace_driver<recording_allocator>(a, t, 0, 0), stash::logic_error);
}

}  // namespace STASH_UNITY_ID
