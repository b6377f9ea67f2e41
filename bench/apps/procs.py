"""The processes bench/apps starts (run.py and its neighbours: be_overhead.py, correctness.py,
one_daemon.py): an MPS control daemon of its own, concordd, the LC service and the BE job as one-off
processes or resident ones (control.py), each pinned to its role's CPUs and started from an
environment without inherited Concord settings. No PyTorch here.
"""
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import control  # noqa: E402

PY = os.environ.get("PYTHON", sys.executable)
GPU_ENV = {}  # CUDA_VISIBLE_DEVICES of --gpu, for every process the bench starts
CPUS = {}  # role ("lc", "be", "sys") -> the CPUs its processes are pinned to
ALL_CPUS = os.sched_getaffinity(0)  # before run.py pins itself: what an unpinned process gets
START = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - START:6.1f} s] {msg}", file=sys.stderr, flush=True)


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


def mps_client_env(scheme):
    """An MPS scheme's BE environment: mps, mps-beN, mps-prio, mps-prio-beN."""
    m = re.fullmatch(r"mps(-prio)?(?:-be(\d+))?", scheme)
    if not m or (m.group(2) is not None and not 0 < int(m.group(2)) <= 100):
        raise RuntimeError(f"scheme '{scheme}': expected mps, mps-beN, mps-prio or mps-prio-beN (0 < N <= 100)")
    env = {}
    if m.group(1):
        env["CUDA_MPS_CLIENT_PRIORITY"] = "1"
    if m.group(2):
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = m.group(2)
    return env


class Mps:
    """An MPS control daemon of our own (pipe and log directories under `work`), pinned to the
    system CPUs (the server it starts inherits them). `env` is its clients' environment: with
    --gpu K the server sees GPU K alone and a client's CUDA_VISIBLE_DEVICES counts among the
    server's devices, so clients name it 0."""

    def __init__(self, work):
        self.dirs = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(work, "mps-pipe"),
                     "CUDA_MPS_LOG_DIRECTORY": os.path.join(work, "mps-log")}
        for d in self.dirs.values():
            os.makedirs(d, exist_ok=True)
        self.env = {**self.dirs, **({"CUDA_VISIBLE_DEVICES": "0"} if GPU_ENV else {})}

    def __enter__(self):
        subprocess.run(["nvidia-cuda-mps-control", "-d"], env={**base_env(), **self.dirs}, check=True, preexec_fn=pinned("sys"))
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", env={**base_env(), **self.dirs}, timeout=30)
        time.sleep(1.0)


class Concordd:
    """concordd with one policy (None: the daemon's default, no --policy), its socket under `work`,
    pinned to the system CPUs (`free`: to every CPU of the machine, as a daemon started without
    pinning runs); its log `log_path` (default: concordd.log in `work`)."""

    def __init__(self, work, policy, env, extra=(), log_path=None, free=False):
        self.free = free
        os.makedirs(work, exist_ok=True)
        self.socket = os.path.join(work, "concordd.sock")
        self.metrics = os.path.join(work, "metrics.sock")
        self.log = open(log_path or os.path.join(work, "concordd.log"), "w")
        self.cmd = [os.environ["CONCORDD"], "--socket", self.socket, *(["--policy", policy] if policy else []),
                    "--device-spec", device_spec(), "--metrics-socket", self.metrics, *extra]
        if GPU_ENV and "--devices" not in extra:
            # --gpu K: the daemon manages GPU K alone (named by its PCI bus id, whatever the order).
            self.cmd += ["--devices", gpu_bus_id(GPU_ENV["CUDA_VISIBLE_DEVICES"])]
        self.env = env

    def __enter__(self):
        for f in (self.socket, self.metrics):
            if os.path.exists(f):
                os.remove(f)
        every = ALL_CPUS
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env={**base_env(), **self.env},
                                     preexec_fn=(lambda: os.sched_setaffinity(0, every)) if self.free else pinned("sys"))
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
    yields to every LC tenant). "concord" alone -> (None, []): the daemon's default policy. A
    trailing "@free" (concord@free, concord:orion@free) runs the daemon unpinned: run.py's
    --free-daemon schemes."""
    scheme = scheme.removesuffix("@free")
    if scheme == "concord":
        return None, []
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
    """lc_service.py as one process (one_daemon.py)."""
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
    """be_train.py as one process (be_overhead.py, correctness.py, one_daemon.py)."""
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


class Resident:
    """A process serving jobs from a control folder (control.py); its output goes to `log_path`."""

    def __init__(self, name, cmd, env, roles, folder, log_path):
        if os.path.isdir(folder):
            for f in os.listdir(folder):
                os.remove(os.path.join(folder, f))
        os.makedirs(folder, exist_ok=True)
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        self.name = name
        self.log = open(log_path, "w")
        proc = subprocess.Popen(cmd + ["--serve", folder], stdout=self.log, stderr=subprocess.STDOUT, env={**base_env(), **env},
                                preexec_fn=pinned(*roles))
        self.client = control.Client(folder, proc, name)
        self.pid = proc.pid

    def stop(self):
        try:
            rc = self.client.stop()
            if rc != 0:
                log(f"{self.name}: ended with rc {rc} (see {self.log.name})")
        finally:
            self.log.close()


def lc_server_cmd(c, a):
    cmd = [PY, os.path.join(HERE, "lc_service.py"), "--model", c["lc_model"], "--batch", str(c["lc_batch"]),
           "--llm-config", a.llm_config, "--llm-impl", a.llm_impl]
    return cmd + (["--graph"] if c["graph"] else [])


def be_server_cmd(c, a):
    return [PY, os.path.join(HERE, "be_train.py"), "--model", c["be_model"], "--batch", str(c["be_batch"]), "--llm-config", a.llm_config]


def ps_server_cmd(c, a):
    cmd = [PY, os.path.join(HERE, "prio_streams.py"), "--lc-model", c["lc_model"], "--lc-batch", str(c["lc_batch"]),
           "--be-model", c["be_model"], "--be-batch", str(c["be_batch"]), "--llm-config", a.llm_config, "--llm-impl", a.llm_impl]
    return cmd + (["--graph"] if c["graph"] else [])
