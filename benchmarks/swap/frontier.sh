#!/usr/bin/env bash
# The memory-time frontier of every swap policy on every trace in data/traces, on the pcie4_x16
# and h100_sxm presets: stash-plan --frontier's table per trace and preset, and its SVG.
# Every time is predicted by stash's cost model (include/stash/sim), not measured.
#   bash benchmarks/swap/frontier.sh [STASH_PLAN] [OUT_DIR]
# Writes OUT_DIR/swap_frontier.md and OUT_DIR/frontier/<trace>_<preset>.svg.
set -euo pipefail
cd "$(dirname "$0")/../.."
plan=${1:-build/default/examples/stash-plan}
out=${2:-benchmarks/results}
mkdir -p "$out/frontier"
md="$out/swap_frontier.md"
{
  echo "# Swap policies at the memory-time frontier"
  echo
  echo "Command: \`bash benchmarks/swap/frontier.sh $plan $out\` (stash-plan --frontier per trace"
  echo "and preset). Date: $(date -u +%Y-%m-%d). Machine: $(nproc) cores, $(uname -m), no GPU."
  echo "stash $(git rev-parse --short HEAD 2>/dev/null || echo '?')."
  echo
  echo "Every time below is **predicted** by stash's cost model with the budget enforced (an"
  echo "allocation or prefetch waits for offloads to release memory; '-' = the iteration cannot"
  echo "complete within the budget). 'swap lb' is iteration_time_lower_bound without recompute or"
  echo "wrap entries: no swap-only policy's schedule at that budget is faster; 'any lb' the same for"
  echo "any keep/swap/recompute schedule, wrap entries included (as `search` plans)."
  echo "Budgets: 100% of the peak down to the lowest bound in 5% steps, plus the swap bounds"
  echo "(activations only; any storage), the memory bound (recompute and wraps), and 1.05x each."
  echo
} > "$md"
# Summary first: the tightest fit per policy and the time at 1.05x the swap bound.
json_files=()
for hw in pcie4_x16 h100_sxm; do
  for trace in data/traces/*.trace; do
    f=/tmp/frontier_$$_$(basename "$trace" .trace)_$hw.json
    "$plan" --json --frontier --hw "$hw" --search-nodes 0 "$trace" > "$f"
    json_files+=("$f")
  done
done
{
  echo "## Summary"
  echo
  echo "Tightest budget each policy fits, as x the activations-only swap bound (below 1: the"
  echo "policy also moves parameters, gradients or temporaries; '-': fits none of the budgets), and"
  echo "the predicted iteration at 1.05x that bound."
  echo
  python3 benchmarks/swap/frontier_summary.py "${json_files[@]}"
  echo
} >> "$md"
rm -f "${json_files[@]}"
for hw in pcie4_x16 h100_sxm; do
  for trace in data/traces/*.trace; do
    name=$(basename "$trace" .trace)
    "$plan" --frontier --hw "$hw" --search-nodes 0 --svg "$out/frontier/${name}_${hw}.svg" "$trace" \
      > /tmp/frontier_$$.txt
    # keep the frontier section (from its heading to the next section)
    awk '/^  frontier /{on=1} on && /^  (picture|frontier svg)/{on=0} on' /tmp/frontier_$$.txt \
      > /tmp/frontier_section_$$.txt
    rm -f "$out/frontier/${name}_${hw}.svg"  # the iteration picture; the frontier's is kept
    {
      echo "## $name on $hw"
      echo
      echo '```'
      cat /tmp/frontier_section_$$.txt
      echo '```'
      echo
      echo "![frontier](frontier/${name}_${hw}-frontier.svg)"
      echo
    } >> "$md"
  done
done
rm -f /tmp/frontier_$$.txt /tmp/frontier_section_$$.txt
echo "wrote $md"
