#!/usr/bin/env bash
# The bench/apps runs stored before rounds existed, recomputed with 95% bootstrap intervals
# (summarize.py; each archive unpacked into a temporary folder, never into the tree). Those runs
# had no scheme that ran concordd as a user starts it, so `concord-orion` (the gate) is the
# configuration judged against the baselines; every other concord variant shows as best-of-N.
#
#   bench/apps/intervals.sh      writes the *-intervals.md files named below
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
res=$root/bench/results
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# An archive the tree no longer holds (bench/results keeps the latest run per experiment) is read
# from the last commit that held it.
held=279ab4c
unpack() {  # ARCHIVE (relative to bench/results) DEST
  if [ -f "$res/$1" ]; then
    tar -xJf "$res/$1" -C "$2"
  else
    git -C "$root" show "$held:bench/results/$1" | tar -xJ -C "$2"
  fi
}
sum() {  # OUT.md TITLE DIR...
  local out=$1 title=$2
  shift 2
  {
    echo "<!-- made by bench/apps/intervals.sh from the archive named below; do not edit -->"
    echo "$title"
    echo
    python3 "$root/bench/apps/summarize.py" "$@" --default concord-orion
  } >"$out"
  echo "wrote $out"
}
unpack gpu-h200/apps-8f01583.tar.xz "$tmp"
sum "$res/gpu-h200/apps-8f01583-intervals.md" \
  "Four H200 of one host, 2026-11-28, bundle 8f01583, raw file gpu-h200/apps-8f01583.tar.xz (apps/): one round, 250 requests per load." \
  "$tmp/apps-8f01583/apps"
mkdir -p "$tmp/h100"
unpack gpu-h100/leases-d79e82f.tar.xz "$tmp/h100"
l=$tmp/h100/leases
sum "$res/gpu-h100/leases-d79e82f-intervals.md" \
  "Four H100 80GB HBM3 of one host, 2026-11-28, bundle d79e82f, raw file gpu-h100/leases-d79e82f.tar.xz (apps-resnet-d79e82f/apps, apps-3combos-d79e82f/apps): one round, 200 requests per load." \
  "$l/apps-resnet-d79e82f/apps" "$l/apps-3combos-d79e82f/apps"
sum "$res/gpu-h100/leases-d79e82f-repeats-intervals.md" \
  "The same H100 run with its repeats of the eager combos pooled as rounds (apps-repeats-d79e82f/{apps,rep0,rep1,rep2,rep3}; the repeats ran on different GPUs of the host): BERT b8 4 rounds, the decoder step 2." \
  "$l/apps-repeats-d79e82f/apps" "$l"/apps-repeats-d79e82f/rep{0,1,2,3}
mkdir -p "$tmp/room" "$tmp/e9" "$tmp/18"
unpack gpu-h200/room-1d7d749.tar.xz "$tmp/room"
unpack gpu-h200/concord-e9167da.tar.xz "$tmp/e9"
unpack gpu-h200/concord-18cedc5.tar.xz "$tmp/18"
# Each folder its own run (its own combos, bundle and day): one section each, never pooled.
out=$res/gpu-h200/apps-earlier-intervals.md
echo "<!-- made by bench/apps/intervals.sh from the archives named below; do not edit -->" >"$out"
for f in "room-1d7d749.tar.xz r2 (bundle 1d7d749, 200 requests per load):$tmp/room/room-1d7d749/r2/apps" \
         "room-1d7d749.tar.xz r3:$tmp/room/room-1d7d749/r3/apps" "room-1d7d749.tar.xz r4:$tmp/room/room-1d7d749/r4/apps" \
         "concord-e9167da.tar.xz apps1 (bundle e9167da, 250 requests per load):$tmp/e9/concord-e9167da/apps1" \
         "concord-e9167da.tar.xz apps2:$tmp/e9/concord-e9167da/apps2" \
         "concord-18cedc5.tar.xz apps (bundle 18cedc5, 250 requests per load):$tmp/18/apps"; do
  {
    echo
    echo "# H200, 2026-11-28/29, ${f%%:*}"
    echo
    python3 "$root/bench/apps/summarize.py" "${f#*:}" --default concord-orion | sed 's/^# bench/## bench/; s/^## /### /'
  } >>"$out"
done
echo "wrote $out"
