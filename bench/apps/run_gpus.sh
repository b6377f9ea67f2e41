#!/usr/bin/env bash
# bench/apps on every GPU of the machine at once: the combos dealt out to the GPUs in turn, one
# run.py --gpu K per GPU (each with its own MPS server, daemon and work folder), then the tables.
# Each combo's schemes all run on one GPU, so its comparisons never mix GPUs.
#
#   bench/apps/run_gpus.sh OUTDIR COMBO[,COMBO...] [run.py options...]
#
# GPUS (default: every GPU nvidia-smi lists) limits the GPUs used; FIRST_GPU (default 0) is the
# first of them. Writes OUTDIR/tables.md and
# OUTDIR/summary.json; each GPU's log is OUTDIR/gpuK.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 OUTDIR COMBO[,COMBO...] [run.py options...]" >&2; exit 2; }
out=$1
combos=$2
shift 2
mkdir -p "$out"
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
[ "$gpus" -ge 1 ] || { echo "run_gpus.sh: no GPU" >&2; exit 2; }
IFS=',' read -r -a list <<<"$combos"
declare -a mine
for i in "${!list[@]}"; do
  g=$((i % gpus))
  mine[$g]="${mine[$g]:+${mine[$g]},}${list[$i]}"
done
pids=()
for i in "${!mine[@]}"; do
  g=$((i + ${FIRST_GPU:-0}))
  echo "GPU $g: ${mine[$i]}"
  python3 "$here/run.py" "$out" --gpu "$g" --combos "${mine[$i]}" "$@" >"$out/gpu$g.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
python3 "$here/summarize.py" "$out" --json "$out/summary.json" >"$out/tables.md" || status=1
cat "$out/tables.md"
exit $status
