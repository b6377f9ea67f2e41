#!/usr/bin/env bash
# On a GPU machine (the bundle of scripts/gpu_build.sh): shows that the GPU output tests notice a
# kernel that does no work. Runs tests/gpu/outputs_test.cpp's tests (BackendOutputs.*,
# EngineOutputs.*) once as built, where every one must pass, then once for each kernel in KERNELS
# (default "stream_triad fma_loop hotspot") with CONCORD_TEST_STUB_KERNEL naming it: that kernel's
# body does nothing while the wrappers still hand out, count and report its logical blocks, and
# the tests must fail, on its output. Writes each run's log and gtest JSON to OUT (default
# gpu-stub-check) and prints a table; exit status 0 only when the plain run passed and every
# stubbed run failed with output mismatches against the CPU reference (any such mismatch is the
# stubbed kernel's: the plain run had none).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-stub-check}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
bin=${BIN:-.gpu/bin/concord_gpu_tests}
filter=${FILTER:-'BackendOutputs.*:EngineOutputs.*'}
kernels=${KERNELS:-stream_triad fma_loop hotspot}
status=0
failures() {  # failures LOG: how many tests failed (gtest names each twice: when it fails, and in the summary)
  grep -o '^\[  FAILED  \] [A-Za-z0-9_]*\.[A-Za-z0-9_]*' "$1" | sort -u | wc -l
}
run() {  # run NAME [ENV=VALUE]: one pass of the tests; its exit status
  local name=$1
  shift
  env "$@" timeout 600 "$bin" --gtest_filter="$filter" --gtest_output="json:$out/$name.json" >"$out/$name.log" 2>&1
}
echo "| run | exit | tests failed | output mismatches reported |" | tee "$out/summary.md"
echo "|---|---:|---:|---:|" | tee -a "$out/summary.md"
run plain
rc=$?
failed=$(failures "$out/plain.log")
echo "| as built | $rc | $failed | - |" | tee -a "$out/summary.md"
if [ "$rc" -ne 0 ]; then
  echo "the tests fail without a stub: fix that first (see $out/plain.log)"
  status=1
fi
for k in $kernels; do
  run "stub-$k" CONCORD_TEST_STUB_KERNEL="$k"
  rc=$?
  failed=$(failures "$out/stub-$k.log")
  named=$(grep -c "against the CPU reference" "$out/stub-$k.log")
  echo "| $k stubbed | $rc | $failed | $named |" | tee -a "$out/summary.md"
  if [ "$rc" -eq 0 ] || [ "$failed" -eq 0 ] || [ "$named" -eq 0 ]; then
    echo "   the tests did not catch '$k' doing nothing (see $out/stub-$k.log)" | tee -a "$out/summary.md"
    status=1
  fi
done
[ $status -eq 0 ] && echo "every stubbed kernel was caught" | tee -a "$out/summary.md"
exit $status
