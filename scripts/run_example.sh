#!/usr/bin/env bash
# The main job: installs what it needs, builds the `concord` command alone, and runs the compute +
# memory pair (examples/pair.yaml, closed loop) and the 4-tenant mix (examples/mix4.yaml, an LC
# service with arrivals beside three BE tenants) under every policy. On a machine with an NVIDIA
# GPU and nvcc it builds the CUDA backend (build/) and runs there; otherwise it builds without
# CUDA (build-sim/: no CUDA object is compiled) and runs on the simulator. A few minutes on two
# cores without a GPU.
#
# Ends with one table, a row per policy and a column per example, of each run's headline
# (README, "The headline": throughput over serial for the pair, LC SLO attainment for the mix),
# and a figure of the same; both, and every run's results JSON, go to results/.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash scripts/setup.sh --run

backend=sim
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null 2>&1; then
  backend=cuda
fi
if [ "$backend" = cuda ]; then
  build=${CONCORD_BUILD_DIR:-build}
  cuda=AUTO
else
  build=${CONCORD_BUILD_DIR:-build-sim}
  cuda=OFF
fi
if [ ! -f "$build/build.ninja" ]; then
  if [ "$cuda" = OFF ]; then
    # The simulator's build: -O1 without debug information compiles in under half the time of
    # -O2 -g, and the example runs take seconds either way.
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DCONCORD_CUDA=OFF \
      -DCONCORD_BUILD_TESTS=OFF -DCONCORD_BUILD_BENCH=OFF >/dev/null
  else
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCONCORD_CUDA="$cuda" >/dev/null
  fi
fi
echo "building concord in $build/ ($( [ "$cuda" = OFF ] && echo "without CUDA: the simulator" || echo "with CUDA"))"
cmake --build "$build" -j "${CONCORD_JOBS:-$(nproc)}" --target concord_cli | tail -1
concord=$build/src/concord
if [ "$backend" = cuda ] && ! "$concord" backends | grep -qx cuda; then
  backend=sim
fi
echo "backend: $backend ($((SECONDS - t0)) s so far)"

out=results
mkdir -p "$out"
rm -f "$out"/pair-*.json "$out"/mix4-*.json
for spec in examples/pair.yaml examples/mix4.yaml; do
  name=$(basename "$spec" .yaml)
  for policy in $("$concord" policies | cut -f1); do
    # Each run's full report is in its results file; the line printed here is its headline.
    if "$concord" run "$spec" --policy "$policy" --backend "$backend" --out "$out/$name-$policy.json" \
      >"$out/$name-$policy.txt" 2>&1; then
      printf '%-6s %-22s %s\n' "$name" "$policy" "$(grep -m1 '^Headline' "$out/$name-$policy.txt" | sed 's/^Headline //')"
    else
      printf '%-6s %-22s FAILED (see %s)\n' "$name" "$policy" "$out/$name-$policy.txt"
    fi
  done
done

echo
echo "== The headline of each policy on each example ($backend backend)"
"$concord" compare "$out"/pair-*.json "$out"/mix4-*.json | tee "$out/compare.txt"
"$concord" compare --markdown "$out"/pair-*.json "$out"/mix4-*.json >"$out/compare.md"
figure=""
if "$concord" -q plot stp "$out"/pair-*.json "$out"/mix4-*.json -o "$out/headline.svg" 2>/dev/null; then
  figure=" and $out/headline.svg (figure)"
fi
echo
echo "Table: $out/compare.txt ($out/compare.md as Markdown)$figure; each run's report in $out/<example>-<policy>.txt"
echo "and its raw figures in $out/<example>-<policy>.json. $((SECONDS - t0)) s in all."
