// Shared helpers for the codec tests: loading the real activations, bitwise comparison.
#pragma once

#include "support/data.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace stash::test {

/// The post-ReLU activation files listed in data/activations/manifest.tsv.
inline std::vector<std::string> activation_files()
{
  std::ifstream manifest(data_path("activations/manifest.tsv"));
  if (!manifest) { throw std::runtime_error("cannot open activations/manifest.tsv"); }
  std::vector<std::string> files;
  std::string line;
  std::getline(manifest, line);  // header
  while (std::getline(manifest, line)) {
    if (!line.empty()) { files.push_back(line.substr(0, line.find('\t'))); }
  }
  return files;
}

/// Raw little-endian float32 file under data/activations/.
inline std::vector<float> load_activation(std::string const& name)
{
  std::ifstream in(data_path("activations/" + name), std::ios::binary | std::ios::ate);
  if (!in) { throw std::runtime_error("cannot open " + name); }
  auto const bytes = static_cast<std::size_t>(in.tellg());
  std::vector<float> v(bytes / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

/// Bitwise equality of two float vectors (NaN payloads and -0.0 must match).
inline bool bitwise_equal(std::vector<float> const& a, std::vector<float> const& b)
{
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

/// The IEEE edge cases of bitmask's sign test (docs/codec_format.md, "bitmask": bit i set iff the
/// sign is clear and 0 < magnitude <= +inf), shared by the host test (lossy_codecs_test.cpp) and
/// the device one (device_codecs_test.cu), so both encoders are held to the same bytes.
inline std::vector<std::uint32_t> bitmask_sign_cases()
{
  return {
      0x00000000u,  // 0: +0           -> 0
      0x80000000u,  // 1: -0           -> 0
      0x00000001u,  // 2: +denormal    -> 1
      0x007fffffu,  // 3: +denormal    -> 1
      0x80000001u,  // 4: -denormal    -> 0
      0x00800000u,  // 5: FLT_MIN      -> 1
      0x3f800000u,  // 6: 1.0          -> 1
      0x7f7fffffu,  // 7: FLT_MAX      -> 1
      0x7f800000u,  // 8: +inf         -> 1
      0xff800000u,  // 9: -inf         -> 0
      0x7fc00000u,  // 10: quiet NaN   -> 0
      0x7f800001u,  // 11: signalling NaN -> 0
      0xffc00000u,  // 12: -NaN        -> 0
      0xbf800000u,  // 13: -1.0        -> 0
      0x807fffffu,  // 14: -denormal   -> 0
  };
}

/// The mask word bitmask_sign_cases() encodes to (bits 2, 3, 5, 6, 7, 8), little-endian, as it
/// follows the 32-byte header.
inline constexpr std::array<std::byte, 4> bitmask_sign_mask = {std::byte{0xec}, std::byte{0x01},
                                                               std::byte{0x00}, std::byte{0x00}};

/// The bounds range_mask's tests run with: ReLU6's (and with lo = -0), a symmetric one holding
/// 0, asymmetric and all-negative ones (hi = -0 too), infinite ends, the whole finite range,
/// bounds two floats apart (one float inside) and a few denormals wide (lo, hi as float32).
inline std::vector<std::array<float, 2>> range_mask_bounds_cases()
{
  float const inf = std::bit_cast<float>(0x7f800000u);
  float const max = std::bit_cast<float>(0x7f7fffffu);
  return {{0.0f, 6.0f},
          {-0.0f, 6.0f},
          {-1.0f, 1.0f},
          {-0.75f, 3.25f},
          {-6.0f, -0.0f},
          {-3.5f, -1.25f},
          {-inf, 2.5f},
          {1.0f, inf},
          {-inf, inf},
          {-max, max},
          {1.0f, std::bit_cast<float>(0x3f800002u)},
          {std::bit_cast<float>(0x00000002u), std::bit_cast<float>(0x00000009u)}};
}

/// The IEEE edge cases of range_mask's inside test for bounds (lo, hi), as bit patterns: NaNs,
/// +-inf, +-0, denormals, the extremes, lo and hi and their neighbours on both sides. Shared by
/// the host test (range_mask_test.cpp) and the device one (device_range_mask_test.cu).
inline std::vector<std::uint32_t> range_mask_special_cases(float lo, float hi)
{
  std::vector<std::uint32_t> v{0x7fc00000u, 0x7f800001u, 0xffc00000u, 0x7fffffffu,  // NaNs
                               0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u,  // inf, 0
                               0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu,  // denormals
                               0x00800000u, 0x80800000u, 0x7f7fffffu, 0xff7fffffu,  // extremes
                               0x3f800000u, 0xbf800000u, 0x40000000u, 0x40c00000u};
  for (float const b : {lo, hi}) {
    std::uint32_t const bits = std::bit_cast<std::uint32_t>(b);
    // The bound, its other sign, and its neighbours away from 0 and towards 0.
    v.push_back(bits);
    v.push_back(bits ^ 0x80000000u);
    if ((bits & 0x7fffffffu) < 0x7f800000u) { v.push_back(bits + 1); }
    if ((bits & 0x7fffffffu) != 0) { v.push_back(bits - 1); }
  }
  return v;
}

/// ReLU6's input for the transfer tests (host and CUDA): range_mask_special_cases(0, 6), then
/// values spread over [-3, 9).
inline std::vector<float> relu6_pre_activation(std::size_t n)
{
  auto const specials = range_mask_special_cases(0.0f, 6.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = i < specials.size() ? std::bit_cast<float>(specials[i])
                               : -3.0f + static_cast<float>(i * 7919 % 1200) / 100.0f;
  }
  return v;
}

/// aten::hardtanh_backward's rule, element by element: `grad_in = (x <= lo || x >= hi) ? 0 :
/// grad` (a NaN x passes the gradient), as float comparisons.
inline std::vector<float> hardtanh_backward(std::vector<float> const& grad,
                                            std::vector<float> const& x, float lo, float hi)
{
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    out[i] = (x[i] <= lo || x[i] >= hi) ? 0.0f : grad[i];
  }
  return out;
}

}  // namespace stash::test
