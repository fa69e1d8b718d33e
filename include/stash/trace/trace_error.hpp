/**
 * @file trace_error.hpp
 * @brief The error raised for malformed trace and instance files: it names file, line and what.
 */
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace stash {

/// @brief A trace (or MiniMalloc CSV) that cannot be read as written. The message is
/// "FILE:LINE: WHAT", the way compilers report errors, so editors can jump to it.
class trace_error : public std::runtime_error {
 public:
  /// @brief `line` is 1-based; 0 means the error concerns the file as a whole (e.g. cannot open).
  /// @param file The file or source name.
  /// @param line The 1-based line, or 0.
  /// @param what What is wrong.
  trace_error(std::string file, std::size_t line, std::string const& what)
      : std::runtime_error(file + ":" + (line > 0 ? std::to_string(line) + ":" : std::string()) +
                           " " + what),
        file_(std::move(file)),
        line_(line),
        reason_(what)
  {
  }

  /// @brief The file (or source name) being read.
  /// @return The file name.
  [[nodiscard]] std::string const& file() const noexcept { return file_; }
  /// @brief The 1-based line at fault; 0 when the error is about the whole file.
  /// @return The line, or 0.
  [[nodiscard]] std::size_t line() const noexcept { return line_; }
  /// @brief What is wrong, without the location.
  /// @return The reason.
  [[nodiscard]] std::string const& reason() const noexcept { return reason_; }

 private:
  std::string file_;
  std::size_t line_;
  std::string reason_;
};

}  // namespace stash
