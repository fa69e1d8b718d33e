/**
 * @file conformance_report.hpp
 * @brief What stash's conformance kits (pool, codec, offload backend, swap policy) return: the
 * checks run and one line per failure, so one line of any test framework runs a kit, e.g.
 * @code
 * auto const r = stash::testing::check_pool<my_pool>(make_my_pool, stream);
 * CHECK_MESSAGE(r.ok(), r.summary());
 * @endcode
 */
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace stash::testing {

/// @brief What a conformance kit found: one line per failed check.
struct conformance_report {
  std::string subject;                ///< what was checked (e.g. "swap policy 'vdnn_all'")
  std::size_t checks{0};              ///< checks run
  std::vector<std::string> failures;  ///< one per failed check, saying what and where

  /// @brief True when every check passed.
  /// @return Whether no check failed.
  [[nodiscard]] bool ok() const noexcept { return failures.empty(); }
  /// @brief "<subject>: N of M checks failed: ..." (or that all passed), for a test's message.
  /// @return The summary.
  [[nodiscard]] std::string summary() const
  {
    std::string s = subject + ": " + std::to_string(failures.size()) + " of " +
                    std::to_string(checks) + " checks failed";
    for (auto const& f : failures) { s += "\n  " + f; }
    return s;
  }
  /// @brief Records one check: a failure (with `what`) when `passed` is false.
  /// @param passed The check's outcome.
  /// @param what What failed, and where.
  void expect(bool passed, std::string const& what)
  {
    ++checks;
    if (!passed) { failures.push_back(what); }
  }
};

}  // namespace stash::testing
