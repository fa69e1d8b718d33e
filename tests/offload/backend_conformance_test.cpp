// The public offload_backend conformance kit (stash/testing/) on the host backend, and shown to
// catch a backend that breaks its contract.
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/testing/backend_conformance.hpp>

#include <doctest/doctest.h>

namespace {

using host_pool = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;

// The host backend, except that query() never reports completion.
struct forgetful_backend : stash::host_backend {
  [[nodiscard]] bool query(event const&) const { return false; }
};
static_assert(stash::offload_backend<forgetful_backend>);

}  // namespace

TEST_CASE("the host backend passes the offload_backend conformance kit")
{
  stash::host_backend backend;
  host_pool memory;
  auto const r = stash::testing::check_offload_backend(backend, memory);
  CHECK_MESSAGE(r.ok(), r.summary());
  CHECK(r.checks >= 6);
}

TEST_CASE("the backend kit catches events that never complete")
{
  forgetful_backend backend;
  host_pool memory;
  auto const r = stash::testing::check_offload_backend(backend, memory);
  CHECK_FALSE(r.ok());
  CHECK(r.summary().find("not complete") != std::string::npos);
}
