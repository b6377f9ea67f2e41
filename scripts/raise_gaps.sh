#!/usr/bin/env bash
# Traces of bench/raise's tasks under raise, sq, rr and rd on the GPU (concord run --trace), and
# bench/raise/gaps.py's account of where the time goes: idle GPU, gaps between one task's kernels,
# kernels and tasks in flight. Usage: scripts/raise_gaps.sh OUT [vectors.json] (bundle in .gpu/).
# POLICIES, COPIES, TASKS (default bench/raise/tasks.yaml), RUN_ARGS (more `concord run` options,
# e.g. "--param ahead=2") change the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
vec=${2:-bench/results/gpu-h200/raise/table4/profiles-mean5.json}
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
bin=${BIN:-.gpu/bin}
mkdir -p "$out/traces"
rm -f "$out/raise.db"
"$bin/concord" profile import --db "$out/raise.db" "$vec"
# COPIES copies of every task template (12, 36 tasks by default), as bench/raise composes them.
for k in ${COPIES:-1 3}; do
  python3 - "$k" "${TASKS:-bench/raise/tasks.yaml}" > "$out/tasks-$k.yaml" <<'PY'
import sys, yaml
k = int(sys.argv[1])
w = yaml.safe_load(open(sys.argv[2]))
w["name"] = f"raise-tasks-x{k}"
w["tenants"] = [dict(t, name=f"{t['name']}#{i}") for i in range(k) for t in w["tenants"]]
print(yaml.safe_dump(w, sort_keys=False))
PY
  for p in ${POLICIES:-raise sq rr rd}; do
    "$bin/concord" run "$out/tasks-$k.yaml" --backend "${BACKEND:-cuda}" --policy "$p" --profiles "$out/raise.db" --no-serial \
      ${RUN_ARGS:-} --trace "$out/traces/$p-x$k.trace.json" --out "$out/traces/$p-x$k.result.json" > "$out/traces/$p-x$k.log" 2>&1 \
      || { echo "$p x$k failed"; tail -5 "$out/traces/$p-x$k.log"; }
  done
done
python3 bench/raise/gaps.py "$out"/traces/*.trace.json | tee "$out/gaps.md"
tar -C "$out" -czf "$out/traces.tar.gz" traces && rm -rf "$out/traces" "$out"/raise.db*
