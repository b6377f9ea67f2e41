#!/usr/bin/env bash
# Builds the Debian packages of a configured and built folder (CPack; CONCORD_BUILD_DIR, default
# build/) into BUILD/package/: "concord" (the commands, the daemon and its unit, the interception
# library where CUDA was found, examples, docs) and "concord-dev" (static libraries, headers). Then
# checks that they install and run. With CI=true (CI runs as root on a fresh machine) or
# CONCORD_PACKAGE_INSTALL=1: the README's operator quick start, the commands between its
# operator-quick-start markers, run as written where the build has the interception library (below,
# run_quick_start: it installs "concord" with `dpkg -i`, and installs it again over itself under the
# running program, which must be a tenant of the restarted daemon), then `dpkg -i` of "concord-dev",
# /usr/bin/concord --version, concordd --help, a program run with LD_PRELOAD=libconcord_intercept.so,
# a run and a figure from the installed files, then `dpkg -P`. Otherwise the packages are unpacked
# into a fresh folder (dpkg-deb -x) and run from there, which needs no root.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CONCORD_BUILD_DIR:-build}
rm -rf "$build/package"
log=$(mktemp)
if ! (cd "$build" && cpack -G DEB) >"$log" 2>&1; then
  cat "$log" >&2
  echo "package: cpack failed" >&2
  exit 1
fi
rm -f "$log"
deb=$(ls "$build"/package/concord_*.deb)
dev=$(ls "$build"/package/concord-dev_*.deb)
for d in "$deb" "$dev"; do
  echo "package: $d ($(du -h "$d" | cut -f1))"
  dpkg-deb --field "$d" Package Version Architecture Depends Recommends
done

# What each package must hold (paths under /usr); the runtime package holds no static archive.
# Where the build has the interception library (CUDA found), the runtime package carries it.
contents=$(dpkg-deb --contents "$deb" | awk '{print $NF}')
want_runtime=(./usr/bin/concord ./usr/bin/concordd ./usr/lib/systemd/system/concordd.service ./usr/share/concord/plot.py
              ./usr/share/concord/examples/pair.yaml ./usr/share/doc/concord/README.md ./usr/share/doc/concord/docs/schema/results-v2.json)
intercept=""
if [ -e "$build/src/intercept/libconcord_intercept.so" ]; then
  want_runtime+=(./usr/lib/libconcord_intercept.so)
  intercept=libconcord_intercept.so
fi
# Where the build has the Slurm plugin (libslurm-dev found), the runtime package carries it, its
# commented plugstack.conf line and slurmd's drop-in that starts concordd first.
if [ -e "$build/src/slurm/concord_spank.so" ]; then
  want_runtime+=("./usr/lib/$(gcc -print-multiarch)/slurm-wlm/concord_spank.so" ./etc/slurm/plugstack.conf.d/concord.conf
                 ./usr/lib/systemd/system/slurmd.service.d/concord.conf)
fi
for want in "${want_runtime[@]}"; do
  grep -qxF "$want" <<<"$contents" || { echo "package: $deb lacks $want" >&2; exit 1; }
done
if grep -q '\.a$' <<<"$contents"; then
  echo "package: $deb holds static archives (they belong in concord-dev): $(grep '\.a$' <<<"$contents" | head -3)" >&2
  exit 1
fi
dev_contents=$(dpkg-deb --contents "$dev" | awk '{print $NF}')
for want in ./usr/include/concord/backend.h ./usr/include/concord/device/context.cuh ./usr/lib/libconcord_core.a; do
  grep -qxF "$want" <<<"$dev_contents" || { echo "package: $dev lacks $want" >&2; exit 1; }
done
echo "package: interception library: ${intercept:-none (built without CUDA)}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A run and a figure with the installed command: its plot script is found beside it.
check() {
  local concord=$1 share=$2
  "$concord" --version
  "$(dirname "$concord")/concordd" --help >/dev/null
  "$concord" -q run "$share/examples/pair.yaml" --no-serial --out "$work/pair.json" >/dev/null
  "$concord" -q plot stp "$work/pair.json" -o "$work/pair.svg"
  test -s "$work/pair.svg"
  # A program run with the interception library preloaded: it loads (without a GPU or libcuda,
  # the library stays out of the way) and the program's output is its own.
  if [ -n "$intercept" ]; then
    local lib=$3
    local maps
    maps=$(LD_PRELOAD="$lib" CONCORD_SOCKET="$work/none.sock" cat /proc/self/maps)
    grep -q "libconcord_intercept.so" <<<"$maps" || { echo "package: $lib was not loaded by a preloaded program" >&2; exit 1; }
    [ "$(LD_PRELOAD="$lib" "$concord" --version)" = "$("$concord" --version)" ] ||
      { echo "package: concord --version differs under LD_PRELOAD=$lib" >&2; exit 1; }
    echo "package: a program ran with LD_PRELOAD=$lib"
  fi
}
# The README's operator quick start (at most five commands between its markers), run as written in
# the folder of the packages, with what a container lacks put in front of it: the stand-in driver
# (tests/standin) on LD_LIBRARY_PATH; stand-ins for systemctl and nvidia-cuda-mps-control first on
# PATH (tests/package: the unit's ExecStart run directly; MPS's pipe and process, for doctor, in a
# pipe directory of this run's own); and the README's placeholder program `python3 train.py`
# replaced by the stand-in test program, running for a minute. Its `concord doctor` must pass and
# its `concord top --once` must list the program as tenant "train".
run_quick_start() {
  local repo build_dir
  repo=$PWD
  build_dir=$(cd "$build" && pwd)
  local standin_driver="$build_dir/tests/standin/driver" app="$build_dir/tests/standin/concord_standin_app"
  for f in "$standin_driver/libcuda.so.1" "$app"; do
    [ -e "$f" ] || { echo "package: $f is not built (ninja -C $build concord_standin_cuda concord_standin_app)" >&2; exit 1; }
  done
  local block commands
  block=$(sed -n '/^<!-- operator-quick-start/,/^<!-- \/operator-quick-start -->/p' README.md | sed -n '/^```sh$/,/^```$/{/^```/d;p}')
  commands=$(grep -cv '^[[:space:]]*$' <<<"$block" || true)
  [ "$commands" -ge 1 ] && [ "$commands" -le 5 ] ||
    { echo "package: README's operator quick start has $commands commands (1 to 5 between its markers)" >&2; exit 1; }
  [ "$(grep -c 'python3 train.py' <<<"$block")" -eq 1 ] ||
    { echo "package: README's operator quick start names its program 'python3 train.py' not exactly once" >&2; exit 1; }
  echo "package: the README's operator quick start:"
  sed 's/^/package:   /' <<<"$block"
  {
    echo 'set -euo pipefail'
    sed "s|python3 train.py|$app be ms=60000|" <<<"$block"
    echo "echo \"\$!\" >$work/program.pid"
  } >"$work/quick_start.sh"
  quick_start_ran=1
  if ! (cd "$build_dir/package" && PATH="$repo/tests/package:$PATH" LD_LIBRARY_PATH="$standin_driver" \
        CUDA_MPS_PIPE_DIRECTORY="$work/mps" CONCORD_FAKE_SYSTEMD_STATE="$work/systemd" bash "$work/quick_start.sh") \
       >"$work/quick_start.out" 2>&1; then
    cat "$work/quick_start.out" >&2
    [ ! -f "$work/systemd/concordd.log" ] || { echo "package: concordd's log:" >&2; cat "$work/systemd/concordd.log" >&2; }
    echo "package: the README's operator quick start failed" >&2
    exit 1
  fi
  sed 's/^/package: | /' "$work/quick_start.out"
  grep -q '^concord doctor: every check passed$' "$work/quick_start.out" ||
    { echo "package: concord doctor did not pass in the quick start" >&2; exit 1; }
  grep -Eq '^ +[0-9]+ +[^ ]+ +train +BE ' "$work/quick_start.out" ||
    { echo "package: concord top --once did not list the program as tenant 'train'" >&2; exit 1; }
  echo "package: the README's operator quick start ran: concord doctor passed, concord top listed the program"
  upgrade_under_the_program
}
# The package installed again over itself (an upgrade, to dpkg) while the quick start's program
# runs: its postinst restarts the unit (systemctl try-restart, through the stand-in systemctl; a
# container without systemd gets /run/systemd/system for the while, as the postinst asks), and the
# program, still running, is a tenant of the new daemon within 5 s.
upgrade_under_the_program() {
  local old_pid new_pid made=""
  old_pid=$(cat "$work/systemd/concordd.pid")
  [ -d /run/systemd/system ] || { mkdir -p /run/systemd/system; made=1; }
  if ! PATH="$repo/tests/package:$PATH" CONCORD_FAKE_SYSTEMD_STATE="$work/systemd" dpkg -i "$deb" >"$work/upgrade.out" 2>&1; then
    [ -z "$made" ] || rmdir /run/systemd/system
    cat "$work/upgrade.out" >&2
    echo "package: dpkg -i over the installed package failed" >&2
    exit 1
  fi
  [ -z "$made" ] || rmdir /run/systemd/system
  new_pid=$(cat "$work/systemd/concordd.pid" 2>/dev/null || true)
  [ -n "$new_pid" ] && [ "$new_pid" != "$old_pid" ] && kill -0 "$new_pid" 2>/dev/null ||
    { echo "package: the upgrade did not restart concordd (pid $old_pid, now '${new_pid}')" >&2; exit 1; }
  kill -0 "$(cat "$work/program.pid")" 2>/dev/null || { echo "package: the program ended with the upgrade" >&2; exit 1; }
  local listed=""
  for _ in $(seq 100); do
    if /usr/bin/concord top --once 2>/dev/null | grep -Eq '^ +[0-9]+ +[^ ]+ +train +BE '; then listed=1; break; fi
    sleep 0.05
  done
  [ -n "$listed" ] || { /usr/bin/concord top --once >&2 || true; echo "package: after the upgrade the program was not a tenant of the new daemon within 5 s" >&2; exit 1; }
  echo "package: dpkg -i over it restarted concordd (pid $old_pid -> $new_pid) and the running program registered again"
}
# What the quick start left running: the program, the daemon (through the fake systemctl) and the
# fake MPS control daemon; ended by their pids.
stop_quick_start() {
  [ -n "${quick_start_ran:-}" ] || return 0
  [ ! -f "$work/program.pid" ] || kill "$(cat "$work/program.pid")" 2>/dev/null || true
  CONCORD_FAKE_SYSTEMD_STATE="$work/systemd" tests/package/systemctl stop concordd || true
  echo quit | CUDA_MPS_PIPE_DIRECTORY="$work/mps" tests/package/nvidia-cuda-mps-control || true
}

if [ "${CI:-}" = true ] || [ "${CONCORD_PACKAGE_INSTALL:-0}" = 1 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "package: installing the package needs root" >&2; exit 1; }
  # Installed (not merely known to dpkg: a package removed without --purge stays known).
  installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
  if installed concord || installed concord-dev; then
    echo "package: a concord package is installed already; leaving it alone" >&2
    exit 1
  fi
  trap 'stop_quick_start; dpkg -P concord-dev concord >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  if [ -n "$intercept" ]; then
    run_quick_start  # installs concord with dpkg -i
    dpkg -i "$dev" >/dev/null
  else
    echo "package: the README's operator quick start needs the interception library: not run (a build without CUDA)"
    dpkg -i "$deb" "$dev" >/dev/null
  fi
  [ "$(command -v concord)" = /usr/bin/concord ] || { echo "package: concord is not /usr/bin/concord" >&2; exit 1; }
  # By name: the library is on the loader's default path.
  XDG_CONFIG_HOME="$work" check /usr/bin/concord /usr/share/concord libconcord_intercept.so
  stop_quick_start
  quick_start_ran=
  dpkg -P concord-dev concord >/dev/null
  [ ! -e /usr/bin/concord ] || { echo "package: /usr/bin/concord left after dpkg -P" >&2; exit 1; }
  echo "package: installed with dpkg -i, ran from /usr/bin, purged"
else
  dpkg-deb -x "$deb" "$work/root"
  XDG_CONFIG_HOME="$work" check "$work/root/usr/bin/concord" "$work/root/usr/share/concord" "$work/root/usr/lib/libconcord_intercept.so"
  echo "package: unpacked into a fresh folder and ran from it (CONCORD_PACKAGE_INSTALL=1: dpkg -i as root, and the README's operator quick start)"
fi
