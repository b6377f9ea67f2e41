#!/usr/bin/env bash
# Builds the GPU binaries on a machine without a GPU (nvcc needed) and bundles them with the
# shared libraries they need into .gpu/ (git-ignored), for scripts/gpu_run.sh on a GPU machine:
# the bundle is the install tree's gpu_bundle component (cmake/install.cmake), binaries in
# .gpu/bin, the Debian libraries a plain CUDA image lacks in .gpu/lib.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${CONCORD_GPU_BUILD_DIR:-build-gpu}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Binaries built from uncommitted changes say so.
git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
# Configure every time: the commit the binaries report is set here.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONCORD_CUDA=ON -DCONCORD_GIT_COMMIT="$commit" >/dev/null
cmake --build "$build" -j "${CONCORD_JOBS:-2}" --target concord_cli concord_gpu_tests concord_gpu_bench \
  concord_raise_bench concord_fedcm_bench concord_lsbe_bench concord_aker_bench concord_pbs_bench concord_channel_probe concord_channel_analyze \
  concord_intercept concord_intercept_app concord_intercept_bench concordd
rm -rf .gpu
cmake --install "$build" --prefix "$PWD/.gpu" --component gpu_bundle --strip >/dev/null
# Every GPU call carries the bundle with the tree (64 MiB in all): BUNDLE_KEEP="concord concordd ..."
# keeps only the binaries a call needs.
if [ -n "${BUNDLE_KEEP:-}" ]; then
  for b in .gpu/bin/*; do
    case " $BUNDLE_KEEP " in *" $(basename "$b") "*) ;; *) rm -f "$b" ;; esac
  done
fi
echo "$commit" > .gpu/COMMIT
du -sh .gpu
