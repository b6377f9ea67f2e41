#!/usr/bin/env bash
# eager_alone.sh on every GPU of the machine at once, each pinned to CPUs local to its GPU
# (cpu_plan.py's LC CPUs; PIN=0 leaves them unpinned), then one table over all the runs
# (eager_summary.py): GPUS x ROUNDS runs per model and mode.
#
#   bench/apps/eager_gpus.sh OUTDIR DEVICE_SPEC MODEL:BATCH...
#
# GPUS, FIRST_GPU as run_gpus.sh; MODES, ROUNDS, REQUESTS, BIN, LIB as eager_alone.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 3 ] || { echo "usage: $0 OUTDIR DEVICE_SPEC MODEL:BATCH..." >&2; exit 2; }
out=$1
spec=$2
shift 2
mkdir -p "$out"
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
first=${FIRST_GPU:-0}
[ "$gpus" -ge 1 ] || { echo "eager_gpus.sh: no GPU" >&2; exit 2; }
declare -A cpus
if [ "${PIN:-1}" = 1 ]; then
  while read -r g lc _; do cpus[$g]=$lc; done < <(python3 "$here/cpu_plan.py" "$first" "$gpus")
fi
pids=()
dirs=()
for ((i = 0; i < gpus; i++)); do
  g=$((i + first))
  dirs+=("$out/gpu$g")
  echo "GPU $g: CPUs ${cpus[$g]:-unpinned}"
  CUDA_VISIBLE_DEVICES=$g PIN_CPUS=${cpus[$g]:-} bash "$here/eager_alone.sh" "$out/gpu$g" "$spec" "$@" >"$out/gpu$g.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
python3 "$here/eager_summary.py" --modes "${MODES:-mps concord disabled streams}" "${dirs[@]}" -- "$@" >"$out/summary.md" || status=1
cat "$out/summary.md"
exit $status
