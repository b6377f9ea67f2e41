#!/usr/bin/env bash
# Times the launch forms on short kernels (bench/fedcm/probe/short.yaml: s2b's graph tenant alone,
# 10-50 us kernels) through `concord run --backend cuda --policy manual`: native and persistent on
# the whole GPU, on 66 and on 32 SMs. Prints each run's makespan and median launch duration (GPU
# events). Run on the GPU machine after scripts/gpu_build.sh: bash bench/fedcm/probe/forms.sh [OUT]
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
b=.gpu/bin
w=bench/fedcm/probe/short.yaml
out=${1:-/tmp/forms}
mkdir -p "$out"
run() {
  local n=$1
  shift
  if ! "$b/concord" run "$w" --backend cuda --policy manual "$@" --out "$out/$n.json" >/dev/null 2>"$out/$n.err"; then
    echo "$n failed: $(tail -n 2 "$out/$n.err")"
    return
  fi
  python3 - "$out/$n.json" "$n" <<'PY'
import json, statistics as st, sys
d = json.load(open(sys.argv[1]))
dur = [l["end_s"] - l["start_s"] for l in d["launches"]]
print(f"{sys.argv[2]:<22} makespan {d['metrics']['makespan_s'] * 1e3:6.2f} ms  median launch {st.median(dur) * 1e6:5.1f} us")
PY
}
run native-all
run persistent-all --param form=persistent
run persistent-all-tlp4 --param form=persistent --param tlp.0=4
run native-66 --param sms.0=0-65
run persistent-66 --param form=persistent --param sms.0=0-65
run native-32 --param sms.0=0-31
run persistent-32 --param form=persistent --param sms.0=0-31
