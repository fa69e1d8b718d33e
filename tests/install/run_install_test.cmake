# Installs stash from the build tree into a scratch prefix, then configures, builds and runs a
# small consumer project twice: once through find_package(stash), once through add_subdirectory.
cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(JOIN " " cmd ${ARGN})
    message(FATAL_ERROR "command failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

run(${CMAKE_COMMAND} --install "${STASH_BINARY_DIR}" --prefix "${prefix}")

# Every public header is installed, byte for byte, and nothing else under include/stash: with
# that, each installed header compiles from the install tree because each compiles alone from the
# source tree (stash_header_check). The consumer built from the install tree below includes a
# few of them; it used to include the umbrella, an nvcc unit of ~90 CPU s that checked again
# what the header check and this comparison check (CONTRIBUTING.md "CI").
file(GLOB_RECURSE source_headers RELATIVE "${STASH_SOURCE_DIR}/include"
     "${STASH_SOURCE_DIR}/include/stash/*")
file(GLOB_RECURSE installed_headers RELATIVE "${prefix}/include" "${prefix}/include/stash/*")
if(NOT source_headers STREQUAL installed_headers)
  set(missing ${source_headers})
  list(REMOVE_ITEM missing ${installed_headers})
  set(extra ${installed_headers})
  list(REMOVE_ITEM extra ${source_headers})
  message(FATAL_ERROR "installed include/stash differs from the source tree's: "
                      "not installed: [${missing}]; installed but not in the source: [${extra}]")
endif()
foreach(header IN LISTS source_headers)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${STASH_SOURCE_DIR}/include/${header}"
                          "${prefix}/include/${header}" RESULT_VARIABLE differs)
  if(differs)
    message(FATAL_ERROR "installed ${header} differs from include/${header}")
  endif()
endforeach()
list(LENGTH source_headers header_count)
message(STATUS "install: ${header_count} headers installed as in the source tree")
if(header_count LESS 100)
  message(FATAL_ERROR "install: only ${header_count} headers found under include/stash")
endif()

foreach(mode IN ITEMS package subdirectory)
  set(build "${WORK_DIR}/build-${mode}")
  run(${CMAKE_COMMAND} -S "${STASH_SOURCE_DIR}/tests/install/consumer" -B "${build}"
      -G "${GENERATOR}"
      -DCMAKE_PREFIX_PATH=${prefix}
      -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}
      -DCONSUMER_MODE=${mode}
      -DSTASH_SOURCE_DIR=${STASH_SOURCE_DIR})
  run(${CMAKE_COMMAND} --build "${build}")
  run("${build}/consumer" "${STASH_SOURCE_DIR}/data/traces/alexnet_b128.trace")
endforeach()
