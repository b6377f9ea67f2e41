#!/usr/bin/env bash
# On a GPU machine: runs the GPU tests (and compute-sanitizer on the device-API tests), the GPU
# benchmarks and every baseline through `concord run --backend cuda`, writing everything into
# the folder given as $1 (default ./gpu-results). Uses the bundle from scripts/gpu_build.sh.
# STAGES (default "tests sanitize bench runs") picks what to run, to fit one call's time limit;
# "profile" measures the suite into OUT/profiles.db (and exports OUT/profiles.json); "fidelity"
# runs bench/fidelity's mixes under four baselines into OUT/fidelity.tar.gz; "raise" measures
# RAISE's metrics with ncu (the suite, and bench/raise's tasks) into OUT/profiles.db and runs
# bench/raise; "channel" runs the VRAM channel probe and its analysis into OUT/channel; "fedcm"
# runs bench/fedcm in one process and then as MPS peers (it starts and stops the MPS daemon
# itself, so it goes last); "lsbe" runs bench/lsbe/run.sh (likewise); "aker" runs bench/aker/run.sh;
# "intercept" runs the library's GPU tests, bench/intercept/run.sh (as MPS clients) and
# scripts/intercept_torch_check.py under a daemon with leases; "eager" compares eager PyTorch
# services alone as plain MPS clients and under the library with concordd; "apps" runs
# bench/apps on every GPU (bench/apps/run_gpus.sh; APPS_COMBOS, APPS_ARGS); "room" tests and
# measures the BE caps of leases with room terms (ROOM_LAUNCHES, ROOM_CORRECTNESS_ARGS); "overhead"
# compares the BE training alone as a plain MPS client and under the library, in turns; "node" runs
# one concordd for every GPU (bench/apps/one_daemon.py; NODE_ARGS), the two-GPU measurement;
# "verdicts" runs one part of bench/apps' LC/BE verdicts on one GPU (bench/apps/verdicts.sh:
# VERDICTS_PART=selftest|1|2|3, VERDICTS_S its time limit) into OUT/verdicts; "memory" runs the
# memory quotas under PyTorch (bench/memory/quota.sh, its own MPS server) into OUT/mem.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-results}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
bin=.gpu/bin
status=0
source scripts/step.sh
{
  date -u
  echo "bundle commit: $(cat .gpu/COMMIT 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv
} >"$out/device.txt" 2>&1
cat "$out/device.txt"
stages=" ${STAGES:-tests sanitize bench runs} "
has() { [[ "$stages" == *" $1 "* ]]; }
# The fused-pair test (every pair the rule accepts, 420 NVRTC compiles: 390-460 s on an H200) runs
# as a step of its own, so each step stays within one device call's 600 s.
has tests && step gpu_tests 540 "$bin/concord_gpu_tests" --gtest_filter='-DeviceApi.EveryPair*' --gtest_output="json:$out/gpu_tests.json"
has tests && step gpu_tests_pairs 540 "$bin/concord_gpu_tests" --gtest_filter='DeviceApi.EveryPair*' --gtest_output="json:$out/gpu_tests_pairs.json"
# Under the sanitizers: every device-API test, on the kernels with shared memory and barriers
# (and both members of every fused pair), and the counting kernels of preempt/shrink/grow.
export CONCORD_GPU_TEST_KERNELS=matmul,pathfinder,backprop,sgemm,srad,fma_loop,stream_triad
has sanitize && step memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/concord_gpu_tests" \
  --gtest_filter='DeviceApi.*'
# The backend paths that launch a kernel again on a running launch's control block (grow, TLP),
# kernels queued behind others (stream order, a persistent one behind a native one, hand-offs),
# and the profiler (curves, cache policies alone and beside a streaming kernel).
has sanitize && step memcheck_backend 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/concord_gpu_tests" \
  --gtest_filter='CudaBackend.Raising*:CudaBackend.Preempt*:CudaBackend.Queued*:Profiler.*'
has sanitize && step racecheck 300 compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/concord_gpu_tests" \
  --gtest_filter='DeviceApi.Standalone*:DeviceApi.Elastic*:DeviceApi.Fused*'
unset CONCORD_GPU_TEST_KERNELS
has bench && step gpu_bench 300 "$bin/concord_gpu_bench" "$out/gpu_bench.json"
has runs && for spec in examples/pair.yaml examples/gpu4.yaml examples/dnn.yaml; do
  name=$(basename "$spec" .yaml)
  for policy in serial streams static-partition round-robin random priority-streams orion; do
    step "run-$name-$policy" 120 "$bin/concord" run "$spec" --backend cuda --policy "$policy" --out "$out/run-$name-$policy.json"
  done
done
if has profile; then
  step profile 540 "$bin/concord" profile run --db "$out/profiles.db" --max-minutes "${PROFILE_MINUTES:-7}"
  step profile_export 60 "$bin/concord" profile export --db "$out/profiles.db" "$out/profiles.json"
  step profile_show 60 "$bin/concord" profile show --db "$out/profiles.db"
fi
# Fidelity: the mixes of bench/fidelity under four baselines, for bench/fidelity/compare.py.
if has fidelity; then
  for spec in bench/fidelity/mixes/*.yaml; do
    mix=$(basename "$spec" .yaml)
    for policy in serial streams static-partition round-robin; do
      step "fid-$mix-$policy" 120 "$bin/concord" run "$spec" --backend cuda --policy "$policy" --out "$out/fid-$mix-$policy.json"
    done
  done
  (cd "$out" && tar czf fidelity.tar.gz fid-*.json fid-*.log && rm -f fid-*.json fid-*.log)
fi
# Hand placements of the pair through `concord run --policy manual` .
if has runs; then
  declare -A hand=(
    [green-split-96-36]="--param sms.0=0-95 --param sms.1=96-131"
    [smid-split-96-36]="--param form=persistent --param sms.0=0-95 --param sms.1=96-131"
    [elastic-share-4-4]="--param form=persistent --param tlp.0=4 --param tlp.1=4"
    [fused-1-1]="--param fuse=0+1 --param ratio=1:1"
  )
  for name in "${!hand[@]}"; do
    # shellcheck disable=SC2086
    step "run-pair-manual-$name" 120 "$bin/concord" run examples/pair.yaml --backend cuda --policy manual ${hand[$name]} \
      --out "$out/run-pair-manual-$name.json"
  done
fi
# RAISE's metrics and RAISE's evaluation.
# RAISE_PROFILES="a.json b.json ...": replay bench/raise on stored task vectors instead (no Nsight
# Compute): each file imported into its own store, then the bench on RAISE_TASKS (default
# bench/raise/tasks.yaml); outputs raise_bench_<tasks>-vec-<file>.json. RAISE_ARGS: more options
# for the bench (e.g. "--policies raise,sq,raise:ahead=0 --no-sensitivity"). RAISE_PASSES: ncu passes
# per measurement (default 3, averaged).
if has raise && [ -n "${RAISE_PROFILES:-}" ]; then
  for f in $RAISE_PROFILES; do
    vec=$(basename "$f" .json)
    step "raise_import_$vec" 60 "$bin/concord" profile import --db "$out/raise-$vec.db" "$f"
    for tasks in ${RAISE_TASKS:-bench/raise/tasks.yaml}; do
      tag=$(basename "$tasks" .yaml)
      step "raise_bench_$tag-vec-$vec" "${RAISE_S:-300}" "$bin/concord_raise_bench" --backend cuda --profiles "$out/raise-$vec.db" \
        --tasks "$tasks" --out "$out/raise_bench_$tag-vec-$vec.json" --max-minutes "${RAISE_MINUTES:-4}" ${RAISE_ARGS:-}
    done
  done
elif has raise; then
  ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  echo "ncu: ${ncu_bin:-not found}" | tee -a "$out/summary.txt"
  # The stored suite profile gains the metrics: start from it.
  [ -f "$out/profiles.db" ] || step profile_import 60 "$bin/concord" profile import --db "$out/profiles.db" \
    bench/results/gpu-h200/profiles.json
  mkdir -p "$out/ncu-suite"
  # The bench's tasks first (the bench needs them), the whole suite last. RAISE_TASKS: the task
  # template files (default: tasks.yaml and tasks-small.yaml).
  for tasks in ${RAISE_TASKS:-bench/raise/tasks.yaml bench/raise/tasks-small.yaml}; do
    tag=$(basename "$tasks" .yaml)
    mkdir -p "$out/ncu-$tag"
    step "raise_metrics_$tag" "${NCU_TASKS_S:-200}" "$bin/concord" profile raise --db "$out/profiles.db" --ncu "$ncu_bin" \
      --workload "$tasks" --work-dir "$out/ncu-$tag" --passes "${RAISE_PASSES:-3}"
    step "raise_bench_$tag" "${RAISE_S:-300}" "$bin/concord_raise_bench" --backend cuda --profiles "$out/profiles.db" \
      --tasks "$tasks" --out "$out/raise_bench_$tag.json" --max-minutes "${RAISE_MINUTES:-4}" ${RAISE_ARGS:-}
  done
  # RAISE_SUITE=0: the bench's tasks only (the suite's metrics are in bench/results already).
  [ "${RAISE_SUITE:-1}" = 0 ] || step raise_metrics_suite "${NCU_SUITE_S:-240}" "$bin/concord" profile raise --db "$out/profiles.db" --ncu "$ncu_bin" \
    --work-dir "$out/ncu-suite" --passes "${RAISE_PASSES:-3}"
  step profile_export 60 "$bin/concord" profile export --db "$out/profiles.db" "$out/profiles.json"
  step profile_show 60 "$bin/concord" profile show --db "$out/profiles.db"
fi
# The VRAM channel probe and its verdict (docs/channel_probe.md): CHANNEL_MODE=quick for
# the short one.
if has channel; then
  channel_args=()
  [ "${CHANNEL_MODE:-full}" = quick ] && channel_args=(--quick)
  step channel 240 bash bench/channel/run.sh "$out/channel" "${channel_args[@]}"
fi
# FEDCM's evaluation: every scheme in one process, then the MPS peers.
if has fedcm; then
  # FEDCM_WORKLOADS (default bench/fedcm/workloads/*.yaml), FEDCM_SCHEMES (the bench's --schemes,
  # e.g. "serial,streams,krisp,fedc,fedcm,fedcm:gamma=1.2"), FEDCM_SIGMAS ("none": no sweep),
  # FEDCM_GAMMAS, FEDCM_MPS=0 (no MPS peers), FEDCM_MPS_S (their time limit, default 300 s), FEDCM_PROFILES (stored profile JSON files to import
  # instead of measuring the workloads' kernels again).
  workloads=(${FEDCM_WORKLOADS:-bench/fedcm/workloads/*.yaml})
  if [ -n "${FEDCM_PROFILES:-}" ]; then
    for f in $FEDCM_PROFILES; do
      step "fedcm_import_$(basename "$f" .json)" 60 "$bin/concord" profile import --db "$out/fedcm_profiles.db" "$f"
    done
  else
    # Measured SM curves and cache slowdowns of the workloads' kernels (at their sizes) for the
    # policies' estimator.
    step fedcm_profile 300 "$bin/concord" profile run --db "$out/fedcm_profiles.db" --workload "${workloads[@]}"
  fi
  extra=()
  [ -n "${FEDCM_SCHEMES:-}" ] && extra+=(--schemes "$FEDCM_SCHEMES")
  [ -n "${FEDCM_SIGMAS:-}" ] && extra+=(--sigmas "$FEDCM_SIGMAS")
  [ -n "${FEDCM_GAMMAS:-}" ] && extra+=(--gammas "$FEDCM_GAMMAS")
  step fedcm_bench 400 "$bin/concord_fedcm_bench" run --backend cuda "${workloads[@]}" \
    --profiles "$out/fedcm_profiles.db" --out "$out/fedcm_bench.json" "${extra[@]}"
  if [ "${FEDCM_MPS:-1}" != 0 ]; then
    trap 'echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/concord-mps/mps-pipe nvidia-cuda-mps-control >/dev/null 2>&1 || true' EXIT
    step fedcm_mps "${FEDCM_MPS_S:-300}" "$bin/concord_fedcm_bench" mps "${workloads[@]}" --work-dir /tmp/concord-mps \
      --out "$out/fedcm_mps.json"
  fi
  if command -v python3 >/dev/null 2>&1; then
    if [ -f "$out/fedcm_mps.json" ]; then
      python3 bench/fedcm/summarize.py "$out/fedcm_bench.json" "$out/fedcm_mps.json" >"$out/fedcm_tables.md" 2>&1
    else
      python3 bench/fedcm/summarize.py "$out/fedcm_bench.json" >"$out/fedcm_tables.md" 2>&1
    fi
  fi
fi
# The LC/BE bench (bench/lsbe/run.sh, its own MPS daemon last) into OUT/lsbe; LSBE_QUICK=1 for its
# quick mode, and its other variables (SCHEMES, MIXES, LOADS, STEPS, BE_SHARE, ARGS) pass through.
has lsbe && step lsbe "${LSBE_S:-600}" env QUICK="${LSBE_QUICK:-0}" bash bench/lsbe/run.sh "$out/lsbe"
# The Aker bench (bench/aker/run.sh: fused pairs, then LC/BE at two QoS targets) into OUT/aker;
# AKER_QUICK=1 for its quick mode, and its other variables (SCHEMES, MIXES, LOADS, TARGETS, PAIRS,
# RATIOS, STEPS, ARGS) pass through.
has aker && step aker "${AKER_S:-600}" env QUICK="${AKER_QUICK:-0}" bash bench/aker/run.sh "$out/aker"
# The interception library (docs/intercept.md): its GPU tests (a daemon in the test process), its
# per-launch cost as MPS clients (bench/intercept/run.sh: plain, pass-through, leases for LC and
# BE, per-launch decisions) into OUT/intercept, and the PyTorch check under a daemon with leases,
# as a BE and as an LC tenant.
devspec=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -q H200 && echo h200 || echo h100)
if has intercept; then
  step intercept_tests 300 "$bin/concord_gpu_tests" --gtest_filter='Intercept.*' --gtest_output="json:$out/intercept_tests.json"
  step intercept_bench 400 env MPS=1 DEVICE_SPEC="$devspec" bash bench/intercept/run.sh "$out/intercept"
  if python3 -c "import torch" >/dev/null 2>&1; then
    sock=$(mktemp -u /tmp/concord-torch-XXXXXX.sock)
    "$bin/concordd" --socket "$sock" --policy orion --device-spec "$devspec" >"$out/intercept/torch-concordd.log" 2>&1 &
    daemon=$!
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
    step intercept_torch_be 300 python3 scripts/intercept_torch_check.py "$out/intercept/torch-be" --lib .gpu/lib/libconcord_intercept.so \
      --socket "$sock"
    step intercept_torch_lc 300 env CONCORD_CLASS=lc CONCORD_TARGET_MS=100 python3 scripts/intercept_torch_check.py \
      "$out/intercept/torch-lc" --lib .gpu/lib/libconcord_intercept.so --socket "$sock"
    kill -TERM "$daemon"
    wait "$daemon"
  else
    echo "intercept_torch: skipped (python3 cannot import torch)" | tee -a "$out/summary.txt"
  fi
fi
# Room for BE launches (docs/intercept.md, "Room"): the library's GPU test of the caps, the
# test program under compute-sanitizer memcheck with padding applied, the switch's cost per launch
# (bench/intercept/run.sh ROOM=1, as MPS clients beside an LC busy loop), and the BE training's
# losses and parameters with and without the caps (bench/apps/correctness.py).
if has room; then
  step room_tests 120 "$bin/concord_gpu_tests" --gtest_filter='Intercept.Room*' --gtest_output="json:$out/room_tests.json"
  sock=$(mktemp -u /tmp/concord-room-XXXXXX.sock)
  "$bin/concordd" --socket "$sock" --policy 'orion:bound_share=0;be_sms=16;be_blocks_per_sm=2' --device-spec "$devspec" \
    >"$out/room-memcheck-concordd.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  # An LC tenant with its flag up for the whole run (the test program in a loop is BE).
  rm -f "$out/busy.ready" "$out/busy.stop"
  env LD_PRELOAD="$PWD/.gpu/lib/libconcord_intercept.so" CONCORD_SOCKET="$sock" CONCORD_CLASS=lc CONCORD_TARGET_MS=100 \
    python3 bench/intercept/lc_busy.py "$out/busy.ready" "$out/busy.stop" >"$out/room-busy.log" 2>&1 &
  for _ in $(seq 300); do [ -e "$out/busy.ready" ] && break; sleep 0.1; done
  step room_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 env LD_PRELOAD="$PWD/.gpu/lib/libconcord_intercept.so" \
    CONCORD_SOCKET="$sock" CONCORD_CLASS=be CONCORD_INTERCEPT_STATS="$out/room-memcheck-stats.json" "$bin/concord_intercept_app" room
  touch "$out/busy.stop"
  kill -TERM "$daemon"
  wait "$daemon"
  step room_switch 150 env MPS=1 ROOM=1 ROOM_ONLY=1 LAUNCHES="${ROOM_LAUNCHES:-20000}" DEVICE_SPEC="$devspec" \
    bash bench/intercept/run.sh "$out/room-switch"
  step room_correctness 200 env CONCORDD="$PWD/$bin/concordd" INTERCEPT="$PWD/.gpu/lib/libconcord_intercept.so" \
    CONCORD_DEVICE_SPEC="$devspec" python3 bench/apps/correctness.py "$out/room-correctness" ${ROOM_CORRECTNESS_ARGS:-}
fi
# The library's cost on the BE training job alone with caps armed: plain MPS client and library in
# turn, OVERHEAD_ROUNDS rounds under one MPS server (bench/apps/be_overhead.py) into OUT/be-overhead.
if has overhead; then
  step be_overhead "${OVERHEAD_S:-300}" env CONCORDD="$PWD/$bin/concordd" INTERCEPT="$PWD/.gpu/lib/libconcord_intercept.so" \
    CONCORD_DEVICE_SPEC="$devspec" python3 bench/apps/be_overhead.py "$out/be-overhead" --rounds "${OVERHEAD_ROUNDS:-3}" \
    ${OVERHEAD_ARGS:-}
fi
# Eager services alone (the target: within 3% of a plain MPS client): each model's mean service time
# back to back as a plain MPS client, then under the library with concordd (orion), in turn,
# ROUNDS times on every GPU at once, each pinned to CPUs local to its GPU (bench/apps/eager_gpus.sh);
# OUT/eager/gpuK/<model>-<batch>-<mode>-<round>.json, OUT/eager/summary.md.
if has eager; then
  step eager 400 bash bench/apps/eager_gpus.sh "$out/eager" "$devspec" ${EAGER_MODELS:-bert:8 gpt:16}
fi
# bench/apps on every GPU at once (bench/apps/run_gpus.sh) into OUT/apps.
if has apps; then
  step apps "${APPS_S:-590}" env CONCORDD="$PWD/$bin/concordd" INTERCEPT="$PWD/.gpu/lib/libconcord_intercept.so" \
    CONCORD_DEVICE_SPEC="$devspec" bash bench/apps/run_gpus.sh "$out/apps" \
    "${APPS_COMBOS:-resnet50:64:graph/resnet50:64,bert:32:graph/bert:16,bert:8/resnet50:64,gpt:16/bert:16}" ${APPS_ARGS:-}
fi
# One part of the LC/BE verdicts (bench/apps/verdicts.sh: rounds, the default configuration against
# every baseline) into OUT/verdicts/part<PART>.tar.xz.
if has verdicts; then
  step "verdicts-${VERDICTS_PART:-1}" "${VERDICTS_S:-580}" env CONCORDD="$PWD/$bin/concordd" INTERCEPT="$PWD/.gpu/lib/libconcord_intercept.so" \
    CONCORD_DEVICE_SPEC="$devspec" bash bench/apps/verdicts.sh "${VERDICTS_PART:-1}" "$out/verdicts"
fi
# One concordd for every GPU of the machine (bench/apps/one_daemon.py): an LC and a BE on GPU 0, a BE
# on GPU 1, into OUT/node (docs/cluster.md; the two-GPU measurement of the daemon's lanes).
if has node; then
  step node 500 env CONCORDD="$PWD/$bin/concordd" INTERCEPT="$PWD/.gpu/lib/libconcord_intercept.so" \
    python3 bench/apps/one_daemon.py "$out/node" ${NODE_ARGS:-}
fi
# Memory quotas (docs/intercept.md, "Memory"): a BE job over its limit beside an LC service with a
# reservation, with both PyTorch allocators, a baseline without Concord, and the cost of an
# allocation, into OUT/mem (bench/memory/quota.sh; about 5 minutes).
if has memory; then
  step memory 360 bash bench/memory/quota.sh "$out/mem"
fi
# The Markdown tables of everything above.
if has bench && command -v python3 >/dev/null 2>&1; then
  python3 bench/gpu/summarize.py "$out" >"$out/tables.md" 2>>"$out/summary.txt" || status=1
fi
exit $status
