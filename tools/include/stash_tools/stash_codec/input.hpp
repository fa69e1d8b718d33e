/**
 * @file input.hpp
 * @brief stash-codec's input: a regular file of raw float32 values, read whole, or a clear
 * error. Directories, devices (/dev/zero never ends), FIFOs, empty files and sizes that are not
 * a whole number of float32 are refused before anything is allocated for them.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace stash_tools {

/// @brief Why an input file cannot be compressed; what() is the message for the user.
class input_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief The float32 values of the regular file `path`.
/// @throws input_error naming the file and what is wrong with it.
[[nodiscard]] inline std::vector<float> read_f32_file(std::string const& path)
{
  namespace fs = std::filesystem;
  std::error_code ec;
  auto const status = fs::status(path, ec);
  if (ec || !fs::exists(status)) { throw input_error(path + ": cannot open (no such file)"); }
  if (fs::is_directory(status)) { throw input_error(path + ": is a directory, not a file"); }
  if (!fs::is_regular_file(status)) {
    throw input_error(path +
                      ": not a regular file (devices, pipes and sockets have no size to "
                      "compress; copy the data to a file first)");
  }
  auto const bytes = fs::file_size(path, ec);
  if (ec) { throw input_error(path + ": cannot read its size: " + ec.message()); }
  if (bytes == 0) { throw input_error(path + ": empty file (no float32 values)"); }
  if (bytes % sizeof(float) != 0) {
    throw input_error(path + ": " + std::to_string(bytes) +
                      " bytes is not a whole number of float32");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) { throw input_error(path + ": cannot open"); }
  std::vector<float> values(static_cast<std::size_t>(bytes / sizeof(float)));
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(bytes));
  if (static_cast<std::uint64_t>(in.gcount()) != bytes) {
    throw input_error(path + ": read " + std::to_string(in.gcount()) + " of " +
                      std::to_string(bytes) + " bytes (the file changed or a read failed)");
  }
  return values;
}

}  // namespace stash_tools
