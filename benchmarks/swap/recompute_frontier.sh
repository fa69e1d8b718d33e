#!/usr/bin/env bash
# Issue 22: keep / swap / recompute. On every trace in data/traces, on pcie4_x16 and h100_sxm:
#  - the targets table: at 50% and 33% of the no_swap peak, search, checkpoint, dtr, search_swap
#    and vdnn_all, each against no_swap with room for everything;
#  - stash-plan --frontier's table and SVG for the same policies (budgets down to 33% of the peak).
# Every time is predicted by stash's cost model (include/stash/sim), not measured.
#   bash benchmarks/swap/recompute_frontier.sh [STASH_PLAN] [OUT_DIR]
# Writes OUT_DIR/recompute_frontier.md and OUT_DIR/recompute_frontier/<trace>_<preset>-frontier.svg.
# With CODEC_AUTO=1: the targets table only, every policy planned with --codec auto (per-storage
# lossless encodings), in OUT_DIR/recompute_targets_codec_auto.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/swap/targets_json.sh
plan=${1:-build/default/examples/stash-plan}
out=${2:-benchmarks/results}
codec_auto=${CODEC_AUTO:-0}
extra=()
mkdir -p "$out/recompute_frontier"
md="$out/recompute_frontier.md"
if [ "$codec_auto" = 1 ]; then
  extra=(--codec auto)
  md="$out/recompute_targets_codec_auto.md"
fi
policies=(--policy no_swap --policy vdnn_all --policy search_swap --policy checkpoint --policy dtr
  --policy search)
{
  if [ "$codec_auto" = 1 ]; then
    echo "# Keep, swap or recompute with per-storage encodings (--codec auto): the targets"
    echo
    echo "Every policy planned with \`--codec auto\`: each swapped storage crosses with the lossless"
    echo "encoding choose_encoding allows (zvc, bitmask, two_value, ...), priced by the cost model."
    echo "recompute_frontier.md has the same table without encodings (how the targets are measured)."
    echo "The time bound prices each storage's gap at the best encoding a schedule may give it there"
    echo "(choose_encoding's or raw; time_bound_options::encodings, swap/swap_bounds.hpp): its link"
    echo "seconds per byte, its codec kernel's per byte included (launch and latency left out), the"
    echo "links carrying the fewest seconds per byte first. 'unreachable (time bound)' below is proven"
    echo "for every keep / swap (+ allowed encoding) / recompute / wrap schedule under the cost model;"
    echo "'no' says only that search missed it, not that it is reachable."
    echo
    echo "Command: \`CODEC_AUTO=1 bash benchmarks/swap/recompute_frontier.sh $plan $out\`. Date: $(date -u +%Y-%m-%d)."
  else
    echo "# Keep, swap or recompute: search against checkpoint, dtr and the swap-only policies"
    echo
    echo "Command: \`bash benchmarks/swap/recompute_frontier.sh $plan $out\`. Date: $(date -u +%Y-%m-%d)."
  fi
  echo "Machine: $(nproc) cores, $(uname -m), no GPU. stash $(git rev-parse --short HEAD 2>/dev/null || echo '?')."
  echo "Load (uptime load average, 1/5/15 min) at start: $(uptime | sed 's/.*load average: //') (the"
  echo "predictions do not depend on it, planning times do)."
  echo
  echo "Every time below is **predicted** by stash's cost model with the budget enforced, not"
  echo "measured on a GPU. 'no_swap ms' is the iteration with room for everything; a policy's cell"
  echo "is its predicted iteration and the slowdown over that; '-' = it does not fit the budget."
  echo "Issue 22's targets: search within +10% of no_swap at 50% of the peak, +30% at 33%."
  echo
  echo "## Targets"
  echo
} > "$md"
specs=()
for pct in 50% 33%; do
  f=/tmp/recompute_targets_$$_${pct%\%}.json
  targets_json "$plan" "$pct" "$f" data/traces/*.trace -- "${policies[@]}" ${extra[@]+"${extra[@]}"}
  specs+=("$pct=$f")
done
python3 benchmarks/swap/recompute_targets.py "${specs[@]}" >> "$md"
for s in "${specs[@]}"; do rm -f "${s#*=}"; done
if [ "$codec_auto" = 1 ]; then
  echo "wrote $md"
  exit 0
fi
for hw in pcie4_x16 h100_sxm; do
  for trace in data/traces/*.trace; do
    name=$(basename "$trace" .trace)
    "$plan" --frontier --hw "$hw" --search-nodes 0 "${policies[@]}" \
      --svg "$out/recompute_frontier/${name}_${hw}.svg" "$trace" > /tmp/recompute_frontier_$$.txt
    awk '/^  frontier /{on=1} on && /^  (picture|frontier svg)/{on=0} on' \
      /tmp/recompute_frontier_$$.txt > /tmp/recompute_frontier_section_$$.txt
    rm -f "$out/recompute_frontier/${name}_${hw}.svg"  # the iteration picture; the frontier's is kept
    {
      echo "## $name on $hw"
      echo
      echo '```'
      cat /tmp/recompute_frontier_section_$$.txt
      echo '```'
      echo
      echo "![frontier](recompute_frontier/${name}_${hw}-frontier.svg)"
      echo
    } >> "$md"
  done
done
rm -f /tmp/recompute_frontier_$$.txt /tmp/recompute_frontier_section_$$.txt
echo "wrote $md"
