// GPU benchmark of the offload manager (needs a CUDA device; prints why and exits 0 without one).
//
// 1. Effective offload / prefetch bandwidth: N tensors of S bytes offloaded (D2H) then prefetched
//    (H2D) through the manager, against plain cudaMemcpyAsync of the same bytes between the same
//    device memory and one pinned buffer, in the same run.
// 2. Overlap: a compute kernel of fixed work runs on the compute stream alone, then while the
//    manager offloads and prefetches; the compute stream's slowdown is reported.
// 3. How the D2H copy of a zvc-compressed tensor learns how many bytes to move (issue #5). The
//    encoder computes the compressed size on the device; per tensor size, each way of getting the
//    compressed tensor into pinned host memory is timed back to back on one stream:
//    - raw:       cudaMemcpyAsync D2H of the uncompressed bytes (no codec; what compression must
//    beat)
//    - mapped:    the encode kernel writes straight into mapped pinned memory (the manager's path,
//                 device_codec_transfer: cDMA's idea in software); exactly the compressed bytes
//                 cross PCIe, as the kernel's stores
//    - worst:     encode into device scratch, then cudaMemcpyAsync of max_compressed_bytes (a
//                 copy-engine copy, but as many bytes as no compression at all, plus the header)
//    - sized:     encode into device scratch, then a copy kernel reads the device-written size and
//                 moves exactly that prefix into mapped pinned memory with 16-byte stores
//    - roundtrip: encode into device scratch, copy the 8-byte size to the host and synchronize,
//                 then cudaMemcpyAsync of exactly that many bytes (one host round trip per tensor)
//    - encode:    encode into device scratch only, no transfer (the encoder's own ceiling)
//    A chunked cudaMemcpyAsync that skips chunks past the size is not in the list: the host
//    queues a cudaMemcpyAsync's size, so it cannot depend on a size the device has not yet
//    written without a round trip (a graph with conditional nodes could; not measured here).
//    GB/s are uncompressed bytes per second. The data are ReLU-like float32: the raw float32
//    tensor in --activations FILE (e.g. data/activations/netA_final_relu2.f32) tiled to each
//    size, or (default) random positive values with a --zero-fraction of zeros. Every method's
//    host copy is checked against the mapped one, and that one against the host reference.
// 4. The way back (H2D) of the same zvc-compressed tensors, from the pinned host slot the encoder
//    wrote, each method timed back to back on one stream:
//    - raw:          cudaMemcpyAsync H2D of the uncompressed bytes (what compression must beat)
//    - copy+decode:  device_codec_transfer's default: a copy engine moves exactly the compressed
//                    bytes (the size the host read after the offload) into device scratch, and
//                    the decode runs from there
//    - sized+decode: the same when the host does not know the size (an offload still in flight,
//                    a CUDA graph): a kernel reads the header's length and copies that prefix
//    - mapped:       decode_from::mapped: the decode kernels read the pinned slot over PCIe
//    GB/s are uncompressed bytes per second; every method's device bytes are checked against
//    the original tensor.
//
// Usage: bench_offload [--tensor-mib S] [--count N] [--sizes MIB,...] [--zero-fraction F]
//                      [--activations FILE] [--d2h-only] [--json]
//        (--d2h-only skips sections 1 and 2; sections 3 and 4 always run)
#include <stash/codec/device_zvc.cuh>
#include <stash/codec/zvc.hpp>
#include <stash/core/cuda_event.hpp>
#include <stash/core/cuda_stream.hpp>
#include <stash/core/device.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/pinned_host_buffer.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/pool/caching_pool.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using device_pool = stash::caching_pool<stash::device_upstream>;
using host_pool   = stash::pinned_host_pool<>;
using manager     = stash::offload_manager<stash::cuda_backend, device_pool, host_pool>;

__global__ void busy_kernel(float* x, int n, int iterations)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) { return; }
  float v = x[i];
  for (int k = 0; k < iterations; ++k) { v = v * 0.999f + 0.001f; }
  x[i] = v;
}

float elapsed_ms(stash::cuda_event const& a, stash::cuda_event const& b)
{
  float ms = 0;
  STASH_CUDA_TRY(cudaEventElapsedTime(&ms, a.value(), b.value()));
  return ms;
}

// ------------------------------------------------------------------------------------------
// Section 3: D2H-size alternatives for zvc.

using zvc_device = stash::device_zvc<float>;
using zvc_host   = stash::zvc<float>;

__device__ std::uint32_t mix(std::uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x);
}

// Random positive values, zero with probability zero_fraction (what a ReLU leaves).
__global__ void relu_like_kernel(float* x, std::size_t n, std::uint32_t zero_threshold)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint32_t const h = mix(i);
    x[i] = h < zero_threshold ? 0.0f : 1e-3f + float(mix(i ^ 0x9e3779b97f4a7c15ull) >> 8) * 1e-6f;
  }
}

// Copies the first *bytes bytes (rounded up to 16) of src to dst: the size never leaves the
// device. Both buffers are 16-byte aligned and padded to a multiple of 16.
__global__ void copy_prefix_kernel(uint4 const* src, uint4* dst, std::size_t const* bytes)
{
  std::size_t const words = (*bytes + 15) / 16;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < words;
       i += std::size_t(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

struct d2h_result {
  std::size_t tensor_bytes{0};
  std::size_t compressed_bytes{0};
  int reps{0};
  double raw{0}, mapped{0}, worst{0}, sized{0}, roundtrip{0}, encode{0};
  bool ok{true};
};

std::vector<float> read_f32(std::string const& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in) { throw std::runtime_error("bench_offload: cannot read " + path); }
  in.seekg(0, std::ios::end);
  auto const bytes = static_cast<std::size_t>(in.tellg());
  in.seekg(0);
  std::vector<float> v(bytes / sizeof(float));
  in.read(reinterpret_cast<char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (v.empty()) { throw std::runtime_error("bench_offload: " + path + " holds no float32"); }
  return v;
}

// The benchmark's tensor: --activations tiled to n floats, or ReLU-like random values. The copy
// from `activations` is synchronous (pageable memory) before this returns.
void fill_input(float* in, std::size_t n, std::vector<float> const& activations,
                double zero_fraction, int sms, cudaStream_t s)
{
  if (activations.empty()) {
    auto const threshold = static_cast<std::uint32_t>(std::min(zero_fraction, 1.0) * 4294967295.0);
    relu_like_kernel<<<sms * 8, 256, 0, s>>>(in, n, threshold);
    STASH_CUDA_TRY(cudaGetLastError());
  } else {  // tiled: the file's zero pattern, repeated
    std::size_t const chunk = std::min(activations.size(), n);
    STASH_CUDA_TRY(
        cudaMemcpyAsync(in, activations.data(), chunk * sizeof(float), cudaMemcpyHostToDevice, s));
    for (std::size_t done = chunk; done < n;) {
      std::size_t const step = std::min(done, n - done);
      STASH_CUDA_TRY(
          cudaMemcpyAsync(in + done, in, step * sizeof(float), cudaMemcpyDeviceToDevice, s));
      done += step;
    }
  }
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
}

// One cudaMalloc, freed on destruction.
struct device_memory {
  void* p{nullptr};
  explicit device_memory(std::size_t bytes) { STASH_CUDA_TRY(cudaMalloc(&p, bytes)); }
  device_memory(device_memory const&)            = delete;
  device_memory& operator=(device_memory const&) = delete;
  ~device_memory() { STASH_CUDA_CHECK_NOTHROW(cudaFree(p)); }
};

// One tensor size: every method timed over `reps` encodes of the same device tensor.
d2h_result measure_d2h(std::size_t bytes, std::vector<float> const& activations,
                       double zero_fraction, int sms)
{
  std::size_t const n             = bytes / sizeof(float);
  std::size_t const cap           = zvc_host::max_compressed_bytes(n);
  std::size_t const pad           = stash::align_up(cap, 16);
  std::size_t const scratch_bytes = zvc_device::encode_scratch_bytes(n);
  d2h_result r;
  r.tensor_bytes = bytes;
  r.reps         = static_cast<int>(std::clamp<std::size_t>((1024 * stash::MiB) / bytes, 4, 200));

  stash::cuda_stream s;
  stash::cuda_event t0(cudaEventDefault), t1(cudaEventDefault);
  // Freed on every way out, a throwing check or encode included.
  device_memory const in_memory(bytes), out_memory(pad),
      scratch_memory(std::max<std::size_t>(scratch_bytes, 16)), size_memory(sizeof(std::size_t));
  auto* const in      = static_cast<float*>(in_memory.p);
  void* const out     = out_memory.p;
  void* const scratch = scratch_memory.p;
  auto* const d_size  = static_cast<std::size_t*>(size_memory.p);
  // Pinned memory is mapped at the same address (unified addressing): kernels store to it.
  stash::pinned_host_buffer raw_host(bytes), mapped_host(pad), staged_host(pad),
      sizes_host(2 * sizeof(std::size_t));
  auto* h_size = static_cast<std::size_t*>(sizes_host.data());  // [0]: mapped, [1]: round trip

  fill_input(in, n, activations, zero_fraction, sms, s.value());
  STASH_CUDA_TRY(cudaMemsetAsync(out, 0, pad, s.value()));
  s.synchronize();

  auto encode_to = [&](void* dst, std::size_t* size_out) {
    zvc_device::encode_async(in, n, static_cast<std::byte*>(dst), cap, size_out, scratch,
                             scratch_bytes, s.value());
  };
  int const copy_blocks                                                    = sms * 4;
  std::vector<std::pair<const char*, std::function<void()>>> const methods = {
      {"raw",
       [&] {
         STASH_CUDA_TRY(
             cudaMemcpyAsync(raw_host.data(), in, bytes, cudaMemcpyDeviceToHost, s.value()));
       }},
      {"mapped", [&] { encode_to(mapped_host.data(), &h_size[0]); }},
      {"worst",
       [&] {
         encode_to(out, d_size);
         STASH_CUDA_TRY(
             cudaMemcpyAsync(staged_host.data(), out, cap, cudaMemcpyDeviceToHost, s.value()));
       }},
      {"sized",
       [&] {
         encode_to(out, d_size);
         copy_prefix_kernel<<<copy_blocks, 256, 0, s.value()>>>(
             static_cast<uint4 const*>(out), static_cast<uint4*>(staged_host.data()), d_size);
         STASH_CUDA_TRY(cudaGetLastError());
       }},
      {"roundtrip",
       [&] {
         encode_to(out, d_size);
         STASH_CUDA_TRY(cudaMemcpyAsync(&h_size[1], d_size, sizeof(std::size_t),
                                        cudaMemcpyDeviceToHost, s.value()));
         s.synchronize();  // the host round trip this method is about
         STASH_CUDA_TRY(cudaMemcpyAsync(staged_host.data(), out, h_size[1], cudaMemcpyDeviceToHost,
                                        s.value()));
       }},
      {"encode", [&] { encode_to(out, d_size); }},
  };

  std::vector<std::byte> reference;  // the mapped path's bytes, checked by the host reference
  for (auto const& [name, run] : methods) {
    std::string const which = name;
    std::memset(staged_host.data(), 0, pad);
    run();  // warm-up, and the copy that is checked
    s.synchronize();
    if (which == "mapped") {
      r.compressed_bytes = h_size[0];
      auto const* p      = static_cast<std::byte const*>(mapped_host.data());
      reference.assign(p, p + r.compressed_bytes);
      std::vector<float> decoded(n), original(n);
      STASH_CUDA_TRY(cudaMemcpy(original.data(), in, bytes, cudaMemcpyDeviceToHost));
      bool const same = zvc_host::host_decode(std::span<std::byte const>(reference),
                                              std::span<float>(decoded)) == n &&
                        std::memcmp(decoded.data(), original.data(), bytes) == 0;
      r.ok = r.ok && same;
    } else if (which == "worst" || which == "sized" || which == "roundtrip") {
      r.ok = r.ok && std::memcmp(staged_host.data(), reference.data(), reference.size()) == 0;
    }
    t0.record(s.value());
    for (int i = 0; i < r.reps; ++i) { run(); }
    t1.record(s.value());
    t1.synchronize();
    double const gbps = double(bytes) * r.reps / 1e9 / (elapsed_ms(t0, t1) / 1e3);
    if (which == "raw") { r.raw = gbps; }
    if (which == "mapped") { r.mapped = gbps; }
    if (which == "worst") { r.worst = gbps; }
    if (which == "sized") { r.sized = gbps; }
    if (which == "roundtrip") { r.roundtrip = gbps; }
    if (which == "encode") { r.encode = gbps; }
  }
  return r;
}

// ------------------------------------------------------------------------------------------
// Section 4: the way back of zvc, decode from a device copy against decode from mapped memory.

using zvc_staged = stash::device_codec_transfer<zvc_device>;
using zvc_mapped = stash::device_codec_transfer<zvc_device, stash::decode_from::mapped>;

struct h2d_result {
  std::size_t tensor_bytes{0};
  std::size_t compressed_bytes{0};
  int reps{0};
  double raw{0}, copy_decode{0}, sized_decode{0}, mapped{0};
  bool ok{true};
};

// Device memory of the section, freed on every path out.
struct h2d_buffers {
  float* in{nullptr};
  float* out{nullptr};
  void* scratch{nullptr};
  h2d_buffers(std::size_t bytes, std::size_t scratch_bytes)
  {
    STASH_CUDA_TRY(cudaMalloc(&in, bytes));
    STASH_CUDA_TRY(cudaMalloc(&out, bytes));
    STASH_CUDA_TRY(cudaMalloc(&scratch, std::max<std::size_t>(scratch_bytes, 256)));
  }
  h2d_buffers(h2d_buffers const&)            = delete;
  h2d_buffers& operator=(h2d_buffers const&) = delete;
  ~h2d_buffers()
  {
    STASH_CUDA_CHECK_NOTHROW(cudaFree(in));
    STASH_CUDA_CHECK_NOTHROW(cudaFree(out));
    STASH_CUDA_CHECK_NOTHROW(cudaFree(scratch));
  }
};

// One tensor size: encoded once into a pinned slot as the manager lays it out, then every way
// back timed over `reps` decodes of that slot into the same device tensor.
h2d_result measure_h2d(std::size_t bytes, std::vector<float> const& activations,
                       double zero_fraction, int sms)
{
  std::size_t const cap = zvc_staged::host_bytes(bytes);
  std::size_t const scratch =
      std::max({zvc_staged::scratch_bytes(bytes), zvc_staged::decode_scratch_bytes(bytes, cap),
                zvc_staged::decode_scratch_bytes(bytes, stash::unknown_encoded_bytes)});
  h2d_result r;
  r.tensor_bytes = bytes;
  r.reps         = static_cast<int>(std::clamp<std::size_t>((1024 * stash::MiB) / bytes, 4, 200));
  stash::cuda_backend backend;
  stash::cuda_stream s;
  stash::cuda_event t0(cudaEventDefault), t1(cudaEventDefault);
  h2d_buffers d(bytes, scratch);
  stash::pinned_host_buffer raw_host(bytes),
      slot(stash::align_up(cap, 16) + sizeof(stash::transfer_status));
  auto* status = reinterpret_cast<stash::transfer_status*>(static_cast<std::byte*>(slot.data()) +
                                                           stash::align_up(cap, 16));
  fill_input(d.in, bytes / sizeof(float), activations, zero_fraction, sms, s.value());
  zvc_staged::encode(backend, s.value(), d.in, bytes, slot.data(), cap, d.scratch, status);
  STASH_CUDA_TRY(cudaMemcpyAsync(raw_host.data(), d.in, bytes, cudaMemcpyDeviceToHost, s.value()));
  s.synchronize();
  r.compressed_bytes = status->encoded_bytes;

  auto decode_with = [&](auto transfer, std::size_t encoded) {
    decltype(transfer)::decode(backend, s.value(), slot.data(), cap, d.out, bytes, d.scratch,
                               status, encoded);
  };
  std::vector<std::pair<const char*, std::function<void()>>> const methods = {
      {"raw",
       [&] {
         STASH_CUDA_TRY(
             cudaMemcpyAsync(d.out, raw_host.data(), bytes, cudaMemcpyHostToDevice, s.value()));
       }},
      {"copy+decode", [&] { decode_with(zvc_staged{}, r.compressed_bytes); }},
      {"sized+decode", [&] { decode_with(zvc_staged{}, stash::unknown_encoded_bytes); }},
      {"mapped", [&] { decode_with(zvc_mapped{}, stash::unknown_encoded_bytes); }},
  };
  std::vector<std::byte> original(bytes), back(bytes);
  std::memcpy(original.data(), raw_host.data(), bytes);
  for (auto const& [name, run] : methods) {
    std::string const which = name;
    STASH_CUDA_TRY(cudaMemsetAsync(d.out, 0xff, bytes, s.value()));
    run();  // warm-up, and the decode that is checked
    STASH_CUDA_TRY(cudaMemcpyAsync(back.data(), d.out, bytes, cudaMemcpyDeviceToHost, s.value()));
    s.synchronize();
    r.ok =
        r.ok && status->status.code == 0 && std::memcmp(back.data(), original.data(), bytes) == 0;
    t0.record(s.value());
    for (int i = 0; i < r.reps; ++i) { run(); }
    t1.record(s.value());
    t1.synchronize();
    double const gbps = double(bytes) * r.reps / 1e9 / (elapsed_ms(t0, t1) / 1e3);
    if (which == "raw") { r.raw = gbps; }
    if (which == "copy+decode") { r.copy_decode = gbps; }
    if (which == "sized+decode") { r.sized_decode = gbps; }
    if (which == "mapped") { r.mapped = gbps; }
  }
  return r;
}

std::vector<std::size_t> parse_sizes(std::string const& list)
{
  std::vector<std::size_t> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    std::size_t const mib = std::strtoull(item.c_str(), nullptr, 10);
    if (mib > 0) { out.push_back(mib); }
  }
  return out;
}

// Sections 1 and 2.
struct manager_result {
  std::size_t bytes{0};
  double raw_d2h{0}, raw_h2d{0}, mgr_d2h{0}, mgr_h2d{0};
  double alone_ms{0}, shared_ms{0}, slowdown{0};
};

manager_result measure_manager(std::size_t tensor_mib, int count)
{
  std::size_t const bytes = tensor_mib * stash::MiB;
  double const total_gb   = double(bytes) * count / 1e9;

  stash::cuda_backend backend;
  device_pool device;
  // Each offload takes a host slot a little larger than the tensor (its transfer status): the
  // budget and the reservation are `count` slots, pinned up front (pinning is not measured).
  auto options           = stash::pinned_host_pool_options();
  std::size_t const slot = stash::align_up(manager::host_slot_bytes(bytes), options.rounding);
  options = stash::pinned_host_pool_options(std::size_t(count) * slot, 256 * stash::MiB);
  host_pool host(stash::pinned_host_upstream{}, options);
  host.reserve(std::size_t(count) * slot);
  manager m(backend, device, host);
  stash::cuda_stream compute;
  stash::cuda_event t0(cudaEventDefault), t1(cudaEventDefault), t2(cudaEventDefault);

  // Baseline: raw cudaMemcpyAsync D2H then H2D of the same bytes, one stream each way.
  std::vector<void*> raw(count);
  for (auto& p : raw) { p = device.allocate_async(bytes, compute); }
  stash::pinned_host_buffer pinned(bytes * count);
  t0.record(compute);
  for (int i = 0; i < count; ++i) {
    STASH_CUDA_TRY(cudaMemcpyAsync(static_cast<char*>(pinned.data()) + i * bytes, raw[i], bytes,
                                   cudaMemcpyDeviceToHost, compute));
  }
  t1.record(compute);
  for (int i = 0; i < count; ++i) {
    STASH_CUDA_TRY(cudaMemcpyAsync(raw[i], static_cast<char*>(pinned.data()) + i * bytes, bytes,
                                   cudaMemcpyHostToDevice, compute));
  }
  t2.record(compute);
  t2.synchronize();
  double const raw_d2h = total_gb / (elapsed_ms(t0, t1) / 1e3);
  double const raw_h2d = total_gb / (elapsed_ms(t1, t2) / 1e3);
  for (auto p : raw) { device.deallocate_async(p, bytes, compute); }
  compute.synchronize();

  // Through the manager.
  std::vector<stash::tensor_handle> hs;
  for (int i = 0; i < count; ++i) { hs.push_back(m.allocate_async(bytes, compute)); }
  compute.synchronize();
  t0.record(compute);
  for (auto h : hs) { m.offload_async(h, compute); }
  stash::cuda_event offloaded;
  offloaded.record(m.d2h_stream());
  offloaded.wait_on(compute);
  t1.record(compute);
  for (auto h : hs) { m.prefetch_async(h); }
  for (auto h : hs) { (void)m.acquire_async(h, compute); }
  t2.record(compute);
  t2.synchronize();
  double const mgr_d2h = total_gb / (elapsed_ms(t0, t1) / 1e3);
  double const mgr_h2d = total_gb / (elapsed_ms(t1, t2) / 1e3);

  // Overlap: the compute kernel alone, then with the same offload + prefetch traffic beside it.
  int const n = 1 << 24;
  float* x    = static_cast<float*>(device.allocate_async(n * sizeof(float), compute));
  STASH_CUDA_TRY(cudaMemsetAsync(x, 0, n * sizeof(float), compute));
  int const iterations = 2000;
  t0.record(compute);
  busy_kernel<<<n / 256, 256, 0, compute>>>(x, n, iterations);
  STASH_CUDA_TRY(cudaGetLastError());
  t1.record(compute);
  t1.synchronize();
  double const alone_ms = elapsed_ms(t0, t1);
  t0.record(compute);
  for (auto h : hs) { m.offload_async(h, compute); }  // waits only for work queued before
  busy_kernel<<<n / 256, 256, 0, compute>>>(x, n, iterations);
  STASH_CUDA_TRY(cudaGetLastError());
  t1.record(compute);
  for (auto h : hs) { m.prefetch_async(h); }
  t1.synchronize();
  double const shared_ms = elapsed_ms(t0, t1);
  m.synchronize();
  device.deallocate_async(x, n * sizeof(float), compute);
  for (auto h : hs) { m.deallocate_async(h); }
  compute.synchronize();
  manager_result r;
  r.bytes     = bytes;
  r.raw_d2h   = raw_d2h;
  r.raw_h2d   = raw_h2d;
  r.mgr_d2h   = mgr_d2h;
  r.mgr_h2d   = mgr_h2d;
  r.alone_ms  = alone_ms;
  r.shared_ms = shared_ms;
  r.slowdown  = (shared_ms - alone_ms) / alone_ms * 100.0;
  return r;
}

struct options {
  std::size_t tensor_mib             = 64;
  int count                          = 16;
  bool json                          = false;
  bool d2h_only                      = false;
  std::vector<std::size_t> sizes_mib = {1, 16, 64, 256};
  double zero_fraction               = 0.5;
  std::string activations_file;
};

// nullopt (after printing the usage) when the arguments are not understood.
std::optional<options> parse_options(int argc, char** argv)
{
  options o;
  bool ok = true;
  for (int i = 1; i < argc && ok; ++i) {
    std::string const a  = argv[i];
    bool const has_value = i + 1 < argc;
    if (a == "--tensor-mib" && has_value) {
      o.tensor_mib = std::strtoull(argv[++i], nullptr, 10);
      ok           = o.tensor_mib > 0;
    } else if (a == "--count" && has_value) {
      o.count = std::atoi(argv[++i]);
      ok      = o.count > 0;
    } else if (a == "--sizes" && has_value) {
      o.sizes_mib = parse_sizes(argv[++i]);
      ok          = !o.sizes_mib.empty();
    } else if (a == "--zero-fraction" && has_value) {
      o.zero_fraction = std::strtod(argv[++i], nullptr);
      ok              = o.zero_fraction >= 0.0 && o.zero_fraction <= 1.0;
    } else if (a == "--activations" && has_value) {
      o.activations_file = argv[++i];
    } else if (a == "--d2h-only") {
      o.d2h_only = true;
    } else if (a == "--json") {
      o.json = true;
    } else {
      ok = false;
    }
  }
  if (!ok) {
    std::fprintf(stderr,
                 "usage: bench_offload [--tensor-mib S>0] [--count N>0] [--sizes MIB,...] "
                 "[--zero-fraction F in [0,1]] [--activations FILE] [--d2h-only] [--json]\n");
    return std::nullopt;
  }
  return o;
}

void print_json(options const& o, char const* device, manager_result const& mr,
                std::vector<d2h_result> const& d2h, std::vector<h2d_result> const& h2d,
                std::string const& data)
{
  std::printf("{\"device\":\"%s\"", device);
  if (!o.d2h_only) {
    std::printf(
        ",\"tensor_bytes\":%zu,\"count\":%d,\"raw_d2h_gbps\":%.2f,"
        "\"raw_h2d_gbps\":%.2f,\"offload_gbps\":%.2f,\"prefetch_gbps\":%.2f,"
        "\"compute_alone_ms\":%.3f,\"compute_with_traffic_ms\":%.3f,\"slowdown_pct\":%.2f",
        mr.bytes, o.count, mr.raw_d2h, mr.raw_h2d, mr.mgr_d2h, mr.mgr_h2d, mr.alone_ms,
        mr.shared_ms, mr.slowdown);
  }
  std::printf(",\"zvc_d2h\":{\"data\":\"%s\",\"unit\":\"GB/s of uncompressed bytes\",\"sizes\":[",
              data.c_str());
  for (std::size_t i = 0; i < d2h.size(); ++i) {
    auto const& r = d2h[i];
    std::printf(
        "%s{\"tensor_bytes\":%zu,\"compressed_bytes\":%zu,\"reps\":%d,\"raw\":%.2f,"
        "\"mapped\":%.2f,\"worst\":%.2f,\"sized\":%.2f,\"roundtrip\":%.2f,"
        "\"encode\":%.2f,\"ok\":%s}",
        i == 0 ? "" : ",", r.tensor_bytes, r.compressed_bytes, r.reps, r.raw, r.mapped, r.worst,
        r.sized, r.roundtrip, r.encode, r.ok ? "true" : "false");
  }
  std::printf("]},\"zvc_h2d\":{\"unit\":\"GB/s of uncompressed bytes\",\"sizes\":[");
  for (std::size_t i = 0; i < h2d.size(); ++i) {
    auto const& r = h2d[i];
    std::printf(
        "%s{\"tensor_bytes\":%zu,\"compressed_bytes\":%zu,\"reps\":%d,\"raw\":%.2f,"
        "\"copy_decode\":%.2f,\"sized_decode\":%.2f,\"mapped\":%.2f,\"ok\":%s}",
        i == 0 ? "" : ",", r.tensor_bytes, r.compressed_bytes, r.reps, r.raw, r.copy_decode,
        r.sized_decode, r.mapped, r.ok ? "true" : "false");
  }
  std::printf("]}}\n");
}

void print_text(options const& o, char const* device, manager_result const& mr,
                std::vector<d2h_result> const& d2h, std::vector<h2d_result> const& h2d,
                std::string const& data)
{
  std::printf("device: %s\n", device);
  if (!o.d2h_only) {
    std::printf("%d tensors x %zu MiB (identity codec)\n", o.count, o.tensor_mib);
    std::printf("  cudaMemcpyAsync D2H %.2f GB/s, H2D %.2f GB/s\n", mr.raw_d2h, mr.raw_h2d);
    std::printf("  offload_manager offload %.2f GB/s, prefetch+acquire %.2f GB/s\n", mr.mgr_d2h,
                mr.mgr_h2d);
    std::printf("  compute kernel alone %.3f ms, beside the traffic %.3f ms: slowdown %.2f%%\n",
                mr.alone_ms, mr.shared_ms, mr.slowdown);
  }
  std::printf("zvc D2H: how the copy learns the compressed size (%s; GB/s of uncompressed bytes)\n",
              data.c_str());
  std::printf("  %8s %7s %8s %8s %8s %8s %10s %8s %s\n", "MiB", "ratio", "raw", "mapped", "worst",
              "sized", "roundtrip", "encode", "check");
  for (auto const& r : d2h) {
    std::printf("  %8zu %7.2f %8.2f %8.2f %8.2f %8.2f %10.2f %8.2f %s\n",
                r.tensor_bytes / stash::MiB,
                r.compressed_bytes > 0 ? double(r.tensor_bytes) / double(r.compressed_bytes) : 0.0,
                r.raw, r.mapped, r.worst, r.sized, r.roundtrip, r.encode, r.ok ? "ok" : "MISMATCH");
  }
  std::printf(
      "zvc H2D: decode from a device copy or from mapped memory (GB/s of uncompressed "
      "bytes)\n");
  std::printf("  %8s %7s %8s %12s %13s %8s %s\n", "MiB", "ratio", "raw", "copy+decode",
              "sized+decode", "mapped", "check");
  for (auto const& r : h2d) {
    std::printf("  %8zu %7.2f %8.2f %12.2f %13.2f %8.2f %s\n", r.tensor_bytes / stash::MiB,
                r.compressed_bytes > 0 ? double(r.tensor_bytes) / double(r.compressed_bytes) : 0.0,
                r.raw, r.copy_decode, r.sized_decode, r.mapped, r.ok ? "ok" : "MISMATCH");
  }
}

// Every section; 0 when every check passed.
int run(options const& o)
{
  cudaDeviceProp prop{};
  STASH_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
  manager_result mr;
  if (!o.d2h_only) { mr = measure_manager(o.tensor_mib, o.count); }
  std::vector<float> activations;
  if (!o.activations_file.empty()) { activations = read_f32(o.activations_file); }
  std::vector<d2h_result> d2h;
  std::vector<h2d_result> h2d;
  for (std::size_t mib : o.sizes_mib) {
    d2h.push_back(
        measure_d2h(mib * stash::MiB, activations, o.zero_fraction, prop.multiProcessorCount));
    h2d.push_back(
        measure_h2d(mib * stash::MiB, activations, o.zero_fraction, prop.multiProcessorCount));
  }
  std::string const data = o.activations_file.empty()
                               ? "synthetic, zero fraction " + std::to_string(o.zero_fraction)
                               : o.activations_file;
  if (o.json) {
    print_json(o, prop.name, mr, d2h, h2d, data);
  } else {
    print_text(o, prop.name, mr, d2h, h2d, data);
  }
  bool const all_ok =
      std::all_of(d2h.begin(), d2h.end(), [](d2h_result const& r) { return r.ok; }) &&
      std::all_of(h2d.begin(), h2d.end(), [](h2d_result const& r) { return r.ok; });
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv)
{
  auto const o = parse_options(argc, argv);
  if (!o) { return 2; }
  if (!stash::gpu_available()) {
    std::printf("bench_offload: no CUDA device (%s); nothing measured\n",
                stash::no_gpu_reason().c_str());
    return 0;
  }
  // A failure is a message and exit status 1, never an uncaught exception (std::terminate).
  try {
    return run(*o);
  } catch (stash::out_of_memory const& e) {
    std::fprintf(stderr,
                 "bench_offload: out of memory: %s\n(--count %d x --tensor-mib %zu needs that "
                 "much device memory and pinned host memory; try smaller values)\n",
                 e.what(), o->count, o->tensor_mib);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_offload: %s\n", e.what());
  }
  return 1;
}
