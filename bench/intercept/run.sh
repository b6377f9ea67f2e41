#!/usr/bin/env bash
# The interception library's cost per launch (issue 21's targets: at most 2 us median on the
# pass-through path, at most 5 us with a decision per launch), into the folder given as $1
# (default ./intercept-results): results.json (one object per row) and summary.txt.
#
# Rows, each for the runtime (<<<>>>) and the driver (cuLaunchKernel) API:
#   plain         no library
#   passthrough   LD_PRELOAD, no daemon (the library falls back to pass-through)
#   disabled      LD_PRELOAD with CONCORD_DISABLE=1
#   free-run      LD_PRELOAD, daemon letting the tenant run free   (when DAEMON_FREE_RUN is set)
#   decision      LD_PRELOAD, daemon deciding every launch          (when DAEMON_DECIDE is set)
# DAEMON_FREE_RUN / DAEMON_DECIDE: the command that starts concordd in that mode, with {socket}
# standing for the control socket's path, e.g.
#   DAEMON_DECIDE='.gpu/bin/concordd --socket {socket} --policy streams'
# Other variables: LAUNCHES (default 100000), BATCH (default 256), BIN (default .gpu/bin),
# LIB (default .gpu/lib/libconcord_intercept.so).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-intercept-results}
mkdir -p "$out"
bin=${BIN:-.gpu/bin}
lib=$(realpath "${LIB:-.gpu/lib/libconcord_intercept.so}")
bench="$bin/concord_intercept_bench"
launches=${LAUNCHES:-100000}
batch=${BATCH:-256}
[ -x "$bench" ] || { echo "no $bench (build it: scripts/gpu_build.sh)" >&2; exit 2; }
[ -f "$lib" ] || { echo "no $lib (build it: scripts/gpu_build.sh)" >&2; exit 2; }
: >"$out/rows.jsonl"
status=0

row() {  # row LABEL API [ENV=VALUE ...]
  local label=$1 api=$2
  shift 2
  echo "== $label ($api)"
  if env "$@" "$bench" --launches "$launches" --batch "$batch" --api "$api" --label "$label" \
      >>"$out/rows.jsonl" 2>>"$out/$label-$api.log"; then
    tail -1 "$out/rows.jsonl"
  else
    echo "   failed: see $out/$label-$api.log"
    status=1
  fi
}

with_daemon() {  # with_daemon LABEL COMMAND_TEMPLATE
  local label=$1 template=$2 sock pid
  sock=$(mktemp -u /tmp/concord-bench-XXXXXX.sock)
  local cmd=${template//\{socket\}/$sock}
  echo "== starting the daemon: $cmd"
  $cmd >"$out/daemon-$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  if [ ! -S "$sock" ]; then
    echo "   the daemon made no socket at $sock: see $out/daemon-$label.log"
    kill "$pid" 2>/dev/null
    status=1
    return
  fi
  for api in runtime driver; do
    row "$label" "$api" LD_PRELOAD="$lib" CONCORD_SOCKET="$sock" CONCORD_NAME="bench-$label" \
      CONCORD_INTERCEPT_STATS="$out/stats-$label-$api.json"
  done
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

for api in runtime driver; do
  row plain "$api"
  row passthrough "$api" LD_PRELOAD="$lib" CONCORD_SOCKET=/nonexistent/concordd.sock \
    CONCORD_INTERCEPT_STATS="$out/stats-passthrough-$api.json"
  row disabled "$api" LD_PRELOAD="$lib" CONCORD_DISABLE=1
done
[ -n "${DAEMON_FREE_RUN:-}" ] && with_daemon free-run "$DAEMON_FREE_RUN"
[ -n "${DAEMON_DECIDE:-}" ] && with_daemon decision "$DAEMON_DECIDE"

python3 - "$out" <<'PY' || status=1
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines() if l.strip()]
(out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
plain = {r["api"]: r["median_us"] for r in rows if r["label"] == "plain"}
# The issue's targets: the library's own cost (median over plain) per path.
targets = {"passthrough": 2.0, "disabled": 2.0, "free-run": 2.0, "decision": 5.0}
lines = ["| row | api | median us | p99 us | over plain (median) us | target us | met |", "|---|---|---|---|---|---|---|"]
for r in rows:
    base = plain.get(r["api"])
    over = r["median_us"] - base if base is not None and r["label"] != "plain" else None
    t = targets.get(r["label"])
    met = "" if over is None or t is None else ("yes" if over <= t else "NO")
    lines.append(f"| {r['label']} | {r['api']} | {r['median_us']:.3f} | {r['p99_us']:.3f} | "
                 f"{'' if over is None else f'{over:.3f}'} | {'' if t is None else t} | {met} |")
(out / "summary.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
exit $status
