#!/usr/bin/env bash
# search on issue 22's targets table (every trace in data/traces x pcie4_x16, h100_sxm x 50%,
# 33% of the no_swap peak), two stash-plan binaries side by side: the predicted iteration (ms),
# whether it fits, and each binary's CPU time (user seconds of the whole stash-plan run: trace
# read, analysis, bounds, planning, simulation; this machine, Release build). Fails
# (exit 1) when the second binary's plan stops fitting or is slower anywhere (beyond 1e-6 ms).
# Every time is predicted by stash's cost model, not measured.
#   bash benchmarks/swap/search_targets_compare.sh BEFORE_STASH_PLAN AFTER_STASH_PLAN
# One build alone: give the same binary twice (delta 0 everywhere). Needs /usr/bin/time (`time`).
# Extra stash-plan arguments (word-split) from the environment: STASH_PLAN_ARGS for both binaries,
# BEFORE_ARGS / AFTER_ARGS for one of them. With --codec auto on both:
#   STASH_PLAN_ARGS='--codec auto' bash benchmarks/swap/search_targets_compare.sh OLD NEW
# and whether one binary's --codec auto plan is never slower than its raw plan:
#   AFTER_ARGS='--codec auto' bash benchmarks/swap/search_targets_compare.sh NEW NEW
set -euo pipefail
cd "$(dirname "$0")/../.."
before=$1
after=$2
worse=0
read -r -a common <<<"${STASH_PLAN_ARGS:-}"
read -r -a before_args <<<"${BEFORE_ARGS:-}"
read -r -a after_args <<<"${AFTER_ARGS:-}"
printf '%-28s %-10s %-4s %12s %12s %8s %8s %8s\n' trace preset pct before_ms after_ms delta before_s after_s
for pct in 50% 33%; do
  for hw in pcie4_x16 h100_sxm; do
    for trace in data/traces/*.trace; do
      row=()
      for side in before after; do
        if [ "$side" = before ]; then
          bin=$before
          extra=("${common[@]}" "${before_args[@]}")
        else
          bin=$after
          extra=("${common[@]}" "${after_args[@]}")
        fi
        ms=$(/usr/bin/time -o /tmp/search_targets_compare_$$.time -f %U "$bin" --json --budget "$pct" --hw "$hw" --search-nodes 0 --no-times --policy search \
          "${extra[@]}" "$trace" | python3 -c '
import json, sys
d = json.load(sys.stdin)
d = d[0] if isinstance(d, list) else d
p = d["policies"][0]
print("%.6f" % p["iteration_ms"] if p.get("fits") else "-")')
        row+=("$ms" "$(cat /tmp/search_targets_compare_$$.time)")
      done
      delta=$(python3 -c "
b, a = '${row[0]}', '${row[2]}'
if a == '-' and b == '-': print('both-')
elif a == '-': print('LOST')
elif b == '-': print('NEW')
else: print('%+.4f' % (float(a) - float(b)))")
      case $delta in
        LOST) worse=1 ;;
        both- | NEW) ;;
        *) python3 -c "import sys; sys.exit(0 if float('$delta') <= 1e-6 else 1)" || worse=1 ;;
      esac
      printf '%-28s %-10s %-4s %12s %12s %8s %8.2f %8.2f\n' "$(basename "$trace" .trace)" "$hw" \
        "$pct" "${row[0]}" "${row[2]}" "$delta" "${row[1]}" "${row[3]}"
    done
  done
done
rm -f /tmp/search_targets_compare_$$.time
exit $worse
