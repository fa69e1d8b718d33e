// Compression ratio of every host codec on the real Net A activations, per training point
// (init / epoch1 / final): the sum of input bytes over the sum of compressed bytes of relu1..5,
// and the worst per-file ratio. Prints a markdown table.
//
//   codec_ratios DATA_DIR/activations
#include <stash/codec/host_codec_list.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

std::vector<float> load(std::string const& path)
{
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) { throw std::runtime_error("cannot open " + path); }
  std::vector<float> v(static_cast<std::size_t>(f.tellg()) / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

}  // namespace

int main(int argc, char** argv)
{
  if (argc != 2) {
    std::fprintf(stderr, "usage: codec_ratios ACTIVATIONS_DIR\n");
    return 2;
  }
  std::string const dir = argv[1];
  char const* points[]  = {"init", "epoch1", "final"};
  std::vector<std::vector<std::vector<float>>> data;  // [point][layer]
  for (auto p : points) {
    data.emplace_back();
    for (int k = 1; k <= 5; ++k) {
      data.back().push_back(load(dir + "/netA_" + p + "_relu" + std::to_string(k) + ".f32"));
    }
  }
  std::printf("| codec | lossless | init | epoch1 | final | min per file | max abs error |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  stash::for_each_f32_codec([&](auto nc) {
    using C = typename decltype(nc)::type;
    std::printf("| %s | %s |", nc.name, C::lossless ? "yes" : "no");
    double min_ratio = 1e30, max_err = 0.0;
    for (auto const& layers : data) {
      double in_bytes = 0, out_bytes = 0;
      for (auto const& in : layers) {
        std::vector<std::byte> buf(C::max_compressed_bytes(in.size()));
        std::size_t const size = C::host_encode(in, buf);
        std::vector<float> out(in.size());
        (void)C::host_decode(std::span<std::byte const>(buf.data(), size), out);
        for (std::size_t i = 0; i < in.size(); ++i) {
          max_err = std::max(max_err, std::abs(static_cast<double>(out[i]) - in[i]));
        }
        in_bytes += static_cast<double>(in.size() * 4);
        out_bytes += static_cast<double>(size);
        min_ratio =
            std::min(min_ratio, static_cast<double>(in.size() * 4) / static_cast<double>(size));
      }
      std::printf(" %.2fx |", in_bytes / out_bytes);
    }
    std::printf(" %.2fx | %.3g |\n", min_ratio, max_err);
  });
  return 0;
}
