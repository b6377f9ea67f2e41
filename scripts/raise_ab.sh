#!/usr/bin/env bash
# A/B of two concord_raise_bench binaries on the GPU, in one call, alternating per vector set so
# that drift of the lent machine falls on both: scripts/raise_ab.sh OUT A_BIN B_BIN [vectors.json...]
# (default: the six stored H200 vector sets). Writes OUT/{a,b}-<vectors>.json and their tables.
# Needs the bundle's concord and libraries in .gpu/ (scripts/gpu_build.sh). TASKS: the task file.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$1 a=$2 b=$3
shift 3
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
vdir=bench/results/gpu-h200/raise/table4
vecs=("$@")
[ ${#vecs[@]} -gt 0 ] || vecs=("$vdir/profiles-mean5.json" "$vdir/profiles-5f5d1f1.json" "$vdir/profiles-b657def-1.json"
                             "$vdir/profiles-b657def-2.json" "$vdir/profiles-b657def-3.json" "$vdir/profiles-b657def-4.json")
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/device.txt" 2>&1
status=0
for f in "${vecs[@]}"; do
  v=$(basename "$f" .json)
  .gpu/bin/concord profile import --db "$out/$v.db" "$f" > /dev/null || { status=1; continue; }
  for side in a b; do
    bin=$a
    [ "$side" = b ] && bin=$b
    "$bin" --backend cuda --profiles "$out/$v.db" --tasks "${TASKS:-bench/raise/tasks.yaml}" --no-sensitivity \
      --max-minutes 4 --out "$out/$side-$v.json" > "$out/$side-$v.log" 2>&1 || status=1
    python3 bench/raise/summarize.py "$out/$side-$v.json" > "$out/$side-$v.md" 2>/dev/null
    echo "$side $v: $(grep 'raise over sq' "$out/$side-$v.md")"
  done
  rm -f "$out/$v.db"*
done
exit $status
