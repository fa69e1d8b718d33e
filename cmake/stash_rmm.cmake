# RMM as an optional dependency of stash's own tests (stash's headers never include RMM).
#
# Where RMM comes from: the librmm-cu13 wheel on PyPI (scripts/test.sh installs it with pip): its
# headers, librmm.so, and under include/rapids the CCCL that librmm.so was built with (3.5 for RMM
# 26.10), plus the rapids-logger wheel it depends on. STASH_RMM_ROOT (a prefix holding include/rmm
# and lib64/ or lib/librmm.so) overrides the lookup; empty, python3 is asked where its librmm is.
#
# Why not find_package(rmm): the wheel's rmm-config.cmake requires CMake 4.0 (stash supports 3.25,
# Debian 12's), and it would bring RMM's CCCL as the same CCCL::CCCL target name the toolkit's
# CCCL already took. So this file builds a small imported target from the wheel's layout.
#
# One CCCL per translation unit and per executable: RMM's headers need CCCL >= 3.5 (allocate_sync,
# any_resource), the toolkit's is 3.0.1. stash_use_rmm() puts RMM's CCCL first on the include path
# of the RMM test executables only (as -I, before the toolkit's -I .../include/cccl that
# CCCL::CCCL adds; nvcc appends its own -isystem .../include/cccl after every user path, so nvcc
# and g++ both resolve every CCCL header to RMM's copy, checked by a static_assert in the tests).
# Everything else keeps the toolkit's CCCL: that is what a user without RMM gets, so CI compiles
# stash against both spellings of cuda::mr. Building all of stash against RMM's CCCL when RMM is
# present was the alternative; it would leave the toolkit's CCCL, the default, untested in CI.

set(STASH_WITH_RMM AUTO CACHE STRING
    "RMM interop tests: AUTO (built when RMM is found), ON (RMM required) or OFF")
set_property(CACHE STASH_WITH_RMM PROPERTY STRINGS AUTO ON OFF)
set(STASH_RMM_ROOT "" CACHE PATH
    "Prefix of librmm (include/rmm, lib64/librmm.so); empty: python3's librmm wheel")

# Inside stash_find_rmm: RMM is unusable because `why`; fatal under STASH_WITH_RMM=ON, otherwise
# said and the RMM tests left out (returns from the calling function).
macro(stash_rmm_unavailable why)
  if(STASH_WITH_RMM STREQUAL "ON")
    message(FATAL_ERROR "STASH_WITH_RMM=ON: ${why}")
  endif()
  message(WARNING "RMM interop tests NOT built: ${why}")
  return()
endmacro()

# Sets STASH_RMM_FOUND in the caller and, when found, defines the target stash_rmm.
function(stash_find_rmm)
  set(STASH_RMM_FOUND FALSE PARENT_SCOPE)
  if(STASH_WITH_RMM STREQUAL "OFF")
    return()
  endif()
  set(rmm_root "${STASH_RMM_ROOT}")
  set(logger_root "")
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    foreach(module librmm rapids_logger)
      execute_process(
        COMMAND ${Python3_EXECUTABLE} -c "import os, ${module}; print(os.path.dirname(${module}.__file__))"
        OUTPUT_VARIABLE module_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
      if(status EQUAL 0 AND module STREQUAL "librmm" AND NOT rmm_root)
        set(rmm_root "${module_dir}")
      elseif(status EQUAL 0 AND module STREQUAL "rapids_logger")
        set(logger_root "${module_dir}")
      endif()
    endforeach()
  endif()
  find_path(STASH_RMM_INCLUDE_DIR rmm/version_config.hpp HINTS "${rmm_root}/include")
  find_path(STASH_RMM_CCCL_INCLUDE_DIR cuda/std/__cccl/version.h
            HINTS "${rmm_root}/include/rapids" "${STASH_RMM_INCLUDE_DIR}/rapids" NO_DEFAULT_PATH)
  find_library(STASH_RMM_LIBRARY rmm HINTS "${rmm_root}/lib64" "${rmm_root}/lib")
  find_path(STASH_RAPIDS_LOGGER_INCLUDE_DIR rapids_logger/logger.hpp
            HINTS "${logger_root}/include" "${rmm_root}/include")
  find_library(STASH_RAPIDS_LOGGER_LIBRARY rapids_logger
               HINTS "${logger_root}/lib64" "${logger_root}/lib" "${rmm_root}/lib64")
  set(missing "")
  foreach(var STASH_RMM_INCLUDE_DIR STASH_RMM_CCCL_INCLUDE_DIR STASH_RMM_LIBRARY
              STASH_RAPIDS_LOGGER_INCLUDE_DIR STASH_RAPIDS_LOGGER_LIBRARY)
    if(NOT ${var})
      list(APPEND missing ${var})
    endif()
  endforeach()
  if(missing)
    list(JOIN missing ", " missing)
    stash_rmm_unavailable(
      "RMM not found (${missing} not set; librmm-cu13 from PyPI: bash scripts/test.sh installs it)")
  endif()
  file(STRINGS "${STASH_RMM_CCCL_INCLUDE_DIR}/cuda/std/__cccl/version.h" cccl_line
       REGEX "^#define CCCL_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+" cccl_version "${cccl_line}")
  if(cccl_version LESS 3001000)
    # tests/rmm is written against RMM 26 (CCCL >= 3.1's cuda::mr); an older RMM is not supported.
    stash_rmm_unavailable(
      "RMM at ${STASH_RMM_INCLUDE_DIR} ships CCCL ${cccl_version}; tests/rmm needs >= 3.1 (RMM >= 26)")
  endif()

  add_library(stash_rmm INTERFACE)
  target_include_directories(stash_rmm SYSTEM INTERFACE
    ${STASH_RMM_INCLUDE_DIR} ${STASH_RAPIDS_LOGGER_INCLUDE_DIR})
  target_link_libraries(stash_rmm INTERFACE ${STASH_RMM_LIBRARY} ${STASH_RAPIDS_LOGGER_LIBRARY})
  # As RMM's own CMake package sets them on its CCCL, so these units see CCCL as librmm.so did.
  target_compile_definitions(stash_rmm INTERFACE
    STASH_RMM_CCCL_VERSION=${cccl_version}
    CUB_DISABLE_NAMESPACE_MAGIC CUB_IGNORE_NAMESPACE_MAGIC_ERROR
    THRUST_DISABLE_ABI_NAMESPACE THRUST_IGNORE_ABI_NAMESPACE_ERROR CCCL_DISABLE_PDL)
  # librmm.so finds librapids_logger.so through its own RUNPATH ($ORIGIN) only; keep it a direct
  # dependency of the executable (Debian's linker drops unused ones) so the executable's RPATH finds it.
  target_link_options(stash_rmm INTERFACE "LINKER:--no-as-needed")
  set(STASH_RMM_CCCL_INCLUDE_DIR "${STASH_RMM_CCCL_INCLUDE_DIR}" PARENT_SCOPE)
  set(STASH_RMM_FOUND TRUE PARENT_SCOPE)
  message(STATUS "RMM interop tests: RMM at ${STASH_RMM_INCLUDE_DIR}, its CCCL ${cccl_version} "
                 "for those tests only")
endfunction()

# Builds `target` against RMM and RMM's CCCL (see the top of this file).
function(stash_use_rmm target)
  target_include_directories(${target} BEFORE PRIVATE ${STASH_RMM_CCCL_INCLUDE_DIR})
  target_link_libraries(${target} PRIVATE stash_rmm)
endfunction()
