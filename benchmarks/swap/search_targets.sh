#!/usr/bin/env bash
# search on every trace in data/traces x {pcie4_x16, h100_sxm} x {50%, 33%} of the peak: one
# line per point (trace, preset, budget, fits, predicted iteration ms, slowdown over no_swap,
# planning CPU seconds: /usr/bin/time's user time, which grows with the machine's load). Every
# time is the cost model's prediction. Compare two builds with `diff` of their outputs less the
# cpu= field (it varies run to run): diff <(sed 's/ cpu=.*//' A) <(sed 's/ cpu=.*//' B).
# Needs /usr/bin/time (Debian package `time`).
# Usage: bash benchmarks/swap/search_targets.sh [stash-plan] [traces dir] [budgets...]
set -euo pipefail
bin=${1:-build/default/examples/stash-plan}
dir=${2:-data/traces}
shift $(( $# > 2 ? 2 : $# ))
budgets=("$@")
[ ${#budgets[@]} -eq 0 ] && budgets=(50% 33%)
for b in "${budgets[@]}"; do
  for hw in pcie4_x16 h100_sxm; do
    for t in "$dir"/*.trace; do
      out=$( { /usr/bin/time -f 'cpu %U' "$bin" --budget "$b" --hw "$hw" --search-nodes 0 \
        --no-times --policy search "$t"; } 2>&1)
      row=$(grep -E '^ +search +(yes|no) ' <<<"$out" | head -1 | awk '$2 == "yes" {print $2, $(NF-4), $(NF-2)} $2 != "yes" {print $2, "-", "-"}')
      cpu=$(grep -E '^cpu ' <<<"$out" | awk '{print $2}')
      printf '%-26s %-10s %-5s %s cpu=%ss\n' "$(basename "$t" .trace)" "$hw" "$b" "$row" "$cpu"
    done
  done
done
