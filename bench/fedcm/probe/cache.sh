#!/usr/bin/env bash
# Does cache bypass protect a co-located tenant on this GPU? FEDCM's cache half (Section III-B,
# "Kernel cache bypass") assumes that one kernel's streamed data evicts what another reuses. For
# each victim tenant of bench/fedcm/pool.yaml beside the streaming tenant hpc_stream, runs through
# `concord run --backend cuda`: `manual` with both tenants as persistent launches on every SM (so
# they share every SM and the L2), with the streaming tenant's loads and stores normal, L2
# evict-first, or L1-bypass + L2 evict-first; then streams, fedc, fedcm (bypass filter under
# pressure, the default) and fedcm with filter=alone (the paper's). Prints STP and each tenant's NP.
# Run on the GPU machine after scripts/gpu_build.sh, with the profiles FEDCM needs:
#   bash bench/fedcm/probe/cache.sh OUT PROFILES.json [VICTIM ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
b=${BIN:-.gpu/bin}
out=${1:?OUT}
profiles=${2:?PROFILES.json}
shift 2
victims=${*:-graph hpc_stencil lbm ml_cnn ml_mlp hpc_mri}
backend=${BACKEND:-cuda}
mkdir -p "$out"
rm -f "$out/p.db"
"$b/concord" profile import --db "$out/p.db" "$profiles" >/dev/null || exit 1
for v in $victims; do
  python3 - "$v" > "$out/$v.yaml" <<'PY' || exit 1
import sys, yaml
pool = yaml.safe_load(open("bench/fedcm/pool.yaml"))
by = {t["name"]: t for t in pool["tenants"]}
print(yaml.safe_dump({"name": f"cache-{sys.argv[1]}", "tenants": [by[sys.argv[1]], by["hpc_stream"]]}, sort_keys=False))
PY
  run() {
    local n=$1
    shift
    if ! "$b/concord" run "$out/$v.yaml" --backend "$backend" --profiles "$out/p.db" --no-serial "$@" \
        --out "$out/$v-$n.json" >"$out/$v-$n.log" 2>&1; then
      echo "$v $n failed: $(tail -n 2 "$out/$v-$n.log")"
      return
    fi
    python3 - "$out/$v-$n.json" "$v" "$n" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
nps = " ".join(f"{t['name']} {t['np']:.3f}" for t in d["tenants"])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {d['metrics'].get('np_sum', d['metrics'].get('stp')):.3f} | {nps} | {d['metrics']['makespan_s'] * 1e3:.2f} |")
PY
  }
  run shared-normal --policy manual --param form=persistent
  run shared-stream-l2ef --policy manual --param form=persistent --param cache.1=l2-evict-first
  run shared-stream-both --policy manual --param form=persistent --param cache.1=both
  run streams --policy streams
  run fedc --policy fedc
  run fedcm --policy fedcm
  run fedcm-filter-alone --policy fedcm --param filter=alone
done
