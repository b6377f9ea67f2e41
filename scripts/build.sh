#!/usr/bin/env bash
# Configures and builds Concord in build/ (CUDA code too when nvcc is found: CONCORD_CUDA=AUTO).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${CONCORD_BUILD_DIR:-build}
cuda=${CONCORD_CUDA:-AUTO}
# Warnings are errors in CI (host and device code); CONCORD_WERROR=ON|OFF overrides.
werror=${CONCORD_WERROR:-OFF}
[ "${CI:-}" = true ] && werror=${CONCORD_WERROR:-ON}
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCONCORD_CUDA="$cuda" -DCONCORD_WERROR="$werror"
fi
# Two jobs: nvcc needs a few GiB each and CI machines have two cores.
cmake --build "$build_dir" -j "${CONCORD_JOBS:-2}"
