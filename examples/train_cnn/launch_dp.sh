#!/usr/bin/env bash
# Starts N ranks of train_cnn's data-parallel mode on this node, one per GPU:
#
#   examples/train_cnn/launch_dp.sh N path/to/train_cnn DATA_DIR [train_cnn options...]
#
# Rank r gets STASH_RANK=r, STASH_LOCAL_RANK=r (so GPU r), STASH_WORLD_SIZE=N, one STASH_RUN_ID
# shared by all ranks and new for every launch, and --nccl-id-file in a fresh temporary folder
# (rank 0 writes NCCL's unique id there, the others read it). The script waits for every rank; when
# one fails it stops the others (they would otherwise wait in NCCL for it forever) and exits with
# the first failing rank's status. Ctrl-C stops all ranks. Only rank 0 prints progress.
set -u

usage() {
  echo "usage: $0 N TRAIN_CNN DATA_DIR [train_cnn options...]   (N ranks on this node, one per GPU)" >&2
  exit 2
}
(( $# >= 2 )) || usage
ranks=$1
shift
[[ $ranks =~ ^[1-9][0-9]*$ ]] || { echo "launch_dp.sh: N must be a positive integer, not '$ranks'" >&2; usage; }
[[ -x $1 ]] || { echo "launch_dp.sh: '$1' is not an executable (the train_cnn binary)" >&2; exit 2; }

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/stash-dp.XXXXXX") || exit 1
pids=()

# shellcheck disable=SC2317  # called from the traps
stop_ranks() {
  for pid in "${pids[@]}"; do
    [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null
  done
}
# shellcheck disable=SC2317
cleanup() {
  stop_ranks
  rm -rf "$run_dir"
}
trap cleanup EXIT
trap 'echo "launch_dp.sh: interrupted; stopping all ranks" >&2; exit 130' INT TERM

export STASH_WORLD_SIZE=$ranks
# Unique per launch, so a stale id file can never match (see README.md, "Data parallel").
STASH_RUN_ID="$(hostname 2>/dev/null || echo host)-$$-$(date +%s%N)-$RANDOM"
export STASH_RUN_ID
for (( r = 0; r < ranks; ++r )); do
  STASH_RANK=$r STASH_LOCAL_RANK=$r "$@" --nccl-id-file "$run_dir/nccl_id" &
  pids[r]=$!
done

status=0
left=$ranks
while (( left > 0 )); do
  # wait -n: the next rank to finish, whichever it is; -p (bash 5.1+) says which.
  finished=""
  if (( BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1) )); then
    wait -n -p finished
    s=$?
  else
    wait -n
    s=$?
  fi
  if (( s == 127 )) && [[ -z $(jobs -p) ]]; then break; fi  # no rank left to wait for
  for (( r = 0; r < ranks; ++r )); do
    pid=${pids[r]}
    [[ -z $pid ]] && continue
    # Without -p: the reaped rank is the one whose process is gone (the others are running or zombies).
    if [[ $pid == "$finished" ]] || { [[ -z $finished ]] && ! kill -0 "$pid" 2>/dev/null; }; then
      pids[r]=""
      (( --left ))
      if (( s != 0 && status == 0 )); then
        status=$s
        echo "launch_dp.sh: rank $r exited with status $s; stopping the other ranks" >&2
        stop_ranks
      fi
      break
    fi
  done
done
exit "$status"
