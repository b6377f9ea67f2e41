#!/usr/bin/env bash
# The interception library's cost per launch, into the folder given as $1 (default
# ./intercept-results): results.json (one object per row) and summary.txt (each row's median over
# the plain program's, against its target).
#
# Rows, each for the runtime (<<<>>>) and the driver (cuLaunchKernel) API, on a stream the program
# creates, and for leases also on the legacy default stream:
#   plain          no library
#   passthrough    LD_PRELOAD, no daemon (the library falls back to pass-through)     target 2 us
#   disabled       LD_PRELOAD with CONCORD_DISABLE=1                                   target 2 us
#   lease-lc       LD_PRELOAD, a daemon with leases, the tenant latency-critical        target 1 us
#   lease-be       the same, best-effort                                               target 1 us
#   per-launch-be  LD_PRELOAD, a daemon deciding every BE launch (--per-launch)          target 5 us
# With MPS=1 every row runs as a client of an MPS server of the script's own (pipe and log folders
# in a temporary folder), the way tenants share a GPU: the plain row is then a plain MPS client.
# ROOM=1 adds, under a daemon whose BE leases carry room terms (ROOM_POLICY, default
# orion:bound_share=0;be_sms=66;be_blocks_per_sm=2) while an LC tenant keeps its flag up
# (lc_busy.py, PyTorch):
#   room-off-be    the BE with CONCORD_ROOM=0 (room terms ignored): the same conditions, no caps
#   room-be        the BE with its caps applied: a green-context stream and event hand-offs per
#                  launch, padded shared memory; the difference is the cost of the switch
# DAEMON_POLICY (default orion) is the policy the daemon rows run under. Other variables: LAUNCHES
# (default 100000), BATCH (default 256), BIN (default .gpu/bin), LIB (default
# .gpu/lib/libconcord_intercept.so), DEVICE_SPEC (concordd's --device-spec, default h100).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-intercept-results}
mkdir -p "$out"
bin=${BIN:-.gpu/bin}
lib=$(realpath "${LIB:-.gpu/lib/libconcord_intercept.so}")
bench="$bin/concord_intercept_bench"
concordd="$bin/concordd"
launches=${LAUNCHES:-100000}
batch=${BATCH:-256}
policy=${DAEMON_POLICY:-orion}
[ -x "$bench" ] || { echo "no $bench (build it: scripts/gpu_build.sh)" >&2; exit 2; }
[ -f "$lib" ] || { echo "no $lib (build it: scripts/gpu_build.sh)" >&2; exit 2; }
: >"$out/rows.jsonl"
status=0
mps_env=()
if [ "${MPS:-0}" = 1 ]; then
  mps_dir=$(mktemp -d /tmp/concord-bench-mps-XXXXXX)
  mkdir -p "$mps_dir/pipe" "$mps_dir/log"
  mps_env=(CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log")
  env "${mps_env[@]}" nvidia-cuda-mps-control -d || { echo "MPS did not start" >&2; exit 2; }
  trap 'echo quit | env "${mps_env[@]}" nvidia-cuda-mps-control; rm -rf "$mps_dir"' EXIT
  sleep 0.5
fi

row() {  # row LABEL API STREAM [ENV=VALUE ...]
  local label=$1 api=$2 stream=$3
  shift 3
  echo "== $label ($api, $stream stream)"
  if env "${mps_env[@]}" "$@" "$bench" --launches "$launches" --batch "$batch" --api "$api" --stream "$stream" \
      --label "$label" >>"$out/rows.jsonl" 2>>"$out/$label-$api-$stream.log"; then
    tail -1 "$out/rows.jsonl"
  else
    echo "   failed: see $out/$label-$api-$stream.log"
    status=1
  fi
}

with_daemon() {  # with_daemon LABEL [EXTRA_DAEMON_ARGS...]: starts concordd, prints its socket
  local label=$1 sock pid
  shift
  sock=$(mktemp -u /tmp/concord-bench-XXXXXX.sock)
  "$concordd" --socket "$sock" --policy "$policy" --device-spec "${DEVICE_SPEC:-h100}" "$@" >"$out/daemon-$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  if [ ! -S "$sock" ]; then
    echo "   the daemon made no socket at $sock: see $out/daemon-$label.log"
    kill "$pid" 2>/dev/null
    status=1
    return
  fi
  echo "$sock"
}

# ROOM_ONLY=1: the plain rows and the room rows, nothing else.
for api in runtime driver; do
  row plain "$api" created
  [ "${ROOM_ONLY:-0}" = 1 ] && continue
  row plain "$api" default
  row passthrough "$api" created LD_PRELOAD="$lib" CONCORD_SOCKET=/nonexistent/concordd.sock \
    CONCORD_INTERCEPT_STATS="$out/stats-passthrough-$api.json"
  row disabled "$api" created LD_PRELOAD="$lib" CONCORD_DISABLE=1
done

# Leases: the daemon's own output goes to a log; its socket is the last line with_daemon prints.
sock=$( [ "${ROOM_ONLY:-0}" = 1 ] || with_daemon leases | tail -1)
if [ -S "$sock" ]; then
  for api in runtime driver; do
    for stream in created default; do
      row lease-lc "$api" "$stream" LD_PRELOAD="$lib" CONCORD_SOCKET="$sock" CONCORD_CLASS=lc CONCORD_TARGET_MS=50 \
        CONCORD_NAME=bench-lc CONCORD_INTERCEPT_STATS="$out/stats-lease-lc-$api-$stream.json"
      row lease-be "$api" "$stream" LD_PRELOAD="$lib" CONCORD_SOCKET="$sock" CONCORD_CLASS=be \
        CONCORD_NAME=bench-be CONCORD_INTERCEPT_STATS="$out/stats-lease-be-$api-$stream.json"
    done
  done
  pkill -TERM -f -- "--socket $sock" 2>/dev/null
fi
sock=$( [ "${ROOM_ONLY:-0}" = 1 ] || with_daemon per-launch --per-launch | tail -1)
if [ -S "$sock" ]; then
  for api in runtime driver; do
    row per-launch-be "$api" created LD_PRELOAD="$lib" CONCORD_SOCKET="$sock" CONCORD_CLASS=be CONCORD_NAME=bench-be \
      CONCORD_INTERCEPT_STATS="$out/stats-per-launch-be-$api.json"
  done
  pkill -TERM -f -- "--socket $sock" 2>/dev/null
fi
if [ "${ROOM:-0}" = 1 ]; then
  policy=${ROOM_POLICY:-orion:bound_share=0;be_sms=66;be_blocks_per_sm=2}
  sock=$(with_daemon room | tail -1)
  if [ -S "$sock" ]; then
    rm -f "$out/busy.ready" "$out/busy.stop"
    env "${mps_env[@]}" LD_PRELOAD="$lib" CONCORD_SOCKET="$sock" CONCORD_CLASS=lc CONCORD_TARGET_MS=100 CONCORD_NAME=busy \
      python3 bench/intercept/lc_busy.py "$out/busy.ready" "$out/busy.stop" >"$out/lc-busy.log" 2>&1 &
    busy=$!
    for _ in $(seq 600); do [ -e "$out/busy.ready" ] && break; sleep 0.1; done
    if [ -e "$out/busy.ready" ]; then
      for api in runtime driver; do
        row room-off-be "$api" created LD_PRELOAD="$lib" CONCORD_SOCKET="$sock" CONCORD_CLASS=be CONCORD_NAME=bench-be \
          CONCORD_ROOM=0 CONCORD_INTERCEPT_STATS="$out/stats-room-off-be-$api.json"
        row room-be "$api" created LD_PRELOAD="$lib" CONCORD_SOCKET="$sock" CONCORD_CLASS=be CONCORD_NAME=bench-be \
          CONCORD_INTERCEPT_STATS="$out/stats-room-be-$api.json"
      done
    else
      echo "   the LC busy loop did not start: see $out/lc-busy.log"
      status=1
    fi
    touch "$out/busy.stop"
    wait "$busy" 2>/dev/null
    pkill -TERM -f -- "--socket $sock" 2>/dev/null
  fi
fi
sleep 0.5

python3 - "$out" <<'PY' || status=1
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines() if l.strip()]
(out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
plain = {(r["api"], r.get("stream", "created")): r["median_us"] for r in rows if r["label"] == "plain"}
# The library's own cost (median over the plain program's, same API and stream) per path.
targets = {"passthrough": 2.0, "disabled": 2.0, "lease-lc": 1.0, "lease-be": 1.0, "per-launch-be": 5.0}
lines = ["| row | api | stream | median us | p99 us | over plain (median) us | target us | met |",
         "|---|---|---|---|---|---|---|---|"]
for r in rows:
    base = plain.get((r["api"], r.get("stream", "created")))
    over = r["median_us"] - base if base is not None and r["label"] != "plain" else None
    t = targets.get(r["label"])
    met = "" if over is None or t is None else ("yes" if over <= t else "NO")
    lines.append(f"| {r['label']} | {r['api']} | {r.get('stream', 'created')} | {r['median_us']:.3f} | {r['p99_us']:.3f} | "
                 f"{'' if over is None else f'{over:.3f}'} | {'' if t is None else t} | {met} |")
# The room switch: room-be over room-off-be (same daemon, same LC load, caps ignored).
off = {r["api"]: r for r in rows if r["label"] == "room-off-be"}
for r in rows:
    if r["label"] == "room-be" and r["api"] in off:
        o = off[r["api"]]
        lines.append(f"room switch ({r['api']}): median {r['median_us'] - o['median_us']:+.3f} us, "
                     f"p99 {r['p99_us'] - o['p99_us']:+.3f} us over the same launches with CONCORD_ROOM=0")
(out / "summary.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
exit $status
