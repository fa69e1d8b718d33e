#!/usr/bin/env bash
# The sanitizer and fuzzing checks (see README.md "Errors"); CI runs `tsan fuzz` after
# scripts/test.sh, whose test preset already builds and runs stash_tests under ASan + UBSan:
#   asan   the CPU test suite (stash_tests) under AddressSanitizer + UBSan, once, with the asan
#          preset (-O1, assertions on; the long result sweeps are stash_sweep_tests, not here)
#   tsan   the offload and allocator tests, the pool's threaded ones and stash-plan's threaded
#          frontier (tests/tools/frontier_threads_test.cpp) under ThreadSanitizer (not the
#          single-threaded pool and planner tests: nothing for it to see), TSAN_RUNS times
#          (default 2: races are intermittent)
#   fuzz   every libFuzzer target in tests/fuzz: its seeds and regression inputs, then
#          FUZZ_SECONDS (default 30) of fuzzing, FUZZ_JOBS (default: the core count) targets at a
#          time; a crash leaves its input in build/fuzz/artifacts/
#
#   bash scripts/sanitize.sh                    all three
#   bash scripts/sanitize.sh asan tsan          some of them
#   bash scripts/sanitize.sh fuzz codec 60      one fuzz target for 60 s (targets: tests/fuzz/*_fuzz.cpp)
#
# Each step prints its wall time; the last line is a ctest-style summary over the steps.
# Installs clang-14 and its libFuzzer runtime with apt-get when missing (as test.sh does doctest).
set -euo pipefail
cd "$(dirname "$0")/.."

fuzz_targets=(trace_reader minimalloc_reader codec chain stash_plan_args facade)
steps=()
only_target=""
only_seconds=""
while [ $# -gt 0 ]; do
  case "$1" in
    asan | tsan) steps+=("$1") ;;
    fuzz)
      steps+=(fuzz)
      if [ $# -gt 1 ] && [[ " ${fuzz_targets[*]} " == *" $2 "* ]]; then
        only_target=$2
        shift
        if [ $# -gt 1 ] && [[ "$2" =~ ^[0-9]+$ ]]; then only_seconds=$2; shift; fi
      fi
      ;;
    *)
      echo "usage: $0 [asan] [tsan] [fuzz [TARGET [SECONDS]]]   (fuzz targets: ${fuzz_targets[*]})" >&2
      exit 2
      ;;
  esac
  shift
done
[ ${#steps[@]} -gt 0 ] || steps=(asan tsan fuzz)
tsan_runs=${TSAN_RUNS:-2}
fuzz_seconds=${only_seconds:-${FUZZ_SECONDS:-30}}
jobs=$(nproc)

passed=0
failed=()
# Runs "$@" as one named check, timing it; a failure is recorded, not fatal, so every check runs.
check() {
  local name=$1
  shift
  local start=$SECONDS
  echo "=== sanitize: $name"
  if "$@"; then
    passed=$((passed + 1))
    echo "=== sanitize: $name passed ($((SECONDS - start)) s)"
  else
    failed+=("$name")
    echo "=== sanitize: $name FAILED ($((SECONDS - start)) s)"
  fi
}

install_missing() {
  [ $# -gt 0 ] || return 0
  echo "installing: $*"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

build() { # preset
  cmake --preset "$1" >/dev/null && cmake --build --preset "$1" -j "$jobs"
}

asan_suite() {
  # leak checking stays on; the CUDA runtime is loaded but, with no device, never initialized.
  build asan && ctest --preset asan --no-label-summary -j "$jobs"
}

tsan_run() {
  # GCC 12's TSan maps its shadow at fixed addresses that newer kernels' mmap randomization can
  # collide with ("unexpected memory mapping"); running without ASLR avoids it.
  if setarch "$(uname -m)" -R true 2>/dev/null; then
    setarch "$(uname -m)" -R ctest --preset tsan --no-label-summary -j "$jobs"
  else
    ctest --preset tsan --no-label-summary -j "$jobs"
  fi
}

fuzz_target() { # name
  # Absolute paths: stash_plan_args runs in an empty directory of its own.
  local name=$1 root=$PWD
  local bin=$root/build/fuzz/tests/fuzz/${name}_fuzz src=$root/tests/fuzz
  local work=$root/build/fuzz/corpus/$name artifacts=$root/build/fuzz/artifacts/$name/
  local dirs=("$src/corpus/$name")
  [ -d "$src/regressions/$name" ] && dirs+=("$src/regressions/$name")
  local dict=()
  [ -f "$src/dict/$name.dict" ] && dict=(-dict="$src/dict/$name.dict")
  local log=$root/build/fuzz/$name.log
  mkdir -p "$work" "$artifacts"
  # Seeds and regressions first, each once; then fuzzing from them into the build tree's corpus
  # (new inputs are written to the first directory, so the committed corpus stays as it is).
  # Stack-use-after-return detection on (clang's default builds it in, off at run time): CI's
  # ASan run of stash_tests goes without it for time (tests/CMakeLists.txt), the fuzz inputs not.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_stack_use_after_return=1}
  if ! "$bin" -runs=0 -timeout=1 "${dirs[@]}" >"$log" 2>&1; then
    tail -n 60 "$log"
    return 1
  fi
  echo "replayed: $(grep -Eo 'INITED.*|Running [0-9]+ inputs.*' "$log" | head -n 1)"
  local status=0
  "$bin" -timeout=1 -rss_limit_mb=2048 -max_total_time="$fuzz_seconds" -print_final_stats=1 \
    -artifact_prefix="$artifacts" "${dict[@]}" "$work" "${dirs[@]}" >"$log" 2>&1 || status=$?
  if [ $status -ne 0 ]; then
    tail -n 80 "$log"
  else
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added)' "$log" || true
  fi
  return $status
}

fuzz_all() {
  local missing=()
  command -v clang++-14 >/dev/null 2>&1 || missing+=(clang-14)
  if ! command -v clang++-14 >/dev/null 2>&1 ||
    [ ! -f "$(clang++-14 --print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer-x86_64.a" ]; then
    missing+=(libclang-rt-14-dev)
  fi
  install_missing "${missing[@]}"
  local start=$SECONDS
  if build fuzz; then
    passed=$((passed + 1))
    echo "=== sanitize: fuzz build passed ($((SECONDS - start)) s)"
  else
    failed+=("fuzz build")
    return 0
  fi
  local targets=("${fuzz_targets[@]}")
  [ -z "$only_target" ] || targets=("$only_target")
  # One target per core at a time (FUZZ_JOBS; each libFuzzer process is single-threaded), reported
  # in order as each finishes.
  local par=${FUZZ_JOBS:-$jobs} pids=() names=() starts=() next=0 done_count=0
  while [ $done_count -lt ${#targets[@]} ]; do
    while [ $next -lt ${#targets[@]} ] && [ $((next - done_count)) -lt "$par" ]; do
      fuzz_target "${targets[$next]}" >"build/fuzz/${targets[$next]}.out" 2>&1 &
      pids+=($!)
      names+=("${targets[$next]}")
      starts+=($SECONDS)
      next=$((next + 1))
    done
    local name=${names[$done_count]} label="fuzz ${names[$done_count]} (${fuzz_seconds} s)"
    echo "=== sanitize: $label"
    if wait "${pids[$done_count]}"; then
      cat "build/fuzz/$name.out"
      passed=$((passed + 1))
      echo "=== sanitize: $label passed ($((SECONDS - starts[done_count])) s)"
    else
      cat "build/fuzz/$name.out"
      failed+=("$label")
      echo "=== sanitize: $label FAILED ($((SECONDS - starts[done_count])) s)"
    fi
    done_count=$((done_count + 1))
  done
}

for step in "${steps[@]}"; do
  case "$step" in
    asan) check "asan suite" asan_suite ;;
    tsan)
      start=$SECONDS
      if build tsan; then
        echo "=== sanitize: tsan build ($((SECONDS - start)) s)"
        for i in $(seq 1 "$tsan_runs"); do check "tsan run $i of $tsan_runs" tsan_run; done
      else
        failed+=("tsan build")
      fi
      ;;
    fuzz) fuzz_all ;;
  esac
done

total=$((passed + ${#failed[@]}))
for f in "${failed[@]}"; do echo "sanitize: FAILED: $f"; done
echo "$((total == 0 ? 100 : 100 * passed / total))% tests passed, ${#failed[@]} tests failed out of $total"
[ ${#failed[@]} -eq 0 ]
