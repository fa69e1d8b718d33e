#!/usr/bin/env bash
# A compiler launcher that logs each command's CPU time (user + system, children included), for
# measuring what a build costs independently of the machine's load (CONTRIBUTING.md "CI"):
#   STASH_TIME_LOG=$PWD/tu-times.log cmake --preset test -B build/measure \
#     -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/scripts/time-compile.sh \
#     -DCMAKE_CUDA_COMPILER_LAUNCHER=$PWD/scripts/time-compile.sh
#   STASH_TIME_LOG=$PWD/tu-times.log cmake --build build/measure -j1
# One line per command: user+system CPU seconds, wall seconds, then the output file (-o).
log=${STASH_TIME_LOG:-/tmp/stash-tu-times.log}
out="?"
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  prev=$a
done
exec /usr/bin/time -a -o "$log" -f "%U %S %e $out" "$@"
