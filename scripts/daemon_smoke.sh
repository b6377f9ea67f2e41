#!/usr/bin/env bash
# Starts concordd in a temporary folder with a chosen policy, optionally runs a command as its
# tenant (under the interception library when CONCORD_INTERCEPT_LIB names it), then prints
# `concord top --once` and the Prometheus metrics, stops the daemon with SIGTERM and keeps its
# JSON log. Everything it shows is also written under OUT.
#
#   scripts/daemon_smoke.sh POLICY OUT [-- COMMAND ARGS...]
#   e.g. CONCORD_INTERCEPT_LIB=build/src/intercept/libconcord_intercept.so CONCORD_CLASS=lc CONCORD_TARGET_MS=20 \
#        scripts/daemon_smoke.sh sgdrc /tmp/smoke -- python3 infer.py
#
# CONCORD_BIN (e.g. .gpu/bin), else CONCORD_BUILD_DIR/src (default build/src), holds concordd and
# concord; CONCORD_DEVICE_SPEC (default h100)
# is the device the policies plan for.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 POLICY OUT [-- COMMAND ARGS...]" >&2; exit 2; }
policy=$1
out=$2
shift 2
[ "${1:-}" = "--" ] && shift
build=${CONCORD_BUILD_DIR:-build}
bin=${CONCORD_BIN:-$build/src}
concordd=$bin/concordd
concord=$bin/concord
for b in "$concordd" "$concord"; do
  [ -x "$b" ] || { echo "daemon_smoke: $b is not built (cmake --build $build --target concordd concord_cli, or scripts/gpu_build.sh)" >&2; exit 1; }
done
mkdir -p "$out"
run=$(mktemp -d)
socket=$run/concordd.sock
metrics=$run/metrics.sock
"$concordd" --socket "$socket" --socket-mode 0660 --policy "$policy" --device-spec "${CONCORD_DEVICE_SPEC:-h100}" \
  --metrics-socket "$metrics" 2>"$out/concordd.log" &
daemon=$!
stop() {
  if kill -0 "$daemon" 2>/dev/null; then
    kill -TERM "$daemon"
    wait "$daemon" || echo "daemon_smoke: concordd exited with status $?" >&2
  fi
  rm -rf "$run"
}
trap stop EXIT
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
[ -S "$socket" ] || { cat "$out/concordd.log" >&2; echo "daemon_smoke: concordd did not start" >&2; exit 1; }

fetch_metrics() {
  if command -v curl >/dev/null; then
    curl -s --unix-socket "$metrics" http://localhost/metrics
  else
    python3 - "$metrics" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
data = b""
while chunk := s.recv(65536): data += chunk
print(data.split(b"\r\n\r\n", 1)[1].decode(), end="")
PY
  fi
}

status=0
if [ $# -gt 0 ]; then
  echo "daemon_smoke: running the tenant: $*"
  # Top while it runs, every second, into OUT.
  ( while kill -0 "$daemon" 2>/dev/null; do "$concord" -q top --once --socket "$socket" || true; echo; sleep 1; done ) \
    >"$out/top.txt" 2>&1 &
  topper=$!
  start=$(date +%s%N)
  CONCORD_SOCKET=$socket LD_PRELOAD=${CONCORD_INTERCEPT_LIB:-} "$@" >"$out/tenant.out" 2>"$out/tenant.err" || status=$?
  end=$(date +%s%N)
  kill "$topper" 2>/dev/null || true
  echo "daemon_smoke: the tenant exited with status $status after $(( (end - start) / 1000000 )) ms (output in $out/tenant.*)"
fi
"$concord" -q top --once --socket "$socket" | tee "$out/top_final.txt"
fetch_metrics | tee "$out/metrics.txt"
stop
trap - EXIT
echo "daemon_smoke: log in $out/concordd.log ($(wc -l <"$out/concordd.log") lines)"
exit "$status"
