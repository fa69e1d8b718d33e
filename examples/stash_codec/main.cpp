// stash-codec: compresses raw tensor files with stash's host codecs, checks the round trip and
// reports sizes, ratios, errors and host throughput.
//
//   stash-codec [--codec NAME|all] [--dtype f32] [--json] FILE...
#include <stash/codec/host_codec_list.hpp>
#include <stash_tools/json_string.hpp>
#include <stash_tools/stash_codec/input.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

constexpr char const* usage_text =
    "usage: stash-codec [--codec NAME|all] [--dtype f32] [--json] FILE...\n"
    "Each FILE is a regular file of raw float32 values.\n"
    "codecs: identity zvc csr rle bitmask fp16 bf16 fp10 fp8_e4m3 fp8_e5m2 fp16+zvc "
    "fp8_e4m3+zvc\n";

int usage(const char* why)
{
  std::fprintf(stderr, "stash-codec: %s\n%s", why, usage_text);
  return 2;
}

template <class C>
void run(const char* name, std::string const& file, std::vector<float> const& in, bool json)
{
  using clock = std::chrono::steady_clock;
  std::vector<std::byte> buf(C::max_compressed_bytes(in.size()));
  auto const t0          = clock::now();
  std::size_t const size = C::host_encode(in, buf);
  auto const t1          = clock::now();
  std::vector<float> out(in.size());
  std::size_t const n = C::host_decode(std::span<std::byte const>(buf.data(), size), out);
  auto const t2       = clock::now();
  bool const exact    = n == in.size() && std::memcmp(out.data(), in.data(), in.size() * 4) == 0;
  double max_err      = 0.0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (std::isfinite(in[i])) {
      max_err = std::max(max_err, std::abs(static_cast<double>(out[i]) - in[i]));
    }
  }
  double const in_bytes = static_cast<double>(in.size() * 4);
  double const ratio    = static_cast<double>(size) > 0 ? in_bytes / static_cast<double>(size) : 0;
  double const enc_s    = std::chrono::duration<double>(t1 - t0).count();
  double const dec_s    = std::chrono::duration<double>(t2 - t1).count();
  if (json) {
    std::printf(
        "{\"file\": %s, \"codec\": \"%s\", \"input_bytes\": %zu, \"compressed_bytes\": "
        "%zu, \"ratio\": %.4f, \"exact\": %s, \"max_abs_error\": %.9g, "
        "\"encode_MBps\": %.1f, \"decode_MBps\": %.1f}\n",
        stash_tools::json_string(file).c_str(), name, in.size() * 4, size, ratio,
        exact ? "true" : "false", max_err, in_bytes / enc_s / 1e6, in_bytes / dec_s / 1e6);
  } else {
    std::printf("%-40s %-13s %10zu %10zu %7.3fx  %-22s enc %7.1f MB/s  dec %7.1f MB/s\n",
                file.c_str(), name, in.size() * 4, size, ratio,
                exact ? "exact" : ("max err " + std::to_string(max_err)).c_str(),
                in_bytes / enc_s / 1e6, in_bytes / dec_s / 1e6);
  }
}

}  // namespace

int main(int argc, char** argv)
{
  std::string codec = "all";
  bool json         = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--codec" && i + 1 < argc) {
      codec = argv[++i];
    } else if (a == "--dtype" && i + 1 < argc) {
      if (std::string(argv[++i]) != "f32") { return usage("only --dtype f32 is supported"); }
    } else if (a == "--json") {
      json = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(usage_text, stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option " + a).c_str());
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) { return usage("no input file"); }
  bool known = codec == "all";
  stash::for_each_f32_codec([&](auto nc) { known = known || codec == nc.name; });
  if (!known) { return usage(("unknown codec " + codec).c_str()); }
  if (!json) {
    std::printf("%-40s %-13s %10s %10s %8s\n", "file", "codec", "input", "compressed", "ratio");
  }
  int status = 0;
  for (auto const& file : files) {
    std::vector<float> in;
    try {
      in = stash_tools::read_f32_file(file);
    } catch (stash_tools::input_error const& e) {
      std::fprintf(stderr, "stash-codec: %s\n", e.what());
      status = 1;
      continue;
    }
    stash::for_each_f32_codec([&](auto nc) {
      if (codec == "all" || codec == nc.name) {
        try {
          run<typename decltype(nc)::type>(nc.name, file, in, json);
        } catch (std::exception const& e) {
          std::fprintf(stderr, "stash-codec: %s: %s: %s\n", file.c_str(), nc.name, e.what());
          status = 1;
        }
      }
    });
  }
  return status;
}
