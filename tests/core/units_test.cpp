#include <stash/core/units.hpp>

#include <doctest/doctest.h>

namespace STASH_UNITY_ID {

TEST_CASE("alignment arithmetic")
{
  CHECK(stash::is_pow2(1));
  CHECK(stash::is_pow2(256));
  CHECK_FALSE(stash::is_pow2(0));
  CHECK_FALSE(stash::is_pow2(384));
  CHECK(stash::align_up(0, 256) == 0);
  CHECK(stash::align_up(1, 256) == 256);
  CHECK(stash::align_up(256, 256) == 256);
  CHECK(stash::align_up(257, 256) == 512);
  CHECK(stash::align_down(511, 256) == 256);
  CHECK(stash::is_aligned(1024, 256));
  CHECK_FALSE(stash::is_aligned(1000, 256));
  static_assert(stash::align_up(3, 4) == 4);
}

TEST_CASE("format_bytes picks a binary unit")
{
  CHECK(stash::format_bytes(0) == "0 B");
  CHECK(stash::format_bytes(1023) == "1023 B");
  CHECK(stash::format_bytes(1024) == "1.0 KiB");
  CHECK(stash::format_bytes(835805832) == "797.1 MiB");
  CHECK(stash::format_bytes(3 * stash::GiB) == "3.0 GiB");
}

}  // namespace STASH_UNITY_ID
