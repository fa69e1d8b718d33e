# Sourced by recompute_frontier.sh and unseen_traces.sh: issue 22's targets as stash-plan JSON.
# targets_json STASH_PLAN PCT OUT_JSON TRACE... [-- STASH_PLAN_OPTION...]: one JSON array in
# OUT_JSON of stash-plan's --json document for each preset (pcie4_x16, h100_sxm) and TRACE at
# PCT of the trace's no_swap peak, with the options after `--` (policies, --codec).
targets_json() {
  local plan=$1 pct=$2 out=$3
  shift 3
  local traces=() options=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do traces+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  options=("$@")
  echo "[" > "$out"
  local first=1 hw trace
  for hw in pcie4_x16 h100_sxm; do
    for trace in "${traces[@]}"; do
      [ $first = 1 ] || echo "," >> "$out"
      first=0
      "$plan" --json --budget "$pct" --hw "$hw" --search-nodes 0 --no-times \
        ${options[@]+"${options[@]}"} "$trace" | sed -e '1s/^\[//' -e '$s/\]$//' >> "$out"
    done
  done
  echo "]" >> "$out"
}
