// offload_async asks its transfer for the codec scratch size once, before it takes anything (GPU
// review 2026-11-25, fourth read, O1): a device codec's answer is a CUDA call (CUB's temp-storage
// query), and it was asked again where the scratch went back to the pool, in the failure path (a
// throw there skipped the host slot's give-back) and after the tensor had moved (a throw there
// left the device bytes taken and reported a moved tensor as a failed offload).
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <stdexcept>

namespace STASH_UNITY_ID {

namespace {

using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;

// Raw copies with 256 bytes of scratch, whose size query throws at call number `fail_at` (as a
// CUB query can), and whose encode throws when told to.
struct flaky_query_transfer {
  static constexpr bool lossless       = true;
  static constexpr bool reports_status = false;
  static inline int calls              = 0;
  static inline int fail_at            = 0;  // 0: never
  static inline bool fail_encode       = false;

  static std::size_t host_bytes(std::size_t bytes) noexcept { return bytes; }
  static std::size_t scratch_bytes(std::size_t)
  {
    if (++calls == fail_at) { throw std::runtime_error("scratch query failed"); }
    return 256;
  }
  template <class Backend>
  static void encode(Backend& b, typename Backend::stream s, void const* device, std::size_t bytes,
                     void* host, std::size_t, void*, stash::transfer_status*)
  {
    if (fail_encode) { throw std::runtime_error("encode failed"); }
    b.copy_async(host, device, bytes, s);
  }
  template <class Backend>
  static void decode(Backend& b, typename Backend::stream s, void const* host, std::size_t,
                     void* device, std::size_t bytes, void*, stash::transfer_status*)
  {
    b.copy_async(device, host, bytes, s);
  }
};

using manager =
    stash::offload_manager<stash::host_backend, host_caching, host_caching, flaky_query_transfer>;

}  // namespace

TEST_CASE("offload scratch query: asked once, so a second answer cannot strand a block")
{
  stash::host_backend backend;
  auto const s = backend.create_stream();
  host_caching device, host;
  {
    manager m(backend, device, host);
    auto const h = m.allocate_async(4096, s);

    SUBCASE("success path: the offload moves the tensor and gives its device bytes back")
    {
      flaky_query_transfer::calls   = 0;
      flaky_query_transfer::fail_at = 2;  // what the give-back of the scratch used to ask
      CHECK_NOTHROW(m.offload_async(h, s));
      CHECK(flaky_query_transfer::calls == 1);
      m.synchronize();
      CHECK(m.state(h) == stash::tensor_state::offloaded);
      CHECK(device.stats().in_use_bytes == 0);  // the tensor's bytes and the scratch went back
    }
    SUBCASE("failure path: the encode's error is reported and the host slot goes back")
    {
      flaky_query_transfer::calls       = 0;
      flaky_query_transfer::fail_at     = 2;
      flaky_query_transfer::fail_encode = true;
      CHECK_THROWS_WITH_AS(m.offload_async(h, s), "encode failed", std::runtime_error);
      flaky_query_transfer::fail_encode = false;
      CHECK(m.state(h) == stash::tensor_state::resident);
      CHECK(host.stats().in_use_bytes == 0);
      CHECK(device.stats().in_use_bytes == 4096);  // the tensor only: the scratch went back
    }
    flaky_query_transfer::fail_at = 0;
    m.deallocate_async(h);
    m.synchronize();
  }
  CHECK(device.stats().in_use_bytes == 0);
  CHECK(host.stats().in_use_bytes == 0);
}

}  // namespace STASH_UNITY_ID
