#!/usr/bin/env bash
# bench/aker on a GPU machine (or the simulator): `concord_aker_bench pairs` (fused versions of the
# tensor-core + CUDA-core and compute + memory pairs at ratios a:b, and their knees), then
# `concord_aker_bench run` over the mixes (every scheme in one process, QoS targets of 1.5x and
# 1.15x the LC query's solo time), then the tables. Everything goes into OUTDIR, one folder to
# tar: aker_pairs.json, aker.json, tables.md, a log per step, summary.txt, device.txt.
#
# Environment:
#   BIN      the bundle's binaries (default .gpu/bin, from scripts/gpu_build.sh; its ../lib is added
#            to LD_LIBRARY_PATH); BUILD=DIR instead takes DIR/bench/aker/concord_aker_bench
#   BACKEND  cuda (default) or sim (the simulator)
#   QUICK=1  100 LC requests per run, load 0.3 only, one repetition per pair point
#   MIXES    mix specs (default bench/aker/mixes/*.yaml)
#   SCHEMES  comma-separated (default aker,baymax,tacker,streams,sgdrc,static-partition; those
#            without a policy in the build are left out and named in the results and tables)
#   LOADS    comma-separated LC loads (default 0.3,0.5);  TARGETS  QoS factors (default 1.5,1.15)
#   TARGET_BASIS  what the factors multiply: solo (default, Aker's), alone-p99, or solo,alone-p99
#   PAIRS, RATIOS  comma-separated, for `pairs` (default: the bench's own list; 1:1,1:2,2:1,1:3,3:1,1:4,4:1)
#   VARIANTS chosen (default: per ratio the variants that leave several fused blocks per SM) or default
#   STEPS    "pairs run" (default), "pairs" or "run"
#   PAIRS_S, RUN_S  the steps' time limits in seconds (default 200 and 390: both within 10 minutes;
#            each step writes its results after every pair or mix, so a step cut short keeps those)
#   ARGS     more options for `run` (e.g. "--profiles DB")
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out=${1:?usage: bench/aker/run.sh OUTDIR}
mkdir -p "$out"
source scripts/bench_env.sh
bench_env aker concord_aker_bench "$out"
backend=${BACKEND:-cuda}
status=0
STEP_TAIL=15
source scripts/step.sh

read -r -a mixes <<<"${MIXES:-$(echo bench/aker/mixes/*.yaml)}"
pairs_args=(--backend "$backend" --out "$out/aker_pairs.json")
[ -n "${PAIRS:-}" ] && pairs_args+=(--pairs "$PAIRS")
[ -n "${RATIOS:-}" ] && pairs_args+=(--ratios "$RATIOS")
[ -n "${VARIANTS:-}" ] && pairs_args+=(--variants "$VARIANTS")
run_args=(--backend "$backend" --skip-unknown-schemes --out "$out/aker.json"
  --schemes "${SCHEMES:-aker,baymax,tacker,streams,sgdrc,static-partition}"
  --loads "${LOADS:-0.3,0.5}" --target-factors "${TARGETS:-1.5,1.15}" --target-basis "${TARGET_BASIS:-solo}")
if [ "${QUICK:-0}" = 1 ]; then
  run_args+=(--lc-requests 100 --loads 0.3)
  pairs_args+=(--reps 1)
fi
# shellcheck disable=SC2206
[ -n "${ARGS:-}" ] && run_args+=(${ARGS})
steps=" ${STEPS:-pairs run} "
[[ "$steps" == *" pairs "* ]] && step aker_pairs "${PAIRS_S:-200}" "$bench" pairs "${pairs_args[@]}"
[[ "$steps" == *" run "* ]] && step aker_run "${RUN_S:-390}" "$bench" run "${mixes[@]}" "${run_args[@]}"
files=()
for f in "$out/aker.json" "$out/aker_pairs.json"; do [ -f "$f" ] && files+=("$f"); done
if [ ${#files[@]} -gt 0 ] && command -v python3 >/dev/null 2>&1; then
  python3 bench/aker/summarize.py "${files[@]}" --out "$out/tables.md" >/dev/null 2>>"$out/summary.txt" || status=1
fi
exit $status
