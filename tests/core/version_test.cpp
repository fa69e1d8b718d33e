// The version lives in include/stash/version.hpp; CMake's project(VERSION) is read from it. This
// checks that the two agree (the definitions come from the project's version) and that
// STASH_VERSION is composed from the parts.
#include <stash/version.hpp>

#include <doctest/doctest.h>

namespace STASH_UNITY_ID {

TEST_CASE("version.hpp agrees with CMake's project version")
{
  CHECK(STASH_VERSION_MAJOR == STASH_PROJECT_VERSION_MAJOR);
  CHECK(STASH_VERSION_MINOR == STASH_PROJECT_VERSION_MINOR);
  CHECK(STASH_VERSION_PATCH == STASH_PROJECT_VERSION_PATCH);
  CHECK(STASH_VERSION ==
        STASH_VERSION_MAJOR * 10000 + STASH_VERSION_MINOR * 100 + STASH_VERSION_PATCH);
}

}  // namespace STASH_UNITY_ID
