#!/usr/bin/env bash
# Draws the figures of docs/results.md from the stored results (bench/results/) with
# `concord plot`, into docs/figures/ (SVG). CONCORD=PATH picks the binary (default build/src/concord).
set -euo pipefail
cd "$(dirname "$0")/.."
concord=${CONCORD:-${CONCORD_BUILD_DIR:-build}/src/concord}
r=bench/results
out=docs/figures
mkdir -p "$out"
plot() { "$concord" -q plot "$@"; }

runs=$r/gpu-h200/runs-7f3d0e2.tar.xz
plot latency "$runs:run-dnn-*.json" "$runs:run-gpu4-*.json" -o "$out/latency-cdf-h200.svg" \
  --title "LC request latency per baseline, dnn and gpu4 (H200, 7f3d0e2)"
plot stp --metric speedup "$runs:run-*.json" -o "$out/speedup-baselines-h200.svg" \
  --title "speedup over serial per policy through concord run --backend cuda (H200, 7f3d0e2)"
plot stp "$r/gpu-h200/fedcm/main-a09ca4c.tar.xz:fedcm_bench.json" -o "$out/stp-fedcm-main-h200.svg" \
  --title "FEDCM's main set: STP over the co-run window per scheme (H200, a09ca4c)"
plot fidelity "$r/gpu-h200/fidelity/fidelity.json" -o "$out/fidelity-h200.svg"
plot sweep "$r/gpu-h200/elastic-overhead-24879f3.tar.xz:gpu_bench.json" -o "$out/pair-split-h200.svg" \
  --title "compute + memory pair: speedup over serial against the SM split (H200, 24879f3)"
plot sweep "$r/gpu-h200/fedcm/main-a09ca4c.tar.xz:fedcm_bench.json" -o "$out/fedcm-sigma-h200.svg" \
  --title "FEDCM's sigma sweep on the main set (H200, a09ca4c)"
plot sweep "$r/gpu-h200/raise/replay-67b68d9.tar.xz:replay/raise_bench_*.json" -o "$out/raise-tasks-h200.svg" \
  --title "RAISE, RR and RD over SQ against the task count, six vector sets (H200, 67b68d9)"
du -ch "$out"/*.svg | tail -1
