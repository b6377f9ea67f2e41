#!/usr/bin/env python3
"""bench/apps: unmodified PyTorch processes as tenants. An LC inference service (lc_service.py)
at a share of its alone capacity (Poisson arrivals) beside a BE training job (be_train.py), as
separate processes, under each scheme:

  timeslice          two plain processes (the GPU time-slices their contexts)
  priority-streams   one process, two threads (prio_streams.py): LC on a high-priority stream
  mps                both as MPS clients, no limit
  mps-be75|50|25     MPS, the BE client at CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=75|50|25
  mps-prio           MPS, the BE client at CUDA_MPS_CLIENT_PRIORITY=1 (below normal; the LC at 0)
  mps-prio-beN       the same, the BE also at N% of the threads
  concord            MPS clients under libconcord_intercept.so, concordd as a user starts it: no
                     --policy (the daemon's default)
  concord:POLICY     the same with concordd --policy POLICY
  concord:POLICY:dN  the same with concordd --be-depth N (BE launches released ahead at most N deep)
  concord:POLICY:sN:rM  the same, the BE confined while LC work is in flight to N SMs and M blocks
                     per SM (room: the policy's be_sms and be_blocks_per_sm); uN bounds the BE's
                     work in flight to N µs of its measured GPU time (orion's be_depth_us, sgdrc's
                     be_in_flight_us); bX sets bound_share
  SCHEME@free        a concord scheme with concordd not pinned (every CPU of the machine, as a
                     daemon started by hand runs): beside the pinned one, whether the daemon's
                     CPUs matter to the LC

  run.py OUTDIR [--combos C] [--loads 0.3,0.6] [--schemes S] [--rounds 3] [--requests 667]
         [--phase-s S] [--lc-cpus LIST --be-cpus LIST --sys-cpus LIST] [--gpu K] [--deadline-s T]

A combo is LC/BE: MODEL:BATCH[:graph]/MODEL:BATCH, e.g. resnet50:16:graph/resnet50:64,
bert:32:graph/bert:16, gpt:16/bert:16 (an eager decoder step) or llama:8:graph/llama:8 (an LLM
decode service beside a transformer's training, llm.py).

Rounds. The schemes run interleaved, A B C ... A B C ..., --rounds times; in every round the LC is
measured alone again. A round has two groups, each a set of resident processes started together,
built and warmed once, that serve one job after another (control.py) and end with the group:
- MPS (one MPS server), first: the LC alone as an MPS client, the BE alone as one, every concord
  scheme (its own concordd, LC and BE under the library) and every MPS scheme (a BE process of its
  own each, one LC process for all), in --schemes' order;
- plain (no MPS server): the LC alone, the BE alone (--be-alone-s), timeslice, priority-streams
  (only when --schemes has one of these two).
Within a group only the job's own processes work; the others wait idle (a stat every 5 ms). A job
beside a BE starts the BE, lets it run --lead-s alone, then runs the LC's phases (one per load, the
same arrival seeds for every scheme of a round), then pauses the BE; the BE's rate is taken over
each phase's window. Round 1 first calibrates the LC (200 requests back to back: capacity = 1 /
mean service time; 20 for an LLM service) and takes the SLO targets from its first alone. The
LC of the schemes in --trace-schemes is traced once more at the end of its round-1 group (PyTorch's
profiler over --trace-requests requests, the BE beside it: trace.json and trace.trace.json.gz),
after every measured job of the group, since the profiler may leave hooks in the process. Each job's results go to
OUTDIR/<combo>/round<K>/<entry>/ (lc.json, be.json; the library's counters, concordd's log and its
metrics sampled every --metrics-every s for concord schemes); a job already there is kept (rerun to
resume). --deadline-s ends the run before a job that would not finish in time (the rounds already
made stand). summarize.py OUTDIR makes the tables.

Every process is pinned: the LC's to --lc-cpus, the BE's to --be-cpus, concordd, the MPS server and
this script to --sys-cpus (the priority-streams process to the LC's and the BE's). --threads
samples, every 0.25 s of each job, which CPU each thread of the LC, the BE, concordd and the MPS
server ran on and how much CPU it used (threads.jsonl). The GPU's clocks and power are sampled
every 200 ms through the whole run (gpu.csv, nvidia-smi).

--gpu K runs everything on GPU K alone (CUDA_VISIBLE_DEVICES, its own MPS server and work folder
OUTDIR/work-gpuK): several run.py on several GPUs at once measure several combos at once
(bench/apps/run_gpus.sh).

Environment: CONCORDD (the daemon binary), INTERCEPT (libconcord_intercept.so), both needed only
for concord schemes; CONCORD_DEVICE_SPEC (concordd's --device-spec; default h200 or h100 from the
GPU's name); PYTHON (python3).
"""
import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import control  # noqa: E402
import procs  # noqa: E402
from procs import CPUS, GPU_ENV, Concordd, Mps, Resident, concord_scheme, log, mps_client_env, parse_combo, parse_cpus, pinned  # noqa: E402
from samplers import Sampler, gpu_sampler, mps_server_pids  # noqa: E402
from stats import percentile  # noqa: E402

PLAIN_SCHEMES = ("timeslice", "priority-streams")
SCHEMES = ["timeslice", "priority-streams", "mps", "mps-prio", "mps-prio-be50", "mps-be75", "mps-be50", "mps-be25", "concord"]
START = procs.START


def group_of(scheme):
    return "plain" if scheme in PLAIN_SCHEMES else "mps"


def check_scheme(scheme):
    if scheme in PLAIN_SCHEMES or scheme.removesuffix("@free") == "concord":
        return
    if scheme.startswith("mps"):
        mps_client_env(scheme)
    elif scheme.startswith("concord:"):
        concord_scheme(scheme)
    else:
        raise RuntimeError(f"unknown scheme '{scheme}' (known: {', '.join(SCHEMES)}, mps-beN, mps-prio-beN, concord:POLICY...)")


class Combo:
    """One combo's rounds: its settings, the jobs still to run, the groups that run them."""

    def __init__(self, a, c, schemes, work):
        self.a, self.c, self.schemes, self.work = a, c, schemes, work
        self.base = os.path.join(a.out, c["name"])
        os.makedirs(self.base, exist_ok=True)
        self.failures = []
        self.llm = c["lc_model"] == "llama"
        self.warmup = 2 if self.llm else 10
        self.settings_path = os.path.join(self.base, "settings.json")
        self.settings = load(self.settings_path) or {}
        self.startup_s = None  # measured at the first group
        # Sockets and MPS pipes under a short path (a Unix socket's path has at most 107 bytes).
        self.sockets = tempfile.mkdtemp(prefix="concord-apps-")

    # The plan: rates from the calibration, requests per phase, the targets from round 1's alone.
    def calibrated(self, doc):
        service_s = doc["mean_s"]
        rates = [load_ / service_s for load_ in self.a.loads]
        if self.a.phase_s:
            requests = [max(self.a.min_requests, min(self.a.requests, math.ceil(self.a.phase_s * r))) for r in rates]
        else:
            requests = [self.a.requests] * len(rates)
        self.settings.update({"loads": self.a.loads, "rates_rps": rates, "service_s": service_s, "requests": requests,
                              "rounds": self.a.rounds, "schemes": self.schemes, "gpu": self.a.gpu, "combo": self.c,
                              "lead_s": self.a.lead_s, "be_alone_s": self.a.be_alone_s, "slo_factor": self.a.slo_factor,
                              "cpus": {k: sorted(v) for k, v in CPUS.items()}, "llm_config": self.a.llm_config,
                              "clock": {"monotonic": time.monotonic(), "time": time.time()}})
        self.save()

    def targeted(self, alone_doc):
        if "targets_ms" not in self.settings:
            self.settings["targets_ms"] = [self.a.slo_factor * percentile(p["latency_s"], 99) * 1e3 for p in alone_doc["phases"]]
            self.save()

    def save(self):
        control.write_atomic(self.settings_path, self.settings)

    def target_ms(self):
        """The LC's registered target (a label: no lease policy reads it): round 1's first alone
        p99 x --slo-factor once measured, 100 ms before."""
        return (self.settings.get("targets_ms") or [100.0])[0]

    def rdir(self, k, entry):
        return os.path.join(self.base, f"round{k}", entry.replace(":", "-"))

    def done(self, k, entry):
        d = self.rdir(k, entry)
        files = ("be.json",) if entry.startswith("be-alone") else ("lc.json",) if entry in ("alone", "alone-mps") else ("lc.json", "be.json")
        return all(os.path.exists(os.path.join(d, f)) for f in files)

    def job_s(self, entry):
        """An estimate of a job's seconds (for --deadline-s)."""
        if entry.startswith("be-alone"):
            return self.a.lead_s + self.a.be_alone_s + 1.0
        rates, reqs = self.settings.get("rates_rps"), self.settings.get("requests")
        if not rates:
            return 10.0
        svc = self.settings["service_s"]
        s = sum(n / r + self.warmup * svc for n, r in zip(reqs, rates)) + (0 if entry.startswith("alone") else self.a.lead_s) + 1.0
        return s

    def left_s(self):
        return self.a.deadline_s - (time.monotonic() - START) if self.a.deadline_s else float("inf")

    # Jobs.
    def lc_job(self, lc, d, seed, ref):
        os.makedirs(d, exist_ok=True)
        lc.client.call(self.a.timeout, op="phases", rates=self.settings["rates_rps"], requests=self.settings["requests"], seed=seed,
                       out=os.path.join(d, "lc.json"), extra={"alone_ref": ref}, warmup=self.warmup)

    def pair_job(self, lc, be, d, seed, ref, sampler):
        os.makedirs(d, exist_ok=True)
        be.client.call(120, op="train")
        try:
            with sampler:
                time.sleep(self.a.lead_s)
                self.lc_job(lc, d, seed, ref)
        finally:
            be.client.call(300, op="pause", out=os.path.join(d, "be.json"))

    def trace_jobs(self, k, pairs):
        """Round 1's traces, after every measured job of the group (the profiler may leave its
        hooks in the process): each traced scheme's LC once more beside its BE under PyTorch's
        profiler. `pairs`: scheme -> (LC, BE)."""
        if k != 1 or not self.a.trace_requests:
            return
        for s in self.a.trace_schemes:
            if s not in pairs or os.path.exists(os.path.join(self.rdir(k, s), "trace.json")):
                continue
            lc, be = pairs[s]
            d = self.rdir(k, s)
            t = time.monotonic()
            if self.out_of_time or self.a.trace_requests / self.settings["rates_rps"][0] + 20.0 > self.left_s():
                self.skipped.append(f"round {k} trace of {s}")
                continue
            try:
                be.client.call(120, op="train")
                try:
                    time.sleep(self.a.lead_s)
                    lc.client.call(self.a.timeout, op="trace", rate=self.settings["rates_rps"][0], requests=self.a.trace_requests,
                                   seed=1000 * k + 7, out=os.path.join(d, "trace.json"))
                finally:
                    be.client.call(300, op="pause", out=os.path.join(d, "trace_be.json"))
                log(f"{self.c['name']} round {k} trace of {s}: {time.monotonic() - t:.1f} s")
            except (RuntimeError, OSError) as e:
                self.failures.append(f"{self.c['name']} round {k} trace of {s}: {e}")
                log(f"{self.c['name']} round {k} trace of {s}: FAILED: {e}")

    def be_alone_job(self, be, d):
        os.makedirs(d, exist_ok=True)
        be.client.call(120, op="train")
        t0 = time.monotonic() + self.a.lead_s
        time.sleep(self.a.lead_s + self.a.be_alone_s)
        t1 = time.monotonic()
        tmp = os.path.join(d, "be.segment.json")
        be.client.call(300, op="pause", out=tmp)
        doc = load(tmp)
        os.remove(tmp)
        control.write_atomic(os.path.join(d, "be.json"), {**doc, "window": [round(t0, 6), round(t1, 6)]})

    def run_job(self, k, entry, fn):
        """One job with its bookkeeping: skipped when done or out of time, its failure written."""
        if self.done(k, entry):
            return
        est = self.job_s(entry)
        if self.out_of_time or est + 15.0 > self.left_s():
            # Nothing runs after the first job that does not fit: the rounds made stay whole.
            self.out_of_time = True
            self.skipped.append(f"round {k} {entry}")
            return
        d = self.rdir(k, entry)
        t = time.monotonic()
        try:
            fn()
            log(f"{self.c['name']} round {k} {entry}: {time.monotonic() - t:.1f} s (estimated {est:.1f})")
            err = os.path.join(d, "error.txt")
            if os.path.exists(err):
                os.remove(err)
        except (RuntimeError, OSError, subprocess.SubprocessError, ValueError) as e:
            self.failures.append(f"{self.c['name']} round {k} {entry}: {e}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "error.txt"), "w") as f:
                f.write(str(e) + "\n")
            log(f"{self.c['name']} round {k} {entry}: FAILED: {e}")

    def resident(self, k, name, cmd, env, roles, tag):
        """A resident process of round k: its control folder under the work folder, its output in
        the round's logs/."""
        return Resident(name, cmd, env, roles, os.path.join(self.work, f"round{k}", tag),
                        os.path.join(self.base, f"round{k}", "logs", tag + ".log"))

    def start_all(self, residents):
        """Waits until every resident is warm; a process that ended or timed out is dropped (its
        jobs fail) and the others go on."""
        t = time.monotonic()
        ready = {}
        for name, r in residents.items():
            try:
                r.client.wait_ready(self.a.timeout)
                ready[name] = r
            except (RuntimeError, control.ProcessGone) as e:
                self.failures.append(f"{self.c['name']}: {name} did not start: {e}")
                log(f"{name}: did not start: {e}")
                r.stop()
        self.startup_s = time.monotonic() - t
        log(f"{self.c['name']}: {len(ready)} of {len(residents)} processes warm in {self.startup_s:.1f} s")
        return ready

    def group_fits(self, entries):
        startup = self.startup_s if self.startup_s is not None else 25.0
        first = self.job_s(entries[0]) if entries else 0.0
        if self.out_of_time or startup + first + 15.0 > self.left_s():
            self.out_of_time = True
            return False
        return True

    def calibrate(self, lc):
        """Round 1's first group: the LC's service time back to back, hence the rates."""
        cal = os.path.join(self.base, "calibrate.json")
        lc.client.call(self.a.timeout, op="calibrate", n=20 if self.llm else 200, out=cal)
        self.calibrated(load(cal))
        log(f"{self.c['name']}: service time {self.settings['service_s'] * 1e3:.2f} ms, rates "
            f"{', '.join(f'{r:.1f}' for r in self.settings['rates_rps'])} /s, requests {self.settings['requests']}")

    def need_calibration(self):
        return not os.path.exists(os.path.join(self.base, "calibrate.json")) or "rates_rps" not in self.settings

    # The two groups of a round.
    def plain_group(self, k):
        schemes = [s for s in self.schemes if group_of(s) == "plain"]
        if not schemes and any(group_of(s) == "mps" for s in self.schemes):
            return  # no plain scheme to compare with its alone: the MPS group's references serve
        todo = [e for e in ["alone", "be-alone", *schemes] if not self.done(k, e)]
        need_cal = self.need_calibration()
        if not todo and not need_cal:
            return
        if not self.group_fits(todo):
            self.skipped += [f"round {k} {e}" for e in todo]
            return
        residents = {}
        if need_cal or any(e in todo for e in ("alone", "timeslice")):
            residents["lc"] = self.resident(k, "LC (plain)", procs.lc_server_cmd(self.c, self.a), {}, ("lc",), "lc-plain")
        if any(e in todo for e in ("be-alone", "timeslice")):
            residents["be"] = self.resident(k, "BE (plain)", procs.be_server_cmd(self.c, self.a), {}, ("be",), "be-plain")
        if "priority-streams" in todo:
            residents["ps"] = self.resident(k, "priority-streams", procs.ps_server_cmd(self.c, self.a), {}, ("lc", "be"), "ps")
        ready = self.start_all(residents)
        try:
            if need_cal and "lc" in ready:
                self.calibrate(ready["lc"])
            if "rates_rps" not in self.settings:
                self.failures.append(f"{self.c['name']}: no calibration (the LC did not start)")
                return
            seed = 1000 * k
            if "lc" in ready:
                self.run_job(k, "alone", lambda: self.lc_job(ready["lc"], self.rdir(k, "alone"), seed, "alone"))
                alone = load(os.path.join(self.rdir(k, "alone"), "lc.json"))
                if alone:
                    self.targeted(alone)
            if "be" in ready:
                self.run_job(k, "be-alone", lambda: self.be_alone_job(ready["be"], self.rdir(k, "be-alone")))
            for s in schemes:
                if s == "timeslice" and "lc" in ready and "be" in ready:
                    pids = {"lc": [ready["lc"].pid], "be": [ready["be"].pid]}
                    self.run_job(k, s, lambda: self.pair_job(ready["lc"], ready["be"], self.rdir(k, s), seed, "alone",
                                                             Sampler(self.rdir(k, s), pids=pids, threads_every=self.a.threads_every)))
                elif s == "priority-streams" and "ps" in ready:
                    d = self.rdir(k, s)

                    def ps_job():
                        os.makedirs(d, exist_ok=True)
                        ready["ps"].client.call(self.a.timeout, op="pair", rates=self.settings["rates_rps"], requests=self.settings["requests"],
                                                seed=seed, lead_s=self.a.lead_s, warmup=self.warmup,
                                                out_lc=os.path.join(d, "lc.json"), out_be=os.path.join(d, "be.json"))
                    self.run_job(k, s, ps_job)
        finally:
            for r in ready.values():
                r.stop()

    def mps_group(self, k):
        schemes = [s for s in self.schemes if group_of(s) == "mps"]
        if not schemes:
            return
        todo = [e for e in ["alone-mps", "be-alone-mps", *schemes] if not self.done(k, e)]
        need_cal = self.need_calibration()
        if not todo and not need_cal:
            return
        if not self.group_fits(todo):
            self.skipped += [f"round {k} {e}" for e in todo]
            return
        with Mps(os.path.join(self.sockets, "mps")) as mps, contextlib.ExitStack() as stack:
            daemons, residents = {}, {}
            for i, s in enumerate(x for x in schemes if x.startswith("concord") and x in todo):
                policy, extra = concord_scheme(s)
                d = self.rdir(k, s)
                os.makedirs(d, exist_ok=True)
                try:
                    daemons[s] = stack.enter_context(Concordd(os.path.join(self.sockets, f"d{i}"), policy, mps.env, extra,
                                                              log_path=os.path.join(d, "concordd.log"), free=s.endswith("@free")))
                except (RuntimeError, OSError) as e:
                    self.failures.append(f"{self.c['name']} round {k} {s}: {e}")
                    with open(os.path.join(d, "error.txt"), "w") as f:
                        f.write(str(e) + "\n")
            if need_cal or any(e in todo for e in ["alone-mps", *(s for s in schemes if s.startswith("mps"))]):
                residents["lc"] = self.resident(k, "LC (MPS)", procs.lc_server_cmd(self.c, self.a), mps.env, ("lc",), "lc-mps")
            for s in (x for x in schemes if x.startswith("mps") and x in todo):
                residents["be:" + s] = self.resident(k, f"BE ({s})", procs.be_server_cmd(self.c, self.a), {**mps.env, **mps_client_env(s)},
                                                     ("be",), "be-" + s)
            if not self.done(k, "be-alone-mps") and "be:mps" not in residents:
                residents["be:mps"] = Resident("BE (mps)", procs.be_server_cmd(self.c, self.a), mps.env, ("be",), "be-mps")
            for s, daemon in daemons.items():
                d = self.rdir(k, s)
                common = {**mps.env, "LD_PRELOAD": os.environ["INTERCEPT"], "CONCORD_SOCKET": daemon.socket}
                lc_env = {**common, "CONCORD_CLASS": "lc", "CONCORD_NAME": "lc", "CONCORD_TARGET_MS": f"{self.target_ms():.3f}",
                          "CONCORD_INTERCEPT_STATS": os.path.join(d, "lc_intercept.json")}
                # The library's counters say which share of the BE's launches each mechanism touched.
                be_env = {**common, "CONCORD_CLASS": "be", "CONCORD_NAME": "be", "CONCORD_INTERCEPT_STATS": os.path.join(d, "be_intercept.json")}
                tag = s.replace(":", "-")
                residents["lc:" + s] = self.resident(k, f"LC ({s})", procs.lc_server_cmd(self.c, self.a), lc_env, ("lc",), "lc-" + tag)
                residents["be:" + s] = self.resident(k, f"BE ({s})", procs.be_server_cmd(self.c, self.a), be_env, ("be",), "be-" + tag)
            ready = self.start_all(residents)
            mps_pids = mps_server_pids()
            try:
                if need_cal and "lc" in ready:
                    self.calibrate(ready["lc"])
                if "rates_rps" not in self.settings:
                    self.failures.append(f"{self.c['name']}: no calibration (the LC did not start)")
                    return
                seed, pairs = 1000 * k, {}
                if "lc" in ready:
                    self.run_job(k, "alone-mps", lambda: self.lc_job(ready["lc"], self.rdir(k, "alone-mps"), seed, "alone-mps"))
                    alone = load(os.path.join(self.rdir(k, "alone-mps"), "lc.json"))
                    if alone:
                        self.targeted(alone)
                if "be:mps" in ready:
                    self.run_job(k, "be-alone-mps", lambda: self.be_alone_job(ready["be:mps"], self.rdir(k, "be-alone-mps")))
                for s in schemes:
                    d = self.rdir(k, s)
                    if s.startswith("mps"):
                        lc, be, metrics = ready.get("lc"), ready.get("be:" + s), None
                    else:
                        lc, be = ready.get("lc:" + s), ready.get("be:" + s)
                        metrics = daemons[s].metrics if s in daemons else None
                    if lc is None or be is None:
                        if not self.done(k, s) and not os.path.exists(os.path.join(d, "error.txt")):
                            self.failures.append(f"{self.c['name']} round {k} {s}: its processes did not start")
                        continue
                    pids = {"lc": [lc.pid], "be": [be.pid], "mps": mps_pids}
                    if s in daemons:
                        pids["daemon"] = [daemons[s].proc.pid]
                    self.run_job(k, s, lambda lc=lc, be=be, d=d, metrics=metrics, pids=pids: self.pair_job(
                        lc, be, d, seed, "alone-mps", Sampler(d, metrics, self.a.metrics_every, pids, self.a.threads_every)))
                    pairs[s] = (lc, be)
                self.trace_jobs(k, pairs)
            finally:
                for r in ready.values():
                    r.stop()

    def run(self):
        self.skipped, self.out_of_time = [], False
        try:
            with gpu_sampler(os.path.join(self.base, f"gpu-{int(time.time())}.csv"),
                             GPU_ENV.get("CUDA_VISIBLE_DEVICES", "0"), pinned("sys")):
                for k in range(1, self.a.rounds + 1):
                    # The MPS group first: the default configuration and plain MPS come first in
                    # every round, so a run cut short by its deadline loses time slicing first.
                    self.mps_group(k)
                    self.plain_group(k)
        finally:
            shutil.rmtree(self.sockets, ignore_errors=True)
        if self.skipped:
            log(f"{self.c['name']}: out of time (--deadline-s {self.a.deadline_s:g}): skipped {', '.join(self.skipped)}")
            with open(os.path.join(self.base, "skipped.txt"), "a") as f:
                f.write("\n".join(self.skipped) + "\n")
        return self.failures


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--combos", default="resnet50:16:graph/resnet50:64")
    ap.add_argument("--loads", default="0.3,0.6")
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=667, help="LC requests per load per round (3 rounds: 2,001 per point)")
    ap.add_argument("--phase-s", type=float, default=0.0,
                    help="cap each phase at about this many seconds of arrivals (an LLM service's requests are long)")
    ap.add_argument("--min-requests", type=int, default=5, help="with --phase-s, at least this many requests per phase")
    ap.add_argument("--be-alone-s", type=float, default=4.0, help="the BE alone per round, seconds")
    ap.add_argument("--lead-s", type=float, default=1.0, help="the BE runs this long before the LC's phases start")
    ap.add_argument("--slo-factor", type=float, default=1.5, help="the LC target: this x its alone p99 at the load (round 1)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds any one job or start-up may take")
    ap.add_argument("--deadline-s", type=float, default=0.0, help="no job starts that would end after this many seconds")
    ap.add_argument("--gpu", type=int, help="run on this GPU alone (CUDA_VISIBLE_DEVICES), with a work folder of its own")
    ap.add_argument("--lc-cpus", help="pin the LC service's processes to these CPUs (taskset's list form, e.g. 0-1)")
    ap.add_argument("--be-cpus", help="pin the BE job's processes to these CPUs")
    ap.add_argument("--sys-cpus", help="pin concordd, the MPS server and this script to these CPUs")
    ap.add_argument("--metrics-every", type=float, default=0.1, help="concord schemes: sample the daemon's metrics this often (s)")
    ap.add_argument("--threads-every", type=float, default=0.0, help="sample the processes' threads' CPUs this often (s; 0: off)")
    ap.add_argument("--trace-schemes", default="", help="schemes whose LC is traced after its phases (PyTorch's profiler)")
    ap.add_argument("--trace-requests", type=int, default=20)
    ap.add_argument("--llm-config", default="", help="llama combos: llm.py's configuration, key=value,...")
    ap.add_argument("--llm-impl", choices=("auto", "transformers", "hand"), default="auto")
    a = ap.parse_args()
    for role, text in (("lc", a.lc_cpus), ("be", a.be_cpus), ("sys", a.sys_cpus)):
        if text:
            CPUS[role] = parse_cpus(text, f"--{role}-cpus")
    if "sys" in CPUS:
        os.sched_setaffinity(0, CPUS["sys"])
    a.loads = [float(x) for x in a.loads.split(",") if x]
    a.trace_schemes = [s for s in a.trace_schemes.split(",") if s]
    if not a.trace_schemes:
        a.trace_requests = 0
    schemes = [s for s in a.schemes.split(",") if s]
    for s in schemes:
        try:
            check_scheme(s)
        except RuntimeError as e:
            ap.error(str(e))
    if any(s.startswith("concord") for s in schemes):
        for var in ("CONCORDD", "INTERCEPT"):
            if not os.environ.get(var):
                ap.error(f"concord schemes need {var}")
    if any(not 0 < x < 1 for x in a.loads):
        ap.error("--loads must be in (0, 1)")
    if a.rounds < 1 or a.requests < 1:
        ap.error("--rounds and --requests must be >= 1")
    if a.gpu is not None:
        GPU_ENV["CUDA_VISIBLE_DEVICES"] = str(a.gpu)
    work = os.path.join(a.out, "work" if a.gpu is None else f"work-gpu{a.gpu}")
    os.makedirs(work, exist_ok=True)
    failures = []
    for combo in a.combos.split(","):
        c = parse_combo(combo)
        failures += Combo(a, c, schemes, os.path.join(work, c["name"])).run()
    if failures:
        print("run.py: failed runs:\n  " + "\n  ".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
