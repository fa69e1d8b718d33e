// The bitmask and range_mask codecs' kernels compiled to PTX with --use_fast_math
// (flush-to-zero), as a consumer may build them: tests/arch_check/no_float_compare.cmake (ctest
// arch_check.bitmask_ftz) fails if they contain a floating-point comparison. The mask bit is
// decided on the bit pattern (codec/detail/bitmask_format.hpp, bitmask_positive;
// range_mask_format.hpp, range_mask_inside), so -ftz cannot flush a denormal across the mask's
// edge on the device while the host reference keeps it (issue 26; the former `x > 0.0f` compiled
// to `setp.gt.ftz.f32`). Compiled, never run.
#include <stash/codec/device_bitmask.cuh>
#include <stash/codec/device_range_mask.cuh>

#include <cuda_runtime_api.h>

/// @brief Enqueues every bitmask kernel (never called: the point is the PTX it compiles to).
void stash_bitmask_ftz_check(cudaStream_t s)
{
  stash::device_bitmask::encode_async(static_cast<float const*>(nullptr), 0, nullptr, 0, nullptr,
                                      nullptr, 0, s);
  stash::device_bitmask::decode_async(nullptr, 0, static_cast<float*>(nullptr), 0, nullptr, nullptr,
                                      0, s);
  stash::device_bitmask::apply_mask_to_gradient_async(nullptr, 0, nullptr, 0, nullptr, s);
}

/// @brief Enqueues every range_mask kernel (never called: the point is the PTX it compiles to).
void stash_range_mask_ftz_check(cudaStream_t s)
{
  stash::device_range_mask::encode_async(nullptr, 0, stash::range_bounds{0.0f, 6.0f}, nullptr, 0,
                                         nullptr, s);
  stash::device_range_mask::decode_async(nullptr, 0, nullptr, 0, nullptr, s);
  stash::device_range_mask::apply_mask_to_gradient_async(nullptr, 0, nullptr, 0, nullptr, s);
}
