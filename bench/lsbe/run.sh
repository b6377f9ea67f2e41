#!/usr/bin/env bash
# bench/lsbe on a GPU machine: `concord_lsbe_bench run` over the mixes (every scheme in one
# process), then `concord_lsbe_bench mps` (the LC and BE tenants as MPS peers; it starts and stops
# its own MPS daemon, so it goes last), then the tables. Everything goes into OUTDIR, one folder to
# tar: lsbe.json, lsbe_mps.json, tables.md, a log per step, summary.txt.
#
# Environment:
#   BIN      the bundle's binaries (default .gpu/bin, from scripts/gpu_build.sh; its ../lib is added
#            to LD_LIBRARY_PATH); BUILD=DIR instead takes DIR/bench/lsbe/concord_lsbe_bench
#   BACKEND  cuda (default) or sim (the simulator; no MPS step)
#   QUICK=1  100 LC requests per run and MPS at load 0.5 only (the default: the mixes' 200, all loads)
#   MIXES    mix specs (default bench/lsbe/mixes/*.yaml)
#   SCHEMES  comma-separated (default sgdrc,orion,priority-streams,streams,static-partition,serial;
#            those without a policy in the build are left out and named in the results)
#   LOADS    comma-separated LC loads (default 0.3,0.5,0.7)
#   STEPS    "run mps" (default), "run" or "mps" (the MPS step reads OUTDIR/lsbe.json: the steps may
#            go in two calls);  BE_SHARE=X  the third MPS variant's BE share when sgdrc did not run
#   RUN_S, MPS_S  the steps' time limits in seconds (default 330 and 240: both within 10 minutes;
#            each step writes its results after every mix, so a step cut short keeps those)
#   ARGS     more options for `run` (e.g. "--profiles DB --target-factor 2")
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out=${1:?usage: bench/lsbe/run.sh OUTDIR}
mkdir -p "$out"
source scripts/bench_env.sh
bench_env lsbe concord_lsbe_bench "$out"
backend=${BACKEND:-cuda}
status=0
STEP_TAIL=15
source scripts/step.sh

read -r -a mixes <<<"${MIXES:-$(echo bench/lsbe/mixes/*.yaml)}"
run_args=(--backend "$backend" --skip-unknown-schemes --out "$out/lsbe.json"
  --schemes "${SCHEMES:-sgdrc,orion,priority-streams,streams,static-partition,serial}"
  --loads "${LOADS:-0.3,0.5,0.7}")
mps_args=(--from "$out/lsbe.json" --backend "$backend" --work-dir /tmp/concord-lsbe-mps --out "$out/lsbe_mps.json")
if [ "${QUICK:-0}" = 1 ]; then
  run_args+=(--lc-requests 100)
  mps_args+=(--loads 0.5)
fi
[ -n "${BE_SHARE:-}" ] && mps_args+=(--be-share "$BE_SHARE")
# shellcheck disable=SC2206
[ -n "${ARGS:-}" ] && run_args+=(${ARGS})
steps=" ${STEPS:-run mps} "
[[ "$steps" == *" run "* ]] && step lsbe_run "${RUN_S:-330}" "$bench" run "${mixes[@]}" "${run_args[@]}"
if [ "$backend" = cuda ] && [[ "$steps" == *" mps "* ]] && [ -f "$out/lsbe.json" ]; then
  # Should the step be killed, the daemon it started is told to quit here.
  trap 'echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/concord-lsbe-mps/mps-pipe nvidia-cuda-mps-control >/dev/null 2>&1 || true' EXIT
  step lsbe_mps "${MPS_S:-240}" "$bench" mps "${mps_args[@]}"
fi
if [ -f "$out/lsbe.json" ] && command -v python3 >/dev/null 2>&1; then
  extra=()
  [ -f "$out/lsbe_mps.json" ] && extra=("$out/lsbe_mps.json")
  python3 bench/lsbe/summarize.py "$out/lsbe.json" "${extra[@]}" --out "$out/tables.md" 2>>"$out/summary.txt" || status=1
fi
exit $status
