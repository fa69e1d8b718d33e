#include <stash/core/device.hpp>

#include <doctest/doctest.h>

namespace STASH_UNITY_ID {

TEST_CASE("device detection is consistent and never throws")
{
  int const count = stash::device_count();
  CHECK(count >= 0);
  CHECK(stash::gpu_available() == (count > 0));
  // No reason is given exactly when a device is usable.
  CHECK(stash::no_gpu_reason().empty() == stash::gpu_available());
  if (!stash::gpu_available()) {
    MESSAGE("no CUDA device here: " << stash::no_gpu_reason());
    CHECK(stash::no_gpu_reason().find("cudaGetDeviceCount") != std::string::npos);
  }
}

}  // namespace STASH_UNITY_ID
