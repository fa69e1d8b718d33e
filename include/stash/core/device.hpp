/**
 * @file device.hpp
 * @brief Whether a usable CUDA device is present, and why not when it is not.
 *
 * On a machine with the toolkit but no driver or no GPU, the runtime answers
 * cudaGetDeviceCount with an error (e.g. cudaErrorInsufficientDriver, cudaErrorNoDevice) rather
 * than a count of 0; both mean "no device" here.
 */
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace stash {

/// @brief Number of usable CUDA devices; 0 when the runtime reports an error. Never throws.
/// @return The device count, 0 on any error.
[[nodiscard]] inline int device_count() noexcept
{
  int count                = 0;
  cudaError_t const status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

/// @brief True when at least one CUDA device can be used.
/// @return Whether device_count() > 0.
[[nodiscard]] inline bool gpu_available() noexcept { return device_count() > 0; }

/// @brief Why no device can be used ("" when one can), e.g.
/// "cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device is detected".
/// @return The runtime's reason, or an empty string.
[[nodiscard]] inline std::string no_gpu_reason()
{
  int count                = 0;
  cudaError_t const status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + ": " +
           cudaGetErrorString(status);
  }
  if (count == 0) { return "cudaGetDeviceCount: 0 devices"; }
  return "";
}

}  // namespace stash
