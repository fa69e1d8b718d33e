// Writes the seed corpora of the codec and chain fuzz targets: valid encodings of slices of
// data/activations, each prefixed with the selector byte the target dispatches on. Run once and
// commit the output; rerun after a format change:
//   build/fuzz/tests/fuzz/stash_fuzz_make_corpus tests/fuzz/corpus
#include <stash/codec/bitmask.hpp>
#include <stash/codec/chain.hpp>
#include <stash/codec/csr.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/pool_argmax.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/range_mask.hpp>
#include <stash/codec/rle.hpp>
#include <stash/codec/two_value.hpp>
#include <stash/codec/zvc.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::vector<float> slice(char const* file, std::size_t first, std::size_t count)
{
  std::ifstream in(fs::path(STASH_DATA_DIR) / "activations" / file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(first * sizeof(float)));
  std::vector<float> out(count);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count * sizeof(float)));
  out.resize(static_cast<std::size_t>(in.gcount()) / sizeof(float));
  return out;
}

template <class T>
std::vector<T> convert(std::vector<float> const& in)
{
  std::vector<T> out;
  for (float const x : in) { out.push_back(static_cast<T>(std::floor(x * 50.0f))); }
  return out;
}

void write(fs::path const& dir, std::string const& name, std::uint8_t selector,
           std::vector<std::byte> const& prefix, std::vector<std::byte> const& buffer)
{
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary);
  out.put(static_cast<char>(selector));
  out.write(reinterpret_cast<char const*>(prefix.data()),
            static_cast<std::streamsize>(prefix.size()));
  out.write(reinterpret_cast<char const*>(buffer.data()),
            static_cast<std::streamsize>(buffer.size()));
}

// Seeds `selector` with codec C over each input, plus one checksum-sealed copy of the first.
template <class C, class T = typename C::value_type>
void seed(fs::path const& dir, std::string const& name, std::uint8_t selector,
          std::vector<std::vector<T>> const& inputs)
{
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    auto buffer = stash::host_encode_vector<C>(std::span<T const>(inputs[i]));
    write(dir, name + "_" + std::to_string(i), selector, {}, buffer);
    if (i == 0) {
      stash::seal_checksum(buffer);
      write(dir, name + "_sealed", selector, {}, buffer);
    }
  }
}

// range_mask with ReLU6's bounds, and with {-1, 1}, as codecs for seed().
struct relu6_mask : stash::range_mask {
  static std::size_t host_encode(std::span<float const> in, std::span<std::byte> out)
  {
    return stash::range_mask::host_encode(in, out, stash::range_bounds{0.0f, 6.0f});
  }
};
struct unit_mask : stash::range_mask {
  static std::size_t host_encode(std::span<float const> in, std::span<std::byte> out)
  {
    return stash::range_mask::host_encode(in, out, stash::range_bounds{-1.0f, 1.0f});
  }
};

}  // namespace

int main(int argc, char** argv)
{
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (writes CORPUS_DIR/codec and CORPUS_DIR/chain)\n",
                 argv[0]);
    return 2;
  }
  fs::path const root(argv[1]);
  fs::path const codec  = root / "codec";
  fs::path const chains = root / "chain";
  // Short, one-chunk and multi-chunk slices of ReLU outputs (about half zeros), early and late.
  std::vector<std::vector<float>> const f        = {slice("netA_final_relu5.f32", 0, 40),
                                                    slice("netA_init_relu3.f32", 5000, 1100),
                                                    slice("netA_epoch1_relu1.f32", 20000, 300)};
  std::vector<std::vector<float>> const long_run = {slice("netA_final_relu2.f32", 0, 4200)};
  std::vector<std::vector<float>> const empty    = {{}};
  auto const d   = std::vector<std::vector<double>>{convert<double>(f[0])};
  auto const u8  = std::vector<std::vector<std::uint8_t>>{convert<std::uint8_t>(f[0]),
                                                          convert<std::uint8_t>(f[2])};
  auto const u16 = std::vector<std::vector<std::uint16_t>>{convert<std::uint16_t>(f[1])};
  auto const u32 = std::vector<std::vector<std::uint32_t>>{convert<std::uint32_t>(f[2])};
  using namespace stash;
  // Selectors as in codec_fuzz.cpp's switch (0: header checks, fed zvc buffers).
  seed<zvc<float>>(codec, "header", 0, f);
  seed<identity<float>>(codec, "identity_f32", 1, f);
  seed<identity<float>>(codec, "identity_f32_empty", 1, empty);
  seed<identity<std::uint8_t>>(codec, "identity_u8", 2, u8);
  seed<zvc<float>>(codec, "zvc_f32", 3, f);
  seed<zvc<std::uint16_t>>(codec, "zvc_u16", 4, u16);
  seed<zvc<std::uint8_t>>(codec, "zvc_u8", 5, u8);
  seed<zvc<double>>(codec, "zvc_f64", 6, d);
  seed<csr<float>>(codec, "csr_f32", 7, f);
  seed<csr<std::uint16_t>>(codec, "csr_u16", 8, u16);
  seed<rle<float>>(codec, "rle_f32", 9, f);
  seed<rle<float>>(codec, "rle_f32_chunks", 9, long_run);
  seed<rle<std::uint8_t>>(codec, "rle_u8", 10, u8);
  seed<bitmask>(codec, "bitmask", 11, f);
  seed<precision<float, fp16>>(codec, "fp16", 12, f);
  seed<precision<float, bf16>>(codec, "bf16", 13, f);
  seed<precision<float, fp10>>(codec, "fp10", 14, f);
  seed<precision<float, fp8_e4m3>>(codec, "fp8_e4m3", 15, f);
  seed<precision<float, fp8_e5m2>>(codec, "fp8_e5m2", 16, f);
  seed<identity<double>>(codec, "identity_f64", 18, d);
  seed<rle<std::uint32_t>>(codec, "rle_u32", 19, u32);
  // two_value: scaled dropout masks kept where the same ReLU slices are positive, and all zeros.
  auto const scaled = [](std::vector<float> const& in, float c) {
    std::vector<float> out;
    for (float const x : in) { out.push_back(x > 0.0f ? c : 0.0f); }
    return out;
  };
  seed<two_value<float>>(codec, "two_value_f32", 20,
                         {scaled(f[0], 1.0f / 0.9f), scaled(f[1], 2.0f), scaled(f[2], -0.0f)});
  seed<two_value<float>>(codec, "two_value_f32_zeros", 20, {std::vector<float>(70, 0.0f)});
  std::vector<std::uint8_t> bits;
  for (float const x : f[1]) { bits.push_back(x > 0.0f ? 1 : 0); }
  seed<two_value<std::uint8_t>>(codec, "two_value_u8", 21, {bits});
  // pool_argmax: the four geometry bytes codec_fuzz.cpp decodes, then the buffer. 2x2 windows,
  // stride 2 (0x55), 2 planes of 14x14.
  pool_geometry const g{2, 14, 14, 2, 2, 2, 2};
  auto const maps = slice("netA_final_relu3.f32", 0, g.planes * g.height * g.width);
  std::vector<std::byte> argmax(pool_argmax::max_compressed_bytes(g.outputs()));
  argmax.resize(pool_argmax::host_encode(maps, g, argmax));
  write(codec, "pool_argmax_0", 17, {std::byte{0x55}, std::byte{1}, std::byte{12}, std::byte{12}},
        argmax);
  // The same windows as max-pool indices (PyTorch's iy * width + ix within each plane), encoded
  // by the index encoder: its int64-tagged buffer is what the index decoder sees in a prefetch.
  std::vector<std::int64_t> indices;
  indices.reserve(g.outputs());
  for (std::size_t p = 0; p < g.planes; ++p) {
    for (std::size_t oy = 0; oy < g.out_h(); ++oy) {
      for (std::size_t ox = 0; ox < g.out_w(); ++ox) {
        std::size_t best = oy * g.stride_h * g.width + ox * g.stride_w;
        for (std::size_t dy = 0; dy < g.window_h; ++dy) {
          for (std::size_t dx = 0; dx < g.window_w; ++dx) {
            std::size_t const at = (oy * g.stride_h + dy) * g.width + ox * g.stride_w + dx;
            if (maps[p * g.height * g.width + at] > maps[p * g.height * g.width + best]) {
              best = at;
            }
          }
        }
        indices.push_back(static_cast<std::int64_t>(best));
      }
    }
  }
  std::vector<std::byte> tagged(pool_argmax::max_compressed_bytes(g.outputs()));
  tagged.resize(pool_argmax::host_encode_indices(indices, g, tagged));
  write(codec, "pool_argmax_indices_0", 17,
        {std::byte{0x55}, std::byte{1}, std::byte{12}, std::byte{12}}, tagged);
  // range_mask: ReLU outputs under ReLU6's bounds (inside, at 0, some >= 6) and under {-1, 1}.
  seed<relu6_mask>(codec, "range_mask_relu6", 22, f);
  seed<unit_mask>(codec, "range_mask_unit", 22, {f[0]});
  seed<relu6_mask>(codec, "range_mask_empty", 22, empty);
  // Chains, selectors as in chain_fuzz.cpp.
  seed<chain<precision<float, fp16>, zvc<std::uint16_t>>>(chains, "fp16_zvc", 0, f);
  seed<chain<precision<float, fp8_e4m3>, zvc<std::uint8_t>>>(chains, "fp8_e4m3_zvc", 1, f);
  seed<chain<rle<float>, zvc<std::uint32_t>>>(chains, "rle_zvc", 2, f);
  seed<chain<zvc<float>, rle<std::uint8_t>>>(chains, "zvc_rle", 3, f);
  return 0;
}
