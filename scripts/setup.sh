#!/usr/bin/env bash
# Installs the Debian packages Concord builds with (only those missing). Needs root or sudo.
#   scripts/setup.sh         everything: the build, the tests, benches, package and fuzzers
#   scripts/setup.sh --run   only what building and running `concord` needs (scripts/run_example.sh)
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config
          libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libsqlite3-dev
          libcpp-httplib-dev  # concordd's TCP metrics endpoint
          python3 python3-matplotlib)  # matplotlib: `concord plot`
if [ "${1:-}" != --run ]; then
  packages+=(git libgtest-dev libgmock-dev libbenchmark-dev
             python3-yaml
             dpkg-dev file  # CPack's Debian package (dpkg-shlibdeps, file)
             clang libclang-rt-14-dev  # libFuzzer for scripts/fuzz.sh
             munge slurmctld slurmd slurm-client libslurm-dev)  # the Slurm plugin and its loopback test (tests/slurm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

# Another package manager (unattended-upgrades, a second setup) may hold the dpkg or apt lock:
# wait for it, up to CONCORD_APT_LOCK_WAIT seconds (default 600), instead of failing at once.
lock_wait=${CONCORD_APT_LOCK_WAIT:-600}
deadline=$((SECONDS + lock_wait))
apt_get() {
  local log announced=""
  log=$(mktemp)
  while true; do
    if $sudo apt-get -o DPkg::Lock::Timeout="$((deadline > SECONDS ? deadline - SECONDS : 0))" "$@" 2>"$log"; then
      cat "$log" >&2
      rm -f "$log"
      return 0
    fi
    if ! grep -qiE "could not get lock|unable to acquire|is another process using it" "$log" || [ "$SECONDS" -ge "$deadline" ]; then
      cat "$log" >&2
      rm -f "$log"
      [ "$SECONDS" -ge "$deadline" ] && echo "setup: the package lock was still held after ${lock_wait} s" >&2
      return 1
    fi
    if [ -z "$announced" ]; then
      echo "setup: another package manager holds the lock; waiting up to $((deadline - SECONDS)) s" >&2
      announced=1
    fi
    sleep 5
  done
}
apt_get update -q
apt_get install -y -q --no-install-recommends "${missing[@]}"
