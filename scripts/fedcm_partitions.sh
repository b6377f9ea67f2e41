#!/usr/bin/env bash
# The best static SM partition of each bench/fedcm workload, beside serial, streams, FedC and FEDCM
# in the same process: static-partition over a grid of weights per tenant count (N = 2: 1/7..7/1;
# N = 3 and 4: even, one tenant 2-4x the others, two tenants 2x), green contexts, no elasticity.
# An upper bound on what fixed SM sets buy these tenants, to set FEDCM's numbers against.
# Usage: scripts/fedcm_partitions.sh OUT [profiles.json] (bundle in .gpu/). WORKLOADS: the specs.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
prof=${2:-bench/results/gpu-h200/fedcm/fedcm_profiles.json}
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
bin=${BIN:-.gpu/bin}
backend=${BACKEND:-cuda}
mkdir -p "$out"
rm -f "$out/partitions.db"
"$bin/concord" profile import --db "$out/partitions.db" "$prof" >/dev/null
weights() {
  case $1 in
    2) echo "1/7 2/6 3/5 4/4 5/3 6/2 7/1" ;;
    3) echo "1/1/1 2/1/1 1/2/1 1/1/2 4/1/1 1/4/1 1/1/4 2/2/1 2/1/2 1/2/2" ;;
    4) echo "1/1/1/1 3/1/1/1 1/3/1/1 1/1/3/1 1/1/1/3 2/2/1/1 2/1/2/1 2/1/1/2 1/2/2/1 1/2/1/2 1/1/2/2" ;;
  esac
}
for spec in ${WORKLOADS:-bench/fedcm/workloads/*.yaml}; do
  name=$(basename "$spec" .yaml)
  n=$(python3 -c "import sys,yaml; print(len(yaml.safe_load(open(sys.argv[1]))['tenants']))" "$spec")
  schemes="serial,streams,fedc,fedcm"
  for w in $(weights "$n"); do schemes="$schemes,static-partition:weights=$w"; done
  "$bin/concord_fedcm_bench" run --backend "$backend" "$spec" --profiles "$out/partitions.db" --sigmas none \
    --schemes "$schemes" --out "$out/partitions-$name.json" > "$out/partitions-$name.log" 2>&1 \
    || { echo "$name failed"; tail -5 "$out/partitions-$name.log"; }
done
python3 bench/fedcm/partitions.py "$out"/partitions-*.json | tee "$out/partitions.md"
rm -f "$out"/partitions.db*
