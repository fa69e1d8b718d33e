// lifetime_arena::relearn (GPU review 2026-11-25, fourth read, C5): the iteration it is called in
// is not planned; with no arena block live the arena is given back and the next iteration is
// recorded and planned; with one live, only the pending deviations are forgotten and the plan
// stays.
#include <stash/core/host_upstream.hpp>
#include <stash/pool/lifetime_arena.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using host_arena          = stash::lifetime_arena<stash::host_upstream>;
cudaStream_t const stream = reinterpret_cast<cudaStream_t>(0x1000);

// Allocates and frees `sizes` in order (each freed before the next is taken, but the last).
void sequence(host_arena& a, std::vector<std::size_t> const& sizes)
{
  for (auto n : sizes) { a.deallocate_async(a.allocate_async(n, stream), n, stream); }
}

}  // namespace

TEST_CASE("lifetime_arena::relearn: no plan from that iteration; the next one is planned")
{
  host_arena a;
  std::vector<std::size_t> const recorded{1024, 4096};
  std::vector<std::size_t> const replayed{1024, 2048, 4096};
  a.begin_iteration();
  sequence(a, recorded);
  a.relearn();  // the caller allocates otherwise from the next iteration on
  a.end_iteration();
  CHECK(a.state() == stash::arena_state::recording);
  CHECK(a.arena_bytes() == 0);
  a.begin_iteration();
  sequence(a, replayed);
  a.end_iteration();
  REQUIRE(a.state() == stash::arena_state::replaying);
  auto const fallbacks = a.stats().fallbacks;
  for (int i = 0; i < 2; ++i) {
    a.begin_iteration();
    sequence(a, replayed);
    a.end_iteration();
  }
  CHECK(a.stats().fallbacks == fallbacks);
  CHECK(a.replans() == 0);

  SUBCASE("with a plan in force and no block live, the arena is given back")
  {
    a.begin_iteration();
    sequence(a, recorded);
    a.relearn();
    a.end_iteration();
    CHECK(a.state() == stash::arena_state::recording);
    CHECK(a.arena_bytes() == 0);
  }
  SUBCASE("with an arena block live, the plan stays")
  {
    a.begin_iteration();
    void* kept = a.allocate_async(1024, stream);  // slot 0 of the plan, outliving the iteration
    a.relearn();
    a.end_iteration();
    CHECK(a.state() == stash::arena_state::replaying);
    CHECK(a.arena_bytes() > 0);
    a.deallocate_async(kept, 1024, stream);
  }
}

}  // namespace STASH_UNITY_ID
