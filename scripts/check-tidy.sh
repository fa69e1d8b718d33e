#!/usr/bin/env bash
# Runs clang-tidy 14 with the repository's .clang-tidy over translation units of the test preset's
# compile_commands.json; CUDA .cu files are left out (clang-tidy does not parse nvcc's flags).
# Fails when any check fires.
#   cmake --preset test && bash scripts/check-tidy.sh --headers     (what CI runs)
#   cmake --preset test && bash scripts/check-tidy.sh [-j N] [FILE...]
# --headers: one translation unit, the header check's all_hpp_headers.cpp, which includes every
# public .hpp header (HeaderFilterRegex reports what is in them): the library's code in one parse,
# about 1-2 CPU-minutes. Uninstantiated templates are checked as far as tidy's matchers see into
# dependent code; the tests, which instantiate them, are not part of this run.
# Without arguments: every CPU translation unit of tests/, examples/, benchmarks/ (~50 of them,
# a CPU-minute or more each): before a release, or on the files a change touches (as arguments).
# Installs clang-tidy-14 with apt-get when missing (as test.sh does doctest).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=2
headers=0
if [ "${1:-}" = "--headers" ]; then headers=1; shift; fi
if [ "${1:-}" = "-j" ]; then jobs=$2; shift 2; fi
if ! command -v clang-tidy-14 >/dev/null 2>&1 && ! command -v clang-tidy >/dev/null 2>&1; then
  echo "installing: clang-tidy-14"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang-tidy-14
fi
ct=""
for c in clang-tidy-14 clang-tidy; do
  if command -v "$c" >/dev/null 2>&1 && "$c" --version | grep -qE 'version 14\.'; then ct=$c; break; fi
done
[ -n "$ct" ] || { echo "check-tidy: clang-tidy 14 not found (apt-get install clang-tidy-14)" >&2; exit 1; }
db=build/test/compile_commands.json
[ -f "$db" ] || { echo "check-tidy: $db missing: run 'cmake --preset test' first" >&2; exit 1; }

if [ "$headers" -eq 1 ]; then
  files=(build/test/tests/header_check/all_hpp_headers.cpp)
  [ -f "${files[0]}" ] || { echo "check-tidy: ${files[0]} missing: configure the test preset" >&2; exit 1; }
elif [ "$#" -gt 0 ]; then
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
log=build/test/clang-tidy.log
status=0
printf '%s\n' "${files[@]}" |
  xargs -P "$jobs" -I{} "$ct" -p build/test --quiet --extra-arg=-Wno-unknown-warning-option {} \
  >"$log" 2>&1 || status=$?
# Findings listed in scripts/tidy-known-findings.txt (one extended regex per line, each with its
# reason and owner) are reported but do not fail the check; anything else does.
known=scripts/tidy-known-findings.txt
mapfile -t found < <(grep -E '(warning|error): ' "$log" | sed "s|^$PWD/||" | sort -u)
patterns=$(mktemp)
trap 'rm -f "$patterns"' EXIT
grep -vE '^(#|$)' "$known" >"$patterns" || true
unexpected=()
for f in "${found[@]}"; do
  if [ -s "$patterns" ] && grep -qEf "$patterns" <<<"$f"; then
    echo "check-tidy: known (scripts/tidy-known-findings.txt): $f"
  else
    unexpected+=("$f")
  fi
done
if [ ${#unexpected[@]} -gt 0 ]; then
  printf '%s\n' "${unexpected[@]}"
  exit 1
fi
if [ "$status" -ne 0 ] && [ ${#found[@]} -eq 0 ]; then
  tail -n 40 "$log"
  exit 1
fi
echo "check-tidy: ${#files[@]} translation unit(s) clean (${#found[@]} known finding(s))"
