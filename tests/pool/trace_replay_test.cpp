#include "support/data.hpp"

#include <stash/core/virtual_upstream.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/trace_replay.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace_reader.hpp>

#include <doctest/doctest.h>

namespace STASH_UNITY_ID {

namespace {
using virtual_pool = stash::caching_pool<stash::virtual_upstream, stash::immediate_order>;
}

TEST_CASE("virtual_upstream hands out distinct aligned addresses and counts bytes")
{
  stash::virtual_upstream u;
  void* a = u.allocate(100, 256);
  void* b = u.allocate(1, 256);
  CHECK(a != b);
  CHECK(reinterpret_cast<std::uintptr_t>(b) % 256 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(b) >= reinterpret_cast<std::uintptr_t>(a) + 100);
  CHECK(u.in_use_bytes() == 101);
  u.deallocate(a, 100, 256);
  CHECK(u.in_use_bytes() == 1);
  CHECK(u.peak_bytes() == 101);
}

TEST_CASE("replaying the real traces through the caching pool bounds its footprint from below by L")
{
  for (auto const* name : {"alexnet_b128.trace", "resnet18_b32.trace", "vgg16_b32.trace",
                           "mobilenet_v2_b32.trace", "transformer_encoder_b8.trace"}) {
    std::string const trace_name = name;
    CAPTURE(trace_name);
    auto const t = stash::read_trace(stash::test::data_path(std::string("traces/") + name));
    auto const L = stash::analyze_lifetimes(t).peak_live_bytes;
    virtual_pool pool;
    auto const s = stash::replay_trace(t, pool);
    // The pool cannot beat the lower bound; a block it does not split (a remainder under 512 B in
    // a small segment, up to small_limit in others) counts whole, so live blocks may exceed
    // their requests by that much each.
    CHECK(s.peak_in_use_bytes >= L);
    CHECK(s.peak_in_use_bytes <= L + pool.options().small_limit * t.storages().size());
    CHECK(s.peak_reserved_bytes >= s.peak_in_use_bytes);
    CHECK(pool.stats().in_use_bytes == 0);
    CHECK(pool.upstream().in_use_bytes() == pool.stats().reserved_bytes);
    MESSAGE(trace_name << ": L " << L << ", caching pool peak reserved " << s.peak_reserved_bytes
                       << " (" << double(s.peak_reserved_bytes) / double(L) << "x L)");
  }
}

}  // namespace STASH_UNITY_ID
