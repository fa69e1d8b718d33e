// Decode from device memory, its host-visible half: the staging layout the GPU transfer uses, and
// the host copy's size the manager hands each decode (known once the offload completed, unknown
// before; a corrupted size fails the decode and never makes it read past the slot).
#include <stash/codec/detail/format.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/detail/decode_staging.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/offload/transfer.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/testing/fault_injection.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
using stash::unknown_encoded_bytes;
using stash::detail::plan_decode_staging;

// host_codec_transfer<zvc>, remembering the size each decode was given.
struct recording_zvc_transfer : stash::host_codec_transfer<stash::zvc<float>> {
  static inline std::vector<std::size_t> decoded_sizes;
  static void decode(stash::host_backend& b, stash::host_backend::stream s, void const* host,
                     std::size_t capacity, void* device, std::size_t bytes, void* scratch,
                     stash::transfer_status* status, std::size_t encoded_bytes)
  {
    decoded_sizes.push_back(encoded_bytes);
    host_codec_transfer::decode(b, s, host, capacity, device, bytes, scratch, status,
                                encoded_bytes);
  }
};
using manager =
    stash::offload_manager<stash::host_backend, host_pool, host_pool, recording_zvc_transfer>;

struct fixture {
  stash::host_backend backend;
  host_pool device{stash::host_upstream{}, stash::caching_pool_options{}};
  host_pool host{stash::host_upstream{}, stash::pinned_host_pool_options()};
  stash::host_backend::stream compute{backend.create_stream()};
  manager m{backend, device, host};
  std::vector<float> data = std::vector<float>(10000);

  fixture()
  {
    recording_zvc_transfer::decoded_sizes.clear();
    for (std::size_t i = 0; i < data.size(); ++i) { data[i] = i % 4 == 0 ? float(i) : 0.0f; }
  }
  std::size_t bytes() const { return data.size() * sizeof(float); }
  stash::tensor_handle filled()
  {
    auto h  = m.allocate_async(bytes(), compute);
    void* p = m.acquire_async(h, compute);
    backend.launch(compute, [this, p] { std::memcpy(p, data.data(), bytes()); });
    return h;
  }
  std::size_t expected_size() const
  {
    std::vector<std::byte> buffer(stash::zvc<float>::max_compressed_bytes(data.size()));
    return stash::zvc<float>::host_encode(std::span<float const>(data),
                                          std::span<std::byte>(buffer));
  }
  std::vector<float> back(stash::tensor_handle h)
  {
    std::vector<float> out(data.size(), -1.0f);
    void* q = m.acquire_async(h, compute);
    backend.launch(compute, [&out, q, n = bytes()] { std::memcpy(out.data(), q, n); });
    backend.synchronize(compute);
    return out;
  }
  // The transfer_status after the host copy of an offloaded tensor.
  stash::transfer_status& status_of(stash::tensor_handle h)
  {
    auto const copy = m.host_copy(h);
    auto* base      = const_cast<std::byte*>(copy.data());
    return *reinterpret_cast<stash::transfer_status*>(base + stash::align_up(copy.size(), 16));
  }
};

}  // namespace

TEST_CASE("decode staging: a known size is copied exactly (to 16 bytes) after the status")
{
  auto const p = plan_decode_staging(0, 1000, 333);
  CHECK(p.status_offset == 0);
  CHECK(p.source_offset == 256);  // the status has a 256-byte region of its own
  CHECK(p.source_bytes == 336);
  CHECK(p.copy_bytes == 336);  // in the slot: it holds align_up(1000, 16) bytes before its status
  CHECK_FALSE(p.device_sized_copy);
  CHECK(p.decoder_src_bytes == 333);  // the decoder checks the header against exactly this
  CHECK(p.total_bytes == 256 + 336);
  // The decoder's own scratch comes first, each region 256-byte aligned.
  auto const q = plan_decode_staging(1, 1000, 333);
  CHECK(q.status_offset == 256);
  CHECK(q.source_offset == 512);
  CHECK(q.total_bytes == 512 + 336);
  CHECK(q.source_offset % 16 == 0);
}

TEST_CASE("decode staging: an unknown size reserves the capacity and sizes the copy on the device")
{
  auto const p = plan_decode_staging(512, 1000, unknown_encoded_bytes);
  CHECK(p.device_sized_copy);
  CHECK(p.copy_bytes == 0);
  CHECK(p.source_bytes == 1008);
  CHECK(p.decoder_src_bytes == 1000);
  CHECK(p.total_bytes == 512 + 256 + 1008);
}

TEST_CASE("decode staging: a size past the capacity (a corrupted slot) never reads past the slot")
{
  auto const p = plan_decode_staging(0, 1000, 5000);
  CHECK(p.copy_bytes == 1008);
  CHECK(p.decoder_src_bytes == 1000);
  auto const z = plan_decode_staging(0, 1000, 0);  // an encoder that reported nothing
  CHECK(z.copy_bytes == 0);
  CHECK_FALSE(z.device_sized_copy);  // nothing is staged: the decoder sees 0 bytes and fails
  CHECK(z.decoder_src_bytes == 0);
}

TEST_CASE("the device-sized copy takes header + declared payload, clamped to the slot")
{
  using stash::detail::declared_prefix_bytes;
  CHECK(declared_prefix_bytes(1000, 100) == 132);
  CHECK(declared_prefix_bytes(1000, 968) == 1000);  // exactly the slot
  CHECK(declared_prefix_bytes(1000, 969) == 1000);  // one past: the whole slot, then rejected
  CHECK(declared_prefix_bytes(1000, 0) == 32);      // a header alone
  CHECK(declared_prefix_bytes(31, 0) == 31);        // no header to read: the 31 bytes are taken
  CHECK(declared_prefix_bytes(0, 5) == 0);
  CHECK(declared_prefix_bytes(32, 1) == 32);
  // A corrupted length near 2^64 must not wrap header + payload into a small number.
  CHECK(declared_prefix_bytes(1000, ~std::uint64_t{0}) == 1000);
  CHECK(declared_prefix_bytes(1000, ~std::uint64_t{0} - 31) == 1000);
  // 64-bit slots: a length past 4 GiB is taken whole.
  std::uint64_t const big = std::uint64_t{5} << 32;
  CHECK(declared_prefix_bytes(big, big - 64) == big - 32);
}

TEST_CASE("the decode gets the host copy's size once the offload completed")
{
  fixture f;
  auto h = f.filled();
  f.m.offload_async(h, f.compute);
  f.m.synchronize();
  REQUIRE(f.m.state(h) == stash::tensor_state::offloaded);
  f.m.prefetch_async(h);
  auto const out = f.back(h);
  f.m.synchronize();
  REQUIRE(recording_zvc_transfer::decoded_sizes.size() == 1);
  CHECK(recording_zvc_transfer::decoded_sizes[0] == f.expected_size());
  CHECK(std::memcmp(out.data(), f.data.data(), f.bytes()) == 0);
}

TEST_CASE("the decode of a copy still in flight gets unknown_encoded_bytes, and reads the slot")
{
  fixture f;
  auto h = f.filled();
  std::promise<void> go;
  auto gate = go.get_future().share();
  f.backend.launch(f.compute, [gate] { gate.wait(); });  // the producer is still running
  f.m.offload_async(h, f.compute);
  f.m.prefetch_async(h);
  CHECK(f.m.state(h) == stash::tensor_state::prefetching);
  go.set_value();
  auto const out = f.back(h);
  f.m.synchronize();
  REQUIRE(recording_zvc_transfer::decoded_sizes.size() == 1);
  CHECK(recording_zvc_transfer::decoded_sizes[0] == unknown_encoded_bytes);
  CHECK(std::memcmp(out.data(), f.data.data(), f.bytes()) == 0);
}

TEST_CASE("a corrupted size in the slot's status fails the decode: zeros and codec_error")
{
  fixture f;
  auto h = f.filled();
  f.m.offload_async(h, f.compute);
  f.status_of(h).encoded_bytes = 40;  // shorter than the buffer its header describes
  auto const out               = f.back(h);
  CHECK_THROWS_AS(f.m.synchronize(), stash::codec_error);
  CHECK(f.m.stats().decode_failures == 1);
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 0.0f; }));
  f.m.deallocate_async(h);
  f.m.synchronize();
  CHECK(f.host.stats().in_use_bytes == 0);
}

TEST_CASE("a size past the slot in its status is clamped to the slot: the decode still succeeds")
{
  fixture f;
  auto h = f.filled();
  f.m.offload_async(h, f.compute);
  auto& status         = f.status_of(h);
  status.encoded_bytes = std::size_t{1} << 40;
  auto const out       = f.back(h);
  f.m.synchronize();
  REQUIRE(recording_zvc_transfer::decoded_sizes.size() == 1);
  CHECK(recording_zvc_transfer::decoded_sizes[0] == std::size_t{1} << 40);
  CHECK(std::memcmp(out.data(), f.data.data(), f.bytes()) == 0);
}

namespace {

// As recording_zvc_transfer, with decode scratch sized by the host copy's size (as the device
// transfer's staging is), remembering what the manager asked and handed over.
struct scratch_zvc_transfer : recording_zvc_transfer {
  static inline std::vector<std::size_t> asked;
  static inline std::vector<void*> given;
  static std::size_t decode_scratch_bytes(std::size_t, std::size_t encoded_bytes)
  {
    asked.push_back(encoded_bytes);
    return encoded_bytes == unknown_encoded_bytes ? 8 * stash::KiB : encoded_bytes;
  }
  static void decode(stash::host_backend& b, stash::host_backend::stream s, void const* host,
                     std::size_t capacity, void* device, std::size_t bytes, void* scratch,
                     stash::transfer_status* status, std::size_t encoded_bytes)
  {
    given.push_back(scratch);
    recording_zvc_transfer::decode(b, s, host, capacity, device, bytes, scratch, status,
                                   encoded_bytes);
  }
};

}  // namespace

TEST_CASE("the decode's scratch is sized by the host copy's size, taken and given back")
{
  scratch_zvc_transfer::asked.clear();
  scratch_zvc_transfer::given.clear();
  stash::host_backend backend;
  host_pool device{stash::host_upstream{}, stash::caching_pool_options{}};
  host_pool host{stash::host_upstream{}, stash::pinned_host_pool_options()};
  auto const s = backend.create_stream();
  stash::offload_manager<stash::host_backend, host_pool, host_pool, scratch_zvc_transfer> m(
      backend, device, host);
  std::vector<float> data(20000, 0.0f);
  data[7]             = 3.0f;
  std::size_t const n = data.size() * sizeof(float);
  auto h              = m.allocate_async(n, s);
  void* p             = m.acquire_async(h, s);
  backend.launch(s, [&data, p, n] { std::memcpy(p, data.data(), n); });
  m.offload_async(h, s);
  m.synchronize();
  auto const before = device.stats();
  m.prefetch_async(h);
  REQUIRE(scratch_zvc_transfer::asked.size() == 1);
  REQUIRE(scratch_zvc_transfer::given.size() == 1);
  CHECK(scratch_zvc_transfer::asked[0] == m.stats().bytes_encoded);  // the size, not the capacity
  CHECK(scratch_zvc_transfer::given[0] != nullptr);
  CHECK(device.stats().allocations == before.allocations + 2);  // the tensor and its scratch
  std::vector<float> back(data.size());
  void* q = m.acquire_async(h, s);
  backend.launch(s, [&back, q, n] { std::memcpy(back.data(), q, n); });
  backend.synchronize(s);
  m.synchronize();
  CHECK(back == data);
  m.deallocate_async(h);
  m.synchronize();
  CHECK(device.stats().in_use_bytes == 0);  // the scratch came back too
  CHECK(host.stats().in_use_bytes == 0);
}

TEST_CASE("a prefetch that fails after queueing work keeps the host copy until that work ran")
{
  // The host copy stays with the tensor, which frees it in the D2H stream's order; the work the
  // failed prefetch queued on the H2D stream (the decode reading the slot and writing its status)
  // may not have run yet, so the D2H stream must wait for it.
  using faulty_backend = stash::testing::fault_injecting_backend<stash::host_backend>;
  stash::host_backend inner;
  stash::testing::fault_injector faults;
  faulty_backend backend(inner, faults);
  host_pool device{stash::host_upstream{}, stash::caching_pool_options{}};
  host_pool host{stash::host_upstream{}, stash::pinned_host_pool_options()};
  stash::offload_manager<faulty_backend, host_pool, host_pool,
                         stash::host_codec_transfer<stash::zvc<float>>>
      m(backend, device, host);
  auto const s        = inner.create_stream();
  std::size_t const n = 4096 * sizeof(float);
  auto h              = m.allocate_async(n, s);
  void* p             = m.acquire_async(h, s);
  inner.launch(s, [p, n] { std::memset(p, 0, n); });
  m.offload_async(h, s);
  m.synchronize();
  REQUIRE(m.state(h) == stash::tensor_state::offloaded);

  std::promise<void> go;
  auto gate = go.get_future().share();
  inner.launch(m.h2d_stream(), [gate] { gate.wait(); });  // the H2D stream is busy
  // Event calls of the prefetch: the wait for the host copy, the record of `ready`, the record of
  // `decoded`; the last one fails, after the decode was queued.
  faults.arm(2, 1u << static_cast<unsigned>(stash::testing::fault_kind::event));
  CHECK_THROWS_AS(m.prefetch_async(h), stash::cuda_error);
  REQUIRE(faults.failures() == 1);
  CHECK(m.state(h) == stash::tensor_state::offloaded);

  std::atomic<bool> d2h_ran{false};
  inner.launch(m.d2h_stream(), [&d2h_ran] { d2h_ran = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(d2h_ran.load());  // a free of the slot on the D2H stream would not wait
  go.set_value();
  m.deallocate_async(h);
  m.synchronize();
  CHECK(d2h_ran.load());
  CHECK(device.stats().in_use_bytes == 0);
  CHECK(host.stats().in_use_bytes == 0);
}

namespace {

// A transfer whose decode scratch cannot be sized (a CUDA query failing, say).
struct unsizable_zvc_transfer : stash::host_codec_transfer<stash::zvc<float>> {
  static std::size_t decode_scratch_bytes(std::size_t, std::size_t)
  {
    throw stash::cuda_error(cudaErrorInvalidValue, "unsizable_zvc_transfer", 0, "sizing");
  }
};

}  // namespace

TEST_CASE("a prefetch whose decode scratch cannot be sized gives the device memory back")
{
  stash::host_backend backend;
  host_pool device{stash::host_upstream{}, stash::caching_pool_options{}};
  host_pool host{stash::host_upstream{}, stash::pinned_host_pool_options()};
  stash::offload_manager<stash::host_backend, host_pool, host_pool, unsizable_zvc_transfer> m(
      backend, device, host);
  auto const s        = backend.create_stream();
  std::size_t const n = 4096 * sizeof(float);
  auto h              = m.allocate_async(n, s);
  void* p             = m.acquire_async(h, s);
  backend.launch(s, [p, n] { std::memset(p, 0, n); });
  m.offload_async(h, s);
  m.synchronize();
  CHECK(device.stats().in_use_bytes == 0);
  CHECK_THROWS_AS(m.prefetch_async(h), stash::cuda_error);
  CHECK(device.stats().in_use_bytes == 0);
  CHECK(m.state(h) == stash::tensor_state::offloaded);  // the host copy stays for a retry
  m.deallocate_async(h);
  m.synchronize();
  CHECK(host.stats().in_use_bytes == 0);
}

TEST_CASE("a decode's scratch is taken on the H2D stream: an arena of the compute stream skips it")
{
  // GPU review 2026-11-26b W5: the staged decode's scratch is sized by the host copy's encoded
  // size, which changes with the data. Taken in the order of the stream the prefetch joins, a
  // lifetime_arena numbering that stream met another size at the same index every iteration and
  // served it from its fallback as a deviation.
  scratch_zvc_transfer::asked.clear();
  scratch_zvc_transfer::given.clear();
  using arena =
      stash::lifetime_arena<stash::host_upstream, stash::greedy_planner, stash::host_stream_order>;
  stash::host_backend backend;
  arena device{stash::host_upstream{}, stash::lifetime_arena_options{}};
  host_pool host{stash::host_upstream{}, stash::pinned_host_pool_options()};
  auto const s = backend.create_stream();
  stash::offload_manager<stash::host_backend, arena, host_pool, scratch_zvc_transfer> m(
      backend, device, host);
  constexpr std::size_t count = 4096;
  constexpr std::size_t n     = count * sizeof(float);
  constexpr int steps         = 4;
  for (int i = 0; i < steps; ++i) {
    device.begin_iteration();
    std::vector<float> data(count, 0.0f);  // 64 (i + 1) nonzeros: another encoded size each time
    for (std::size_t j = 0; j < 64 * std::size_t(i + 1); ++j) {
      data[j * 7 % count] = float(j + 1);
    }
    auto h  = m.allocate_async(n, s);
    void* p = m.acquire_async(h, s);
    backend.launch(s, [&data, p] { std::memcpy(p, data.data(), n); });
    m.offload_async(h, s);
    m.synchronize();  // the host copy's size is known: the scratch is sized by it
    m.prefetch_async(h, s);
    std::vector<float> back(count);
    void* q = m.acquire_async(h, s);
    backend.launch(s, [&back, q] { std::memcpy(back.data(), q, n); });
    backend.synchronize(s);
    m.synchronize();
    CHECK(back == data);
    m.deallocate_async(h);
    m.synchronize();
    backend.synchronize(s);
    device.end_iteration();
  }
  REQUIRE(scratch_zvc_transfer::asked.size() == steps);
  CHECK(scratch_zvc_transfer::asked[1] != scratch_zvc_transfer::asked[2]);
  CHECK(device.state() == stash::arena_state::replaying);
  CHECK(device.stats().fallbacks == 0);  // the tensor's bytes at their slots, every replay
  CHECK(device.replans() == 0);
}

}  // namespace STASH_UNITY_ID
