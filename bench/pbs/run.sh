#!/usr/bin/env bash
# bench/pbs: PBS-WS/FI/HS against ++maxTLP, ++bestTLP, DynCTA-like, Mod+Bypass-like and a
# brute-force oracle over TLP combinations, on 2- and 3-tenant mixes of memory-heavy kernels.
#
#   bench/pbs/run.sh OUTDIR
#
# Environment: BACKEND=sim|cuda (sim), DEVICE (sim: h100|h200, default h100; cuda: index 0),
# CONCORD (build/src/concord), SMS=split|shared (split: an equal share of SMs per tenant, the
# paper's setting), TARGET_MS (400: each tenant's work alone), MIXES (a pattern of mix names,
# default all), ORACLE2 ("1 2 4 8 0") and ORACLE3 ("1 2 4 0"): the TLP levels the oracle combines
# for pairs and triples (0: as many blocks as fit), so it runs at most 25 and 64 combinations per
# mix; SIM_TOO=1 (with BACKEND=cuda): the schemes again on the simulator, for its prediction.
# Writes OUTDIR/mixes/, OUTDIR/<backend>/<mix>/{alone-T-L,SCHEME,oracle-L1_L2[_L3]}.json and the
# PBS traces; `python3 bench/pbs/summarize.py OUTDIR` prints the tables.
set -euo pipefail
OUT=${1:?usage: bench/pbs/run.sh OUTDIR}
BACKEND=${BACKEND:-sim}
CONCORD=${CONCORD:-build/src/concord}
SMS=${SMS:-split}
TARGET_MS=${TARGET_MS:-400}
MIXES=${MIXES:-*}
ORACLE2=${ORACLE2:-"1 2 4 8 0"}
ORACLE3=${ORACLE3:-"1 2 4 0"}
SIM_TOO=${SIM_TOO:-1}
if [[ $BACKEND == sim ]]; then DEVICE=${DEVICE:-h100}; else DEVICE=${DEVICE:-0}; fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
[[ -d $OUT/mixes ]] || python3 "$here/mixes.py" "$OUT/mixes" --concord "$CONCORD" --target-ms "$TARGET_MS"
echo "sms=$SMS backend=$BACKEND device=$DEVICE target_ms=$TARGET_MS" > "$OUT/settings.txt"

run() {  # run BACKEND DEVICE SPEC OUTFILE POLICY [--param k=v ...]
  local backend=$1 device=$2 spec=$3 out=$4 policy=$5
  shift 5
  [[ -s $out ]] && return 0
  "$CONCORD" -q run "$spec" --backend "$backend" --device "$device" --policy "$policy" --no-serial --out "$out" "$@" \
    > /dev/null || echo "FAILED: $policy $* on $spec ($backend)" >&2
}

sm_count() {  # the device's SMs, from one short run
  local probe=$OUT/$1-device.json
  run "$1" "$2" "$OUT/mixes/alone/kmeans.yaml" "$probe" serial
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['device_info']['sm_count'])" "$probe"
}

# share I K SMS: tenant I's SMs among K tenants (the runner's split: the last takes the rest).
share() {
  local i=$1 k=$2 sms=$3 per=$(( $3 / $2 ))
  local first=$(( i * per )) last=$(( i == k - 1 ? sms - 1 : (i + 1) * per - 1 ))
  if [[ $SMS == shared ]]; then echo "0-$(( sms - 1 ))"; else echo "$first-$last"; fi
}

schemes() {  # schemes BACKEND DEVICE SPEC DIR BESTTLP_PARAMS...
  local backend=$1 device=$2 spec=$3 dir=$4
  shift 4
  run "$backend" "$device" "$spec" "$dir/maxtlp.json" maxtlp --param sms=$SMS
  run "$backend" "$device" "$spec" "$dir/besttlp.json" besttlp --param sms=$SMS "$@"
  run "$backend" "$device" "$spec" "$dir/dyncta.json" dyncta --param sms=$SMS
  run "$backend" "$device" "$spec" "$dir/modbypass.json" modbypass --param sms=$SMS
  for m in ws fi hs; do
    rm -f "$dir/pbs-$m.trace.jsonl"
    [[ -s $dir/pbs-$m.json ]] || run "$backend" "$device" "$spec" "$dir/pbs-$m.json" pbs --param sms=$SMS --param metric=$m \
      --param "trace=$dir/pbs-$m.trace.jsonl"
  done
}

SMS_N=$(sm_count "$BACKEND" "$DEVICE")
for spec in "$OUT"/mixes/$MIXES.yaml; do
  mix=$(basename "$spec" .yaml)
  IFS=- read -r -a kernels <<< "$mix"
  k=${#kernels[@]}
  dir=$OUT/$BACKEND/$mix
  mkdir -p "$dir"
  if (( k == 2 )); then levels=$ORACLE2; else levels=$ORACLE3; fi
  # Each tenant alone on its share at each level: its best alone TLP (++bestTLP) and alone time.
  best=()
  for i in "${!kernels[@]}"; do
    for l in $levels; do
      tlp=(); [[ $l == 0 ]] || tlp=(--param tlp.0=$l)
      run "$BACKEND" "$DEVICE" "$OUT/mixes/alone/${kernels[$i]}.yaml" "$dir/alone-$i-$l.json" manual --param form=persistent \
        --param "sms.0=$(share "$i" "$k" "$SMS_N")" "${tlp[@]}"
    done
    b=$(python3 - "$dir" "$i" $levels <<'PY'
import json, sys
d, i, levels = sys.argv[1], sys.argv[2], sys.argv[3:]
t = {l: json.load(open(f"{d}/alone-{i}-{l}.json"))["metrics"]["makespan_s"] for l in levels}
print(min(t, key=t.get))
PY
)
    [[ $b == 0 ]] || best+=(--param "tlp.$i=$b")
  done
  schemes "$BACKEND" "$DEVICE" "$spec" "$dir" "${best[@]}"
  # The oracle: every combination of the levels, each a fixed placement.
  combos=("")
  for i in "${!kernels[@]}"; do
    next=()
    for c in "${combos[@]}"; do for l in $levels; do next+=("${c:+${c}_}$l"); done; done
    combos=("${next[@]}")
  done
  for c in "${combos[@]}"; do
    IFS=_ read -r -a ls <<< "$c"
    params=(--param form=persistent)
    for i in "${!ls[@]}"; do
      params+=(--param "sms.$i=$(share "$i" "$k" "$SMS_N")")
      [[ ${ls[$i]} == 0 ]] || params+=(--param "tlp.$i=${ls[$i]}")
    done
    run "$BACKEND" "$DEVICE" "$spec" "$dir/oracle-$c.json" manual "${params[@]}"
  done
  if [[ $BACKEND == cuda && $SIM_TOO == 1 ]]; then
    simdev=h100
    grep -qi h200 "$OUT/cuda-device.json" && simdev=h200
    mkdir -p "$OUT/sim/$mix"
    schemes sim "$simdev" "$spec" "$OUT/sim/$mix" "${best[@]}"
  fi
  echo "$mix done" >&2
done
