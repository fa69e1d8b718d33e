// Relative comparison of small quantities (seconds of a simulated iteration, microseconds).
//
// doctest::Approx(x) alone accepts |a - x| < 1.2e-5 * (1 + max(|a|, |x|)): its scale of 1 makes
// it an absolute tolerance of about 12 us, so Approx(4e-6) also accepts 2e-6 or 15e-6 and a check
// of a microsecond timing cannot fail. approx_s compares relatively only (scale 0).
#pragma once

#include <doctest/doctest.h>

namespace stash::test {

/// @brief `expected` to about 1e-5 relative, whatever its magnitude (exact for 0).
[[nodiscard]] inline doctest::Approx approx_s(double expected)
{
  return doctest::Approx(expected).scale(0.0);
}

}  // namespace stash::test
