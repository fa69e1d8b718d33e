#!/usr/bin/env bash
# Issue 22's targets on traces that are not in data/traces: models recorded with
# examples/pytorch_trace/record_trace.py (PyTorch on the CPU), planned as a new user would, on
# pcie4_x16 and h100_sxm at 50% and 33% of each trace's no_swap peak, without encodings and with
# --codec auto. The table is recompute_targets.py's. Every time is predicted by stash's cost model
# (include/stash/sim), not measured.
#   bash benchmarks/swap/unseen_traces.sh STASH_PLAN TRACE_DIR OUT.md
# To record the traces (Debian: python3-torch python3-torchvision), e.g.:
#   /usr/bin/python3 examples/pytorch_trace/record_trace.py gpt --batch 8 --threads 1 --out DIR/gpt_b8.trace
set -euo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/swap/targets_json.sh
plan=$1
dir=$2
md=$3
policies=(--policy no_swap --policy vdnn_all --policy search_swap --policy checkpoint --policy dtr
  --policy search)
{
  echo "# Keep, swap or recompute on traces recorded outside data/traces"
  echo
  echo "Command: \`bash benchmarks/swap/unseen_traces.sh $plan $dir $md\`. Date: $(date -u +%Y-%m-%d)."
  echo "Machine: $(nproc) cores, $(uname -m), no GPU. stash $(git rev-parse --short HEAD 2>/dev/null || echo '?')."
  echo "Traces: $(cd "$dir" && ls ./*.trace | sed 's|^\./||' | tr '\n' ' ')(recorded with"
  echo "examples/pytorch_trace/record_trace.py; their headers name the PyTorch version)."
  echo
  echo "Every time below is **predicted** by stash's cost model with the budget enforced, not"
  echo "measured on a GPU; '-' = the policy does not fit the budget."
} > "$md"
for codec in raw auto; do
  extra=()
  [ "$codec" = auto ] && extra=(--codec auto)
  specs=()
  for pct in 50% 33%; do
    f=$(mktemp)
    targets_json "$plan" "$pct" "$f" "$dir"/*.trace -- "${policies[@]}" ${extra[@]+"${extra[@]}"}
    specs+=("$pct=$f")
  done
  {
    echo
    if [ "$codec" = auto ]; then
      echo "## With per-storage lossless encodings (--codec auto)"
    else
      echo "## Without encodings"
    fi
    echo
    python3 benchmarks/swap/recompute_targets.py "${specs[@]}"
  } >> "$md"
  for s in "${specs[@]}"; do rm -f "${s#*=}"; done
done
echo "wrote $md"
