#!/usr/bin/env bash
# concordd restarted under a running LC service and BE job on a GPU (PyTorch, MPS clients of an
# MPS server of the script's own; bench/restart/tenants.py): the daemon (policy orion) is killed
# (SIGKILL), started again 2 s later, then stopped (SIGTERM, as systemctl restart does) and started
# again 1 s later. Into the folder given as $1 (default ./restart-results): events.json (when each
# daemon went and came up, and when `concord top --once` listed both tenants again), the tenants'
# results and library counters, the daemons' logs, and summary.json: per phase (before, while the
# daemon was away, after each return), the LC's request latencies and the BE's products a second.
# Uses the bundle .gpu/bin/concordd, .gpu/bin/concord and .gpu/lib/libconcord_intercept.so (with
# the shared libraries they need in .gpu/lib). About 40 s.
#   bash bench/restart/restart.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(mkdir -p "${1:-restart-results}" && realpath "${1:-restart-results}")
bin=$(realpath "${BIN:-.gpu/bin}")
lib=$(realpath "${LIB:-.gpu/lib/libconcord_intercept.so}")
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
for f in "$bin/concordd" "$bin/concord" "$lib"; do [ -e "$f" ] || { echo "restart: no $f" >&2; exit 2; }; done
python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1 ||
  { echo '{"skipped": "python3 cannot import torch with CUDA"}' >"$out/summary.json"; echo "restart: skipped (no torch with CUDA)"; exit 0; }
devspec=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/device.txt" 2>&1
work=$(mktemp -d /tmp/concord-restart-XXXXXX)
mkdir -p "$work/pipe" "$work/log"
export CUDA_MPS_PIPE_DIRECTORY="$work/pipe" CUDA_MPS_LOG_DIRECTORY="$work/log"
if nvidia-cuda-mps-control -d; then
  sleep 0.5
  echo "mps: on" >>"$out/device.txt"
else
  echo "mps: did not start; the processes time-slice the GPU" | tee -a "$out/device.txt"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
socket="$work/concordd.sock"
daemon_pid=""
start_daemon() {  # $1: its log's name
  "$bin/concordd" --socket "$socket" --policy orion --device-spec "$devspec" >"$out/$1.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 400); do
    "$bin/concord" top --socket "$socket" --once >/dev/null 2>&1 && return 0
    sleep 0.025
  done
  echo "restart: concordd did not answer within 10 s ($out/$1.log)" >&2
  return 1
}
now() { date +%s.%N; }
# Waits until `concord top --once` lists both tenants; prints when.
both_listed() {
  for _ in $(seq 1000); do
    local top
    top=$("$bin/concord" top --socket "$socket" --once 2>/dev/null || true)
    if grep -Eq ' lc +LC ' <<<"$top" && grep -Eq ' be +BE ' <<<"$top"; then now; return 0; fi
    sleep 0.01
  done
  echo null
}
cleanup() {
  [ -z "$daemon_pid" ] || kill "$daemon_pid" 2>/dev/null
  [ -z "${lc_pid:-}" ] || kill "$lc_pid" 2>/dev/null
  [ -z "${be_pid:-}" ] || kill "$be_pid" 2>/dev/null
  [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ] || { echo quit | nvidia-cuda-mps-control; sleep 1; }
  rm -rf "$work"
}
trap cleanup EXIT

start_daemon concordd-1 || exit 1
tenant_env=(LD_PRELOAD="$lib" CONCORD_SOCKET="$socket")
env "${tenant_env[@]}" CONCORD_CLASS=lc CONCORD_TARGET_MS=20 CONCORD_NAME=lc CONCORD_INTERCEPT_STATS="$out/lc.stats.json" \
  python3 bench/restart/tenants.py lc --out "$out/lc.json" --seconds 34 >"$out/lc.out" 2>"$out/lc.err" &
lc_pid=$!
env "${tenant_env[@]}" CONCORD_CLASS=be CONCORD_NAME=be CONCORD_INTERCEPT_STATS="$out/be.stats.json" \
  python3 bench/restart/tenants.py be --out "$out/be.json" --seconds 36 >"$out/be.out" 2>"$out/be.err" &
be_pid=$!
for _ in $(seq 600); do [ -e "$out/lc.json.ready" ] && [ -e "$out/be.json.ready" ] && break; sleep 0.05; done
[ -e "$out/lc.json.ready" ] && [ -e "$out/be.json.ready" ] || { echo "restart: the tenants did not start within 30 s" >&2; cat "$out/lc.err" "$out/be.err" >&2; exit 1; }
ready=$(now)
listed0=$(both_listed)
sleep 8
killed=$(now)
kill -KILL "$daemon_pid"
wait "$daemon_pid" 2>/dev/null
sleep 2
start_daemon concordd-2 || exit 1
up1=$(now)
back1=$(both_listed)
sleep 8
stopped=$(now)
kill -TERM "$daemon_pid"
wait "$daemon_pid" 2>/dev/null
sleep 1
start_daemon concordd-3 || exit 1
up2=$(now)
back2=$(both_listed)
"$bin/concord" top --socket "$socket" --once >"$out/top-after.txt" 2>&1
wait "$lc_pid"; lc_rc=$?
wait "$be_pid"; be_rc=$?
lc_pid="" be_pid=""
ended=$(now)
kill -TERM "$daemon_pid"; wait "$daemon_pid" 2>/dev/null; daemon_pid=""
cat >"$out/events.json" <<EOF
{"ready": $ready, "listed": $listed0, "killed": $killed, "up_after_kill": $up1, "listed_after_kill": $back1,
 "stopped": $stopped, "up_after_stop": $up2, "listed_after_stop": $back2, "ended": $ended, "lc_rc": $lc_rc, "be_rc": $be_rc}
EOF
python3 - "$out" <<'EOF'
import json, os, statistics, sys
out = sys.argv[1]
ev = json.load(open(os.path.join(out, "events.json")))
lc = json.load(open(os.path.join(out, "lc.json"))) if os.path.exists(os.path.join(out, "lc.json")) else {"requests": []}
be = json.load(open(os.path.join(out, "be.json"))) if os.path.exists(os.path.join(out, "be.json")) else {"syncs": []}
def stats(path):
    try:
        return json.load(open(os.path.join(out, path)))
    except (OSError, ValueError):
        return None
def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else None
# Phases by the request's arrival (s, unix): a phase after a return starts once both were listed.
end = ev["ended"]
phases = {
    "before": (ev["ready"] + 1.0, ev["killed"]),
    "away_after_kill": (ev["killed"] + 0.2, ev["up_after_kill"]),
    "back_after_kill": ((ev["listed_after_kill"] or end), ev["stopped"]),
    "away_after_stop": (ev["stopped"] + 0.2, ev["up_after_stop"]),
    "back_after_stop": ((ev["listed_after_stop"] or end), end),
}
summary = {"device": open(os.path.join(out, "device.txt")).read().strip(),
           "re_registered_s": {"after_kill": ev["listed_after_kill"] and round(ev["listed_after_kill"] - ev["up_after_kill"], 3),
                               "after_stop": ev["listed_after_stop"] and round(ev["listed_after_stop"] - ev["up_after_stop"], 3)},
           "lc_stats": stats("lc.stats.json"), "be_stats": stats("be.stats.json"), "phases": {}}
for name, (a, b) in phases.items():
    lat = [l for t, l in lc["requests"] if a <= t < b]
    syncs = [t for t in be["syncs"] if a <= t < b]
    summary["phases"][name] = {
        "from_s": round(a - ev["ready"], 3), "to_s": round(b - ev["ready"], 3), "lc_requests": len(lat),
        "lc_p50_ms": pct(lat, 0.5), "lc_p90_ms": pct(lat, 0.9), "lc_max_ms": max(lat) if lat else None,
        "be_products_per_s": round(4 * len(syncs) / (b - a), 2) if b > a else None}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
EOF
