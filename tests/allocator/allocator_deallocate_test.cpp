// stash::allocator::deallocate_async gives the tensor's memory back: the device pool's in-use bytes
// drop by the tensor's size at once, for a persistent tensor, in a recorded iteration, in replayed
// ones (a tensor swapped to the host included), and nothing is left in use once every tensor is
// freed.
#include <stash/allocator.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/vdnn.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using ids          = std::vector<stash::tensor_handle>;

// Sizes that are whole multiples of the pool's 512-byte rounding, so in-use bytes move by them.
constexpr std::size_t a_bytes = 64 * 1024;
constexpr std::size_t b_bytes = 16 * 1024;

// One iteration: a is written, read in the forward phase, left alone for two ops (a gap vdnn_all
// swaps it over) and read again in the backward phase; each tensor is freed after its last use, and
// the pool's in-use bytes are checked after every free.
template <class Allocator>
void iteration(Allocator& alloc, host_caching& pool, stash::host_backend& backend,
               stash::host_backend::stream s)
{
  alloc.begin_iteration();
  auto const before = pool.stats().in_use_bytes;
  alloc.phase(stash::phase::forward);
  auto const a = alloc.allocate_async(a_bytes, stash::storage_kind::act, "a", s);
  (void)alloc.op("produce", {}, ids{a}, s);
  auto const b = alloc.allocate_async(b_bytes, stash::storage_kind::act, "b", s);
  (void)alloc.op("use_a", ids{a}, ids{b}, s);
  (void)alloc.op("use_b", ids{b}, {}, s);
  alloc.phase(stash::phase::backward);
  (void)alloc.op("use_b_again", ids{b}, {}, s);
  (void)alloc.op("use_a_again", ids{a}, {}, s);
  backend.synchronize(s);
  alloc.synchronize();
  auto const resident = pool.stats().in_use_bytes;
  CHECK(resident == before + a_bytes + b_bytes);
  alloc.deallocate_async(a);
  CHECK(pool.stats().in_use_bytes == resident - a_bytes);
  alloc.deallocate_async(b);
  CHECK(pool.stats().in_use_bytes == before);
  alloc.end_iteration();
  backend.synchronize(s);
  alloc.synchronize();
  CHECK(pool.stats().in_use_bytes == before);
}

}  // namespace

TEST_CASE(
    "allocator::deallocate_async drops the pool's in-use bytes: persistent, recorded, replayed")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator<host_caching, stash::no_swap, void, stash::host_backend> alloc(backend, pool);
  auto const param = alloc.allocate_async(b_bytes, stash::storage_kind::param, "w", s);
  CHECK(pool.stats().in_use_bytes == b_bytes);
  auto const scratch = alloc.allocate_async(a_bytes, stash::storage_kind::param, "scratch", s);
  CHECK(pool.stats().in_use_bytes == a_bytes + b_bytes);
  alloc.deallocate_async(scratch);  // before any iteration
  CHECK(pool.stats().in_use_bytes == b_bytes);
  for (int i = 0; i < 3; ++i) { iteration(alloc, pool, backend, s); }
  CHECK(alloc.state() == stash::allocator_state::replaying);
  alloc.deallocate_async(param);
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("allocator::deallocate_async of a tensor swapped to the host leaves nothing in use")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching pool;
  stash::allocator_options o;
  o.device_budget = a_bytes;  // the largest tensor: vdnn_all moves every gap it may
  stash::allocator<host_caching, stash::vdnn_all, void, stash::host_backend> alloc(backend, pool,
                                                                                   o);
  for (int i = 0; i < 3; ++i) { iteration(alloc, pool, backend, s); }
  CHECK(alloc.state() == stash::allocator_state::replaying);
  CHECK(alloc.stats().scheduled_offloads > 0);
  // Freed while on the host: the device bytes went back at the offload, the host copy at the free.
  alloc.begin_iteration();
  alloc.phase(stash::phase::forward);
  auto const a = alloc.allocate_async(a_bytes, stash::storage_kind::act, "a", s);
  (void)alloc.op("produce", {}, ids{a}, s);
  auto const b = alloc.allocate_async(b_bytes, stash::storage_kind::act, "b", s);
  (void)alloc.op("use_a", ids{a}, ids{b}, s);
  (void)alloc.op("use_b", ids{b}, {}, s);
  backend.synchronize(s);
  alloc.synchronize();
  REQUIRE(alloc.where(a) == stash::tensor_state::offloaded);
  CHECK(pool.stats().in_use_bytes == b_bytes);
  alloc.deallocate_async(a);
  alloc.deallocate_async(b);
  CHECK(pool.stats().in_use_bytes == 0);
  alloc.end_iteration();
  alloc.synchronize();
  CHECK(pool.stats().in_use_bytes == 0);
}

}  // namespace STASH_UNITY_ID
