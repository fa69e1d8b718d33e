#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine with the CUDA toolkit lacks (doctest, ninja, cmake,
# clang-format 14 for the style check, python3 for the layering check, doxygen for the API
# reference check, pip) and RMM's C++ library
# (librmm-cu13 from PyPI, for the RMM interop tests; optional: without PyPI those tests are not
# built, with a warning), then configures, builds and runs all of stash's tests with the `test`
# preset.
# GPU tests (ctest label `gpu`) are reported as skipped when no CUDA device is present.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
[ -f /usr/include/doctest/doctest.h ] || [ -f /usr/local/include/doctest/doctest.h ] || missing+=(doctest-dev)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v clang-format-14 >/dev/null 2>&1 || missing+=(clang-format-14)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v doxygen >/dev/null 2>&1 || missing+=(doxygen)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

# RMM: pip's per-user install (~5 MB, with rapids-logger), where CMake finds it by asking python3
# (cmake/stash_rmm.cmake). A Debian python3 refuses per-user installs (PEP 668) unless told to:
# --user writes to ~/.local only, not into the system's packages. Any failure (no PyPI, no pip) is
# reported and the RMM tests are left out; it never fails the run.
rmm_note=""
install_rmm() {
  python3 -c 'import librmm, rapids_logger' >/dev/null 2>&1 && return 0
  echo "installing: librmm-cu13 (PyPI, pip install --user) for the RMM interop tests"
  local args=(install --user --quiet --disable-pip-version-check --timeout 20 --retries 1 librmm-cu13)
  local out
  if out=$(python3 -m pip "${args[@]}" 2>&1); then return 0; fi
  if grep -q "externally-managed" <<<"$out" &&
     out=$(python3 -m pip "${args[@]}" --break-system-packages 2>&1); then
    return 0
  fi
  rmm_note="librmm-cu13 could not be installed: $(tail -n 1 <<<"$out")"
  return 1
}
if ! install_rmm; then
  echo "WARNING: ${rmm_note}" >&2
  echo "WARNING: the RMM interop tests (tests/rmm) will NOT be built or run" >&2
fi

if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break
  done
fi
command -v nvcc >/dev/null 2>&1 || { echo "error: nvcc not found: install the CUDA toolkit" >&2; exit 1; }

cmake --preset test
cmake --build --preset test -j "$(nproc)"
status=0
ctest --preset test --no-label-summary -j "$(nproc)" "$@" || status=$?
if [ -n "$rmm_note" ]; then
  echo "WARNING: RMM interop tests were NOT built (${rmm_note})" >&2
fi
exit "$status"
