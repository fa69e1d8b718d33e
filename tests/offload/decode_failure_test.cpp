// Decode failures belong to their tensor (issue 27 item 3): a corrupted host copy of tensor B is
// reported by synchronize() or poll_decode_failures(), naming B, and never thrown by a call on
// another tensor A; and whether a transfer takes a tensor is a query (accepts) that agrees with
// host_slot_bytes, which refuses with stash::logic_error.
#include <stash/codec/bitmask.hpp>
#include <stash/codec/codec_error.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/error.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/units.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pool_argmax_transfer.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using zvc_manager =
    stash::offload_manager<stash::host_backend, host_pool, host_pool, stash::zvc<float>>;
using set_manager =
    stash::offload_manager<stash::host_backend, host_pool, host_pool,
                           stash::transfer_set<stash::zvc<float>, stash::pool_argmax, void>>;

struct fixture {
  stash::host_backend backend;
  host_pool device;
  host_pool host;
  stash::host_backend::stream compute{backend.create_stream()};
  zvc_manager m{backend, device, host};
  std::vector<float> values = std::vector<float>(1024);
  std::size_t bytes         = values.size() * sizeof(float);

  fixture()
  {
    for (std::size_t i = 0; i < values.size(); ++i) { values[i] = i % 3 == 0 ? 0.0f : float(i); }
  }
  // A resident tensor holding `values`.
  stash::tensor_handle make()
  {
    auto h  = m.allocate_async(bytes, compute);
    void* p = m.acquire_async(h, compute);
    backend.launch(compute, [this, p] { std::memcpy(p, values.data(), bytes); });
    return h;
  }
  // Offloads `h`, corrupts its host copy's header, and brings it back: its decode fails.
  void corrupt_round_trip(stash::tensor_handle h)
  {
    m.offload_async(h, compute);
    auto const copy = m.host_copy(h);
    const_cast<std::byte&>(copy[0]) ^= std::byte{0x40};
    (void)m.acquire_async(h, compute);
    backend.synchronize(compute);
    backend.synchronize(m.h2d_stream());  // the decode has run: the next call reads its status
  }
};

}  // namespace

TEST_CASE("decode failures: an operation on tensor A never throws tensor B's")
{
  fixture f;
  auto a = f.make();
  auto b = f.make();
  f.corrupt_round_trip(b);
  // Every call on A goes on, although B's failed decode is there to be read.
  CHECK_NOTHROW((void)f.m.acquire_async(a, f.compute));
  CHECK_NOTHROW(f.m.offload_async(a, f.compute));
  CHECK_NOTHROW(f.m.prefetch_async(a));
  CHECK_NOTHROW((void)f.m.acquire_async(a, f.compute));
  CHECK_NOTHROW(f.m.deallocate_async(a));
  CHECK(f.m.stats().decode_failures == 1);
  // synchronize() reports it, naming B, once.
  std::string what;
  try {
    f.m.synchronize();
  } catch (stash::codec_error const& e) {
    what = e.what();
    CHECK(e.code() == stash::codec_errc::bad_magic);
  }
  CHECK(what.find("tensor " + stash::to_string(b)) != std::string::npos);
  CHECK_NOTHROW(f.m.synchronize());
  f.m.deallocate_async(b);
  f.m.synchronize();
  CHECK(f.host.stats().in_use_bytes == 0);
}

TEST_CASE("decode failures: poll_decode_failures reports each one once, naming its tensor")
{
  fixture f;
  auto a = f.make();
  auto b = f.make();
  auto c = f.make();
  f.corrupt_round_trip(b);
  f.corrupt_round_trip(c);
  CHECK_NOTHROW(f.m.deallocate_async(a));
  auto const found = f.m.poll_decode_failures();
  REQUIRE(found.size() == 2);
  CHECK(found[0].tensor == b);
  CHECK(found[1].tensor == c);
  CHECK(found[0].code == stash::codec_errc::bad_magic);
  CHECK(std::string(found[1].to_error().what()).find(stash::to_string(c)) != std::string::npos);
  CHECK(f.m.poll_decode_failures().empty());
  CHECK_NOTHROW(f.m.synchronize());  // reported already
  CHECK(f.m.stats().decode_failures == 2);
  f.m.deallocate_async(b);
  f.m.deallocate_async(c);
}

TEST_CASE("transfers: accepts() is the query host_slot_bytes' refusals answer")
{
  auto agrees = [](std::size_t bytes, std::size_t member,
                   set_manager::descriptor_type const& desc) {
    bool refused = false;
    try {
      (void)set_manager::host_slot_bytes(bytes, member, desc);
    } catch (stash::logic_error const&) {
      refused = true;
    }
    CAPTURE(bytes);
    CAPTURE(member);
    CHECK(set_manager::accepts(bytes, member, desc) == !refused);
  };
  stash::pool_geometry const g{2, 8, 8, 2, 2, 2, 2};  // 2 planes of 4x4 outputs: 32 indices
  std::vector<set_manager::descriptor_type> descs{{}, g};
  for (auto bad :
       {stash::pool_geometry{2, 8, 8, 5, 2, 2, 2}, stash::pool_geometry{2, 1, 8, 2, 2, 2, 2},
        stash::pool_geometry{2, 8, 8, 2, 2, 0, 2}}) {
    descs.emplace_back(bad);
  }
  int accepted = 0;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4}, std::size_t{6}, std::size_t{256},
                            std::size_t{32 * 8}, std::size_t{4096}}) {
    for (std::size_t member = 0; member < set_manager::transfer_count; ++member) {
      for (auto const& d : descs) {
        agrees(bytes, member, d);
        accepted += set_manager::accepts(bytes, member, d) ? 1 : 0;
      }
    }
  }
  CHECK(accepted > 0);
  CHECK(set_manager::accepts(32 * 8, 1, g));
  CHECK_FALSE(set_manager::accepts(32 * 8, 1, {}));
  CHECK_FALSE(set_manager::accepts(6, 0, {}));  // not whole floats
  CHECK(set_manager::accepts(6, 2, {}));        // raw copies take anything
  CHECK_FALSE(set_manager::accepts(4, set_manager::transfer_count, {}));  // no such member
  // zvc's element limit, without an exception.
  std::size_t const past_limit = (std::size_t{stash::zvc<float>::max_elements} + 1) * sizeof(float);
  CHECK_FALSE(set_manager::accepts(past_limit, 0, {}));
  agrees(past_limit, 0, {});
}

}  // namespace STASH_UNITY_ID
