# Warning flags for stash's own targets (never imposed on consumers of stash::stash).
function(stash_set_warnings target)
  set(cxx_flags -Wall -Wextra -Wpedantic -Wshadow)
  set(cuda_flags -Xcompiler=-Wall,-Wextra)
  if(STASH_WARNINGS_AS_ERRORS)
    list(APPEND cxx_flags -Werror)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # GCC 12's -O3 object-size analysis reports impossible sizes inside std::string and
      # memset/memcpy of spans (false positives); keep them visible, not fatal.
      list(APPEND cxx_flags -Wno-error=restrict -Wno-error=stringop-overflow)
    endif()
    list(APPEND cuda_flags -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${cxx_flags}>
    $<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>)
  set_target_properties(${target} PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON
                                             CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
endfunction()
