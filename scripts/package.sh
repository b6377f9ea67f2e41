#!/usr/bin/env bash
# Builds the Debian package of a configured and built folder (CPack; CONCORD_BUILD_DIR, default
# build/) into BUILD/package/, then checks that it installs and runs. With CI=true (CI runs as root
# on a fresh machine) or CONCORD_PACKAGE_INSTALL=1: `dpkg -i`, /usr/bin/concord --version, a run
# and a figure from the installed files, then `dpkg -r`. Otherwise the package is unpacked into a
# fresh folder (dpkg-deb -x) and run from there, which needs no root.
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
debs=("$build"/package/*.deb)
deb=${debs[0]}
echo "package: $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --field "$deb" Package Version Architecture Depends Recommends

# What the package must hold (paths under /usr).
contents=$(dpkg-deb --contents "$deb" | awk '{print $NF}')
for want in ./usr/bin/concord ./usr/bin/concordd ./usr/lib/systemd/system/concordd.service ./usr/share/concord/plot.py ./usr/share/concord/examples/pair.yaml \
            ./usr/include/concord/backend.h ./usr/include/concord/device/context.cuh ./usr/lib/libconcord_core.a \
            ./usr/share/doc/concord/README.md ./usr/share/doc/concord/docs/schema/results-v1.json; do
  grep -qxF "$want" <<<"$contents" || { echo "package: $deb lacks $want" >&2; exit 1; }
done

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
}
if [ "${CI:-}" = true ] || [ "${CONCORD_PACKAGE_INSTALL:-0}" = 1 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "package: installing the package needs root" >&2; exit 1; }
  if dpkg -s concord >/dev/null 2>&1; then
    echo "package: a concord package is installed already; leaving it alone" >&2
    exit 1
  fi
  dpkg -i "$deb" >/dev/null
  trap 'dpkg -r concord >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  [ "$(command -v concord)" = /usr/bin/concord ] || { echo "package: concord is not /usr/bin/concord" >&2; exit 1; }
  XDG_CONFIG_HOME="$work" check /usr/bin/concord /usr/share/concord
  dpkg -r concord >/dev/null
  [ ! -e /usr/bin/concord ] || { echo "package: /usr/bin/concord left after dpkg -r" >&2; exit 1; }
  echo "package: installed with dpkg -i, ran from /usr/bin, removed"
else
  dpkg-deb -x "$deb" "$work/root"
  XDG_CONFIG_HOME="$work" check "$work/root/usr/bin/concord" "$work/root/usr/share/concord"
  echo "package: unpacked into a fresh folder and ran from it (CONCORD_PACKAGE_INSTALL=1: dpkg -i as root)"
fi
