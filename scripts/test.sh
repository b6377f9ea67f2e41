#!/usr/bin/env bash
# Installs, builds (compiling the CUDA code when nvcc exists) and runs every CPU test; in CI
# (CI=true) first fuzzes the spec parser, the profile JSON import and the Nsight Compute CSV reader
# for a minute (scripts/fuzz.sh; CONCORD_FUZZ_SECONDS=0 skips it). Then builds the Debian package
# and checks it (scripts/package.sh: in CI installed with dpkg -i, run from /usr/bin, removed;
# CONCORD_PACKAGE=0 skips it).
# GPU tests carry the label "gpu" and run only on a GPU machine (scripts/gpu_run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
fuzz_seconds=${CONCORD_FUZZ_SECONDS:-0}
[ "${CI:-}" = true ] && fuzz_seconds=${CONCORD_FUZZ_SECONDS:-60}
if [ "$fuzz_seconds" -gt 0 ]; then
  bash scripts/fuzz.sh "$fuzz_seconds"
fi
(cd "${CONCORD_BUILD_DIR:-build}" && ctest -L cpu --output-on-failure -j "${CONCORD_JOBS:-2}")
if [ "${CONCORD_PACKAGE:-1}" != 0 ]; then
  bash scripts/package.sh
fi
