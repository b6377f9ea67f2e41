#!/usr/bin/env bash
# Builds the fuzz targets with clang and libFuzzer (ASan + UBSan) in build-fuzz/ and runs each for
# a bounded time, starting from its corpus in fuzz/corpus/<target>/. Exits non-zero when a target
# crashes, leaks or times out; the crashing input is left in build-fuzz/findings/<target>/.
#
#   scripts/fuzz.sh [SECONDS]     SECONDS in all, split evenly across the targets (default 60)
#   FUZZ_TARGETS="spec_parser"    run only these targets
#   FUZZ_JOBS=N                   N fuzzing processes per target (default 1)
#
# New inputs go to build-fuzz/corpus/<target>/, never into the repository's corpus. Needs the
# Debian packages clang and libclang-rt-<version>-dev (libFuzzer's runtime).
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-60}
targets=(${FUZZ_TARGETS:-spec_parser profile_json ncu_csv ipc_protocol})
jobs=${FUZZ_JOBS:-1}
build_dir=${CONCORD_FUZZ_BUILD_DIR:-build-fuzz}

if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
if [ ! -f "$build_dir/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCONCORD_CUDA=OFF \
    -DCONCORD_FUZZ=ON -DCONCORD_BUILD_TESTS=OFF
fi
cmake --build "$build_dir" -j "${CONCORD_JOBS:-2}" --target "${targets[@]/#/fuzz_}"

per_target=$(( total / ${#targets[@]} ))
[ "$per_target" -ge 1 ] || per_target=1
root=$PWD
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
status=0
for t in "${targets[@]}"; do
  work="$root/$build_dir/corpus/$t"
  findings="$root/$build_dir/findings/$t"
  scratch="$root/$build_dir/run/$t"
  log="$root/$build_dir/findings/$t.log"
  mkdir -p "$work" "$findings" "$scratch"
  echo "fuzz: $t for ${per_target}s"
  # The spec checker resolves relative timestamps paths against the working directory: run in an
  # empty scratch directory (which also takes the per-job logs of FUZZ_JOBS > 1).
  if (cd "$scratch" && "$root/$build_dir/fuzz/fuzz_$t" -max_total_time="$per_target" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" "${parallel[@]}" \
        "$work" "$root/fuzz/corpus/$t") >"$log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^Done [0-9]+ runs" "$log" | tail -2 | sed "s/^/fuzz: $t: /"
  else
    status=1
    echo "fuzz: $t FAILED (log: $log; inputs: $findings/)" >&2
    grep -E "ERROR: |SUMMARY: |Test unit written to" "$log" | head -5 >&2 || tail -20 "$log" >&2
  fi
done
exit "$status"
