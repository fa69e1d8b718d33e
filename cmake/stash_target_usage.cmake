# What a consumer of stash::stash needs beyond its include directory, decided where it is used
# (stash's own build, add_subdirectory, or find_package through stash-config.cmake), so nothing is
# baked into the exported target that only holds for the CCCL and CMake that built it.
#
# stash_target_usage(<target>) adds to <target>'s interface:
#   * cuda_std_20, when the CUDA language is enabled in the calling project. CMake 3.25 does not
#     know that nvcc 12+ compiles C++20, so it is taught here (the compile option and the feature),
#     only when it does not know it itself. A consumer that enables CUDA after find_package(stash)
#     sets CUDA_STANDARD 20 on its targets instead.
#   * LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE, only when the CCCL found is older than 3.2:
#     stash's upstreams and pools model libcu++'s cuda::mr concepts, which CCCL 3.0 and 3.1 gate
#     behind this define; CCCL 3.2 and later do not (the define is then left out).
# Idempotent: it can be called once more after enable_language(CUDA). With BUILD_INTERFACE (stash's
# own tree) the additions are wrapped in $<BUILD_INTERFACE:...>, so install(EXPORT) does not carry
# them: the installed stash-config.cmake decides again for the consumer's CMake and CCCL.
function(stash_target_usage target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "BUILD_INTERFACE" "" "")
  set(open "")
  set(close "")
  if(arg_BUILD_INTERFACE)
    set(open "$<BUILD_INTERFACE:")
    set(close ">")
  endif()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  get_property(done TARGET ${target} PROPERTY STASH_USAGE_DONE)
  if("CUDA" IN_LIST languages AND NOT done MATCHES "cuda")
    if(NOT "cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES
       AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
       AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20" PARENT_SCOPE)
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20" PARENT_SCOPE)
      set(features ${CMAKE_CUDA_COMPILE_FEATURES} cuda_std_20)
      set(CMAKE_CUDA_COMPILE_FEATURES "${features}" PARENT_SCOPE)
      set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20 PARENT_SCOPE)
    endif()
    set_property(TARGET ${target} APPEND PROPERTY INTERFACE_COMPILE_FEATURES "${open}cuda_std_20${close}")
    set_property(TARGET ${target} APPEND PROPERTY STASH_USAGE_DONE cuda)
  endif()
  if(NOT done MATCHES "cccl")
    if(NOT DEFINED CCCL_VERSION)
      message(FATAL_ERROR "stash_target_usage: find_package(CCCL) first")
    endif()
    if(CCCL_VERSION VERSION_LESS 3.2)
      set_property(TARGET ${target} APPEND PROPERTY
                   INTERFACE_COMPILE_DEFINITIONS
                 "${open}LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE${close}")
    endif()
    set_property(TARGET ${target} APPEND PROPERTY STASH_USAGE_DONE cccl)
  endif()
endfunction()
