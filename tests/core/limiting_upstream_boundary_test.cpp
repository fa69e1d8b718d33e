// limiting_upstream at its budget's edge: a request of exactly what is left succeeds, one byte
// more throws, and a free makes exactly its bytes available again.
#include <stash/core/error.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/limiting_upstream.hpp>

#include <doctest/doctest.h>

#include <cstddef>

namespace STASH_UNITY_ID {

TEST_CASE("limiting_upstream grants exactly its remaining budget, not a byte more")
{
  constexpr std::size_t budget = 4096;
  stash::limiting_upstream<stash::host_upstream> limited(budget);
  void* whole = limited.allocate(budget, 256);  // exactly the budget
  CHECK(limited.in_use_bytes() == budget);
  CHECK_THROWS_AS((void)limited.allocate(1, 256), stash::out_of_memory);
  limited.deallocate(whole, budget, 256);
  CHECK(limited.in_use_bytes() == 0);

  void* a = limited.allocate(budget - 1000, 256);
  CHECK_THROWS_AS((void)limited.allocate(1001, 256), stash::out_of_memory);
  void* b = limited.allocate(1000, 256);  // exactly what is left
  CHECK(limited.in_use_bytes() == budget);
  limited.deallocate(b, 1000, 256);
  limited.deallocate(a, budget - 1000, 256);
  CHECK(limited.in_use_bytes() == 0);
  CHECK(limited.peak_bytes() == budget);
}

}  // namespace STASH_UNITY_ID
