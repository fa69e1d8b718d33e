// Device codecs against the host reference: byte-identical encodes, cross decodes (device
// decodes host bytes and the host decodes device bytes), and corrupted input reported through
// codec_status. Runs only where a GPU is present.
#include "codec_test_support.hpp"

#include <stash/codec/device_bitmask.cuh>
#include <stash/codec/device_precision.cuh>
#include <stash/codec/device_zvc.cuh>
#include <stash/core/cuda_stream.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <random>

namespace {

/// Owning device allocation for the tests.
class device_bytes {
 public:
  explicit device_bytes(std::size_t bytes) : bytes_(bytes)
  {
    STASH_CUDA_TRY(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes));
  }
  device_bytes(device_bytes const&)            = delete;
  device_bytes& operator=(device_bytes const&) = delete;
  ~device_bytes() { STASH_CUDA_CHECK_NOTHROW(cudaFree(ptr_)); }
  template <class T>
  T* as() const
  {
    return static_cast<T*>(ptr_);
  }
  [[nodiscard]] std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

template <class D>
std::vector<std::byte> device_encode(std::vector<float> const& in, stash::cuda_stream const& s)
{
  using H = typename D::host_codec;
  device_bytes d_in(in.size() * sizeof(float));
  device_bytes d_out(H::max_compressed_bytes(in.size()));
  device_bytes d_size(sizeof(std::size_t));
  std::size_t const scratch_bytes = D::encode_scratch_bytes(in.size());
  device_bytes scratch(scratch_bytes);
  STASH_CUDA_TRY(cudaMemcpyAsync(d_in.as<void>(), in.data(), in.size() * sizeof(float),
                                 cudaMemcpyHostToDevice, s));
  D::encode_async(d_in.as<float>(), in.size(), d_out.as<std::byte>(), d_out.size(),
                  d_size.as<std::size_t>(), scratch.as<void>(), scratch_bytes, s);
  std::size_t size = 0;
  STASH_CUDA_TRY(cudaMemcpyAsync(&size, d_size.as<void>(), sizeof(size), cudaMemcpyDeviceToHost, s));
  s.synchronize();
  REQUIRE(size <= d_out.size());
  std::vector<std::byte> out(size);
  STASH_CUDA_TRY(cudaMemcpy(out.data(), d_out.as<void>(), size, cudaMemcpyDeviceToHost));
  return out;
}

/// Decodes on the device into `capacity` elements; returns the status and the elements.
template <class D>
stash::codec_status device_decode(std::vector<std::byte> const& buf, std::size_t capacity,
                                  std::vector<float>& out, stash::cuda_stream const& s)
{
  device_bytes d_src(buf.size());
  device_bytes d_out(capacity * sizeof(float));
  device_bytes d_status(sizeof(stash::codec_status));
  STASH_CUDA_TRY(cudaMemcpyAsync(d_src.as<void>(), buf.data(), buf.size(), cudaMemcpyHostToDevice, s));
  D::decode_async(d_src.as<std::byte>(), buf.size(), d_out.as<float>(), capacity,
                  d_status.as<stash::codec_status>(), nullptr, 0, s);
  stash::codec_status status{};
  STASH_CUDA_TRY(cudaMemcpyAsync(&status, d_status.as<void>(), sizeof(status),
                                 cudaMemcpyDeviceToHost, s));
  s.synchronize();
  out.resize(capacity);
  if (status.code == 0 && capacity > 0) {
    STASH_CUDA_TRY(cudaMemcpy(out.data(), d_out.as<void>(), capacity * sizeof(float),
                              cudaMemcpyDeviceToHost));
  }
  return status;
}

std::vector<std::vector<float>> inputs()
{
  std::vector<std::vector<float>> all;
  for (auto const& f : stash::test::activation_files()) { all.push_back(stash::test::load_activation(f)); }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (std::size_t n : {0, 1, 31, 33, 1023, 1025, 4097, 100003}) {
    std::vector<float> v(n);
    for (auto& x : v) { x = std::max(0.0f, dist(rng)); }
    if (n > 3) { v[2] = -0.0f; }
    all.push_back(std::move(v));
  }
  return all;
}

}  // namespace

static_assert(stash::device_codec<stash::device_zvc<float>>);
static_assert(stash::device_codec<stash::device_bitmask>);
static_assert(stash::device_codec<stash::device_precision<stash::fp10>>);

TEST_CASE_TEMPLATE("device codecs match the host reference byte for byte",
                   D,
                   stash::device_zvc<float>,
                   stash::device_bitmask,
                   stash::device_precision<stash::fp16>,
                   stash::device_precision<stash::fp10>)
{
  using H = typename D::host_codec;
  stash::cuda_stream s;
  for (auto const& in : inputs()) {
    CAPTURE(in.size());
    auto const host = stash::host_encode_vector<H>(in);
    auto const dev  = device_encode<D>(in, s);
    CHECK(dev == host);
    // device decodes host bytes
    std::vector<float> from_device;
    auto const status = device_decode<D>(host, in.size(), from_device, s);
    CHECK(status.code == 0);
    auto const ref = stash::host_decode_vector<H>(host);
    CHECK(stash::test::bitwise_equal(from_device, ref));
    // host decodes device bytes
    CHECK(stash::test::bitwise_equal(stash::host_decode_vector<H>(dev), ref));
  }
}

TEST_CASE_TEMPLATE("device decoders report corrupted input through codec_status",
                   D,
                   stash::device_zvc<float>,
                   stash::device_bitmask,
                   stash::device_precision<stash::fp10>)
{
  using H = typename D::host_codec;
  stash::cuda_stream s;
  auto const in    = stash::test::load_activation("netA_final_relu4.f32");
  auto const clean = stash::host_encode_vector<H>(in);
  std::vector<float> out;
  // truncated
  std::vector<std::byte> truncated(clean.begin(), clean.begin() + clean.size() / 2);
  auto st = device_decode<D>(truncated, in.size(), out, s);
  CHECK(st.code == static_cast<std::uint32_t>(stash::codec_errc::truncated_payload));
  CHECK_THROWS_AS(stash::throw_if_error(st), stash::codec_error);
  // bad magic
  auto bad = clean;
  bad[0]   = std::byte{0};
  st       = device_decode<D>(bad, in.size(), out, s);
  CHECK(st.code == static_cast<std::uint32_t>(stash::codec_errc::bad_magic));
  CHECK(st.offset == 0);
  // too small a destination
  st = device_decode<D>(clean, in.size() - 1, out, s);
  CHECK(st.code == static_cast<std::uint32_t>(stash::codec_errc::destination_too_small));
  // seeded random mutations: the device verdict (ok or not) must equal the host's
  std::mt19937 rng(11);
  int agreements = 0;
  for (int it = 0; it < 200; ++it) {
    auto m = clean;
    m[32 + rng() % (m.size() - 32)] ^= static_cast<std::byte>(1u << (rng() % 8));
    std::vector<float> host_out(in.size());
    bool host_ok = true;
    try {
      (void)H::host_decode(m, host_out);
    } catch (stash::codec_error const&) {
      host_ok = false;
    }
    std::vector<float> dev_out;
    auto const ds = device_decode<D>(m, in.size(), dev_out, s);
    agreements += ((ds.code == 0) == host_ok) ? 1 : 0;
    if (host_ok && ds.code == 0) { CHECK(stash::test::bitwise_equal(dev_out, host_out)); }
  }
  CHECK(agreements == 200);
}

TEST_CASE("device bitmask applies the mask to a gradient like the host")
{
  stash::cuda_stream s;
  auto const in  = stash::test::load_activation("netA_epoch1_relu2.f32");
  auto const buf = stash::host_encode_vector<stash::bitmask>(in);
  std::vector<float> grad(in.size());
  for (std::size_t i = 0; i < grad.size(); ++i) { grad[i] = static_cast<float>(i % 7) - 3.0f; }
  auto expected = grad;
  stash::bitmask::apply_mask_to_gradient(buf, expected);
  device_bytes d_src(buf.size()), d_grad(grad.size() * 4), d_status(sizeof(stash::codec_status));
  STASH_CUDA_TRY(cudaMemcpy(d_src.as<void>(), buf.data(), buf.size(), cudaMemcpyHostToDevice));
  STASH_CUDA_TRY(cudaMemcpy(d_grad.as<void>(), grad.data(), grad.size() * 4, cudaMemcpyHostToDevice));
  stash::device_bitmask::apply_mask_to_gradient_async(d_src.as<std::byte>(), buf.size(),
                                                      d_grad.as<float>(), grad.size(),
                                                      d_status.as<stash::codec_status>(), s);
  s.synchronize();
  stash::codec_status st{};
  STASH_CUDA_TRY(cudaMemcpy(&st, d_status.as<void>(), sizeof(st), cudaMemcpyDeviceToHost));
  stash::throw_if_error(st);
  STASH_CUDA_TRY(cudaMemcpy(grad.data(), d_grad.as<void>(), grad.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(stash::test::bitwise_equal(grad, expected));
}
