// Shared helpers for the codec tests: loading the real activations, bitwise comparison.
#pragma once

#include "support/data.hpp"

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

}  // namespace stash::test
