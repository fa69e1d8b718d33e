#!/usr/bin/env bash
# The GPU check: one command for the first person who runs stash on a GPU. It builds the `test`
# preset, runs every gpu-labelled test, the same tests under compute-sanitizer (memcheck,
# racecheck, synccheck, initcheck), bench_offload, bench_codec_throughput and train_cnn --check
# (lossless zvc and lossy fp16), and writes one markdown report (device, driver, date, commit, each
# command, pass/fail, time and output) ready to commit under benchmarks/results/.
#
#   scripts/gpu-check.sh [--fashion-mnist DIR] [--report FILE] [--build-dir DIR] [--no-build]
#                        [--jobs N] [--without-train-cnn]
#   scripts/gpu-check.sh --dry-run [--build-dir DIR] [--report FILE] [--without-train-cnn]
#
# --dry-run (CI, no GPU): builds nothing and checks that the wiring holds: every program exists and
# accepts the very arguments of the GPU run. Each runs with them and must exit as a program
# without a device does after parsing its arguments (0, or 77 "skipped"); a usage error (2) or a
# missing program fails. train_cnn reads a small generated IDX dataset; compute-sanitizer is
# checked when installed (its tools are listed by name) and otherwise reported as not installed.
# The dry-run report goes to the build folder, not to benchmarks/results/.
#
# Exit status: 0 when every step passed, 1 otherwise, 2 for a usage error.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)

dry_run=0
build=1
build_dir="$root/build/test"
report=""
jobs=$(nproc 2>/dev/null || echo 2)
fashion_mnist="/usr/share/datasets/fashion-mnist"
with_train_cnn=1
usage() {
  sed -n '8,10p' "$0" | sed 's/^# *//' >&2
  exit 2
}
while (($# > 0)); do
  case $1 in
    --dry-run) dry_run=1 ;;
    --no-build) build=0 ;;
    --without-train-cnn) with_train_cnn=0 ;;
    --build-dir) (($# > 1)) || usage; build_dir=$2; shift ;;
    --report) (($# > 1)) || usage; report=$2; shift ;;
    --jobs) (($# > 1)) || usage; jobs=$2; shift ;;
    --fashion-mnist) (($# > 1)) || usage; fashion_mnist=$2; shift ;;
    *) echo "gpu-check.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
((dry_run)) && build=0

tests_bin="$build_dir/tests/stash_gpu_tests"
bench_offload="$build_dir/benchmarks/bench_offload"
bench_codec="$build_dir/benchmarks/codec/bench_codec_throughput"
train_cnn="$build_dir/examples/train_cnn/train_cnn"
work=$(mktemp -d "${TMPDIR:-/tmp}/stash-gpu-check.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

# --- the device and the machine ----------------------------------------------------------------
device="no GPU"
driver="none"
if command -v nvidia-smi >/dev/null 2>&1 &&
  smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null) &&
  [[ -n $smi ]]; then
  device=$(head -n 1 <<<"$smi" | cut -d, -f1,3,4 | sed 's/, */, /g')
  driver=$(head -n 1 <<<"$smi" | cut -d, -f2 | tr -d ' ')
fi
date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
if [[ -z $report ]]; then
  if ((dry_run)); then
    report="$build_dir/gpu_check_dry_run.md"
  else
    slug=$(cut -d, -f1 <<<"$device" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '_' | sed 's/^_*//; s/_*$//')
    report="$root/benchmarks/results/gpu_check_${slug:-unknown}_$(date -u +%Y%m%d).md"
  fi
fi

# --- steps ---------------------------------------------------------------------------------------
names=() commands=() results=() times=() logs=()
failures=0

# run_step NAME CMD...: runs CMD, keeps its output. Passes on exit 0; in a dry run also on 77 (the
# programs' "no GPU" status) and, for the GPU-only programs that exit 0 without one, on 0.
run_step() {
  local name=$1
  shift
  local log="$work/step${#names[@]}.log" start end status result
  printf '%s\n' "== $name: $*" >&2
  start=$(date +%s)
  "$@" >"$log" 2>&1
  status=$?
  end=$(date +%s)
  if ((status == 0)) || ((dry_run && status == 77)); then
    result="pass"
  else
    result="FAIL (exit $status)"
    failures=$((failures + 1))
    tail -n 20 "$log" >&2
  fi
  names+=("$name") commands+=("$*") results+=("$result") times+=("$((end - start)) s") logs+=("$log")
}

# fail_step NAME WHY: a step that could not even start.
fail_step() {
  local log="$work/step${#names[@]}.log"
  printf '%s\n' "$2" >"$log"
  printf '%s\n' "== $1: FAIL: $2" >&2
  names+=("$1") commands+=("-") results+=("FAIL") times+=("-") logs+=("$log")
  failures=$((failures + 1))
}

# need PROGRAM: whether it exists (else a failed step naming it).
need() {
  [[ -x $1 ]] && return 0
  fail_step "$(basename "$1")" "$1 is missing: build the test preset (cmake --build --preset test)"
  return 1
}

# A few IDX files in Fashion-MNIST's layout, so that the dry run's train_cnn reads a dataset.
make_tiny_dataset() {
  python3 - "$1" <<'EOF'
import struct, sys, os
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
for prefix, n in (("train", 512), ("t10k", 128)):
    with open(os.path.join(d, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes((i * 7) % 256 for i in range(n * 784)))
    with open(os.path.join(d, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
EOF
}

if ((!dry_run)) && [[ $device == "no GPU" ]]; then
  # The programs would report "nothing measured" and exit 0: without a device this is no check.
  fail_step "device" "nvidia-smi finds no GPU: this check needs one (--dry-run checks the wiring only)"
fi
if ((build)); then
  # The test preset builds the benchmarks at -O0 (a compile check); the ones run here report
  # figures, so they are built optimized.
  run_step "configure" cmake --preset test -DSTASH_BENCHMARKS_COMPILE_CHECK=OFF
  run_step "build" cmake --build --preset test -j "$jobs"
fi

# Every gpu-labelled test (all of stash_gpu_tests); --require-gpu: no device is a failure here.
# Under compute-sanitizer, a failing CUDA API call is a reported error (--report-api-errors
# explicit, the default) and so fails the step: the test cases that make a call fail on purpose
# (a cudaMalloc beyond the device's memory) are in the doctest suite `cuda_api_errors`. The four
# tools run every other case with API errors reported; that suite runs once more, alone, under
# memcheck with --report-api-errors no (its kernels and copies are still checked).
api_error_suite=cuda_api_errors
if need "$tests_bin"; then
  run_step "gpu tests" "$tests_bin" --require-gpu
  if command -v compute-sanitizer >/dev/null 2>&1; then
    for tool in memcheck racecheck synccheck initcheck; do
      extra=()
      [[ $tool == memcheck ]] && extra=(--leak-check full)
      if ((dry_run)); then
        # Without a device the tool cannot run a program: check that it knows the tool.
        run_step "compute-sanitizer $tool" bash -c \
          "compute-sanitizer --help | grep -qw $tool"
      else
        run_step "compute-sanitizer $tool" compute-sanitizer --tool "$tool" "${extra[@]}" \
          --error-exitcode 1 "$tests_bin" --require-gpu --test-suite-exclude="$api_error_suite"
      fi
    done
    if ((dry_run)); then
      run_step "compute-sanitizer memcheck ($api_error_suite)" bash -c \
        "compute-sanitizer --help | grep -q -- --report-api-errors"
    else
      run_step "compute-sanitizer memcheck ($api_error_suite)" compute-sanitizer --tool memcheck \
        --report-api-errors no --leak-check full --error-exitcode 1 "$tests_bin" --require-gpu \
        --test-suite="$api_error_suite"
    fi
  elif ((dry_run)); then
    printf '%s\n' "== compute-sanitizer: not installed here (not checked in a dry run)" >&2
    names+=("compute-sanitizer") commands+=("-") results+=("not installed (dry run)")
    times+=("-") logs+=("/dev/null")
  else
    fail_step "compute-sanitizer" \
      "compute-sanitizer not found: it ships with the CUDA toolkit (cuda-sanitizer package); put its bin/ on PATH"
  fi
fi

# RMM on both sides (tests/rmm): built only where RMM was found (STASH_WITH_RMM), so optional here.
rmm_tests_bin="$build_dir/tests/stash_rmm_gpu_tests"
if [[ -x $rmm_tests_bin ]]; then
  run_step "gpu tests (RMM)" "$rmm_tests_bin" --require-gpu
else
  printf '%s
' "== gpu tests (RMM): $rmm_tests_bin not built (no RMM found at configure time)" >&2
fi

need "$bench_offload" && run_step "bench_offload" "$bench_offload"
need "$bench_codec" && run_step "bench_codec_throughput" "$bench_codec"

if ((with_train_cnn)) && need "$train_cnn"; then
  data="$fashion_mnist"
  if ((dry_run)); then
    data="$work/fashion-mnist"
    make_tiny_dataset "$data"
  fi
  run_step "train_cnn --check (zvc, lossless)" "$train_cnn" "$data" --device cuda --check --policy vdnn_all \
    --codec zvc --check-steps 100 --no-progress
  run_step "train_cnn --check (fp16, lossy)" "$train_cnn" "$data" --device cuda --check --policy vdnn_all \
    --codec fp16 --accuracy-margin 1.0 --no-progress
fi

# --- the report ----------------------------------------------------------------------------------
{
  if ((dry_run)); then
    echo "# GPU check (dry run: wiring only, nothing measured)"
  else
    echo "# GPU check: $device"
  fi
  echo
  echo "- date: $date_utc"
  echo "- device: $device; driver $driver"
  echo "- toolkit: $(nvcc --version 2>/dev/null | grep -o 'release [^,]*' || echo 'nvcc not found')"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "- host: $(uname -srm), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
  echo "- run: scripts/gpu-check.sh$( ((dry_run)) && echo ' --dry-run')"
  echo "- result: $((${#names[@]} - failures)) of ${#names[@]} steps passed"
  echo
  echo "| step | result | time |"
  echo "|---|---|---:|"
  for i in "${!names[@]}"; do echo "| ${names[$i]} | ${results[$i]} | ${times[$i]} |"; done
  for i in "${!names[@]}"; do
    echo
    echo "## ${names[$i]}: ${results[$i]}"
    echo
    echo '```'
    echo "\$ ${commands[$i]}"
    # Builds and sanitizers print a lot: their end says what matters; benchmarks are kept whole.
    tail -n 80 "${logs[$i]}"
    echo '```'
  done
} >"$report"
echo "gpu-check.sh: $((${#names[@]} - failures)) of ${#names[@]} steps passed; report: $report" >&2
((failures == 0))
