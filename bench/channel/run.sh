#!/usr/bin/env bash
# On a GPU machine: the VRAM channel probe and its analysis (docs/channel_probe.md), everything
# written under OUT.
#   bash bench/channel/run.sh OUT            full probe (about 90 s on an H100, stopped at 200 s)
#   bash bench/channel/run.sh OUT --quick    quick probe (about 20 s, stopped at 90 s)
#   bash bench/channel/run.sh OUT --sanitize compute-sanitizer memcheck on the smoke mode only
# OUT gets device.txt (nvidia-smi before and after), raw.json (every timing), probe.log, and from
# concord_channel_analyze verdict.json and summary.md. Uses the bundle of scripts/gpu_build.sh
# (.gpu/bin, .gpu/lib); BIN=DIR takes the binaries from DIR instead, SEED=S changes every random
# choice. A probe stopped by its time limit leaves the experiments it finished in raw.json, and the
# analysis runs on those.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
if [ $# -lt 1 ]; then
  echo "usage: bash bench/channel/run.sh OUT [--quick | --sanitize]" >&2
  exit 2
fi
out=$1
mode=full
limit=200
case "${2:-}" in
  "") ;;
  --quick) mode=quick; limit=90 ;;
  --sanitize) mode=smoke; limit=300 ;;
  *) echo "run.sh: unknown option '$2' (--quick or --sanitize)" >&2; exit 2 ;;
esac
bin=${BIN:-.gpu/bin}
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out"
query=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu
{
  date -u
  echo "bundle commit: $(cat .gpu/COMMIT 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=$query --format=csv
} >"$out/device.txt" 2>&1

if [ "$mode" = smoke ]; then
  timeout "$limit" compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$bin/concord_channel_probe" --mode smoke --out "$out/raw-smoke.json" >"$out/memcheck.log" 2>&1
  rc=$?
  tail -n 20 "$out/memcheck.log"
  echo "memcheck rc=$rc" | tee -a "$out/device.txt"
  exit $rc
fi

t0=$SECONDS
timeout "$limit" "$bin/concord_channel_probe" --mode "$mode" --seed "${SEED:-1}" --out "$out/raw.json" 2>&1 |
  tee "$out/probe.log"
probe_rc=${PIPESTATUS[0]}
echo "probe rc=$probe_rc, $((SECONDS - t0)) s" | tee -a "$out/device.txt"
nvidia-smi --query-gpu=$query --format=csv,noheader >>"$out/device.txt" 2>&1
if [ ! -s "$out/raw.json" ]; then
  echo "run.sh: the probe wrote no raw.json" >&2
  exit 1
fi
"$bin/concord_channel_analyze" "$out/raw.json" --out-dir "$out"
analyze_rc=$?
[ "$probe_rc" -eq 0 ] && [ "$analyze_rc" -eq 0 ]
