#!/usr/bin/env bash
# Independent GPU jobs at once on a machine with several GPUs, one lane per GPU:
#   scripts/gpu_lanes.sh OUT 'NAME=COMMAND' ['NAME=COMMAND'...]
# Lane k runs COMMAND (a bash string, with $L set to OUT/NAME, created) under
# CUDA_VISIBLE_DEVICES=k, its output in OUT/NAME.log; every lane is waited for. OUT/lanes.txt
# gives each lane's GPU, exit status and seconds. A lane's limit is its own business (timeout or
# the steps' limits inside it). Exits 1 when a lane failed, 2 when there are more lanes than GPUs.
# Lanes share the host (CPUs, memory, PCIe), not a GPU: a lane's timings are its GPU's alone as
# far as the host allows, and the GPU numbers in every lane's device.txt say which GPU ran it.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu_lanes.sh OUT 'NAME=COMMAND'...}
shift
mkdir -p "$out"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ $# -le "$gpus" ] || { echo "gpu_lanes: $# lanes, $gpus GPUs" >&2; exit 2; }
pids=() names=()
k=0
for lane in "$@"; do
  name=${lane%%=*}
  cmd=${lane#*=}
  [ -n "$name" ] && [ "$name" != "$lane" ] || { echo "gpu_lanes: '$lane': expected NAME=COMMAND" >&2; exit 2; }
  mkdir -p "$out/$name"
  (
    t0=$SECONDS
    CUDA_VISIBLE_DEVICES=$k L="$out/$name" bash -c "$cmd" >"$out/$name.log" 2>&1
    rc=$?
    echo "$name gpu=$k rc=$rc $((SECONDS - t0))s" >>"$out/lanes.txt"
    exit $rc
  ) &
  pids+=($!) names+=("$name")
  k=$((k + 1))
done
status=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || status=1
done
cat "$out/lanes.txt"
exit $status
