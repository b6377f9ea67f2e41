#!/usr/bin/env bash
# Instructions per dispatch inside the policies' hooks (less the backend calls made from them), by
# callgrind: a count that does not move with machine load, to set beside the bench's wall times.
#   bench/sched_cost/instructions.sh BUILD_DIR [policy ...]   (default: every policy; 4 and 16 tenants)
set -euo pipefail
build=${1:?usage: instructions.sh BUILD_DIR [policy ...]}
shift
bench="$build/bench/sched_cost/concord_sched_cost_bench"
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
[ -x "$bench" ] || { echo "instructions.sh: $bench not built" >&2; exit 1; }
policies=("$@")
if [ ${#policies[@]} -eq 0 ]; then
  policies=(serial streams static-partition round-robin random manual raise sq rr rd fedc fedcm krisp)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf "policy\ttenants\tdispatches\thook_instructions_per_dispatch\tbackend_instructions_per_dispatch\n"
for p in "${policies[@]}"; do
  for t in 4 16; do
    out="$tmp/cg.$p.$t"
    valgrind --tool=callgrind --toggle-collect='*Engine::call*' --callgrind-out-file="$out" "$bench" --once "$p" "$t" >"$out.log" 2>/dev/null
    d=$(grep -o 'dispatches=[0-9]*' "$out.log" | cut -d= -f2)
    callgrind_annotate --inclusive=yes "$out" 2>/dev/null >"$out.txt"
    total=$(grep "PROGRAM TOTALS" "$out.txt" | awk '{gsub(",","",$1); print $1}')
    backend=$(grep -E "^ *[0-9,]+ .*(Backend::can_implement|SimBackend::dispatch|SimBackend::set_sm_set|SimBackend::set_tlp|SimBackend::preempt|SimBackend::now|clock_gettime)" "$out.txt" |
              grep -v "=>" | awk '{gsub(",","",$1); s+=$1} END {print s+0}')
    printf "%s\t%s\t%s\t%s\t%s\n" "$p" "$t" "$d" $(((total - backend) / d)) $((backend / d))
  done
done
