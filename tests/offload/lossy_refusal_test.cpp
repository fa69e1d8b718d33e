// A lossy member of a transfer_set refuses a tensor described as data that is not its element type
// (offload/transfer.hpp, "What a tensor holds"; GPU review, fifth read, T2): accepts() says no,
// host_slot_bytes and offload_async throw stash::logic_error before anything is taken and the
// tensor stays resident and intact, while lossless members and raw copies take it and bring it
// back bit-exact. Undescribed tensors and tensors described as the member's own type are taken.
#include <stash/codec/bitmask.hpp>
#include <stash/codec/element_type.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/error.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pool_argmax_transfer.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
// Members: 0 fp16 (lossy), 1 bitmask (lossy), 2 zvc (lossless), 3 pool_argmax, 4 raw.
using manager =
    stash::offload_manager<stash::host_backend, host_pool, host_pool,
                           stash::transfer_set<stash::precision<float, stash::fp16>, stash::bitmask,
                                               stash::zvc<float>, stash::pool_argmax, void>>;
using desc = manager::descriptor_type;

}  // namespace

TEST_CASE("transfer_set: lossy members refuse tensors described as other data, the rest take them")
{
  constexpr std::size_t bytes = 32 * 8;
  stash::pool_geometry const g{2, 8, 8, 2, 2, 2, 2};  // 32 int64 indices
  for (std::size_t lossy : {std::size_t{0}, std::size_t{1}}) {
    CAPTURE(lossy);
    CHECK(manager::accepts(bytes, lossy, desc{}));  // undescribed: taken as floats
    CHECK(manager::accepts(bytes, lossy, desc{stash::element_type::f32}));
    for (auto const& other : {desc{stash::element_type::i64}, desc{stash::element_type::u8},
                              desc{stash::element_type::f64}, desc{g}}) {
      CHECK_FALSE(manager::accepts(bytes, lossy, other));
      CHECK_THROWS_AS((void)manager::host_slot_bytes(bytes, lossy, other), stash::logic_error);
    }
  }
  for (auto const& other :
       {desc{}, desc{stash::element_type::i64}, desc{stash::element_type::u8}, desc{g}}) {
    CHECK(manager::accepts(bytes, 2, other));  // zvc moves bit patterns
    CHECK(manager::accepts(bytes, 4, other));  // raw copies
  }
  CHECK(manager::accepts(bytes, 3, desc{g}));  // pool_argmax needs its own descriptor
  CHECK_FALSE(manager::accepts(bytes, 3, desc{stash::element_type::i64}));
  try {
    (void)manager::host_slot_bytes(bytes, 0, desc{stash::element_type::i64});
    FAIL("fp16 took int64 data");
  } catch (stash::logic_error const& e) {
    std::string const what = e.what();
    CHECK(what.find("member 0") != std::string::npos);
    CHECK(what.find("i64") != std::string::npos);
  }
}

TEST_CASE("offload_manager: int64 data refused by fp16 stays resident; zvc brings it back exact")
{
  stash::host_backend backend;
  host_pool device;
  host_pool host;
  manager m{backend, device, host};
  auto const s = backend.create_stream();
  std::vector<std::int64_t> indices(64);
  for (std::size_t k = 0; k < indices.size(); ++k) { indices[k] = std::int64_t(k * 7 % 23); }
  std::size_t const bytes = indices.size() * sizeof(std::int64_t);
  auto const h            = m.allocate_async(bytes, s);
  backend.copy_async(m.acquire_async(h, s), indices.data(), bytes, s);
  desc const i64{stash::element_type::i64};
  CHECK_THROWS_AS(m.offload_async(h, s, 0, i64), stash::logic_error);
  CHECK(m.state(h) == stash::tensor_state::resident);
  CHECK(m.stats().offloads == 0);
  m.offload_async(h, s, 2, i64);
  CHECK(m.state(h) != stash::tensor_state::resident);
  std::vector<std::int64_t> back(indices.size());
  backend.copy_async(back.data(), m.acquire_async(h, s), bytes, s);
  backend.synchronize(s);
  m.synchronize();
  CHECK(back == indices);
  m.deallocate_async(h);
}

}  // namespace STASH_UNITY_ID
