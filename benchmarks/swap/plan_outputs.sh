#!/usr/bin/env bash
# The swap planners' outputs on every recorded trace, for comparing two builds byte for byte
# (issue 24, item 4: a faster planner must return the very schedules the old one did):
#
#   benchmarks/swap/plan_outputs.sh STASH_PLAN OUT_DIR
#   diff -r OUT_BEFORE OUT_AFTER   # no output: the same plans
#
# Per trace and hardware preset (pcie3_x16, pcie4_x16): `stash-plan --json` of search_swap and
# the four AutoSwap scores at 70%, 50% and 35% of the peak, and `--frontier` of search_swap and
# auto_swap. Times are left out (--no-times) and the offset planners' search is off
# (--search-nodes 0), so the same plans print the same bytes.
set -euo pipefail
plan=${1:?usage: plan_outputs.sh STASH_PLAN OUT_DIR}
out=${2:?usage: plan_outputs.sh STASH_PLAN OUT_DIR}
plan=$(realpath "$plan")
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/../.."  # traces named data/traces/..., the same in any checkout
traces=$(ls data/traces/*.trace)
common=(--json --no-times --search-nodes 0)
policies=(--policy search_swap --policy auto_swap --policy auto_swap_doa --policy auto_swap_aoa
  --policy auto_swap_wdoa)
for hw in pcie3_x16 pcie4_x16; do
  for t in $traces; do
    name=$(basename "$t" .trace)
    for pct in 70 50 35; do
      "$plan" "${common[@]}" --hw "$hw" "${policies[@]}" --budget "$pct%" "$t" \
        >"$out/$name.$hw.$pct.json"
    done
    "$plan" "${common[@]}" --hw "$hw" --policy search_swap --policy auto_swap --frontier "$t" \
      >"$out/$name.$hw.frontier.json"
  done
done
