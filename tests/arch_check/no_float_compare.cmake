# Fails when the PTX file(s) in PTX contain a floating-point comparison (setp.<cmp>[.ftz].f16/f32/f64),
# or no bitmask or range_mask encode kernel at all (so the check cannot pass on an empty file).
# Usage: cmake -DPTX=<file;...> -P no_float_compare.cmake
set(found_entry FALSE)
set(found_range_entry FALSE)
foreach(file IN LISTS PTX)
  file(READ "${file}" ptx)
  if(ptx MATCHES "\\.entry[^\n]*bitmask_encode_kernel")
    set(found_entry TRUE)
  endif()
  if(ptx MATCHES "\\.entry[^\n]*range_mask_encode_kernel")
    set(found_range_entry TRUE)
  endif()
  string(REGEX MATCHALL "setp\\.[a-z]+(\\.ftz)?\\.f(16|32|64)[^\n]*" compares "${ptx}")
  if(compares)
    message(FATAL_ERROR "${file}: floating-point comparison in the mask kernels built with "
                        "--use_fast_math (the mask must be decided on the bit pattern): ${compares}")
  endif()
endforeach()
if(NOT found_entry OR NOT found_range_entry)
  message(FATAL_ERROR "no bitmask_encode_kernel or range_mask_encode_kernel entry in ${PTX}: "
                      "nothing was checked")
endif()
message(STATUS "bitmask and range_mask kernels under --use_fast_math: no floating-point comparison")
