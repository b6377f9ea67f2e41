"""What bench/apps records beside a job's results, to tell where a scheme's time went: concordd's
metrics (the LC's GPU-bound share and flag, the BE's lease), which CPU each thread of the job's
processes ran on and how much CPU it used (/proc), and the GPU's clocks and power (nvidia-smi).
"""
import contextlib
import json
import os
import re
import socket
import subprocess
import threading
import time


def metrics_text(path):
    """The daemon's Prometheus text from its Unix socket."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect(path)
    s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return data.decode().split("\r\n\r\n", 1)[-1]


LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metrics_sample(text):
    """The per-tenant figures of one scrape that tell what the lease did: the LC's GPU-bound share
    and flag, the BE's yield rule and whether it was yielding, each class's launches."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("concord_tenant_"):
            continue
        name, _, rest = line.partition("{")
        labels_text, _, value = rest.rpartition("}")
        labels = dict(LABEL.findall(labels_text))
        cls = labels.get("class")
        try:
            v = float(value)
        except ValueError:
            continue
        if name == "concord_tenant_gpu_bound_share" and cls == "lc":
            out["share"] = v
        elif name == "concord_tenant_lc_in_flight" and cls == "lc":
            out["lc_flag"] = int(v)
        elif name == "concord_tenant_lease" and cls == "be":
            out["be_yield"], out["be_yielding"] = labels.get("yield"), int(v)
        elif name == "concord_tenant_launches_total" and cls in ("lc", "be"):
            out[f"{cls}_launches"] = int(v)
    return out


def proc_threads(pid):
    """{tid: (comm, cpu last run on, utime + stime ticks)} of a process (empty once it is gone)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        rpar = s.rindex(")")
        rest = s[rpar + 2:].split()
        out[int(tid)] = (s[s.index("(") + 1:rpar], int(rest[36]), int(rest[11]) + int(rest[12]))
    return out


def mps_server_pids():
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/comm") as f:
                    if f.read().startswith("nvidia-cuda-mps"):
                        pids.append(int(p))
            except OSError:
                pass
    return pids


class Sampler(threading.Thread):
    """Samples, while a job runs, the daemon's metrics (every `metrics_every` s) and the CPUs the
    job's processes' threads ran on (every `threads_every` s), into JSON lines."""

    def __init__(self, d, metrics_socket=None, metrics_every=0.1, pids=None, threads_every=0.0):
        super().__init__(daemon=True)
        self.d, self.metrics_socket, self.metrics_every = d, metrics_socket, metrics_every
        self.pids, self.threads_every = pids or {}, threads_every
        self.stop_event = threading.Event()

    def run(self):
        mf = open(os.path.join(self.d, "metrics.jsonl"), "w") if self.metrics_socket else None
        tf = open(os.path.join(self.d, "threads.jsonl"), "w") if self.threads_every > 0 and self.pids else None
        last = {}
        next_m = next_t = time.monotonic()
        try:
            while not self.stop_event.is_set():
                now = time.monotonic()
                if mf and now >= next_m:
                    next_m = now + self.metrics_every
                    try:
                        mf.write(json.dumps({"t": round(now, 4), **metrics_sample(metrics_text(self.metrics_socket))}) + "\n")
                    except OSError:
                        pass
                if tf and now >= next_t:
                    next_t = now + self.threads_every
                    for role, pids in self.pids.items():
                        for pid in pids:
                            for tid, (comm, cpu, ticks) in proc_threads(pid).items():
                                delta = ticks - last.get(tid, ticks)
                                last[tid] = ticks
                                if delta > 0:
                                    tf.write(json.dumps({"t": round(now, 3), "role": role, "pid": pid, "tid": tid, "comm": comm,
                                                         "cpu": cpu, "ticks": delta}) + "\n")
                self.stop_event.wait(min(self.metrics_every if mf else 1.0, self.threads_every if tf else 1.0))
        finally:
            for f in (mf, tf):
                if f:
                    f.close()

    def __enter__(self):
        if self.metrics_socket or (self.threads_every > 0 and self.pids):
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        if self.is_alive():
            self.join(timeout=5)


@contextlib.contextmanager
def gpu_sampler(path, index="0", preexec_fn=None):
    """nvidia-smi's clocks, power and utilisation of GPU `index` every 200 ms into `path` while
    the block runs (nothing where nvidia-smi is missing)."""
    try:
        f = open(path, "w")
        proc = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu,temperature.gpu",
                                 "--format=csv", "-lms", "200", "-i", index], stdout=f, stderr=subprocess.DEVNULL,
                                preexec_fn=preexec_fn)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
        f.close()
