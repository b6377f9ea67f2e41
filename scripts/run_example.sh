#!/usr/bin/env bash
# The main job: install, build, and run the compute + memory pair (docs/hardware.md) and the 4-tenant mix
# under every baseline policy. Uses the GPU when one is present and the CUDA backend is built,
# the simulator otherwise. Results go to results/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
concord=${CONCORD_BUILD_DIR:-build}/src/concord

backend=sim
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && "$concord" backends | grep -qx cuda; then
  backend=cuda
fi
echo "backend: $backend"
mkdir -p results
for spec in examples/pair.yaml examples/mix4.yaml; do
  name=$(basename "$spec" .yaml)
  for policy in $("$concord" policies | cut -f1); do
    echo
    echo "== $name / $policy"
    "$concord" run "$spec" --policy "$policy" --backend "$backend" --out "results/$name-$policy.json"
  done
done
