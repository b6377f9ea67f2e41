#!/usr/bin/env bash
# The leased launch path of two builds of the interception library in one run, on one GPU:
#   bench/intercept/new_vs_old.sh OUT
# OLD_LIB and NEW_LIB (defaults .gpu/lib/old/libconcord_intercept.so and
# .gpu/lib/libconcord_intercept.so) run in turns, ROUNDS rounds (default 5), each round a plain
# row (no library) and the LC and BE tenants of each library under one concordd with leases
# (orion), for the driver and the runtime API on a stream the program creates. Every row is a
# client of an MPS server of the script's own, as tenants share a GPU. Writes OUT/rows.jsonl (one
# line per run of concord_intercept_bench: median and p99 per launch) and OUT/summary.md (per row,
# the median over rounds of each run's median and p99, the cost over plain, and new over old).
# Other variables: LAUNCHES (default 100000), BATCH (256), BIN (.gpu/bin), DEVICE_SPEC (h200).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: new_vs_old.sh OUT}
mkdir -p "$out"
bin=${BIN:-.gpu/bin}
old=$(realpath "${OLD_LIB:-.gpu/lib/old/libconcord_intercept.so}")
new=$(realpath "${NEW_LIB:-.gpu/lib/libconcord_intercept.so}")
bench="$bin/concord_intercept_bench"
rounds=${ROUNDS:-5}
launches=${LAUNCHES:-100000}
batch=${BATCH:-256}
for f in "$bench" "$bin/concordd" "$old" "$new"; do
  [ -e "$f" ] || { echo "new_vs_old.sh: no $f" >&2; exit 2; }
done
: >"$out/rows.jsonl"
mps_dir=$(mktemp -d /tmp/concord-nvo-mps-XXXXXX)
mkdir -p "$mps_dir/pipe" "$mps_dir/log"
mps_env=(CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log")
env "${mps_env[@]}" nvidia-cuda-mps-control -d || { echo "new_vs_old.sh: MPS did not start" >&2; exit 2; }
sock=$(mktemp -u /tmp/concord-nvo-XXXXXX.sock)
"$bin/concordd" --socket "$sock" --policy orion --device-spec "${DEVICE_SPEC:-h200}" >"$out/daemon.log" 2>&1 &
daemon=$!
cleanup() {
  kill "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
  echo quit | env "${mps_env[@]}" nvidia-cuda-mps-control
  rm -rf "$mps_dir"
}
trap cleanup EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "new_vs_old.sh: the daemon made no socket: see $out/daemon.log" >&2; exit 2; }
status=0
row() {  # row LABEL LIB ROUND API [ENV=VALUE ...]
  local label=$1 lib=$2 round=$3 api=$4
  shift 4
  local env_lib=()
  [ "$lib" = none ] || env_lib=(LD_PRELOAD="$([ "$lib" = old ] && echo "$old" || echo "$new")" CONCORD_SOCKET="$sock"
                                CONCORD_INTERCEPT_STATS="$out/stats-$label-$lib-$api-$round.json")
  if env "${mps_env[@]}" "${env_lib[@]}" "$@" "$bench" --launches "$launches" --batch "$batch" --api "$api" --stream created \
      --label "$label/$lib/$round" >>"$out/rows.jsonl" 2>>"$out/$label-$lib-$api.log"; then
    echo "round $round $api $label $lib: $(tail -1 "$out/rows.jsonl")"
  else
    echo "round $round $api $label $lib: failed (see $out/$label-$lib-$api.log)"
    status=1
  fi
}
for round in $(seq "$rounds"); do
  # The order turns each round, so neither library always runs first.
  if [ $((round % 2)) = 1 ]; then libs=(old new); else libs=(new old); fi
  for api in driver runtime; do
    row plain none "$round" "$api"
    for lib in "${libs[@]}"; do
      row lease-be "$lib" "$round" "$api" CONCORD_CLASS=be CONCORD_NAME=nvo-be
      row lease-lc "$lib" "$round" "$api" CONCORD_CLASS=lc CONCORD_TARGET_MS=50 CONCORD_NAME=nvo-lc
    done
  done
done
# A library the daemon refused (another protocol version, say) runs pass-through and would look
# free: every library row must have leased its launches.
python3 - "$out" <<'PY' || status=1
import json, pathlib, sys
bad = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("stats-lease-*.json")):
    s = json.loads(f.read_text())
    if s.get("mode") != "active" or not s.get("leased"):
        bad.append(f"{f.name}: mode {s.get('mode')}, {s.get('leased')} leased")
if bad:
    sys.exit("new_vs_old.sh: rows not under the daemon (compare two libraries of one protocol):\n  " + "\n  ".join(bad))
PY
python3 - "$out" <<'PY' || status=1
import json, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines() if l.strip()]
by = {}
for r in rows:
    label, lib, _ = r["label"].split("/")
    by.setdefault((r["api"], label, lib), []).append(r)
def med(key, api, label, lib):
    rs = by.get((api, label, lib), [])
    return statistics.median(r[key] for r in rs) if rs else float("nan")
lines = ["| API | row | library | median us | p99 us | median over plain us | runs |", "|---|---|---|---|---|---|---|"]
summary = {}
for api in ("driver", "runtime"):
    plain = med("median_us", api, "plain", "none")
    lines.append(f"| {api} | plain | none | {plain:.3f} | {med('p99_us', api, 'plain', 'none'):.3f} | | {len(by.get((api, 'plain', 'none'), []))} |")
    for label in ("lease-be", "lease-lc"):
        for lib in ("old", "new"):
            m, p = med("median_us", api, label, lib), med("p99_us", api, label, lib)
            summary[f"{api}/{label}/{lib}"] = {"median_us": m, "p99_us": p, "over_plain_us": m - plain}
            lines.append(f"| {api} | {label} | {lib} | {m:.3f} | {p:.3f} | {m - plain:+.3f} | {len(by.get((api, label, lib), []))} |")
lines += ["", "| API | row | new / old median | new / old p99 | new - old over plain us |", "|---|---|---|---|---|"]
for api in ("driver", "runtime"):
    for label in ("lease-be", "lease-lc"):
        o, n = summary[f"{api}/{label}/old"], summary[f"{api}/{label}/new"]
        lines.append(f"| {api} | {label} | {n['median_us'] / o['median_us']:.3f} | {n['p99_us'] / o['p99_us']:.3f} | "
                     f"{n['over_plain_us'] - o['over_plain_us']:+.3f} |")
(out / "summary.md").write_text("\n".join(lines) + "\n")
(out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
print("\n".join(lines))
PY
exit $status
