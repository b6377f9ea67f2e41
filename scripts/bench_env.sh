# Sourced by the benches' run.sh: `bench_env SUBDIR BINARY OUTDIR` sets $bench to the bench's
# binary — BUILD=DIR takes DIR/bench/SUBDIR/BINARY, else ${BIN:-.gpu/bin}/BINARY with the
# bundle's ../lib on LD_LIBRARY_PATH — and exits 2 naming it when it is missing; then writes
# OUTDIR/device.txt (date, the bundle's or checkout's commit, the GPU, its driver and clocks) and
# shows it.
bench_env() {
  local sub=$1 name=$2 out=$3 bin=
  if [ -n "${BUILD:-}" ]; then
    bench=$BUILD/bench/$sub/$name
  else
    bin=${BIN:-.gpu/bin}
    bench=$bin/$name
    if [ -d "$bin/../lib" ]; then
      LD_LIBRARY_PATH="$(cd "$bin/../lib" && pwd):${LD_LIBRARY_PATH:-}"
      export LD_LIBRARY_PATH
    fi
  fi
  [ -x "$bench" ] || { echo "run.sh: no $bench (build it, or set BIN or BUILD)" >&2; exit 2; }
  {
    date -u
    echo "commit: $(cat "${bin:-.}/../COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  } >"$out/device.txt" 2>&1
  cat "$out/device.txt"
}
