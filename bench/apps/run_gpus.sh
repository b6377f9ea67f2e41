#!/usr/bin/env bash
# bench/apps on every GPU of the machine at once: the combos (each REPEATS times) dealt out to the
# GPUs in turn, one run.py --gpu K per GPU (each with its own MPS server, daemon and work folder),
# then the tables. Each run's schemes all run on one GPU, so its comparisons never mix GPUs.
#
#   bench/apps/run_gpus.sh OUTDIR COMBO[,COMBO...] [run.py options...]
#
# GPUS (default: every GPU nvidia-smi lists) limits the GPUs used; FIRST_GPU (default 0) is the
# first of them. REPEATS=N (default 1) runs each combo N times, repeat r into OUTDIR/rep<r>, and
# summarize.py pools the repeats' folders as rounds of the same combos.
# PIN=1 (the default) pins each GPU's LC and BE processes to CPUs local to that GPU, disjoint
# across GPUs (cpu_plan.py); PIN=0 leaves them to the scheduler.
# Writes OUTDIR/tables.md and OUTDIR/summary.json; each GPU's log is OUTDIR/gpuK.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 OUTDIR COMBO[,COMBO...] [run.py options...]" >&2; exit 2; }
out=$1
combos=$2
shift 2
mkdir -p "$out"
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
first=${FIRST_GPU:-0}
repeats=${REPEATS:-1}
[ "$gpus" -ge 1 ] || { echo "run_gpus.sh: no GPU" >&2; exit 2; }
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "run_gpus.sh: REPEATS=$repeats: expected a positive count" >&2; exit 2; }
IFS=',' read -r -a list <<<"$combos"
# Work items "REPEAT COMBO", the repeats of one combo on different GPUs where there are enough.
items=()
for ((r = 0; r < repeats; r++)); do
  for c in "${list[@]}"; do items+=("$r $c"); done
done
declare -A lc_cpus be_cpus
if [ "${PIN:-1}" = 1 ]; then
  while read -r g lc be; do lc_cpus[$g]=$lc; be_cpus[$g]=$be; done < <(python3 "$here/cpu_plan.py" "$first" "$gpus")
fi
dirs=()
if [ "$repeats" -gt 1 ]; then
  for ((r = 0; r < repeats; r++)); do dirs+=("$out/rep$r"); done
else
  dirs=("$out")
fi
pids=()
for ((i = 0; i < gpus; i++)); do
  g=$((i + first))
  pin=()
  [ -n "${lc_cpus[$g]:-}" ] && pin=(--lc-cpus "${lc_cpus[$g]}" --be-cpus "${be_cpus[$g]}")
  mine=()
  for ((k = i; k < ${#items[@]}; k += gpus)); do mine+=("${items[$k]}"); done
  [ ${#mine[@]} -gt 0 ] || continue
  echo "GPU $g (${pin[*]:-unpinned}): ${mine[*]}"
  (
    rc=0
    for item in "${mine[@]}"; do
      r=${item%% *}
      c=${item#* }
      d=$out
      [ "$repeats" -gt 1 ] && d=$out/rep$r
      python3 "$here/run.py" "$d" --gpu "$g" --combos "$c" "${pin[@]}" "$@" || rc=1
    done
    exit $rc
  ) >"$out/gpu$g.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
python3 "$here/summarize.py" "${dirs[@]}" --json "$out/summary.json" >"$out/tables.md" || status=1
cat "$out/tables.md"
exit $status
