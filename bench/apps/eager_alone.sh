#!/usr/bin/env bash
# An eager PyTorch service alone, back to back: its mean service time as a plain MPS client and
# under libconcord_intercept.so with concordd (orion, the service an LC tenant), in turn, ROUNDS
# times (default 3). The leases' promise: no per-launch wait, so within a few percent. Two more
# modes tell where a difference comes from: `disabled` (the library preloaded, CONCORD_DISABLE=1:
# the hooks alone) and `streams` (concordd --policy streams: a lease at normal priority, no flag).
#
#   bench/apps/eager_alone.sh OUTDIR DEVICE_SPEC MODEL:BATCH...
#
# BIN (default .gpu/bin) holds concordd, LIB (default .gpu/lib/libconcord_intercept.so) the
# library; REQUESTS (default 300) back-to-back requests per run. Writes OUTDIR/<model>-<b>-<mode>-<round>.json
# (lc_service.py --calibrate), the library's counters beside them, and OUTDIR/summary.md.
# MODES (default "mps concord disabled streams") picks the modes; PIN_CPUS (taskset's list form)
# pins every run to those CPUs, the same for every mode: unpinned, the scheduler's migrations of
# the launching thread moved one setting's mean by 30% from process to process.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 3 ] || { echo "usage: $0 OUTDIR DEVICE_SPEC MODEL:BATCH..." >&2; exit 2; }
out=$1
spec=$2
shift 2
mkdir -p "$out"
bin=${BIN:-$root/.gpu/bin}
lib=$(realpath "${LIB:-$root/.gpu/lib/libconcord_intercept.so}")
requests=${REQUESTS:-300}
rounds=${ROUNDS:-3}
work=$(mktemp -d /tmp/concord-eager-XXXXXX)
mkdir -p "$work/pipe" "$work/log"
export CUDA_MPS_PIPE_DIRECTORY=$work/pipe CUDA_MPS_LOG_DIRECTORY=$work/log
nvidia-cuda-mps-control -d || { echo "MPS did not start" >&2; exit 2; }
# A server started on one GPU (CUDA_VISIBLE_DEVICES=K) shows its clients that GPU as device 0.
[ -n "${CUDA_VISIBLE_DEVICES:-}" ] && export CUDA_VISIBLE_DEVICES=0
sock=$work/concordd.sock
"$bin/concordd" --socket "$sock" --policy orion --device-spec "$spec" >"$out/concordd.log" 2>&1 &
daemon=$!
sock_streams=$work/concordd-streams.sock
"$bin/concordd" --socket "$sock_streams" --policy streams --device-spec "$spec" >"$out/concordd-streams.log" 2>&1 &
daemon_streams=$!
cleanup() {
  kill -TERM "$daemon" "$daemon_streams" 2>/dev/null
  wait "$daemon" "$daemon_streams" 2>/dev/null
  echo quit | nvidia-cuda-mps-control
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 100); do [ -S "$sock" ] && [ -S "$sock_streams" ] && break; sleep 0.1; done
modes=${MODES:-mps concord disabled streams}
pin=()
[ -n "${PIN_CPUS:-}" ] && pin=(taskset -c "$PIN_CPUS")
status=0
for mb in "$@"; do
  model=${mb%%:*}
  batch=${mb##*:}
  for r in $(seq "$rounds"); do
    for mode in $modes; do
      f="$out/$model-$batch-$mode-$r.json"
      case $mode in
        mps) envs=() ;;
        disabled) envs=(LD_PRELOAD="$lib" CONCORD_DISABLE=1) ;;
        concord) envs=(LD_PRELOAD="$lib" CONCORD_SOCKET="$sock" CONCORD_CLASS=lc CONCORD_TARGET_MS=100 CONCORD_NAME="$model"
                       CONCORD_INTERCEPT_STATS="$f.stats.json") ;;
        streams) envs=(LD_PRELOAD="$lib" CONCORD_SOCKET="$sock_streams" CONCORD_CLASS=lc CONCORD_TARGET_MS=100 CONCORD_NAME="$model"
                       CONCORD_INTERCEPT_STATS="$f.stats.json") ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
      esac
      env "${envs[@]}" "${pin[@]}" python3 "$here/lc_service.py" --model "$model" --batch "$batch" --calibrate "$requests" --out "$f" \
        >"$f.log" 2>&1 || status=1
    done
  done
done
python3 "$here/eager_summary.py" --modes "$modes" "$out" -- "$@" >"$out/summary.md" || status=1
cat "$out/summary.md"
exit $status
