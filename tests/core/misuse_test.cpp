// The misuse handler (core/misuse.hpp): how a free that must not throw reports a caller's mistake.

#include <stash/core/misuse.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <string>

namespace STASH_UNITY_ID {

namespace {
int counted_calls = 0;
void counting_handler(stash::misuse_error const&) noexcept { ++counted_calls; }
}  // namespace

TEST_CASE("misuse handler: set, scoped, restored; the error carries its figures")
{
  auto const original = stash::get_misuse_handler();
  {
    stash::scoped_misuse_handler const scope(&counting_handler);
    CHECK((stash::get_misuse_handler() == &counting_handler));
    int x = 0;
    stash::detail::report_misuse(stash::misuse_kind::wrong_size, "my_pool", "size differs", &x, 12,
                                 64);
    CHECK(counted_calls == 1);
    CHECK_FALSE(stash::take_misuse().has_value());  // this handler records nothing
  }
  CHECK((stash::get_misuse_handler() == original));
  {
    stash::scoped_misuse_handler const recording;
    auto const before = stash::misuse_count();
    int x             = 0;
    stash::detail::report_bad_free("my_pool", &x, 100, 256, 200, 256, true);
    CHECK(stash::misuse_count() == before + 1);
    auto const e = stash::take_misuse();
    REQUIRE(e.has_value());
    CHECK(e->kind() == stash::misuse_kind::wrong_size);
    CHECK(e->pointer() == &x);
    CHECK(e->bytes() == 100);
    CHECK(e->alignment() == 256);
    CHECK(
        std::string(e->what()) ==
        "my_pool::deallocate: size differs from the one allocated (200 B allocated, 100 B freed)");
    CHECK_FALSE(stash::take_misuse().has_value());  // taken: cleared
    stash::detail::report_bad_free("my_pool", &x, 100, 512, 100, 256, true);
    CHECK(stash::take_misuse()->kind() == stash::misuse_kind::bad_alignment);
    stash::detail::report_bad_free("my_pool", &x, 100, 256, 0, 0, false);
    CHECK(stash::take_misuse()->kind() == stash::misuse_kind::unknown_pointer);
    // free_matches, every pool's check: the record's size member (any name) and alignment.
    struct record {
      std::size_t requested;
      std::size_t alignment;
    };
    record const r{100, 256};
    CHECK(stash::detail::free_matches("my_pool", &x, 100, 256, &r, &record::requested));
    CHECK_FALSE(stash::take_misuse().has_value());
    CHECK_FALSE(stash::detail::free_matches("my_pool", &x, 200, 256, &r, &record::requested));
    CHECK(stash::take_misuse()->kind() == stash::misuse_kind::wrong_size);
    CHECK_FALSE(stash::detail::free_matches("my_pool", &x, 100, 512, &r, &record::requested));
    CHECK(stash::take_misuse()->kind() == stash::misuse_kind::bad_alignment);
    record const* const none = nullptr;
    CHECK_FALSE(stash::detail::free_matches("my_pool", &x, 100, 256, none, &record::requested));
    CHECK(stash::take_misuse()->kind() == stash::misuse_kind::unknown_pointer);
  }
  CHECK((stash::set_misuse_handler(nullptr) == original));  // nullptr restores the default
  CHECK((stash::get_misuse_handler() == &stash::default_misuse_handler));
  stash::set_misuse_handler(&counting_handler);  // process-wide
  {
    stash::scoped_misuse_handler const recording;  // this thread's override wins
    CHECK((stash::get_misuse_handler() == &stash::recording_misuse_handler));
  }
  CHECK((stash::get_misuse_handler() == &counting_handler));
  stash::set_misuse_handler(original);
}

#if defined(NDEBUG)
TEST_CASE("misuse handler: the default, in a release build, records and carries on")
{
  REQUIRE((stash::get_misuse_handler() == &stash::default_misuse_handler));
  (void)stash::take_misuse();
  int x = 0;
  stash::detail::report_misuse(stash::misuse_kind::unknown_pointer, "my_pool", "unknown", &x, 1, 1);
  auto const e = stash::take_misuse();
  REQUIRE(e.has_value());
  CHECK(e->kind() == stash::misuse_kind::unknown_pointer);
}
#endif

}  // namespace STASH_UNITY_ID
