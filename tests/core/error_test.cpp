#include <stash/core/error.hpp>

#include <doctest/doctest.h>

#include <new>
#include <string>

namespace STASH_UNITY_ID {

namespace {
bool contains(std::string const& haystack, std::string const& needle)
{
  return haystack.find(needle) != std::string::npos;
}
}  // namespace

TEST_CASE("STASH_EXPECTS throws logic_error with file:line and message")
{
  CHECK_NOTHROW(STASH_EXPECTS(1 + 1 == 2, "never"));
  int const line = __LINE__ + 2;
  try {
    STASH_EXPECTS(1 + 1 == 3, "arithmetic is broken");
    FAIL("STASH_EXPECTS did not throw");
  } catch (stash::logic_error const& e) {
    std::string const what = e.what();
    CHECK(contains(what, "error_test.cpp:" + std::to_string(line)));
    CHECK(contains(what, "arithmetic is broken"));
  }
  CHECK_THROWS_AS(STASH_FAIL("always"), stash::logic_error);
  // logic_error is a std::logic_error, so generic handlers catch it.
  CHECK_THROWS_AS(STASH_FAIL("always"), std::logic_error);
}

TEST_CASE("STASH_CUDA_TRY passes success and throws cuda_error with the error's name and place")
{
  CHECK_NOTHROW(STASH_CUDA_TRY(cudaSuccess));
  try {
    STASH_CUDA_TRY(cudaErrorInvalidValue);
    FAIL("STASH_CUDA_TRY did not throw");
  } catch (stash::cuda_error const& e) {
    std::string const what = e.what();
    CHECK(e.code() == cudaErrorInvalidValue);
    CHECK(contains(what, "error_test.cpp:"));
    CHECK(contains(what, "cudaErrorInvalidValue"));
    CHECK(contains(what, "STASH_CUDA_TRY") == false);  // the expression, not the macro, is named
    CHECK(contains(what, "cudaErrorInvalidValue failed"));
  }
}

TEST_CASE("STASH_CUDA_CHECK_NOTHROW never throws")
{
  auto const noexcept_path = []() noexcept { STASH_CUDA_CHECK_NOTHROW(cudaErrorInvalidValue); };
  CHECK_NOTHROW(noexcept_path());
}

TEST_CASE("out_of_memory carries requested, budget, in-use and largest free block")
{
  stash::out_of_memory const full("caching_pool", 1024, 4096, 3584, 512);
  CHECK(full.requested_bytes() == 1024);
  CHECK(full.budget_bytes() == 4096);
  CHECK(full.in_use_bytes() == 3584);
  CHECK(full.largest_free_bytes() == 512);
  std::string const what = full.what();
  CHECK(contains(what, "caching_pool"));
  CHECK(contains(what, "requested 1024 B"));
  CHECK(contains(what, "budget 4096 B"));
  CHECK(contains(what, "in use 3584 B"));
  CHECK(contains(what, "largest free block 512 B"));

  stash::out_of_memory const partial("host_upstream", 7, std::nullopt, std::nullopt);
  CHECK_FALSE(partial.budget_bytes().has_value());
  CHECK(contains(partial.what(), "budget unknown"));

  // Generic code that catches std::bad_alloc sees it.
  CHECK_THROWS_AS(throw stash::out_of_memory("x", 1, 0, 0), std::bad_alloc);
}

}  // namespace STASH_UNITY_ID
