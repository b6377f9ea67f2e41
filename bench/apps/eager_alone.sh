#!/usr/bin/env bash
# An eager PyTorch service alone, back to back: its mean service time as a plain MPS client and
# under libconcord_intercept.so with concordd (orion, the service an LC tenant), alternating,
# ROUNDS times (default 3). The leases' promise: no per-launch wait, so within a few percent.
#
#   bench/apps/eager_alone.sh OUTDIR DEVICE_SPEC MODEL:BATCH...
#
# BIN (default .gpu/bin) holds concordd, LIB (default .gpu/lib/libconcord_intercept.so) the
# library; REQUESTS (default 300) back-to-back requests per run. Writes OUTDIR/<model>-<b>-<mode>-<round>.json
# (lc_service.py --calibrate), the library's counters beside them, and OUTDIR/summary.md.
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
sock=$work/concordd.sock
"$bin/concordd" --socket "$sock" --policy orion --device-spec "$spec" >"$out/concordd.log" 2>&1 &
daemon=$!
cleanup() {
  kill -TERM "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
  echo quit | nvidia-cuda-mps-control
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
status=0
for mb in "$@"; do
  model=${mb%%:*}
  batch=${mb##*:}
  for r in $(seq "$rounds"); do
    for mode in mps concord; do
      f="$out/$model-$batch-$mode-$r.json"
      if [ "$mode" = mps ]; then
        python3 "$here/lc_service.py" --model "$model" --batch "$batch" --calibrate "$requests" --out "$f" \
          >"$f.log" 2>&1 || status=1
      else
        env LD_PRELOAD="$lib" CONCORD_SOCKET="$sock" CONCORD_CLASS=lc CONCORD_TARGET_MS=100 CONCORD_NAME="$model" \
          CONCORD_INTERCEPT_STATS="$f.stats.json" \
          python3 "$here/lc_service.py" --model "$model" --batch "$batch" --calibrate "$requests" --out "$f" \
          >"$f.log" 2>&1 || status=1
      fi
    done
  done
done
python3 - "$out" "$@" <<'PY' >"$out/summary.md" || status=1
import json, sys, pathlib, statistics
out = pathlib.Path(sys.argv[1])
print("| model | batch | MPS mean ms | Concord mean ms | Concord / MPS | per round (Concord / MPS) |")
print("|---|---:|---:|---:|---:|---|")
for mb in sys.argv[2:]:
    model, batch = mb.split(":")
    means = {}
    for mode in ("mps", "concord"):
        means[mode] = [json.load(open(f))["mean_s"] for f in sorted(out.glob(f"{model}-{batch}-{mode}-*.json"))
                       if not f.name.endswith(".stats.json")]
    m, c = statistics.mean(means["mps"]), statistics.mean(means["concord"])
    rounds = ", ".join(f"{b / a:.3f}" for a, b in zip(means["mps"], means["concord"]))
    print(f"| {model} | {batch} | {m * 1e3:.3f} | {c * 1e3:.3f} | {c / m:.3f} | {rounds} |")
PY
cat "$out/summary.md"
exit $status
