#!/usr/bin/env bash
# Slurm jobs as Concord tenants, end to end on one machine without a GPU (docs/cluster.md): munge,
# slurmctld and slurmd from Debian on loopback with a generated config (shards on a stand-in device
# file), concordd, and concord_spank.so in the plugin stack. Checks, from the daemon's log, its
# metrics and its tenant list:
#   - a batch job and an srun step that give --concord-* options register with their class, target,
#     weight, name (slurm-<job>.<step>) and uid (one job submitted by another user);
#   - a job without the options registers nothing;
#   - scancel of a running job removes its tenant within one second;
#   - a bad --concord-class, --concord-target-ms or --concord-memory is refused at submission,
#     naming the option; --concord-memory reaches a step as CONCORD_MEMORY_LIMIT (be) or
#     CONCORD_MEMORY_RESERVE (lc);
#   - LC by the cluster's policy: another user's lc job in a partition plugstack.conf lists
#     (lc_partitions) is an LC tenant; one in another partition is refused LC by the daemon;
#   - everything is torn down at the end (also on failure).
# Usage: slurm_jobs.sh CONCORDD CONCORD_CLI SPANK_PLUGIN INTERCEPT_LIBRARY PROBE LIBCUDA_STUB
# Exit status: 0 pass, 1 fail, 77 skipped (the reason on stdout): not root, or Slurm, munge or a
# built piece missing.
set -uo pipefail
concordd=$1 cli=$2 spank=$3 intercept=$4 probe=$5 stub=$6

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (it starts munged, slurmctld and slurmd)"
for tool in munged slurmctld slurmd sbatch srun scancel squeue sinfo python3; do
  command -v "$tool" >/dev/null || skip "$tool not found (apt-get install munge slurmctld slurmd slurm-client)"
done
for f in "$concordd" "$cli" "$spank" "$intercept" "$probe" "$stub"; do
  [ -e "$f" ] || skip "$f not built or not found"
done

D=$(mktemp -d /tmp/concord-slurm.XXXXXX)
chmod 755 "$D"
pids=()
fail=0
teardown() {
  timeout 5 scancel --full --quiet --user=root 2>/dev/null
  timeout 5 scancel --full --quiet --user=nobody 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for f in "$D/run/slurmd.pid" "$D/run/slurmctld.pid" "$D/munge/munged.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  # Whatever is left of this test's daemons and jobs (they all name its folder): 3 s, then KILL.
  for _ in $(seq 30); do
    pgrep -f "$D" >/dev/null || break
    sleep 0.1
  done
  pkill -9 -f "$D" 2>/dev/null
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  if [ "$fail" -ne 0 ]; then
    for log in "$D"/log/*.log "$D"/out/*; do
      [ -f "$log" ] && { echo "---- $log"; tail -n 40 "$log"; }
    done
  fi
  rm -rf "$D"
}
trap teardown EXIT
check() {  # check DESCRIPTION COMMAND...: one line per check; a failure marks the test failed
  if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi
}

mkdir -p "$D"/{bin,lib,log,run,state,spool,dev,munge,out,cuda}
chmod 1777 "$D/out"
# What the jobs run, where any user may read it (the build tree may sit in root's home).
cp "$probe" "$D/bin/probe"
cp "$intercept" "$D/lib/libconcord_intercept.so"
# No GPU: the CUDA toolkit's stub libcuda stands in for the driver (every call answers "stub
# library"); the interception library needs only to find it to register.
ln -s "$stub" "$D/cuda/libcuda.so.1"
chmod -R a+rX "$D/bin" "$D/lib" "$D/cuda"
mknod "$D/dev/nvidia0" c 1 3  # the stand-in GPU the shards are on (a /dev/null twin)

# munge with its own key and socket, leaving any system munged alone.
head -c 1024 /dev/urandom >"$D/munge/munge.key"
chmod 600 "$D/munge/munge.key"
munged --force --key-file="$D/munge/munge.key" --socket="$D/munge/munge.sock" --pid-file="$D/munge/munged.pid" \
  --log-file="$D/log/munged.log" --seed-file="$D/munge/munged.seed" || { fail=1; echo "FAIL: munged did not start"; exit 1; }

port=$((20000 + RANDOM % 20000))
host=$(hostname -s)
cat >"$D/slurm.conf" <<CONF
ClusterName=concordci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.sock
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu,shard
ReturnToService=2
MpiDefault=none
KillWait=1
PlugStackConfig=$D/plugstack.conf
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 Gres=gpu:1,shard:8 State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=other Nodes=ALL Default=NO MaxTime=INFINITE State=UP
CONF
cat >"$D/gres.conf" <<CONF
AutoDetect=off
Name=gpu File=$D/dev/nvidia0
Name=shard Count=8 File=$D/dev/nvidia0
CONF
echo "required $spank socket=$D/concordd.sock preload=$D/lib/libconcord_intercept.so lc_partitions=ci" >"$D/plugstack.conf"
export SLURM_CONF=$D/slurm.conf

# One device taking every tenant, whatever GPUs this machine has (the stub driver names none).
mkdir -p "$D/no-driver"
"$concordd" --socket "$D/concordd.sock" --socket-mode 0666 --policy orion --stale-after 0.5 --driver-root "$D/no-driver" \
  --metrics-socket "$D/metrics.sock" >"$D/log/concordd.log" 2>&1 &
pids+=($!)
slurmctld -f "$D/slurm.conf" || { fail=1; echo "FAIL: slurmctld did not start"; exit 1; }
slurmd -f "$D/slurm.conf" || { fail=1; echo "FAIL: slurmd did not start"; exit 1; }
for _ in $(seq 100); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 0.1
done
check "slurmd registered with slurmctld (node idle)" bash -c "sinfo -h -o %t | grep -q idle"
[ "$fail" -eq 0 ] || exit 1

# Every job's processes find the stub driver (submission exports the environment).
export LD_LIBRARY_PATH=$D/cuda

tenants() { "$cli" top --once --socket "$D/concordd.sock" 2>/dev/null; }
# The daemon's Prometheus text, from its metrics socket.
cat >"$D/metrics.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode().split("\r\n\r\n", 1)[-1])
PY
metrics() { python3 "$D/metrics.py" "$D/metrics.sock"; }
# wait_for PATTERN [SECONDS]: until the tenant list shows PATTERN (an extended regex).
wait_for() {
  local until=$((SECONDS + ${2:-15}))
  while [ "$SECONDS" -lt "$until" ]; do
    tenants | grep -Eq "$1" && return 0
    sleep 0.1
  done
  return 1
}

lc=$(sbatch --parsable --concord-class=lc --concord-target-ms=25 --gres=shard:1 -o "$D/out/lc.out" --wrap "$D/bin/probe 120")
be=$(cd "$D/out" && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" \
  sbatch --parsable --concord-class=be --concord-weight=3 --gres=shard:1 -o "$D/out/be.out" --wrap "$D/bin/probe 120")
plain=$(sbatch --parsable --gres=shard:1 -o "$D/out/plain.out" --wrap "$D/bin/probe 120")
echo "jobs: lc $lc, be $be (user nobody), plain $plain"
nobody=$(id -u nobody)
# The tenant list: ID GPU NAME CLASS UID PID WEIGHT LAUNCHES DONE TARGETms ...
check "the lc batch job is an LC tenant named slurm-$lc.batch, uid 0, target 25 ms" \
  wait_for "^ +[0-9]+ +[0-9-]+ slurm-$lc\.batch +LC +0 +[0-9]+ +1 +[0-9]+ +[0-9]+ +25\.000 "
check "the be batch job (user nobody) is a BE tenant named slurm-$be.batch, uid $nobody, weight 3" \
  wait_for "^ +[0-9]+ +[0-9-]+ slurm-$be\.batch +BE +$nobody +[0-9]+ +3 "
check "a job step through srun is a tenant named slurm-<job>.0" \
  bash -c "timeout 30 srun --concord-class=be --gres=shard:1 -n1 $D/bin/probe 1 >$D/out/step.out 2>&1 &&
           grep -q 'request marks 0 0' $D/out/step.out && grep -Eq '\"event\":\"tenant_joined\"[^}]*\"name\":\"slurm-[0-9]+\\.0\"' $D/log/concordd.log"
# The plain job is running (its probe printed) and is no tenant.
for _ in $(seq 100); do grep -q probe "$D/out/plain.out" 2>/dev/null && break; sleep 0.1; done
tenants_before=$(grep -c '"event":"tenant_joined"' "$D/log/concordd.log")
check "the job without options ran without the library" grep -q 'no interception library' "$D/out/plain.out"
sleep 0.5  # the metrics snapshot is refreshed about every 200 ms
metrics >"$D/out/metrics.txt"
check "the metrics name the LC job's tenant with its device, class and uid" \
  grep -Eq "concord_tenant_launches_total\{tenant=\"[0-9]+\",device=\"0\",name=\"slurm-$lc\.batch\",class=\"lc\",uid=\"0\"\}" "$D/out/metrics.txt"
check "the metrics name the nobody job's tenant with its uid" \
  grep -Eq "name=\"slurm-$be\.batch\",class=\"be\",uid=\"$nobody\"" "$D/out/metrics.txt"
check "the metrics count the GPU's two tenants (the srun step has ended)" grep -q 'concord_device_tenants{device="0"} 2' "$D/out/metrics.txt"
check "the daemon's log has the LC tenant's class, target and uid" \
  grep -Eq "\"class\":\"lc\".*\"event\":\"tenant_joined\".*\"name\":\"slurm-$lc\.batch\".*\"target_ms\":25\.0.*\"uid\":0" "$D/log/concordd.log"

# scancel: the job's processes end, their connection closes, the tenant goes.
t0=$(date +%s%N)
scancel "$lc"
gone=""
while [ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 3000 ]; do
  if ! tenants | grep -q "slurm-$lc\.batch"; then gone=$(( ($(date +%s%N) - t0) / 1000000 )); break; fi
  sleep 0.02
done
echo "scancel $lc: tenant gone after ${gone:-more than 3000} ms"
check "scancel removed the job's tenant within one second" test -n "$gone" -a "${gone:-9999}" -le 1000
check "the be job's tenant is still there" wait_for "slurm-$be\.batch +BE" 1

# Bad values are refused when the job is submitted, naming the option.
out=$(timeout 30 sbatch --concord-class=gpu --wrap true 2>&1)
rc=$?
echo "sbatch --concord-class=gpu: exit $rc: $out"
check "a bad --concord-class is refused at submission" test "$rc" -ne 0
check "the refusal names --concord-class and what it must be" grep -q -- "--concord-class='gpu': must be lc or be" <<<"$out"
out=$(timeout 30 sbatch --concord-class=lc --wrap true 2>&1)
rc=$?
echo "sbatch --concord-class=lc: exit $rc: $out"
check "lc without --concord-target-ms is refused, naming it" bash -c "[ $rc -ne 0 ] && grep -q -- '--concord-target-ms' <<<\"\$1\"" _ "$out"
check "be with a target is refused" bash -c "! timeout 30 srun --concord-class=be --concord-target-ms=5 true >/dev/null 2>&1"
check "the two batch jobs and the srun step with options joined, and no other job did" \
  test "$(grep -c '"event":"tenant_joined"' "$D/log/concordd.log")" -eq "$tenants_before" -a "$tenants_before" -eq 3
# --concord-memory: a bad size is refused at submission, naming the option; a be step gets it as
# its own limit, an lc step as its reservation.
out=$(timeout 30 sbatch --concord-class=lc --concord-target-ms=5 --concord-memory=abc --wrap true 2>&1)
rc=$?
echo "sbatch --concord-memory=abc: exit $rc: $out"
check "a bad --concord-memory is refused at submission, naming it" \
  bash -c "[ $rc -ne 0 ] && grep -q -- \"--concord-memory='abc': is not a size\" <<<\"\$1\"" _ "$out"
check "a be step's --concord-memory is its CONCORD_MEMORY_LIMIT" \
  bash -c "timeout 30 srun --concord-class=be --concord-memory=512M -n1 printenv CONCORD_MEMORY_LIMIT | grep -qx 512M"
check "an lc step's --concord-memory is its CONCORD_MEMORY_RESERVE" \
  bash -c "timeout 30 srun --concord-class=lc --concord-target-ms=5 --concord-memory=2G -n1 printenv CONCORD_MEMORY_RESERVE | grep -qx 2G"

# LC by the cluster's policy: nobody may not register LC by the daemon's own list (root and its
# group), but its lc job in partition ci (lc_partitions=ci) gets the step's grant; in partition
# other it does not, and the daemon refuses its LC registration with the reason.
as_nobody() { (cd "$D/out" && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" "$@"); }
lcn=$(as_nobody sbatch --parsable --concord-class=lc --concord-target-ms=30 --gres=shard:1 -o "$D/out/lcn.out" --wrap "$D/bin/probe 120")
lco=$(as_nobody sbatch --parsable --partition=other --concord-class=lc --concord-target-ms=30 --gres=shard:1 -o "$D/out/lco.out" \
  --wrap "$D/bin/probe 120")
echo "lc jobs of nobody: $lcn (partition ci), $lco (partition other)"
check "nobody's lc job in a listed partition is an LC tenant of uid $nobody" \
  wait_for "^ +[0-9]+ +[0-9-]+ slurm-$lcn\.batch +LC +$nobody +[0-9]+ +1 +[0-9]+ +[0-9]+ +30\.000 "
check "the daemon logged the step's grant" grep -Eq "\"event\":\"lc_granted\".*\"label\":\"slurm-$lcn\.batch\".*\"uid\":$nobody" "$D/log/concordd.log"
refused=""
for _ in $(seq 150); do
  grep -q "uid $nobody may not register latency-critical tenants" "$D/log/concordd.log" && { refused=1; break; }
  sleep 0.1
done
check "nobody's lc job in another partition is refused LC by the daemon, with the reason" test -n "$refused"
check "and is no LC tenant" bash -c "! $cli top --once --socket $D/concordd.sock | grep -Eq 'slurm-$lco\.batch +LC'"

scancel "$be" "$plain" "$lcn" "$lco"
check "every tenant left once the jobs ended" wait_for "^concordd .*: 0 tenants" 5
exit "$fail"
