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
