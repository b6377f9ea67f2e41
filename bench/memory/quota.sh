#!/usr/bin/env bash
# GPU memory quotas on an H200 with PyTorch (bench/memory/quota_torch.py: the scenarios and what
# they measure), as MPS clients of an MPS server of the script's own, into the folder given as $1
# (default ./memory-results): summary.json (the verdicts per allocator and the cost of an
# allocation), one folder per scenario. Uses the bundle of scripts/gpu_build.sh: .gpu/bin/concordd,
# .gpu/bin/concord, .gpu/lib/libconcord_intercept.so. About 4-5 minutes (SECONDS_PER_RUN, default 20,
# sets each scenario's serving time; 6 scenarios and the allocation cost).
#   bash bench/memory/quota.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-memory-results}
mkdir -p "$out"
bin=${BIN:-.gpu/bin}
lib=$(realpath "${LIB:-.gpu/lib/libconcord_intercept.so}")
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
[ -x "$bin/concordd" ] || { echo "no $bin/concordd (build it: scripts/gpu_build.sh)" >&2; exit 2; }
[ -f "$lib" ] || { echo "no $lib (build it: scripts/gpu_build.sh)" >&2; exit 2; }
if ! python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
  echo '{"skipped": "python3 cannot import torch with CUDA"}' >"$out/summary.json"
  echo "memory quotas: skipped (python3 cannot import torch with CUDA)"
  exit 0
fi
devspec=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -q H200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv >"$out/device.txt" 2>&1
# An MPS server of our own: the tenants share the GPU as they do under Concord.
mps_dir=$(mktemp -d /tmp/concord-mem-mps-XXXXXX)
mkdir -p "$mps_dir/pipe" "$mps_dir/log"
export CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log"
if nvidia-cuda-mps-control -d; then
  trap 'echo quit | nvidia-cuda-mps-control; sleep 1; rm -rf "$mps_dir"' EXIT
  sleep 0.5
  echo "mps: on" >>"$out/device.txt"
else
  echo "mps: did not start; the processes time-slice the GPU" | tee -a "$out/device.txt"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
cli=""
[ -x "$bin/concord" ] && cli=$(realpath "$bin/concord")
timeout 345 python3 bench/memory/quota_torch.py bench --out "$out" --concordd "$(realpath "$bin/concordd")" --lib "$lib" \
  --concord-cli "$cli" --device-spec "$devspec" --seconds "${SECONDS_PER_RUN:-20}" ${QUOTA_ARGS:-} 2>&1 | tee "$out/bench.log"
exit "${PIPESTATUS[0]}"
