#!/usr/bin/env bash
# Installs, builds (compiling the CUDA code when nvcc exists) and runs every CPU test.
# GPU tests carry the label "gpu" and run only on a GPU machine (scripts/gpu_run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd "${CONCORD_BUILD_DIR:-build}"
ctest -L cpu --output-on-failure -j "${CONCORD_JOBS:-2}"
