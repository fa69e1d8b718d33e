// The public offload_backend conformance kit on the CUDA backend, copying through device memory.
#include <stash/core/device_upstream.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/testing/backend_conformance.hpp>

#include <doctest/doctest.h>

namespace STASH_UNITY_ID {

TEST_CASE("gpu: the CUDA backend passes the offload_backend conformance kit")
{
  stash::cuda_backend backend;
  stash::caching_pool<stash::device_upstream> memory;
  auto const r = stash::testing::check_offload_backend(backend, memory);
  CHECK_MESSAGE(r.ok(), r.summary());
}

}  // namespace STASH_UNITY_ID
