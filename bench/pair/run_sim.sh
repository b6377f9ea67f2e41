#!/usr/bin/env bash
# the compute + memory pair (docs/hardware.md) on the simulator: serial, streams, and static SM splits,
# with the ideal (the longer alone time). Writes bench/results/pair_sim.json and prints a table.
set -euo pipefail
cd "$(dirname "$0")/../.."
concord=${CONCORD_BUILD_DIR:-build}/src/concord
out=$(mktemp -d)
"$concord" run examples/pair.yaml --policy serial --out "$out/serial.json" >/dev/null
"$concord" run examples/pair.yaml --policy streams --out "$out/streams.json" >/dev/null
for w in 1,1 3,2 2,1 7,3 3,1; do
  "$concord" run examples/pair.yaml --policy static-partition --param weights=$w --out "$out/split-${w/,/-}.json" >/dev/null
done
python3 bench/pair/table.py "$out" bench/results/pair_sim.json
