/**
 * @file json_writer.hpp
 * @brief A minimal streaming JSON writer for stash-plan's machine-readable output: compact
 * output, correct string escaping (stash_tools::json_string: always valid UTF-8), commas and
 * nesting handled by the writer.
 */
#pragma once

#include <stash_tools/json_string.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace stash_plan {

/// @brief Writes one JSON value to a stream. Call key() before each member inside an object.
class json_writer {
 public:
  explicit json_writer(std::ostream& out) : out_(out) {}

  /// @brief Opens an object.
  json_writer& begin_object()
  {
    before_value();
    out_ << '{';
    first_.push_back(true);
    return *this;
  }
  /// @brief Closes the innermost object.
  json_writer& end_object()
  {
    first_.pop_back();
    out_ << '}';
    return *this;
  }
  /// @brief Opens an array.
  json_writer& begin_array()
  {
    before_value();
    out_ << '[';
    first_.push_back(true);
    return *this;
  }
  /// @brief Closes the innermost array.
  json_writer& end_array()
  {
    first_.pop_back();
    out_ << ']';
    return *this;
  }
  /// @brief Names the next member of the current object.
  json_writer& key(std::string_view name)
  {
    separate();
    write_string(name);
    out_ << ':';
    after_key_ = true;
    return *this;
  }
  /// @brief A string value.
  json_writer& value(std::string_view text)
  {
    before_value();
    write_string(text);
    return *this;
  }
  /// @brief A string value (keeps string literals away from the bool overload).
  json_writer& value(char const* text) { return value(std::string_view(text)); }
  /// @brief An unsigned integer value, written exactly.
  json_writer& value(std::uint64_t number)
  {
    before_value();
    out_ << number;
    return *this;
  }
  /// @brief A floating-point value; NaN and infinities (not JSON) become null.
  json_writer& value(double number)
  {
    before_value();
    if (!std::isfinite(number)) {
      out_ << "null";
    } else {
      char buffer[32];
      std::snprintf(buffer, sizeof(buffer), "%.17g", number);
      out_ << buffer;
    }
    return *this;
  }
  /// @brief A boolean value.
  json_writer& value(bool flag)
  {
    before_value();
    out_ << (flag ? "true" : "false");
    return *this;
  }
  /// @brief null.
  json_writer& null()
  {
    before_value();
    out_ << "null";
    return *this;
  }
  /// @brief The value, or null when absent.
  template <class T>
  json_writer& value_or_null(std::optional<T> const& maybe)
  {
    return maybe ? value(*maybe) : null();
  }

 private:
  void separate()
  {
    if (!first_.empty()) {
      if (!first_.back()) { out_ << ','; }
      first_.back() = false;
    }
  }
  void before_value()
  {
    if (after_key_) {
      after_key_ = false;  // the member's comma came with its key
    } else {
      separate();
    }
  }
  void write_string(std::string_view text) { out_ << stash_tools::json_string(text); }

  std::ostream& out_;
  std::vector<bool> first_;  // per open container: no member written yet
  bool after_key_ = false;
};

}  // namespace stash_plan
