// GPU throughput of the device codecs against a device-to-device cudaMemcpy of the same
// (uncompressed) bytes, 1 MiB to 1 GiB of float32 with a ReLU-like 50% zeros. Prints a markdown
// table of GB/s of uncompressed data (median of 10 runs, after one warm-up).
//
//   bench_codec_throughput [max_MiB=1024] [zero_fraction=0.5]
#include <stash/codec/device_bitmask.cuh>
#include <stash/codec/device_csr.cuh>
#include <stash/codec/device_precision.cuh>
#include <stash/codec/device_rle.cuh>
#include <stash/codec/device_zvc.cuh>
#include <stash/core/cuda_event.hpp>
#include <stash/core/cuda_stream.hpp>
#include <stash/core/device.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

__global__ void fill_relu(float* x, std::size_t n, float zero_fraction)
{
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    float const u = static_cast<float>(h & 0xffffff) / 16777216.0f;
    x[i]          = u < zero_fraction ? 0.0f : u;
  }
}

struct device_buffer {
  void* p = nullptr;
  explicit device_buffer(std::size_t bytes)
  {
    STASH_CUDA_TRY(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  }
  device_buffer(device_buffer const&)            = delete;
  device_buffer& operator=(device_buffer const&) = delete;
  ~device_buffer() { STASH_CUDA_CHECK_NOTHROW(cudaFree(p)); }
};

template <class F>
double median_ms(F&& f, cudaStream_t s)
{
  f();
  STASH_CUDA_TRY(cudaStreamSynchronize(s));
  std::vector<float> ms;
  for (int r = 0; r < 10; ++r) {
    cudaEvent_t a, b;
    STASH_CUDA_TRY(cudaEventCreate(&a));
    STASH_CUDA_TRY(cudaEventCreate(&b));
    STASH_CUDA_TRY(cudaEventRecord(a, s));
    f();
    STASH_CUDA_TRY(cudaEventRecord(b, s));
    STASH_CUDA_TRY(cudaEventSynchronize(b));
    float t = 0;
    STASH_CUDA_TRY(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
    STASH_CUDA_CHECK_NOTHROW(cudaEventDestroy(a));
    STASH_CUDA_CHECK_NOTHROW(cudaEventDestroy(b));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class D>
void bench(const char* name, float const* d_in, std::size_t n, double memcpy_ms, cudaStream_t s)
{
  using H = typename D::host_codec;
  if constexpr (requires { D::expect_encodable(n); }) {
    // A codec's size limit (rle's u32 table stops below 2^30 floats): a row that says so, not a
    // terminate from an uncaught logic_error.
    try {
      D::expect_encodable(n);
    } catch (stash::logic_error const& e) {
      std::printf("| %s | %.1f | past its size limit (%s) | | | | | |\n", name,
                  static_cast<double>(n * sizeof(float)) / (1 << 20), e.what());
      return;
    }
  }
  device_buffer out(H::max_compressed_bytes(n)), size(sizeof(std::size_t)),
      status(sizeof(stash::codec_status)), back(n * sizeof(float));
  std::size_t const scratch_bytes = D::encode_scratch_bytes(n);
  device_buffer scratch(scratch_bytes);
  auto* o          = static_cast<std::byte*>(out.p);
  double const enc = median_ms(
      [&] {
        D::encode_async(d_in, n, o, H::max_compressed_bytes(n), static_cast<std::size_t*>(size.p),
                        scratch.p, scratch_bytes, s);
      },
      s);
  std::size_t bytes = 0;
  STASH_CUDA_TRY(cudaMemcpy(&bytes, size.p, sizeof(bytes), cudaMemcpyDeviceToHost));
  double const dec = median_ms(
      [&] {
        D::decode_async(o, bytes, static_cast<float*>(back.p), n,
                        static_cast<stash::codec_status*>(status.p), nullptr, 0, s);
      },
      s);
  stash::codec_status st{};
  STASH_CUDA_TRY(cudaMemcpy(&st, status.p, sizeof(st), cudaMemcpyDeviceToHost));
  stash::throw_if_error(st);
  double const gb = static_cast<double>(n * sizeof(float)) / 1e9;
  std::printf("| %s | %.1f | %.2fx | %.1f | %.1f | %.1f | %.2f | %.2f |\n", name,
              static_cast<double>(n * sizeof(float)) / (1 << 20),
              static_cast<double>(n * sizeof(float)) / static_cast<double>(bytes), gb / (enc / 1e3),
              gb / (dec / 1e3), gb / (memcpy_ms / 1e3), memcpy_ms / enc, memcpy_ms / dec);
}

}  // namespace

int main(int argc, char** argv)
{
  // The arguments are checked first, so that a run without a GPU (scripts/gpu-check.sh --dry-run)
  // still tells whether they would be accepted.
  std::size_t const max_mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  float const zeros         = argc > 2 ? std::strtof(argv[2], nullptr) : 0.5f;
  if (argc > 3 || max_mib == 0 || !(zeros >= 0.0f && zeros <= 1.0f)) {
    std::fprintf(stderr,
                 "usage: bench_codec_throughput [max_MiB>0 (1024)] [zero_fraction in "
                 "[0,1] (0.5)]\n");
    return 2;
  }
  if (!stash::gpu_available()) {
    std::printf("no GPU: %s\n", stash::no_gpu_reason().c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  STASH_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, zero fraction %.2f\n\n", prop.name, static_cast<double>(zeros));
  std::printf(
      "| codec | MiB | ratio | encode GB/s | decode GB/s | memcpy D2D GB/s | "
      "encode/memcpy speed | decode/memcpy speed |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  stash::cuda_stream s;
  for (std::size_t mib = 1; mib <= max_mib; mib *= 4) {
    std::size_t const n = mib * (1 << 20) / sizeof(float);
    device_buffer in(n * sizeof(float)), copy(n * sizeof(float));
    fill_relu<<<1024, 256, 0, s>>>(static_cast<float*>(in.p), n, zeros);
    STASH_CUDA_TRY(cudaGetLastError());
    double const memcpy_ms = median_ms(
        [&] {
          STASH_CUDA_TRY(
              cudaMemcpyAsync(copy.p, in.p, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
        },
        s);
    auto const* d_in = static_cast<float const*>(in.p);
    bench<stash::device_zvc<float>>("zvc", d_in, n, memcpy_ms, s);
    bench<stash::device_csr<float>>("csr", d_in, n, memcpy_ms, s);
    bench<stash::device_rle<float>>("rle", d_in, n, memcpy_ms, s);
    bench<stash::device_bitmask>("bitmask", d_in, n, memcpy_ms, s);
    bench<stash::device_precision<stash::fp16>>("fp16", d_in, n, memcpy_ms, s);
    bench<stash::device_precision<stash::fp10>>("fp10", d_in, n, memcpy_ms, s);
  }
  return 0;
}
