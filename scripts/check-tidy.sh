#!/usr/bin/env bash
# Runs clang-tidy 14 with the repository's .clang-tidy over the CPU translation units (tests/,
# examples/, benchmarks/ *.cpp) of the test preset's compile_commands.json; CUDA .cu files are
# left out (clang-tidy does not parse nvcc's flags). Fails when any check fires.
#   cmake --preset test && bash scripts/check-tidy.sh [-j N] [FILE...]
# Not a ctest test: it takes about a CPU-minute per translation unit (~50 of them), far over the
# few minutes a lint test may take on a 2-core machine; run it before a release or on the files
# a change touches (pass them as arguments).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=2
if [ "${1:-}" = "-j" ]; then jobs=$2; shift 2; fi
ct=""
for c in clang-tidy-14 clang-tidy; do
  if command -v "$c" >/dev/null 2>&1 && "$c" --version | grep -qE 'version 14\.'; then ct=$c; break; fi
done
[ -n "$ct" ] || { echo "check-tidy: clang-tidy 14 not found (apt-get install clang-tidy-14)" >&2; exit 1; }
db=build/test/compile_commands.json
[ -f "$db" ] || { echo "check-tidy: $db missing: run 'cmake --preset test' first" >&2; exit 1; }

if [ "$#" -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(python3 - "$db" "$PWD" <<'PY'
import json, sys
root = sys.argv[2] + "/"
for e in json.load(open(sys.argv[1])):
    f = e["file"]
    if f.startswith(root) and f.endswith(".cpp") and f[len(root):].split("/")[0] in ("tests", "examples", "benchmarks"):
        print(f[len(root):])
PY
  )
fi

# GCC-only warning flags of the build (-Wno-error=stringop-overflow, ...) are unknown to clang.
printf '%s\n' "${files[@]}" |
  xargs -P "$jobs" -I{} "$ct" -p build/test --quiet --extra-arg=-Wno-unknown-warning-option {} \
  > build/test/clang-tidy.log 2>&1 || { grep -E 'warning:|error:' build/test/clang-tidy.log; exit 1; }
echo "check-tidy: ${#files[@]} translation unit(s) clean"
