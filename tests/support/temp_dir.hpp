// A fresh directory under the system's temp folder, removed with everything in it at scope exit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace stash::test {

struct temp_dir {
  std::filesystem::path path;

  explicit temp_dir(std::string const& prefix = "stash_test_")
  {
    path = std::filesystem::temp_directory_path() /
           (prefix + std::to_string(std::random_device{}()) + "_" +
            std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  temp_dir(temp_dir const&)            = delete;
  temp_dir& operator=(temp_dir const&) = delete;

  /// Writes `bytes` to the file `name` in the directory.
  void write(std::string const& name, std::vector<std::uint8_t> const& bytes) const
  {
    std::ofstream f(path / name, std::ios::binary);
    f.write(reinterpret_cast<char const*>(bytes.data()), std::streamsize(bytes.size()));
  }

  /// The names of the entries in the directory, sorted.
  [[nodiscard]] std::vector<std::string> names() const
  {
    std::vector<std::string> v;
    for (auto const& e : std::filesystem::directory_iterator(path)) {
      v.push_back(e.path().filename().string());
    }
    std::sort(v.begin(), v.end());
    return v;
  }
};

}  // namespace stash::test
