#!/usr/bin/env python3
"""bench/apps: unmodified PyTorch processes as tenants. An LC inference service (lc_service.py)
at a share of its alone capacity (Poisson arrivals) beside a BE training job (be_train.py), as
separate processes, under each scheme:

  timeslice          two plain processes (the GPU time-slices their contexts)
  mps                both as MPS clients, no limit
  mps-be75|50|25     MPS, the BE client at CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=75|50|25
  priority-streams   one process, two threads (prio_streams.py): LC on a high-priority stream
  concord:POLICY     MPS clients under libconcord_intercept.so, scheduled by concordd --policy POLICY
  concord:POLICY:dN  the same with concordd --be-depth N (BE launches released ahead at most N deep)
  concord:POLICY:sN:rM  the same, the BE confined while LC work is in flight to N SMs and M blocks
                     per SM (room: the policy's be_sms and be_blocks_per_sm); uN bounds the BE's
                     work in flight to N µs of its measured GPU time (orion's be_depth_us, sgdrc's
                     be_in_flight_us); bX sets bound_share

  run.py OUTDIR [--combos C] [--loads 0.3,0.6] [--schemes S] [--requests N] [--gpu K]
         [--lc-cpus LIST] [--be-cpus LIST]

A combo is LC/BE: MODEL:BATCH[:graph]/MODEL:BATCH, e.g. resnet50:64:graph/resnet50:64 (default),
bert:32:graph/bert:16, bert:8/resnet50:64 (an eager service) or gpt:16/bert:16 (an eager decoder
step). Per combo it first measures the LC service alone back to back (its service time; capacity
= 1 / mean), then the LC alone at every load (one phase per load, in one process), the BE alone
(plain and as an MPS client), then each scheme: the BE job started, the LC service's phases one
after the other beside it, the BE's rate taken over each phase's window. Every run's JSON goes to
OUTDIR/<combo>/<scheme>/{lc,be}.json, logs beside them; a run already there is kept (rerun to
resume). summarize.py OUTDIR makes the tables.

--gpu K runs everything on GPU K alone (CUDA_VISIBLE_DEVICES, its own MPS server and work
folder OUTDIR/work-gpuK): several run.py on several GPUs at once measure several combos at once
(bench/apps/run_gpus.sh). --lc-cpus and --be-cpus pin the LC's and the BE's processes (the
priority-streams process, which holds both, to both sets) under every scheme alike.

Environment: CONCORDD (the daemon binary), INTERCEPT (libconcord_intercept.so), both needed only
for concord:* schemes; CONCORD_DEVICE_SPEC (concordd's --device-spec; default h200 or h100 from
the GPU's name); PYTHON (python3). The daemon's log and its Prometheus text (metrics.sock) are in
the work folder.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.environ.get("PYTHON", sys.executable)
SCHEMES = ["timeslice", "mps", "mps-be75", "mps-be50", "mps-be25", "priority-streams",
           "concord:orion", "concord:sgdrc", "concord:priority-streams"]
GPU_ENV = {}  # CUDA_VISIBLE_DEVICES of --gpu, for every process the bench starts
CPUS = {}  # role ("lc", "be") -> the CPUs its processes are pinned to (--lc-cpus, --be-cpus)


def parse_cpus(text, what):
    """A CPU list as taskset writes it ("0-3,8") -> a set of CPU numbers."""
    cpus = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise SystemExit(f"run.py: {what} '{text}': expected a CPU list such as 0-3,8")
    return cpus


def pinned(*roles):
    """Popen's preexec_fn pinning the child (and every thread it starts) to the CPUs of `roles`;
    None when no role is pinned. The same pinning applies under every scheme, so it moves no
    comparison; it takes away the scheduler's migrations of an eager service's launching thread,
    which made the same setting's service time vary by 30% from process to process."""
    cpus = set().union(*(CPUS.get(r, set()) for r in roles))
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def parse_combo(text):
    try:
        lc, be = text.split("/")
        lp, bp = lc.split(":"), be.split(":")
        return {"name": text.replace("/", "__").replace(":", "-"), "lc_model": lp[0], "lc_batch": int(lp[1]),
                "graph": len(lp) > 2 and lp[2] == "graph", "be_model": bp[0], "be_batch": int(bp[1])}
    except (ValueError, IndexError):
        raise SystemExit(f"run.py: combo '{text}': expected LCMODEL:BATCH[:graph]/BEMODEL:BATCH")


class Mps:
    """An MPS control daemon of our own (pipe and log directories under `work`). `env` is its
    clients' environment: with --gpu K the server sees GPU K alone and a client's
    CUDA_VISIBLE_DEVICES counts among the server's devices, so clients name it 0."""

    def __init__(self, work):
        self.dirs = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(work, "mps-pipe"),
                     "CUDA_MPS_LOG_DIRECTORY": os.path.join(work, "mps-log")}
        for d in self.dirs.values():
            os.makedirs(d, exist_ok=True)
        self.env = {**self.dirs, **({"CUDA_VISIBLE_DEVICES": "0"} if GPU_ENV else {})}

    def __enter__(self):
        subprocess.run(["nvidia-cuda-mps-control", "-d"], env={**base_env(), **self.dirs}, check=True)
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", env={**base_env(), **self.dirs}, timeout=30)
        time.sleep(1.0)


class Concordd:
    """concordd with one policy, its socket under `work`."""

    def __init__(self, work, policy, env, extra=()):
        self.socket = os.path.join(work, "concordd.sock")
        self.log = open(os.path.join(work, "concordd.log"), "w")
        self.cmd = [os.environ["CONCORDD"], "--socket", self.socket, "--policy", policy, "--device-spec", device_spec(),
                    "--metrics-socket", os.path.join(work, "metrics.sock"), *extra]
        if GPU_ENV and "--devices" not in extra:
            # --gpu K: the daemon manages GPU K alone (named by its PCI bus id, whatever the order).
            self.cmd += ["--devices", gpu_bus_id(GPU_ENV["CUDA_VISIBLE_DEVICES"])]
        self.env = env

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env={**base_env(), **self.env})
        for _ in range(100):
            if os.path.exists(self.socket):
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"concordd did not come up (see {self.log.name})")

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def concord_scheme(scheme):
    """concord:POLICY[:dN][:sN][:rN][:uN][:bX] -> (POLICY with its parameters, concordd's extra arguments):
    dN sets --be-depth N; sN the BE's SMs while LC work is in flight (be_sms=N), rN its blocks per
    SM then (be_blocks_per_sm=N), uN the BE's work in flight in µs of its measured GPU time per
    launch (orion: be_depth_us=N, else be_in_flight_us=N), bX the lease's bound_share=X (0: BE
    yields to every LC tenant)."""
    parts = scheme.split(":")[1:]
    if not parts or not parts[0]:
        raise RuntimeError(f"scheme '{scheme}': expected concord:POLICY[:dN][:sN][:rN][:uN][:bX]")
    extra, params = [], []
    for p in parts[1:]:
        if p.startswith("d") and p[1:].isdigit():
            extra += ["--be-depth", p[1:]]
        elif p.startswith("s") and p[1:].isdigit():
            params.append(f"be_sms={p[1:]}")
        elif p.startswith("r") and p[1:].isdigit():
            params.append(f"be_blocks_per_sm={p[1:]}")
        elif p.startswith("u") and p[1:].isdigit():
            # The BE's work in flight in µs of its measured GPU time per launch.
            params.append(("be_depth_us=" if parts[0] == "orion" else "be_in_flight_us=") + p[1:])
        elif p.startswith("b") and p[1:].replace(".", "", 1).isdigit():
            params.append(f"bound_share={p[1:]}")
        else:
            raise RuntimeError(f"scheme '{scheme}': '{p}' is not dN (BE depth), sN (BE SMs), rN (BE blocks per SM), "
                               "uN (BE work in flight, µs) or bX")
    return parts[0] + (":" + ";".join(params) if params else ""), extra


def device_spec():
    """concordd's --device-spec: CONCORD_DEVICE_SPEC, else h200 or h100 from the GPU's name."""
    if os.environ.get("CONCORD_DEVICE_SPEC"):
        return os.environ["CONCORD_DEVICE_SPEC"]
    try:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        name = ""
    return "h200" if "H200" in name else "h100"


def gpu_bus_id(index):
    """The PCI bus id of GPU `index` as nvidia-smi lists it."""
    return subprocess.run(["nvidia-smi", "-i", str(index), "--query-gpu=pci.bus_id", "--format=csv,noheader"], capture_output=True,
                          text=True, timeout=30, check=True).stdout.strip()


def wait_file(path, proc, timeout):
    t = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.args[1]} ended (rc {proc.returncode}) before {path} appeared")
        if time.monotonic() > t:
            raise RuntimeError(f"{path} did not appear within {timeout} s")
        time.sleep(0.05)


def finish(proc, timeout, what):
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise RuntimeError(f"{what} did not finish within {timeout} s")
    if rc != 0:
        raise RuntimeError(f"{what} failed (rc {rc})")


def lc_cmd(c, out, rates=None, requests=None, calibrate=None, ready=None):
    cmd = [PY, os.path.join(HERE, "lc_service.py"), "--model", c["lc_model"], "--batch", str(c["lc_batch"]), "--out", out]
    if c["graph"]:
        cmd.append("--graph")
    if calibrate:
        cmd += ["--calibrate", str(calibrate)]
    else:
        cmd += ["--rates", ",".join(f"{r:.6f}" for r in rates), "--requests", str(requests)]
    if ready:
        cmd += ["--ready", ready]
    return cmd


def be_cmd(c, out, seconds=600, stop=None, ready=None, kernels=None):
    cmd = [PY, os.path.join(HERE, "be_train.py"), "--model", c["be_model"], "--batch", str(c["be_batch"]),
           "--seconds", str(seconds), "--out", out]
    if kernels:
        cmd += ["--kernels-out", kernels]
    if stop:
        cmd += ["--stop-file", stop]
    if ready:
        cmd += ["--ready", ready]
    return cmd


def base_env():
    """This process's environment without the library's tenant settings (CONCORD_CLASS, ...) and
    LD_PRELOAD, for every process the bench starts: each scheme sets its own, and one inherited (say
    CONCORD_TARGET_MS from a smoke run) would make the BE's library refuse its settings and run
    pass-through, or put the library under a baseline."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("CONCORD_") and k != "CONCORD_DEVICE_SPEC") and k != "LD_PRELOAD"}
    return {**env, **GPU_ENV}


def pair(d, c, rates, requests, lc_env, be_env, timeout, kernels=None):
    """The BE job started and warm, then the LC service's phases, then the BE job stopped
    (`kernels`: the BE profiles windows into this file, be_train.py --kernels-out)."""
    stop, ready = os.path.join(d, "stop"), os.path.join(d, "be.ready")
    for f in (stop, ready):
        if os.path.exists(f):
            os.remove(f)
    with open(os.path.join(d, "be.log"), "w") as bl, open(os.path.join(d, "lc.log"), "w") as ll:
        be = subprocess.Popen(be_cmd(c, os.path.join(d, "be.json"), stop=stop, ready=ready, kernels=kernels), stdout=bl, stderr=subprocess.STDOUT,
                              env={**base_env(), **be_env}, preexec_fn=pinned("be"))
        try:
            wait_file(ready, be, timeout)
            lc = subprocess.Popen(lc_cmd(c, os.path.join(d, "lc.json"), rates, requests), stdout=ll, stderr=subprocess.STDOUT,
                                  env={**base_env(), **lc_env}, preexec_fn=pinned("lc"))
            finish(lc, timeout, "the LC service")
        finally:
            open(stop, "w").close()
            finish(be, 60, "the BE job")


def run_scheme(scheme, d, c, rates, requests, target_ms, work, timeout, kernels=None):
    if scheme == "timeslice":
        return pair(d, c, rates, requests, {}, {}, timeout)
    if scheme == "priority-streams":
        cmd = [PY, os.path.join(HERE, "prio_streams.py"), "--lc-model", c["lc_model"], "--lc-batch", str(c["lc_batch"]),
               "--rates", ",".join(f"{r:.6f}" for r in rates), "--requests", str(requests), "--be-model", c["be_model"], "--be-batch",
               str(c["be_batch"]), "--lc-out", os.path.join(d, "lc.json"), "--be-out", os.path.join(d, "be.json")]
        if c["graph"]:
            cmd.append("--graph")
        with open(os.path.join(d, "run.log"), "w") as log:
            return finish(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=base_env(), preexec_fn=pinned("lc", "be")),
                          timeout, "prio_streams.py")
    if scheme.startswith("mps"):
        with Mps(work) as mps:
            be_env = dict(mps.env)
            if scheme != "mps":
                be_env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = scheme[len("mps-be"):]
            return pair(d, c, rates, requests, dict(mps.env), be_env, timeout)
    if scheme.startswith("concord:"):
        for var in ("CONCORDD", "INTERCEPT"):
            if not os.environ.get(var):
                raise RuntimeError(f"{scheme}: set {var}")
        policy, extra = concord_scheme(scheme)
        with Mps(work) as mps, Concordd(work, policy, mps.env, extra) as daemon:
            common = {**mps.env, "LD_PRELOAD": os.environ["INTERCEPT"], "CONCORD_SOCKET": daemon.socket}
            lc_env = {**common, "CONCORD_CLASS": "lc", "CONCORD_NAME": "lc", "CONCORD_TARGET_MS": f"{target_ms:.3f}",
                      "CONCORD_INTERCEPT_STATS": os.path.join(d, "lc_intercept.json")}
            # The library's counters say which share of the BE's launches each mechanism touched.
            be_env = {**common, "CONCORD_CLASS": "be", "CONCORD_NAME": "be", "CONCORD_INTERCEPT_STATS": os.path.join(d, "be_intercept.json")}
            return pair(d, c, rates, requests, lc_env, be_env, timeout, kernels)
    raise RuntimeError(f"unknown scheme '{scheme}' (known: {', '.join(SCHEMES)})")


def done(d):
    return all(os.path.exists(os.path.join(d, f)) for f in ("lc.json", "be.json"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--combos", default="resnet50:64:graph/resnet50:64")
    ap.add_argument("--loads", default="0.3,0.6")
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--requests", type=int, default=250, help="LC requests per load")
    ap.add_argument("--be-alone-s", type=float, default=12.0)
    ap.add_argument("--slo-factor", type=float, default=1.5, help="the LC target: this x its alone p99 at the load")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds any one process may take")
    ap.add_argument("--gpu", type=int, help="run on this GPU alone (CUDA_VISIBLE_DEVICES), with a work folder of its own")
    ap.add_argument("--lc-cpus", help="pin the LC service's processes to these CPUs (taskset's list form, e.g. 0-1)")
    ap.add_argument("--be-cpus", help="pin the BE job's processes to these CPUs")
    ap.add_argument("--shares-under", default="",
                    help="comma-separated concord:* schemes run once more with the BE profiled (be_train.py --kernels-out): "
                         "which share of its launches and GPU time each room mechanism applied to, into shares_<scheme>/")
    ap.add_argument("--be-alone-under", default="",
                    help="concord:* schemes (comma-separated) to run the BE job alone under too (no LC: what the library "
                         "costs it with the scheme's caps armed), each into be_alone_<scheme>.json")
    a = ap.parse_args()
    if a.lc_cpus:
        CPUS["lc"] = parse_cpus(a.lc_cpus, "--lc-cpus")
    if a.be_cpus:
        CPUS["be"] = parse_cpus(a.be_cpus, "--be-cpus")
    loads = [float(x) for x in a.loads.split(",") if x]
    schemes = [s for s in a.schemes.split(",") if s]
    for s in schemes:
        if s not in SCHEMES and not s.startswith("concord:"):
            ap.error(f"unknown scheme '{s}' (known: {', '.join(SCHEMES)})")
    alone_under = [s for s in a.be_alone_under.split(",") if s]
    shares_under = [s for s in a.shares_under.split(",") if s]
    for s in shares_under:
        if not s.startswith("concord:"):
            ap.error(f"--shares-under {s}: a concord:* scheme")
    for s in schemes + alone_under + shares_under:
        if s.startswith("concord:"):
            try:
                concord_scheme(s)
            except RuntimeError as e:
                ap.error(str(e))
        elif s in alone_under:
            ap.error(f"--be-alone-under {s}: a concord:* scheme")
    if any(not 0 < x < 1 for x in loads):
        ap.error("--loads must be in (0, 1)")
    if a.gpu is not None:
        GPU_ENV["CUDA_VISIBLE_DEVICES"] = str(a.gpu)
    work = os.path.join(a.out, "work" if a.gpu is None else f"work-gpu{a.gpu}")
    os.makedirs(work, exist_ok=True)
    failures = []
    for combo in a.combos.split(","):
        c = parse_combo(combo)
        base = os.path.join(a.out, c["name"])
        os.makedirs(base, exist_ok=True)
        cal = os.path.join(base, "calibrate.json")
        if not os.path.exists(cal):
            with open(os.path.join(base, "calibrate.log"), "w") as log:
                finish(subprocess.Popen(lc_cmd(c, cal, calibrate=200), stdout=log, stderr=subprocess.STDOUT, env=base_env(),
                                        preexec_fn=pinned("lc")), a.timeout, "calibration")
        service_s = json.load(open(cal))["mean_s"]
        rates = [load / service_s for load in loads]
        be_alone = os.path.join(base, "be_alone.json")
        if not os.path.exists(be_alone):
            with open(os.path.join(base, "be_alone.log"), "w") as log:
                finish(subprocess.Popen(be_cmd(c, be_alone, seconds=a.be_alone_s), stdout=log, stderr=subprocess.STDOUT, env=base_env(),
                                        preexec_fn=pinned("be")), a.timeout, "BE alone")
        # The BE alone as an MPS client too: an eager training job can run faster under MPS than
        # as a plain process, so the MPS-based schemes are also compared with this.
        be_alone_mps = os.path.join(base, "be_alone_mps.json")
        if not os.path.exists(be_alone_mps):
            with Mps(work) as mps, open(os.path.join(base, "be_alone_mps.log"), "w") as log:
                finish(subprocess.Popen(be_cmd(c, be_alone_mps, seconds=a.be_alone_s), stdout=log, stderr=subprocess.STDOUT,
                                        env={**base_env(), **mps.env}, preexec_fn=pinned("be")), a.timeout, "BE alone under MPS")
        # The BE alone under the library and a daemon (no LC tenant): the library's own cost.
        for s in alone_under:
            out = os.path.join(base, f"be_alone_{s.replace(':', '-')}.json")
            if os.path.exists(out):
                continue
            policy, extra = concord_scheme(s)
            try:
                with Mps(work) as mps, Concordd(work, policy, mps.env, extra) as daemon, \
                        open(out[:-len(".json")] + ".log", "w") as log:
                    env = {**base_env(), **mps.env, "LD_PRELOAD": os.environ["INTERCEPT"], "CONCORD_SOCKET": daemon.socket,
                           "CONCORD_CLASS": "be", "CONCORD_NAME": "be", "CONCORD_INTERCEPT_STATS": out[:-len(".json")] + "_intercept.json"}
                    finish(subprocess.Popen(be_cmd(c, out, seconds=a.be_alone_s), stdout=log, stderr=subprocess.STDOUT, env=env,
                                            preexec_fn=pinned("be")), a.timeout, f"BE alone under {s}")
            except (RuntimeError, subprocess.SubprocessError, OSError, KeyError) as e:
                failures.append(f"{c['name']} BE alone under {s}: {e}")
        alone = os.path.join(base, "lc_alone")
        os.makedirs(alone, exist_ok=True)
        if not os.path.exists(os.path.join(alone, "lc.json")):
            with open(os.path.join(alone, "lc.log"), "w") as log:
                finish(subprocess.Popen(lc_cmd(c, os.path.join(alone, "lc.json"), rates, a.requests), stdout=log,
                                        stderr=subprocess.STDOUT, env=base_env(), preexec_fn=pinned("lc")), a.timeout, "LC alone")
        phases = json.load(open(os.path.join(alone, "lc.json")))["phases"]
        targets_ms = [a.slo_factor * p["p99_s"] * 1e3 for p in phases]
        json.dump({"loads": loads, "rates_rps": rates, "service_s": service_s, "targets_ms": targets_ms,
                   "gpu": a.gpu, "requests": a.requests,
                   "lc_cpus": a.lc_cpus, "be_cpus": a.be_cpus}, open(os.path.join(base, "settings.json"), "w"))
        for s in schemes:
            d = os.path.join(base, s.replace(":", "-"))
            os.makedirs(d, exist_ok=True)
            if done(d):
                continue
            t = time.monotonic()
            try:
                # The LC registers once, with the target of its first load (a label for the policies).
                run_scheme(s, d, c, rates, a.requests, targets_ms[0], work, a.timeout)
                print(f"{c['name']} {s}: {time.monotonic() - t:.0f} s", file=sys.stderr)
            except (RuntimeError, subprocess.SubprocessError, OSError) as e:
                failures.append(f"{c['name']} {s}: {e}")
                with open(os.path.join(d, "error.txt"), "w") as f:
                    f.write(str(e) + "\n")
                print(f"{c['name']} {s}: FAILED: {e}", file=sys.stderr)
        # The same pair again with the BE profiled: its rates are not used (the profiler slows it).
        for s in shares_under:
            d = os.path.join(base, "shares_" + s.replace(":", "-"))
            os.makedirs(d, exist_ok=True)
            if os.path.exists(os.path.join(d, "kernels.json")):
                continue
            try:
                run_scheme(s, d, c, rates, a.requests, targets_ms[0], work, a.timeout, kernels=os.path.join(d, "kernels.json"))
            except (RuntimeError, subprocess.SubprocessError, OSError) as e:
                failures.append(f"{c['name']} shares under {s}: {e}")
                print(f"{c['name']} shares under {s}: FAILED: {e}", file=sys.stderr)
    if failures:
        print("run.py: failed runs:\n  " + "\n  ".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
