# Sourced by the GPU scripts (scripts/gpu_run.sh, bench/lsbe/run.sh): `step NAME TIMEOUT COMMAND...`
# runs a step with a time limit, logs it to $out/NAME.log, notes its exit status and time in
# $out/summary.txt, shows the log's last $STEP_TAIL lines (default 25) and sets status=1 when it
# failed. The caller sets `out` and `status=0` first.
step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name" | tee -a "$out/summary.txt"
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
  tail -n "${STEP_TAIL:-25}" "$out/$name.log"
  [ $rc -eq 0 ] || status=1
}
