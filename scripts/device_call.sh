#!/usr/bin/env bash
# One call on a lent GPU machine whose $OUT returns only a few files: runs COMMAND (a bash string,
# with $R set to a scratch results folder) and packs $R into $OUT/NAME.tar.gz, whatever COMMAND's
# exit status. Usage: scripts/device_call.sh NAME 'COMMAND'
# e.g. scripts/device_call.sh s7 'STAGES="tests" bash scripts/gpu_run.sh $R'
set -uo pipefail
cd "$(dirname "$0")/.."
name=$1
cmd=$2
: "${OUT:?OUT must name the folder that comes back}"
export R=/tmp/concord-$name
rm -rf "$R" && mkdir -p "$R"
bash -c "$cmd"
rc=$?
echo "device_call: command exit status $rc" | tee -a "$R/device_call.txt"
tar czf "$OUT/$name.tar.gz" -C "$(dirname "$R")" "$(basename "$R")"
ls -la "$OUT"
exit $rc
