// The offload manager's state machine, ordering rules and error paths, on the host backend.
#include "offload_stress.hpp"
#include "support/data.hpp"

#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using manager   = stash::offload_manager<stash::host_backend, host_pool, host_pool>;

stash::caching_pool_options budget_of(std::size_t bytes)
{
  stash::caching_pool_options o;
  o.budget = bytes;
  return o;
}

// The byte pattern of tensor `id` at version `version`.
std::uint8_t pattern(std::uint64_t id, std::uint32_t version, std::size_t i)
{
  return static_cast<std::uint8_t>(id * 131 + version * 17 + i * 7 + (i >> 9));
}

// "Kernels" on a host stream: fill a tensor, or check it and count mismatches.
void fill_async(stash::host_backend& b, stash::host_backend::stream s, void* p, std::size_t n,
                std::uint64_t id, std::uint32_t version)
{
  b.launch(s, [=] {
    auto* bytes = static_cast<std::uint8_t*>(p);
    for (std::size_t i = 0; i < n; ++i) { bytes[i] = pattern(id, version, i); }
  });
}

void check_async(stash::host_backend& b, stash::host_backend::stream s, void const* p,
                 std::size_t n, std::uint64_t id, std::uint32_t version,
                 std::atomic<std::uint64_t>& bad)
{
  b.launch(s, [=, &bad] {
    auto const* bytes = static_cast<std::uint8_t const*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      if (bytes[i] != pattern(id, version, i)) {
        bad.fetch_add(1);
        return;
      }
    }
  });
}

struct fixture {
  stash::host_backend backend;
  host_pool device;
  host_pool host;
  stash::host_backend::stream compute;
  std::atomic<std::uint64_t> bad{0};

  explicit fixture(std::size_t device_budget           = 256 * stash::MiB,
                   std::size_t host_budget             = 256 * stash::MiB,
                   stash::host_backend_options options = {})
      : backend(options),
        device(stash::host_upstream{}, budget_of(device_budget)),
        host(stash::host_upstream{}, stash::pinned_host_pool_options(host_budget, 8 * stash::MiB)),
        compute(backend.create_stream())
  {
  }
};

}  // namespace

TEST_CASE("offload then acquire brings back the same bytes, through every state")
{
  fixture f;
  manager m(f.backend, f.device, f.host);
  std::size_t const n = 3 * stash::MiB + 123;
  auto h              = m.allocate_async(n, f.compute);
  CHECK(m.state(h) == stash::tensor_state::resident);
  void* p = m.acquire_async(h, f.compute);
  fill_async(f.backend, f.compute, p, n, h.index(), 0);
  m.offload_async(h, f.compute);
  auto const s = m.state(h);
  CHECK((s == stash::tensor_state::offloading || s == stash::tensor_state::offloaded));
  m.synchronize();
  CHECK(m.state(h) == stash::tensor_state::offloaded);
  // The device bytes went back to the device pool once the copy was done.
  CHECK(f.device.stats().in_use_bytes == 0);
  CHECK(f.host.stats().in_use_bytes >= n);

  m.prefetch_async(h);
  CHECK(m.state(h) == stash::tensor_state::prefetching);
  void* q = m.acquire_async(h, f.compute);
  CHECK(m.state(h) == stash::tensor_state::resident);
  check_async(f.backend, f.compute, q, n, h.index(), 0, f.bad);
  f.backend.synchronize(f.compute);
  CHECK(f.bad.load() == 0);
  CHECK(m.stats().offloads == 1);
  CHECK(m.stats().prefetches == 1);
  CHECK(m.stats().demand_prefetches == 0);
  CHECK(m.stats().bytes_offloaded == n);
  m.deallocate_async(h);
  CHECK(m.state(h) == stash::tensor_state::released);
  m.synchronize();
  f.backend.synchronize(f.compute);
  CHECK(f.device.stats().in_use_bytes == 0);
  CHECK(f.host.stats().in_use_bytes == 0);
}

TEST_CASE("acquire of an offloaded tensor prefetches on demand, ordered after the offload")
{
  // Slow workers: the offload is still running when acquire is called.
  stash::host_backend_options slow;
  slow.max_delay = std::chrono::microseconds(2000);
  slow.seed      = 7;
  fixture f(256 * stash::MiB, 256 * stash::MiB, slow);
  manager m(f.backend, f.device, f.host);
  std::size_t const n = 1 * stash::MiB;
  auto h              = m.allocate_async(n, f.compute);
  fill_async(f.backend, f.compute, m.acquire_async(h, f.compute), n, h.index(), 3);
  m.offload_async(h, f.compute);
  void* q = m.acquire_async(h, f.compute);  // no prefetch_async before: on demand
  check_async(f.backend, f.compute, q, n, h.index(), 3, f.bad);
  f.backend.synchronize(f.compute);
  CHECK(f.bad.load() == 0);
  CHECK(m.stats().demand_prefetches == 1);
}

TEST_CASE("an exhausted host pool leaves the tensor resident and intact")
{
  fixture f(64 * stash::MiB, 8 * stash::MiB);
  manager m(f.backend, f.device, f.host);
  auto a = m.allocate_async(6 * stash::MiB, f.compute);
  auto b = m.allocate_async(6 * stash::MiB, f.compute);
  fill_async(f.backend, f.compute, m.acquire_async(b, f.compute), 6 * stash::MiB, b.index(), 1);
  m.offload_async(a, f.compute);
  try {
    m.offload_async(b, f.compute);
    FAIL("offload beyond the host budget succeeded");
  } catch (stash::out_of_memory const& e) {
    CHECK(std::string(e.what()).find("tensor #1") != std::string::npos);
    CHECK(std::string(e.what()).find("stays resident") != std::string::npos);
    CHECK(e.requested_bytes() >= 6 * stash::MiB);  // the tensor plus the slot's status word
  }
  CHECK(m.state(b) == stash::tensor_state::resident);
  check_async(f.backend, f.compute, m.acquire_async(b, f.compute), 6 * stash::MiB, b.index(), 1,
              f.bad);
  f.backend.synchronize(f.compute);
  CHECK(f.bad.load() == 0);
  CHECK(m.stats().offloads == 1);
}

TEST_CASE("a full device pool on prefetch throws with context; the host copy survives a retry")
{
  fixture f(8 * stash::MiB, 64 * stash::MiB);
  manager m(f.backend, f.device, f.host);
  std::size_t const n = 5 * stash::MiB;
  auto a              = m.allocate_async(n, f.compute);
  fill_async(f.backend, f.compute, m.acquire_async(a, f.compute), n, a.index(), 9);
  m.offload_async(a, f.compute);
  m.synchronize();
  auto b = m.allocate_async(n, f.compute);  // takes the device memory a gave back
  try {
    (void)m.acquire_async(a, f.compute);
    FAIL("prefetch into a full device pool succeeded");
  } catch (stash::out_of_memory const& e) {
    CHECK(std::string(e.what()).find("prefetch of tensor #0") != std::string::npos);
    CHECK(e.requested_bytes() == n);
  }
  CHECK(m.state(a) == stash::tensor_state::offloaded);
  m.deallocate_async(b);
  f.backend.synchronize(f.compute);
  void* q = m.acquire_async(a, f.compute);  // retry after freeing memory
  check_async(f.backend, f.compute, q, n, a.index(), 9, f.bad);
  f.backend.synchronize(f.compute);
  CHECK(f.bad.load() == 0);
}

TEST_CASE("misuse is a logic_error naming the tensor and its state")
{
  fixture f;
  manager m(f.backend, f.device, f.host);
  auto h = m.allocate_async(4096, f.compute);
  m.offload_async(h, f.compute);
  try {
    m.offload_async(h, f.compute);
    FAIL("double offload accepted");
  } catch (stash::logic_error const& e) {
    std::string const what = e.what();
    CHECK(what.find("tensor #0") != std::string::npos);
    CHECK((what.find("offloading") != std::string::npos ||
           what.find("offloaded") != std::string::npos));
  }
  m.deallocate_async(h);
  CHECK_THROWS_AS(m.deallocate_async(h), stash::logic_error);
  CHECK_THROWS_AS((void)m.acquire_async(h, f.compute), stash::logic_error);
  CHECK_THROWS_AS(m.prefetch_async(h), stash::logic_error);
  CHECK_THROWS_AS(m.offload_async(h, f.compute), stash::logic_error);
  try {
    (void)m.acquire_async(stash::tensor_handle(m.owner_tag(), 42, 1), f.compute);
    FAIL("unknown handle accepted");
  } catch (stash::logic_error const& e) {
    CHECK(std::string(e.what()).find("tensor #42 (generation 1) was never made by this manager") !=
          std::string::npos);
  }
  CHECK_THROWS_AS(m.deallocate_async(stash::tensor_handle{}), stash::logic_error);
}

// ---------------------------------------------------------------------------------------------
// CUDA graph capture, as the host backend models its rules (offload_gpu_test.cu runs it for real).

TEST_CASE("capture: a closed region forks the side streams, joins them back and allocates nothing")
{
  fixture f;
  manager m(f.backend, f.device, f.host);
  std::size_t const n = 1 * stash::MiB + 40;
  f.device.reserve(16 * stash::MiB);
  f.host.reserve(16 * stash::MiB);
  auto const device_before = f.device.stats();
  auto const host_before   = f.host.stats();

  f.backend.begin_capture(f.compute);
  std::vector<stash::tensor_handle> ts;
  for (std::uint32_t k = 0; k < 3; ++k) {
    ts.push_back(m.allocate_async(n, f.compute));
    fill_async(f.backend, f.compute, m.acquire_async(ts.back(), f.compute), n, ts.back().index(),
               k);
    m.offload_async(ts.back(), f.compute);
  }
  // The D2H stream joined the capture through an event recorded on the capturing stream.
  CHECK(f.backend.capturing(m.d2h_stream()));
  // Nothing on the host may wait for captured work, nor poll it as if it had run.
  CHECK_THROWS_AS(m.synchronize(), stash::logic_error);
  CHECK_THROWS_AS((void)m.host_copy(ts[0]), stash::logic_error);
  CHECK_THROWS_AS(m.prefetch_async(ts[0]), stash::logic_error);  // must name the stream
  CHECK(m.state(ts[0]) == stash::tensor_state::offloading);      // never "offloaded"
  for (auto t : ts) { m.prefetch_async(t, f.compute); }
  CHECK(f.backend.capturing(m.h2d_stream()));
  for (std::uint32_t k = 0; k < 3; ++k) {
    check_async(f.backend, f.compute, m.acquire_async(ts[k], f.compute), n, ts[k].index(), k,
                f.bad);
    m.deallocate_async(ts[k]);
  }
  m.join_async(f.compute);
  f.backend.end_capture(f.compute);
  CHECK_FALSE(f.backend.capturing(m.d2h_stream()));
  CHECK_FALSE(f.backend.capturing(m.h2d_stream()));

  f.backend.synchronize(f.compute);
  m.synchronize();
  CHECK(f.bad.load() == 0);  // the host backend runs captured work at once: the bytes are real
  CHECK(m.stats().offloads == 3);
  CHECK(m.stats().prefetches == 3);
  // Everything came from the reservations.
  CHECK(f.device.stats().reserved_bytes == device_before.reserved_bytes);
  CHECK(f.host.stats().reserved_bytes == host_before.reserved_bytes);
  CHECK(f.device.stats().in_use_bytes == 0);
  CHECK(f.host.stats().in_use_bytes == 0);
}

TEST_CASE("capture: memory that would have to be allocated is refused; tensor and pools intact")
{
  fixture f;
  manager m(f.backend, f.device, f.host);
  std::size_t const n = 2 * stash::MiB;
  f.device.reserve(4 * stash::MiB);  // room for the tensor; none reserved on the host
  f.backend.begin_capture(f.compute);
  CHECK_THROWS_AS((void)m.allocate_async(64 * stash::MiB, f.compute), stash::logic_error);
  auto t = m.allocate_async(n, f.compute);
  fill_async(f.backend, f.compute, m.acquire_async(t, f.compute), n, t.index(), 5);
  auto const device_before = f.device.stats();
  auto const host_before   = f.host.stats();
  try {
    m.offload_async(t, f.compute);
    FAIL("the host pool grew while capturing");
  } catch (stash::logic_error const& e) {
    std::string const what = e.what();
    CHECK(what.find("captured into a CUDA graph") != std::string::npos);
    CHECK(what.find("reserve()") != std::string::npos);
    CHECK(what.find("tensor #0 (generation 1), which stays resident") != std::string::npos);
  }
  CHECK(m.state(t) == stash::tensor_state::resident);
  CHECK(m.stats().offloads == 0);
  CHECK(f.host.stats().reserved_bytes == host_before.reserved_bytes);
  CHECK(f.host.stats().in_use_bytes == host_before.in_use_bytes);
  CHECK(f.device.stats().in_use_bytes == device_before.in_use_bytes);
  CHECK_FALSE(f.backend.capturing(m.d2h_stream()));  // refused before anything was queued
  check_async(f.backend, f.compute, m.acquire_async(t, f.compute), n, t.index(), 5, f.bad);
  m.deallocate_async(t);
  m.join_async(f.compute);
  f.backend.end_capture(f.compute);
  f.backend.synchronize(f.compute);
  CHECK(f.bad.load() == 0);

  // Outside the capture the same offload may grow the pool.
  auto u = m.allocate_async(n, f.compute);
  m.offload_async(u, f.compute);
  CHECK(f.host.stats().reserved_bytes > host_before.reserved_bytes);
  m.deallocate_async(u);
  m.synchronize();
}

TEST_CASE("capture: tensors do not cross the capture's boundary, except to be released")
{
  fixture f;
  manager m(f.backend, f.device, f.host);
  f.device.reserve(8 * stash::MiB);
  f.host.reserve(8 * stash::MiB);
  auto outside = m.allocate_async(4096, f.compute);
  auto other   = f.backend.create_stream();
  f.backend.begin_capture(f.compute);
  CHECK_THROWS_AS(m.offload_async(outside, f.compute), stash::logic_error);
  CHECK_THROWS_AS((void)m.acquire_async(outside, f.compute), stash::logic_error);
  auto inside = m.allocate_async(4096, f.compute);
  m.offload_async(inside, f.compute);
  // Once the side streams are in the capture, a call on a stream outside it would drag its
  // copies into the graph.
  CHECK_THROWS_AS((void)m.allocate_async(4096, other), stash::logic_error);
  CHECK_THROWS_AS(m.offload_async(outside, other), stash::logic_error);
  CHECK(m.state(outside) == stash::tensor_state::resident);
  m.join_async(f.compute);
  f.backend.end_capture(f.compute);
  try {
    m.prefetch_async(inside, f.compute);
    FAIL("a captured tensor was used after its capture");
  } catch (stash::logic_error const& e) {
    CHECK(std::string(e.what()).find("belongs to it") != std::string::npos);
  }
  m.deallocate_async(inside);  // releasing is always allowed
  m.offload_async(outside, f.compute);
  m.synchronize();
  CHECK(m.state(outside) == stash::tensor_state::offloaded);
  m.deallocate_async(outside);
}

TEST_CASE("stress: random schedules over several streams keep every tensor's bytes")
{
  stash::host_backend_options jitter;
  jitter.max_delay = std::chrono::microseconds(50);
  jitter.seed      = 2026;
  // A tight device budget makes the pool reuse freed memory constantly.
  fixture f(96 * stash::MiB, 64 * stash::MiB, jitter);
  manager m(f.backend, f.device, f.host);
  std::vector<stash::host_backend::stream> streams = {f.compute, f.backend.create_stream(),
                                                      f.backend.create_stream()};
  auto fill = [&](auto s, void* p, std::size_t n, std::uint64_t id, std::uint32_t v) {
    fill_async(f.backend, s, p, n, id, v);
  };
  auto check = [&](auto s, void const* p, std::size_t n, std::uint64_t id, std::uint32_t v) {
    check_async(f.backend, s, p, n, id, v, f.bad);
  };
  auto const c = stash::test::run_offload_stress(m, f.backend, streams, 12345, 3000, 2 * stash::MiB,
                                                 fill, check);
  MESSAGE("stress: " << c.tensors << " tensors, " << c.acquires << " acquires, "
                     << m.stats().offloads << " offloads, " << m.stats().prefetches
                     << " prefetches, " << c.full_pool_retries << " full-pool retries");
  CHECK(f.bad.load() == 0);
  CHECK(c.acquires > 500);
  CHECK(m.stats().offloads > 100);
  CHECK(m.stats().prefetches > 100);
  CHECK(f.device.stats().in_use_bytes == 0);
  CHECK(f.host.stats().in_use_bytes == 0);
}

// ---------------------------------------------------------------------------------------------
// The codec path: host references of the codecs run on the host backend's streams.

namespace {
using zvc_manager =
    stash::offload_manager<stash::host_backend, host_pool, host_pool, stash::zvc<float>>;
// A codec names its host reference on the host backend (transfer_for_t).
static_assert(std::is_same_v<zvc_manager::transfer_set_type,
                             stash::transfer_set<stash::host_codec_transfer<stash::zvc<float>>>>);

std::vector<float> read_f32(std::string const& relative)
{
  std::ifstream in(stash::test::data_path(relative), std::ios::binary);
  REQUIRE(in.good());
  in.seekg(0, std::ios::end);
  auto const bytes = static_cast<std::size_t>(in.tellg());
  in.seekg(0);
  std::vector<float> v(bytes / sizeof(float));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
  return v;
}
}  // namespace

TEST_CASE("zvc transfer: real ReLU activations come back bit-exact and smaller on the host")
{
  fixture f;
  zvc_manager m(f.backend, f.device, f.host);
  auto const act      = read_f32("activations/netA_final_relu4.f32");  // 72% zeros
  std::size_t const n = act.size() * sizeof(float);
  auto h              = m.allocate_async(n, f.compute);
  void* p             = m.acquire_async(h, f.compute);
  f.backend.launch(f.compute, [&, p] { std::memcpy(p, act.data(), n); });
  m.offload_async(h, f.compute);
  auto const copy = m.host_copy(h);
  REQUIRE(copy.size() >= n / 3);
  // The codec wrote a buffer the host reference can decode on its own.
  std::vector<float> on_host(act.size());
  auto const used = stash::zvc<float>::host_decode(copy, std::span<float>(on_host));
  CHECK(used == act.size());
  CHECK(std::memcmp(on_host.data(), act.data(), n) == 0);

  void* q = m.acquire_async(h, f.compute);
  std::vector<float> back(act.size());
  f.backend.launch(f.compute, [&, q] { std::memcpy(back.data(), q, n); });
  f.backend.synchronize(f.compute);
  m.synchronize();
  CHECK(std::memcmp(back.data(), act.data(), n) == 0);
  CHECK(m.stats().decode_failures == 0);
  // host_copy() waited for the copy, so its compressed size was counted: 72% zeros compress.
  CHECK(m.stats().bytes_encoded_source == n);
  std::vector<std::byte> reference(stash::zvc<float>::max_compressed_bytes(act.size()));
  auto const expected =
      stash::zvc<float>::host_encode(std::span<float const>(act), std::span<std::byte>(reference));
  CHECK(m.stats().bytes_encoded == expected);
  CHECK(m.stats().bytes_encoded < n / 2);
  m.deallocate_async(h);
  m.synchronize();
  CHECK(f.host.stats().in_use_bytes == 0);
}

TEST_CASE("transfer_set: each offload runs the member it names and its prefetch decodes with it")
{
  using set_manager =
      stash::offload_manager<stash::host_backend, host_pool, host_pool,
                             stash::transfer_set<stash::raw_transfer, stash::zvc<float>>>;
  static_assert(set_manager::transfer_count == 2);
  fixture f;
  set_manager m(f.backend, f.device, f.host);
  auto const act      = read_f32("activations/netA_final_relu4.f32");
  std::size_t const n = act.size() * sizeof(float);
  auto h              = m.allocate_async(n, f.compute);
  void* p             = m.acquire_async(h, f.compute);
  f.backend.launch(f.compute, [&, p] { std::memcpy(p, act.data(), n); });

  // An index outside the set is refused before anything is taken; the tensor stays resident.
  auto const host_in_use = f.host.stats().in_use_bytes;
  CHECK_THROWS_AS(m.offload_async(h, f.compute, 2), stash::logic_error);
  CHECK(m.state(h) == stash::tensor_state::resident);
  CHECK(f.host.stats().in_use_bytes == host_in_use);

  for (std::size_t member : {1, 0, 1}) {
    m.offload_async(h, f.compute, member);
    auto const copy = m.host_copy(h);
    if (member == 0) {  // raw: the bytes as they are
      CHECK(std::memcmp(copy.data(), act.data(), n) == 0);
    } else {  // zvc: a buffer the host reference decodes on its own
      std::vector<float> on_host(act.size());
      CHECK(stash::zvc<float>::host_decode(copy, std::span<float>(on_host)) == act.size());
      CHECK(std::memcmp(on_host.data(), act.data(), n) == 0);
    }
    void* q = m.acquire_async(h, f.compute);
    std::vector<float> back(act.size());
    f.backend.launch(f.compute, [&, q] { std::memcpy(back.data(), q, n); });
    f.backend.synchronize(f.compute);
    m.synchronize();
    CHECK(std::memcmp(back.data(), act.data(), n) == 0);
  }
  CHECK(m.stats().offloads == 3);
  CHECK(m.stats().decode_failures == 0);
  // Two zvc copies (72% zeros) and one raw copy.
  CHECK(m.stats().bytes_encoded < m.stats().bytes_encoded_source * 2 / 3);
  CHECK(m.stats().bytes_encoded > n);
  m.deallocate_async(h);
  m.synchronize();
  CHECK(f.host.stats().in_use_bytes == 0);
}

TEST_CASE("zvc transfer: a corrupted host copy raises codec_error naming the tensor, never data")
{
  fixture f;
  zvc_manager m(f.backend, f.device, f.host);
  std::vector<float> act(4096);
  for (std::size_t i = 0; i < act.size(); ++i) { act[i] = (i % 3 == 0) ? 0.0f : float(i); }
  std::size_t const n = act.size() * sizeof(float);
  auto h              = m.allocate_async(n, f.compute);
  void* p             = m.acquire_async(h, f.compute);
  f.backend.launch(f.compute, [&, p] { std::memcpy(p, act.data(), n); });
  m.offload_async(h, f.compute);
  auto const copy = m.host_copy(h);
  // A bit flip in the header's magic (as a failing DIMM would do it).
  const_cast<std::byte&>(copy[0]) ^= std::byte{0x40};
  void* q = m.acquire_async(h, f.compute);
  std::vector<float> back(act.size(), -1.0f);
  f.backend.launch(f.compute, [&, q] { std::memcpy(back.data(), q, n); });
  f.backend.synchronize(f.compute);
  try {
    m.synchronize();
    FAIL("a corrupted host copy went unnoticed");
  } catch (stash::codec_error const& e) {
    CHECK(std::string(e.what()).find("tensor #0") != std::string::npos);
    CHECK(e.code() == stash::codec_errc::bad_magic);
  }
  CHECK(m.stats().decode_failures == 1);
  // What the compute stream saw is zeros, not half-decoded garbage.
  CHECK(std::all_of(back.begin(), back.end(), [](float x) { return x == 0.0f; }));
  m.deallocate_async(h);
  m.synchronize();
  CHECK(f.host.stats().in_use_bytes == 0);
}

TEST_CASE("a tensor released before its decode was checked: counted, not thrown, slot freed")
{
  fixture f;
  zvc_manager m(f.backend, f.device, f.host);
  std::vector<float> act(4096);
  for (std::size_t i = 0; i < act.size(); ++i) { act[i] = (i % 3 == 0) ? 0.0f : float(i); }
  std::size_t const n = act.size() * sizeof(float);
  // Holds a side stream until opened, so the host sees nothing complete before release().
  auto hold = [&](stash::host_backend::stream s) {
    auto gate = std::make_shared<std::atomic<bool>>(false);
    f.backend.launch(s, [gate] {
      while (!gate->load()) { std::this_thread::yield(); }
    });
    return gate;
  };

  SUBCASE("a corrupted copy")
  {
    auto h  = m.allocate_async(n, f.compute);
    void* p = m.acquire_async(h, f.compute);
    f.backend.launch(f.compute, [&, p] { std::memcpy(p, act.data(), n); });
    m.offload_async(h, f.compute);
    auto const copy = m.host_copy(h);
    const_cast<std::byte&>(copy[0]) ^= std::byte{0x40};
    auto gate = hold(m.h2d_stream());
    (void)m.acquire_async(h, f.compute);  // the decode waits behind the gate
    m.deallocate_async(h);                // before the decode ran: its check is orphaned
    gate->store(true);
    f.backend.synchronize(f.compute);
    CHECK_NOTHROW(m.synchronize());  // nobody holds the tensor: counted, not thrown
    CHECK(m.stats().decode_failures == 1);
  }
  SUBCASE("an offload the host never saw complete: its encoded size is still counted")
  {
    auto h  = m.allocate_async(n, f.compute);
    void* p = m.acquire_async(h, f.compute);
    f.backend.launch(f.compute, [&, p] { std::memcpy(p, act.data(), n); });
    auto gate = hold(m.d2h_stream());
    m.offload_async(h, f.compute);
    CHECK(m.state(h) == stash::tensor_state::offloading);
    (void)m.acquire_async(h, f.compute);  // prefetch while the encode is still held back
    m.deallocate_async(h);
    gate->store(true);
    f.backend.synchronize(f.compute);
    m.synchronize();
    std::vector<std::byte> reference(stash::zvc<float>::max_compressed_bytes(act.size()));
    CHECK(m.stats().bytes_encoded_source == n);
    CHECK(m.stats().bytes_encoded ==
          stash::zvc<float>::host_encode(std::span<float const>(act),
                                         std::span<std::byte>(reference)));
    CHECK(m.stats().decode_failures == 0);
  }
  CHECK(f.host.stats().in_use_bytes == 0);
}

// ---------------------------------------------------------------------------------------------
// Issue #15: what a line-by-line review of the GPU path found, shown on the host backend.

TEST_CASE("capture: no event or pool marker recorded while capturing is ever queried")
{
  // The host backend throws where cudaEventQuery would return cudaErrorCapturedEvent (and may
  // invalidate the capture): every poll below must leave captured events alone.
  fixture f;
  zvc_manager m(f.backend, f.device, f.host);
  std::size_t const n = 64 * 1024 * sizeof(float);
  f.device.reserve(8 * stash::MiB);
  f.host.reserve(8 * stash::MiB);
  auto other = f.backend.create_stream();

  f.backend.begin_capture(f.compute);
  auto t = m.allocate_async(n, f.compute);
  fill_async(f.backend, f.compute, m.acquire_async(t, f.compute), n, t.index(), 1);
  m.offload_async(t, f.compute);
  CHECK(m.state(t) == stash::tensor_state::offloading);  // polls the captured D2H copy
  m.prefetch_async(t, f.compute);                        // a decode whose status is pending
  check_async(f.backend, f.compute, m.acquire_async(t, f.compute), n, t.index(), 1, f.bad);
  auto u = m.allocate_async(n, f.compute);  // the D2H stream's captured marker is on a free block
  m.offload_async(u, f.compute);            // reaps pending decodes first
  m.deallocate_async(u);
  m.join_async(f.compute);
  f.backend.end_capture(f.compute);

  // After the capture: polling, reaping and pool reuse on another stream still skip them.
  CHECK_NOTHROW(m.synchronize());
  CHECK(m.state(t) == stash::tensor_state::resident);
  void* p = nullptr;
  CHECK_NOTHROW(p = f.device.allocate_async(n, f.backend.tag(other)));
  f.device.deallocate_async(p, n, f.backend.tag(other));
  void* q = nullptr;
  CHECK_NOTHROW(q = f.host.allocate_async(n, f.backend.tag(other)));
  f.host.deallocate_async(q, n, f.backend.tag(other));
  CHECK_NOTHROW((void)f.host.release_cached());
  m.deallocate_async(t);
  f.backend.synchronize(f.compute);
  CHECK(f.bad.load() == 0);
  // A tensor outside any capture is polled as before.
  auto w = m.allocate_async(n, f.compute);
  m.offload_async(w, f.compute);
  m.synchronize();
  CHECK(m.state(w) == stash::tensor_state::offloaded);
  m.deallocate_async(w);
}

namespace {
// A transfer whose encode queues work and then throws, as device_codec_transfer's encoder does
// when its size limit or a launch fails after clear_status_kernel was queued.
struct refusing_transfer {
  static constexpr bool lossless       = true;
  static constexpr bool reports_status = false;
  static std::size_t host_bytes(std::size_t bytes) noexcept { return bytes; }
  static std::size_t scratch_bytes(std::size_t) noexcept { return 4096; }
  static void encode(stash::host_backend& b, stash::host_backend::stream s, void const*,
                     std::size_t, void* host, std::size_t, void*, stash::transfer_status*)
  {
    b.launch(s, [host] { std::memset(host, 0, 16); });
    STASH_FAIL("refusing_transfer: the encoder refuses this tensor");
  }
  static void decode(stash::host_backend& b, stash::host_backend::stream s, void const* host,
                     std::size_t, void* device, std::size_t bytes, void*, stash::transfer_status*)
  {
    b.copy_async(device, host, bytes, s);
  }
};
}  // namespace

TEST_CASE("a failed encode leaves the tensor resident and intact, and the pools as they were")
{
  fixture f;
  stash::offload_manager<stash::host_backend, host_pool, host_pool, refusing_transfer> m(
      f.backend, f.device, f.host);
  std::size_t const n = 1 * stash::MiB;
  auto t              = m.allocate_async(n, f.compute);
  fill_async(f.backend, f.compute, m.acquire_async(t, f.compute), n, t.index(), 3);
  auto const device_before = f.device.stats();
  auto const host_before   = f.host.stats();
  CHECK_THROWS_AS(m.offload_async(t, f.compute), stash::logic_error);
  CHECK(m.state(t) == stash::tensor_state::resident);
  CHECK(m.stats().offloads == 0);
  CHECK(f.device.stats().in_use_bytes == device_before.in_use_bytes);  // the scratch came back
  CHECK(f.host.stats().in_use_bytes == host_before.in_use_bytes);      // and the host slot
  check_async(f.backend, f.compute, m.acquire_async(t, f.compute), n, t.index(), 3, f.bad);
  m.deallocate_async(t);
  m.synchronize();
  f.backend.synchronize(f.compute);
  CHECK(f.bad.load() == 0);
  CHECK(f.device.stats().in_use_bytes == 0);
  CHECK(f.host.stats().in_use_bytes == 0);
}

TEST_CASE("bench_offload's sizing: a pinned pool reserved for N host slots takes N offloads")
{
  // bench_offload at a sixteenth of its size (16 tensors of 64 MiB, 256 MiB steps): the budget
  // and the reservation are N host slots, in one segment. Every slot is a little larger than the
  // tensor (its status record); each block must split off exactly one slot.
  std::size_t const bytes = 4 * stash::MiB;
  std::size_t const step  = 16 * stash::MiB;
  int const count         = 16;
  std::size_t const slot =
      stash::align_up(manager::host_slot_bytes(bytes), stash::pinned_host_pool_options().rounding);
  CHECK(slot > bytes);
  fixture f(std::size_t(count + 1) * bytes, 8 * stash::MiB);
  host_pool host(stash::host_upstream{},
                 stash::pinned_host_pool_options(std::size_t(count) * slot, step));
  host.reserve(std::size_t(count) * slot);
  CHECK(host.stats().reserved_bytes == std::size_t(count) * slot);
  manager m(f.backend, f.device, host);
  std::vector<stash::tensor_handle> hs;
  for (int i = 0; i < count; ++i) { hs.push_back(m.allocate_async(bytes, f.compute)); }
  for (auto h : hs) { CHECK_NOTHROW(m.offload_async(h, f.compute)); }
  m.synchronize();
  CHECK(host.stats().reserved_bytes == std::size_t(count) * slot);
  for (auto h : hs) { m.deallocate_async(h); }
  m.synchronize();
}

// Issue 22, a second drop per gap: a prefetch that keeps its host copy (host_copy_mode::keep) lets
// the tensor leave again with no second device -> host copy (redrop_async), and the copy is freed
// once: by the last prefetch, a discard, a new offload or the tensor's release.
template <class Manager>
void check_redrops(fixture& f)
{
  Manager m(f.backend, f.device, f.host);
  std::size_t const n = 64 * 1024;
  auto h              = m.allocate_async(n, f.compute);
  fill_async(f.backend, f.compute, m.acquire_async(h, f.compute), n, 1, 0);
  m.offload_async(h, f.compute);
  auto const check_back = [&] {
    check_async(f.backend, f.compute, m.acquire_async(h, f.compute), n, 1, 0, f.bad);
    f.backend.synchronize(f.compute);
    CHECK(f.bad.load() == 0);
  };
  for (int round = 0; round < 2; ++round) {
    m.prefetch_async(h, f.compute, stash::host_copy_mode::keep);
    check_back();
    CHECK(m.holds_host_copy(h));
    m.redrop_async(h);
    CHECK_FALSE(m.holds_host_copy(h));
    m.synchronize();
    CHECK(m.state(h) == stash::tensor_state::offloaded);
    CHECK(f.device.stats().in_use_bytes == 0);  // the device bytes went back, nothing copied
  }
  check_back();  // on demand: the last prefetch frees the copy
  CHECK_FALSE(m.holds_host_copy(h));
  CHECK_THROWS_AS(m.redrop_async(h), stash::logic_error);  // no kept copy
  m.synchronize();
  CHECK(f.host.stats().in_use_bytes == 0);
  CHECK(m.stats().offloads == 1);
  CHECK(m.stats().bytes_offloaded == n);
  CHECK(m.stats().redrops == 2);
  CHECK(m.stats().prefetches == 3);
  CHECK(m.stats().bytes_encoded_source == n);  // the one copy, counted once
  CHECK(m.stats().decode_failures == 0);
  // A kept copy is freed by a discard, by a new offload (which replaces it), by the release.
  m.offload_async(h, f.compute);
  m.prefetch_async(h, stash::host_copy_mode::keep);
  check_back();
  m.discard_host_copy(h);
  CHECK_FALSE(m.holds_host_copy(h));
  m.synchronize();
  CHECK(f.host.stats().in_use_bytes == 0);
  m.offload_async(h, f.compute);
  m.prefetch_async(h, f.compute, stash::host_copy_mode::keep);
  check_back();
  auto const one_copy = f.host.stats().in_use_bytes;
  CHECK(one_copy > 0);
  m.offload_async(h, f.compute);  // the kept copy goes, the new one comes
  m.synchronize();
  CHECK(f.host.stats().in_use_bytes == one_copy);
  m.prefetch_async(h, f.compute, stash::host_copy_mode::keep);
  check_back();
  m.deallocate_async(h);
  m.synchronize();
  f.backend.synchronize(f.compute);
  CHECK(f.host.stats().in_use_bytes == 0);
  CHECK(f.device.stats().in_use_bytes == 0);
  CHECK(m.stats().discarded_host_copies == 3);
  CHECK(m.stats().redrops == 2);
}

// The two cases GPU review 2026-11-26c found uncovered (RD4, a write after a keep): a redrop while
// the keep-prefetch is still in flight (nobody acquired: the device bytes go back in the H2D
// copy's order, and another tensor may take them at once), and a tensor written after a
// keep-prefetch (its copy is given up, by a discard or by the offload itself, and the departure
// copies the new value). tests/offload/offload_gpu_test.cu runs the same on CUDA streams.
template <class Manager>
void check_redrop_in_flight_and_write(fixture& f)
{
  Manager m(f.backend, f.device, f.host);
  std::size_t const n = 64 * 1024;
  auto h              = m.allocate_async(n, f.compute);
  fill_async(f.backend, f.compute, m.acquire_async(h, f.compute), n, 1, 0);
  m.offload_async(h, f.compute);
  auto const check_back = [&](std::uint32_t version) {
    check_async(f.backend, f.compute, m.acquire_async(h, f.compute), n, 1, version, f.bad);
    f.backend.synchronize(f.compute);
    CHECK(f.bad.load() == 0);
  };
  auto const scribble = [&] {  // may take h's device bytes, in the order they were given back
    auto o = m.allocate_async(n, f.compute);
    fill_async(f.backend, f.compute, m.acquire_async(o, f.compute), n, 2, 9);
    m.deallocate_async(o);
  };
  for (int round = 0; round < 2; ++round) {
    m.prefetch_async(h, f.compute, stash::host_copy_mode::keep);
    CHECK(m.state(h) == stash::tensor_state::prefetching);
    m.redrop_async(h);  // no acquire in between
    CHECK_FALSE(m.holds_host_copy(h));
    scribble();
    m.synchronize();
    f.backend.synchronize(f.compute);
    CHECK(m.state(h) == stash::tensor_state::offloaded);
    CHECK(f.device.stats().in_use_bytes == 0);
  }
  check_back(0);  // on demand, from the same host copy
  CHECK(m.stats().offloads == 1);
  CHECK(m.stats().redrops == 2);
  CHECK(m.stats().prefetches == 3);
  // Written after a keep-prefetch: given up by a discard (the allocator's acquire_async), so a
  // redrop is refused and the departure is a real copy of version 1.
  m.offload_async(h, f.compute);
  m.prefetch_async(h, f.compute, stash::host_copy_mode::keep);
  void* p = m.acquire_async(h, f.compute);
  m.discard_host_copy(h);
  CHECK_FALSE(m.holds_host_copy(h));
  CHECK_THROWS_AS(m.redrop_async(h), stash::logic_error);
  fill_async(f.backend, f.compute, p, n, 1, 1);
  m.offload_async(h, f.compute);
  scribble();
  check_back(1);
  // Written with the copy still kept: the offload replaces the copy with version 2.
  m.offload_async(h, f.compute);
  m.prefetch_async(h, stash::host_copy_mode::keep);
  fill_async(f.backend, f.compute, m.acquire_async(h, f.compute), n, 1, 2);
  CHECK(m.holds_host_copy(h));
  m.offload_async(h, f.compute);
  CHECK_FALSE(m.holds_host_copy(h));
  scribble();
  check_back(2);
  CHECK(m.stats().offloads == 5);
  CHECK(m.stats().redrops == 2);
  CHECK(m.stats().discarded_host_copies == 2);
  m.deallocate_async(h);
  m.synchronize();
  f.backend.synchronize(f.compute);
  CHECK(f.host.stats().in_use_bytes == 0);
  CHECK(f.device.stats().in_use_bytes == 0);
}

TEST_CASE("host_copy_mode::keep: a redrop copies nothing; the kept host copy is freed once")
{
  SUBCASE("raw copies")
  {
    fixture f;
    check_redrops<manager>(f);
  }
  SUBCASE("zvc: each decode's status is checked, the copy freed after the last one")
  {
    fixture f;
    check_redrops<zvc_manager>(f);
  }
  SUBCASE("a redrop with the prefetch in flight; a write after a keep copies again")
  {
    fixture f;
    check_redrop_in_flight_and_write<manager>(f);
    fixture g;
    check_redrop_in_flight_and_write<zvc_manager>(g);
  }
}

}  // namespace STASH_UNITY_ID
