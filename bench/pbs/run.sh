#!/usr/bin/env bash
# bench/pbs: PBS-WS/FI/HS against ++maxTLP, ++bestTLP, DynCTA-like, Mod+Bypass-like and a
# brute-force oracle over TLP combinations, on 2- and 3-tenant mixes of memory-heavy kernels.
#
#   bench/pbs/run.sh OUTDIR
#
# Environment: BACKEND=sim|cuda (sim), DEVICE (sim: h100|h200, default h100), CONCORD
# (build/src/concord: writes the mixes, and on cuda profiles the pbs facet), BENCH
# (build/bench/pbs/concord_pbs_bench), SMS=split|shared (split: an equal share of SMs per tenant,
# the paper's setting), TARGET_MS (150: each tenant's work alone on the whole GPU), MIXES (a
# pattern of mix names, default all), ORACLE2 ("1 2 4 0") and ORACLE3 ("1 4 0"): the TLP levels
# the oracle combines for pairs and triples (0: as many blocks as fit), so at most 16 and 27 fixed
# runs per mix, each on ORACLE_WORK (0.5) of the mix's work; ALONE_WORK (0.5): the share of a
# tenant's work each alone run does; PBS_ARGS (e.g. "--pbs-param window=0.004"); PROFILE=1 (cuda,
# default when ncu is on the PATH): `concord profile ncu` stores the pbs facet (L1/L2 miss rates)
# of the mixes' kernels in OUTDIR/profiles.db first (at most PROFILE_S, 150 s), and every run
# reads it; without it the results name the kernels that ran without one; SIM_TOO=1 (cuda; off by
# default, it holds the GPU machine while the CPU works): the
# schemes again on the simulator, for its prediction (CPU only).
# One bench process runs every mix (the GPU's context made once). Writes OUTDIR/mixes/ and
# OUTDIR/<backend>/<mix>/{alone-I-L,SCHEME,oracle-L1_L2[_L3]}.json and PBS's traces; a rerun keeps
# what finished. `python3 bench/pbs/summarize.py OUTDIR` prints the tables.
set -euo pipefail
OUT=${1:?usage: bench/pbs/run.sh OUTDIR}
BACKEND=${BACKEND:-sim}
CONCORD=${CONCORD:-build/src/concord}
BENCH=${BENCH:-$(dirname "$CONCORD")/../bench/pbs/concord_pbs_bench}
SMS=${SMS:-split}
TARGET_MS=${TARGET_MS:-150}
MIXES=${MIXES:-*}
ORACLE2=${ORACLE2:-"1 2 4 0"}
ORACLE3=${ORACLE3:-"1 4 0"}
ORACLE_WORK=${ORACLE_WORK:-0.5}
ALONE_WORK=${ALONE_WORK:-0.5}
SIM_TOO=${SIM_TOO:-0}
PBS_ARGS=${PBS_ARGS:-}
if [[ $BACKEND == sim ]]; then DEVICE=${DEVICE:-h100}; else DEVICE=${DEVICE:-0}; fi
if [[ $BACKEND == cuda ]] && command -v ncu > /dev/null; then PROFILE=${PROFILE:-1}; else PROFILE=${PROFILE:-0}; fi
[[ -x $BENCH ]] || { echo "run.sh: no bench binary at $BENCH (build concord_pbs_bench, or set BENCH)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
[[ -d $OUT/mixes ]] || python3 "$here/mixes.py" "$OUT/mixes" --concord "$CONCORD" --target-ms "$TARGET_MS"
echo "sms=$SMS backend=$BACKEND device=$DEVICE target_ms=$TARGET_MS oracle2=$ORACLE2 oracle3=$ORACLE3 oracle_work=$ORACLE_WORK alone_work=$ALONE_WORK profile=$PROFILE pbs_args=$PBS_ARGS" \
  > "$OUT/settings.txt"
shopt -s nullglob
mixes=("$OUT"/mixes/$MIXES.yaml)
(( ${#mixes[@]} )) || { echo "run.sh: no mix matches '$MIXES' in $OUT/mixes" >&2; exit 1; }
profiles=()
if [[ $PROFILE == 1 ]]; then
  # Nsight Compute's L1/L2 miss rates of every kernel variant of the mixes: the pbs facet.
  [[ -s $OUT/profiles.db ]] || timeout "${PROFILE_S:-150}" "$CONCORD" profile ncu "${mixes[@]/#/--workload=}" --default-variants --passes 1 --db "$OUT/profiles.db" --work-dir "$OUT" \
    > "$OUT/profile.log" 2>&1 || echo "run.sh: concord profile ncu failed (see $OUT/profile.log): no pbs facet" >&2
fi
[[ -s $OUT/profiles.db ]] && profiles=(--profiles "$OUT/profiles.db")
common=(--sms "$SMS" --levels2 "${ORACLE2// /,}" --levels3 "${ORACLE3// /,}" --oracle-work "$ORACLE_WORK"
        --alone-work "$ALONE_WORK" "${profiles[@]}")
# shellcheck disable=SC2086
"$BENCH" "${mixes[@]}" --backend "$BACKEND" --device "$DEVICE" --out-dir "$OUT/$BACKEND" "${common[@]}" $PBS_ARGS
if [[ $BACKEND == cuda && $SIM_TOO == 1 ]]; then
  simdev=h100
  grep -qi h200 "$OUT/cuda/bench.json" && simdev=h200
  # shellcheck disable=SC2086
  "$BENCH" "${mixes[@]}" --backend sim --device "$simdev" --out-dir "$OUT/sim" --no-oracle "${common[@]}" $PBS_ARGS
fi
