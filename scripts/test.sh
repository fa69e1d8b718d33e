#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine with the CUDA toolkit lacks (doctest, ninja, cmake,
# clang-format 14 for the style check, python3 for the layering check),
# then configures, builds and runs all of stash's tests with the `test` preset.
# GPU tests (ctest label `gpu`) are reported as skipped when no CUDA device is present.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
[ -f /usr/include/doctest/doctest.h ] || [ -f /usr/local/include/doctest/doctest.h ] || missing+=(doctest-dev)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v clang-format-14 >/dev/null 2>&1 || missing+=(clang-format-14)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break
  done
fi
command -v nvcc >/dev/null 2>&1 || { echo "error: nvcc not found: install the CUDA toolkit" >&2; exit 1; }

cmake --preset test
cmake --build --preset test -j "$(nproc)"
ctest --preset test --no-label-summary -j "$(nproc)" "$@"
