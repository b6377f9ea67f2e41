#!/usr/bin/env bash
# The LC/BE verdicts of docs/results.md, one part per device call (each within about PART_S
# seconds, default 540): run.py in 3 interleaved rounds, the LC alone again in every round, at loads
# 0.3 and 0.6, every process pinned, 667 requests per load per round (2,001 per point) for the
# request-per-request services; the LLM decode services (requests of tens to hundreds of ms) get
# PHASE_S seconds of arrivals per phase instead, and are judged on their per-token tail.
#
#   bench/apps/verdicts.sh PART OUTDIR
#
#   selftest  the LLM decode service, 2 requests each (lc_service.py --selftest: which
#             implementation ran, its request and per-token times): as CUDA graphs with
#             transformers' model where it captures (else the hand-rolled one), as graphs
#             hand-rolled when the first took transformers', and eager hand-rolled
#   1         gpt:16/bert:16 (the eager decoder step: the default configuration also with concordd
#             unpinned, concord@free; the LC of the default and of plain MPS traced at the end of
#             round 1; every process's threads sampled), then llama:8:graph/llama:8 (the LLM decode
#             service as CUDA graphs beside its training)
#   2         resnet50:16:graph/resnet50:64, then llama:8/llama:8 (the LLM decode service eager)
#   3         bert:32:graph/bert:16 with every baseline and the daemon's other lease policies
#
# Schemes, in the order they are cut when a part runs short: concord (concordd with no --policy:
# the default configuration), mps, mps-prio, mps-be50, timeslice, then mps-prio-be50, mps-be75,
# mps-be25, priority-streams, concord:priority-streams, concord:concord (part 3 has them all).
# Each combo's run.py gets --deadline-s: no job starts that would end past the part's time, so a
# part cut short keeps its complete rounds. The BE runs 0.5 s alone before each LC phase pair and
# 3 s alone per round for its reference rate. Writes OUTDIR/part<PART>.tar.xz (the run folders;
# summarize.py reads them unpacked) and OUTDIR/part<PART>.log.
#
# BIN (default .gpu/bin) holds concordd, LIB (default .gpu/lib/libconcord_intercept.so) the
# library; LC_CPUS, SYS_CPUS and BE_CPUS pin the LC's processes, concordd with the MPS server, and
# the BE's (defaults on N CPUs: 0-1, 2-3, 4-(N-1)); LLM_IMPL (default hand: the same model,
# capture-safe, for the graph and the eager service; auto or transformers take transformers'
# LlamaForCausalLM where it builds and captures, whose eager step carries its Python per layer)
# and LLM_CONFIG (llm.py's key=value,...) pass to the LLM services; PHASE_S (default 4) seconds of
# arrivals per LLM phase as graphs, PHASE_S + 2 eager.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -eq 2 ] || { echo "usage: $0 selftest|1|2|3 OUTDIR" >&2; exit 2; }
part=$1
outdir=$(mkdir -p "$2" && cd "$2" && pwd)
bin=${BIN:-$root/.gpu/bin}
lib=$(realpath "${LIB:-$root/.gpu/lib/libconcord_intercept.so}")
export CONCORDD=${CONCORDD:-$bin/concordd} INTERCEPT=${INTERCEPT:-$lib}
llm_impl=${LLM_IMPL:-hand}
llm_config=${LLM_CONFIG:-}
n=$(nproc)
lc=${LC_CPUS:-0-1}
sys=${SYS_CPUS:-2-3}
be=${BE_CPUS:-4-$((n - 1))}
part_s=${PART_S:-540}
phase_s=${PHASE_S:-4}
start=$SECONDS
log=$outdir/part$part.log

if [ "$part" = selftest ]; then
  # transformers' model where it builds and captures (auto), the hand-rolled one as graphs when auto
  # took transformers, and the hand-rolled one eager: which ran, what a request and a token take.
  status=0
  st() {  # IMPL MODE...
    taskset -c "$lc" python3 "$here/lc_service.py" --model llama --batch 8 --llm-impl "$1" --llm-config "$llm_config" \
      "${@:2}" --selftest 2>>"$log" | tee -a "$outdir/selftest.jsonl"
  }
  first=$(st auto --graph) || status=1
  case $first in *'"impl": "transformers"'*) st hand --graph >/dev/null || status=1 ;; esac
  st hand >/dev/null || status=1
  cat "$outdir/selftest.jsonl"
  exit $status
fi

run_dir=$outdir/part$part
mkdir -p "$run_dir"
common=(--rounds 3 --loads 0.3,0.6 --lead-s 0.5 --be-alone-s 3 --lc-cpus "$lc" --be-cpus "$be" --sys-cpus "$sys"
        --llm-impl "$llm_impl" --llm-config "$llm_config")
first="concord,mps,mps-prio,mps-be50,timeslice"

# combo schemes share_of_what_is_left [run.py options...]: one run.py with a deadline.
combo() {
  local c=$1 schemes=$2 share=$3
  shift 3
  local left=$((part_s - (SECONDS - start)))
  local mine=$((left * share / 100))
  echo "== $c ($schemes), $mine s of the $left s left" | tee -a "$log"
  python3 "$here/run.py" "$run_dir" --combos "$c" --schemes "$schemes" --deadline-s "$mine" "${common[@]}" "$@" >>"$log" 2>&1
  echo "   rc=$?, $((SECONDS - start)) s into the part" | tee -a "$log"
}

case $part in
  1)
    combo gpt:16/bert:16 "concord,concord@free,mps,mps-prio,mps-be50,timeslice" 65 --threads-every 0.25 --trace-schemes concord,mps
    combo llama:8:graph/llama:8 "concord,mps,mps-prio" 100 --phase-s "$phase_s" --threads-every 0.5
    ;;
  2)
    combo resnet50:16:graph/resnet50:64 "$first" 58
    combo llama:8/llama:8 "concord,mps,mps-prio" 100 --phase-s "$((phase_s + 2))"
    ;;
  3)
    combo bert:32:graph/bert:16 "$first,mps-prio-be50,mps-be75,mps-be25,priority-streams,concord:priority-streams,concord:concord" 100
    ;;
  *) echo "unknown part '$part' (selftest, 1, 2, 3)" >&2; exit 2 ;;
esac
# The work folders hold sockets and control files only.
rm -rf "$run_dir"/work*
tar -C "$outdir" -cJf "$outdir/part$part.tar.xz" "part$part" && rm -rf "$run_dir"
echo "part $part: $((SECONDS - start)) s; $(du -h "$outdir/part$part.tar.xz" | cut -f1) in part$part.tar.xz" | tee -a "$log"
