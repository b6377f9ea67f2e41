#!/usr/bin/env python3
"""GPU memory quotas under PyTorch on one GPU (docs/intercept.md and docs/daemon.md, "Memory").

  quota_torch.py bench --out DIR --concordd BIN --lib LIB [--seconds S] [--lc-reserve SIZE] [--margin-gib G]
      Every scenario below, for each allocator (PyTorch's native caching allocator, and
      PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which allocates through cuMemCreate/cuMemMap),
      then the cost of an allocation; DIR/summary.json holds the verdicts, DIR/<scenario>/ each
      process's JSON and log:
        concord-lc-alone   the LC service alone under concordd, with its reservation
        concord-lc-be      the LC service beside a BE training job that grows without end, under
                           concordd: the BE's limit (the daemon's share of what the reservation
                           leaves) is below its need, so the BE meets torch.OutOfMemoryError and the
                           LC serves every request, its p99 as alone
        baseline-lc-be     the same two processes without Concord (plain MPS clients): the BE grows
                           into whatever the device has free, the memory the LC gives back included
      alloc-cost: the median ns of a cuMemAlloc_v2/cuMemFree_v2 pair (1 MiB, through ctypes on
      libcuda) plain, under the library without a daemon, and under the library as a BE tenant with
      a quota (after one kernel launch, as a PyTorch process is).
  quota_torch.py lc --out FILE --seconds S [--rate R] [--ready FILE] [--go FILE]
  quota_torch.py be --out FILE --seconds S [--ready FILE] [--go FILE]
  quota_torch.py alloc-cost --out FILE [--pairs N]
      The roles, as the bench starts them.

The LC service: an fp16 MLP (four 8192-wide layers, 512 MiB of weights) serving requests at R per
second (default 50, arrivals on a fixed grid; a request's latency runs from its arrival to its end,
queueing included), batch sizes from a seeded sequence; every 10th request needs a 4 GiB workspace
(a tensor allocated, filled and reduced), after which the service gives its cache back
(torch.cuda.empty_cache()), as services that release memory between large requests do: each large
request asks the driver anew. A request that meets out of memory is counted as failed and the
service goes on. Requests are marked with concord_request_begin/end under the library.

The BE job: an fp32 MLP trained step after step (8192 wide, batch 1024, 20 ms of sleep between steps
so that its compute, not its memory, is not what the LC sees), which also grows a hoard by 1 GiB a
step; at an out of memory it records it, drops 2 GiB of the hoard and tries to grow again 10 steps
later, for its whole run (greedy: memory the LC gives back is taken).
"""
import argparse
import ctypes
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time

GIB = 1 << 30


def percentile(values, q):
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(q * len(v) + 0.5)) - 1))
    return v[k]


def wait_for(path, timeout, proc=None):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc is not None and proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def request_marks():
    try:
        lib = ctypes.CDLL(None)
        begin, end = lib.concord_request_begin, lib.concord_request_end
        begin.restype = end.restype = ctypes.c_int
        return begin, end
    except (OSError, AttributeError):
        return (lambda: 0), (lambda: 0)


def out_of_memory(torch):
    """What an allocation over the limit raises: torch.OutOfMemoryError (torch.cuda's before 2.1);
    a library's own allocation (cuBLAS's workspace) may raise a RuntimeError saying so instead."""
    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def is_out_of_memory(torch, e):
    return isinstance(e, out_of_memory(torch)) or "out of memory" in str(e)


def memory_view(torch):
    free, total = torch.cuda.mem_get_info()
    return {"free": free, "total": total}


# ---- the roles --------------------------------------------------------------------------------

def run_lc(a):
    import torch
    begin, end = request_marks()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8192, 8192, bias=False) for _ in range(4)]
    model = torch.nn.Sequential(*[m for l in layers for m in (l, torch.nn.ReLU())]).half().to(dev).eval()
    out = {"role": "lc", "view_at_start": memory_view(torch), "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}

    def serve(batch, large):
        with torch.no_grad():
            y = model(torch.randn(batch, 8192, device=dev, dtype=torch.half))
            s = float(y.float().sum())
            if large:
                w = torch.empty(4 * GIB, dtype=torch.uint8, device=dev)
                w.fill_(1)
                s += float(w.view(torch.float16).amax())  # a reduction that needs no copy of w
                del w
        return s

    for i in range(5):  # warm
        serve(64, i == 4)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    open(a.ready, "w").close() if a.ready else None
    if a.go:
        wait_for(a.go, 120)
    rng = random.Random(7)
    period = 1.0 / a.rate
    t0 = time.monotonic()
    lat, failed, n = [], [], 0
    errors = []
    while True:
        arrival = t0 + n * period
        if arrival - t0 > a.seconds:
            break
        now = time.monotonic()
        if arrival > now:
            time.sleep(arrival - now)
        large = n % 10 == 9
        batch = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256])
        begin()
        try:
            serve(batch, large)
            torch.cuda.synchronize()
            lat.append(time.monotonic() - arrival)
        except RuntimeError as e:  # torch.OutOfMemoryError is one
            if not is_out_of_memory(torch, e):
                raise
            failed.append(n)
            if len(errors) < 3:
                errors.append(str(e).splitlines()[0][:300])
        finally:
            end()
        if large:
            torch.cuda.empty_cache()
        n += 1
    out.update({"requests": n, "served": len(lat), "failed": len(failed), "first_failures": failed[:10], "errors": errors,
                "p50_ms": 1e3 * percentile(lat, 0.5) if lat else None, "p99_ms": 1e3 * percentile(lat, 0.99) if lat else None,
                "mean_ms": 1e3 * statistics.fmean(lat) if lat else None, "latencies_ms": [round(1e3 * x, 4) for x in lat],
                "peak_allocated": torch.cuda.max_memory_allocated(),
                "peak_reserved": torch.cuda.max_memory_reserved(), "view_at_end": memory_view(torch)})
    json.dump(out, open(a.out, "w"), indent=1)


def run_be(a):
    import torch
    dev = torch.device("cuda")
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(8192, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 8192)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    out = {"role": "be", "view_at_start": memory_view(torch), "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    open(a.ready, "w").close() if a.ready else None
    if a.go:
        wait_for(a.go, 120)
    hoard, ooms, steps, grow_at, first_oom, errors = [], 0, 0, 0, None, []
    most = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.seconds:
        try:
            x = torch.randn(1024, 8192, device=dev)
            loss = model(x).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if steps >= grow_at:
                hoard.append(torch.empty(GIB, dtype=torch.uint8, device=dev))
                most = max(most, len(hoard))
            torch.cuda.synchronize()
        except RuntimeError as e:  # torch.OutOfMemoryError is one
            if not is_out_of_memory(torch, e):
                raise
            ooms += 1
            if first_oom is None:
                first_oom = {"after_s": time.monotonic() - t0, "hoard_gib": len(hoard), "message": str(e).splitlines()[0][:400],
                             "view": memory_view(torch)}
            del hoard[-2:]
            grow_at = steps + 10
        steps += 1
        time.sleep(0.02)
    out.update({"steps": steps, "ooms": ooms, "first_oom": first_oom, "hoard_gib_most": most, "errors": errors,
                "peak_allocated": torch.cuda.max_memory_allocated(), "peak_reserved": torch.cuda.max_memory_reserved(),
                "view_at_end": memory_view(torch)})
    json.dump(out, open(a.out, "w"), indent=1)


# The smallest kernel there is, so the library under test sees a launch (and runs as a PyTorch
# process does) before the allocations are timed.
NOOP_PTX = b""".version 7.0
.target sm_80
.address_size 64
.visible .entry noop() { ret; }
"""


def run_alloc_cost(a):
    cu = ctypes.CDLL("libcuda.so.1")
    def check(r, what):
        if r != 0:
            raise SystemExit(f"{what}: CUresult {r}")
    check(cu.cuInit(0), "cuInit")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    launched = False
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    if cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(NOOP_PTX)) == 0 and cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"noop") == 0:
        launched = cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, None, None) == 0 and cu.cuCtxSynchronize() == 0
    alloc, free = cu.cuMemAlloc_v2, cu.cuMemFree_v2
    alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    free.argtypes = [ctypes.c_uint64]
    p = ctypes.c_uint64()
    size = 1 << 20
    for _ in range(1000):  # warm
        check(alloc(ctypes.byref(p), size), "cuMemAlloc_v2")
        check(free(p.value), "cuMemFree_v2")
    ns = []
    clock = time.perf_counter_ns
    for _ in range(a.pairs):
        t = clock()
        alloc(ctypes.byref(p), size)
        free(p.value)
        ns.append(clock() - t)
    json.dump({"pairs": a.pairs, "bytes": size, "median_ns": statistics.median(ns), "p10_ns": percentile(ns, 0.1),
               "p90_ns": percentile(ns, 0.9), "launched_first": launched, "preloaded": bool(os.environ.get("LD_PRELOAD"))},
              open(a.out, "w"), indent=1)


# ---- the bench --------------------------------------------------------------------------------

def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("CONCORD_") and k not in ("LD_PRELOAD", "PYTORCH_CUDA_ALLOC_CONF")}


def metrics_text(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(path)
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        return data.decode(errors="replace")
    except OSError as e:
        return f"# metrics not read: {e}"


class Daemon:
    def __init__(self, a, work, total):
        self.socket = os.path.join(work, "concordd.sock")
        self.metrics = os.path.join(work, "metrics.sock")
        self.log = open(os.path.join(work, "concordd.log"), "w")
        cmd = [a.concordd, "--socket", self.socket, "--metrics-socket", self.metrics, "--policy", a.policy,
               "--device-spec", a.device_spec, "--memory-total", str(total)]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=clean_env())
        if not wait_for(self.socket, 10, self.proc):
            raise RuntimeError(f"concordd did not start (see {self.log.name})")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def device_total():
    """GPU 0's memory as nvidia-smi reports it (the bench's own process opens no CUDA context)."""
    mib = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    return int(mib) << 20


def scenario(a, name, alloc_conf, with_be, concord, total):
    work = os.path.join(a.out, name)
    os.makedirs(work, exist_ok=True)
    daemon = Daemon(a, work, total) if concord else None
    base = clean_env()
    if alloc_conf:
        base["PYTORCH_CUDA_ALLOC_CONF"] = alloc_conf
    lc_env, be_env = dict(base), dict(base)
    if concord:
        lc_env.update({"LD_PRELOAD": a.lib, "CONCORD_SOCKET": daemon.socket, "CONCORD_CLASS": "lc", "CONCORD_TARGET_MS": "50",
                       "CONCORD_NAME": "lc-service", "CONCORD_MEMORY_RESERVE": a.lc_reserve,
                       "CONCORD_INTERCEPT_STATS": os.path.join(work, "lc.stats.json")})
        be_env.update({"LD_PRELOAD": a.lib, "CONCORD_SOCKET": daemon.socket, "CONCORD_CLASS": "be", "CONCORD_NAME": "be-train",
                       "CONCORD_INTERCEPT_STATS": os.path.join(work, "be.stats.json")})
    go = os.path.join(work, "go")
    procs = {}
    me = [sys.executable, os.path.abspath(__file__)]
    result = {"scenario": name, "alloc_conf": alloc_conf, "concord": concord, "memory_total": total if concord else None}
    try:
        procs["lc"] = subprocess.Popen(me + ["lc", "--out", os.path.join(work, "lc.json"), "--seconds", str(a.seconds), "--ready",
                                             os.path.join(work, "lc.ready"), "--go", go],
                                       stdout=open(os.path.join(work, "lc.log"), "w"), stderr=subprocess.STDOUT, env=lc_env)
        # The LC first: it registers (and reserves) before the BE takes its share.
        if not wait_for(os.path.join(work, "lc.ready"), 120, procs["lc"]):
            raise RuntimeError("the LC service did not get ready (lc.log)")
        if with_be:
            procs["be"] = subprocess.Popen(me + ["be", "--out", os.path.join(work, "be.json"), "--seconds", str(a.seconds + 2),
                                                 "--ready", os.path.join(work, "be.ready"), "--go", go],
                                           stdout=open(os.path.join(work, "be.log"), "w"), stderr=subprocess.STDOUT, env=be_env)
            if not wait_for(os.path.join(work, "be.ready"), 120, procs["be"]):
                raise RuntimeError("the BE job did not get ready (be.log)")
        open(go, "w").close()
        if daemon:
            time.sleep(min(5.0, a.seconds / 2))
            with open(os.path.join(work, "metrics.txt"), "w") as f:
                f.write(metrics_text(daemon.metrics))
            if a.concord_cli:
                with open(os.path.join(work, "top.txt"), "w") as f:
                    subprocess.run([a.concord_cli, "top", "--once", "--socket", daemon.socket], stdout=f, stderr=subprocess.STDOUT,
                                   timeout=10, env=clean_env())
        for role, p in procs.items():
            try:
                p.wait(timeout=a.seconds + 60)
            except subprocess.TimeoutExpired:
                p.kill()
            result[role + "_rc"] = p.returncode
    except RuntimeError as e:
        result["error"] = str(e)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        if daemon:
            daemon.stop()
    for role in ("lc", "be"):
        path = os.path.join(work, role + ".json")
        if os.path.exists(path):
            result[role] = json.load(open(path))
        stats = os.path.join(work, role + ".stats.json")
        if os.path.exists(stats):
            result[role + "_library"] = json.load(open(stats))
    json.dump(result, open(os.path.join(work, "result.json"), "w"), indent=1)
    return result


def alloc_cost(a, total):
    """The three configurations in turns (the order rotating), a.cost_rounds rounds of a.pairs pairs
    each: per configuration the median of the rounds' medians, and per library configuration the
    paired differences to the plain run of the same round (their median and range)."""
    work = os.path.join(a.out, "alloc-cost")
    os.makedirs(work, exist_ok=True)
    me = [sys.executable, os.path.abspath(__file__), "alloc-cost", "--pairs", str(a.pairs)]
    configs = [("plain", {}), ("library_no_daemon", {"LD_PRELOAD": a.lib, "CONCORD_SOCKET": os.path.join(work, "none.sock")})]
    runs = {}
    daemon = Daemon(a, work, total)
    configs.append(("library_quota", {"LD_PRELOAD": a.lib, "CONCORD_SOCKET": daemon.socket, "CONCORD_CLASS": "be"}))
    try:
        for rnd in range(a.cost_rounds):
            k = rnd % len(configs)
            for label, extra in configs[k:] + configs[:k]:
                out = os.path.join(work, f"{label}-{rnd}.json")
                env = {**clean_env(), **extra}
                if label == "library_quota":
                    env["CONCORD_INTERCEPT_STATS"] = os.path.join(work, f"quota-{rnd}.stats.json")
                with open(os.path.join(work, f"{label}-{rnd}.log"), "w") as log:
                    r = subprocess.run(me + ["--out", out], env=env, stdout=log, stderr=subprocess.STDOUT, timeout=120)
                runs.setdefault(label, []).append(json.load(open(out)) if r.returncode == 0 and os.path.exists(out) else None)
    finally:
        daemon.stop()
    rows = {"rounds": a.cost_rounds, "pairs_per_round": a.pairs}
    for label, rs in runs.items():
        ok = [r for r in rs if r]
        rows[label] = {"runs": len(ok), "median_ns": statistics.median(r["median_ns"] for r in ok) if ok else None,
                       "round_medians_ns": [r["median_ns"] if r else None for r in rs],
                       "preloaded": ok[0]["preloaded"] if ok else None, "launched_first": ok[0]["launched_first"] if ok else None}
    for label in ("library_no_daemon", "library_quota"):
        diffs = [x["median_ns"] - p["median_ns"] for x, p in zip(runs.get(label, []), runs.get("plain", [])) if x and p]
        if diffs:
            rows[label]["over_plain_ns_paired_median"] = statistics.median(diffs)
            rows[label]["over_plain_ns_paired_range"] = [min(diffs), max(diffs)]
    return rows


def verdicts(results):
    """Per allocator, what the scenarios show."""
    out = {}
    for conf in sorted({r["alloc_conf"] for r in results}):
        by = {r["scenario"].rsplit("@", 1)[0]: r for r in results if r["alloc_conf"] == conf}
        alone, beside, base = by.get("concord-lc-alone", {}), by.get("concord-lc-be", {}), by.get("baseline-lc-be", {})
        lc_alone, lc_beside, be_beside = alone.get("lc", {}), beside.get("lc", {}), beside.get("be", {})
        lc_base, be_base = base.get("lc", {}), base.get("be", {})
        p99_alone, p99_beside = lc_alone.get("p99_ms"), lc_beside.get("p99_ms")
        out["expandable" if "expandable_segments" in conf else "native"] = {
            "be_quota_bytes": beside.get("be_library", {}).get("memory_limit"),
            "lc_reservation_bytes": beside.get("lc_library", {}).get("memory_limit"),
            "be_out_of_memory_under_concord": be_beside.get("ooms", 0) > 0,
            "be_first_oom_under_concord": be_beside.get("first_oom"),
            "be_view_total_under_concord": be_beside.get("view_at_start", {}).get("total"),
            "lc_requests_under_concord": lc_beside.get("requests"),
            "lc_failed_under_concord": lc_beside.get("failed"),
            "lc_p50_ms_alone": lc_alone.get("p50_ms"), "lc_p99_ms_alone": p99_alone,
            "lc_p50_ms_beside_be": lc_beside.get("p50_ms"), "lc_p99_ms_beside_be": p99_beside,
            "lc_p99_beside_over_alone": p99_beside / p99_alone if p99_alone and p99_beside else None,
            "lc_p99_within_10pct_of_alone": bool(p99_alone and p99_beside and p99_beside <= 1.1 * p99_alone),
            "baseline_lc_failed": lc_base.get("failed"), "baseline_lc_requests": lc_base.get("requests"),
            # The served requests' tail beside the same BE without Concord: what the BE's compute
            # beside the LC costs it, memory apart.
            "baseline_lc_p99_ms_served": lc_base.get("p99_ms"),
            "baseline_be_hoard_gib_most": be_base.get("hoard_gib_most"), "baseline_be_ooms": be_base.get("ooms"),
            "isolation_holds": bool(be_beside.get("ooms", 0) > 0 and lc_beside.get("failed") == 0 and lc_beside.get("requests")),
        }
    return out


def run_bench(a):
    os.makedirs(a.out, exist_ok=True)
    t_start = time.monotonic()
    total_device = int(a.device_total_gib * GIB) if a.device_total_gib else device_total()
    total = total_device - int(a.margin_gib * GIB)  # room for the CUDA contexts, which no quota counts
    results = []
    for conf in (() if a.only_cost else ("", "expandable_segments:True")):
        tag = "native" if not conf else "expandable"
        for name, with_be, concord in (("concord-lc-alone", False, True), ("concord-lc-be", True, True), ("baseline-lc-be", True, False)):
            print(f"[{time.monotonic() - t_start:6.1f} s] {name} ({tag})", flush=True)
            results.append(scenario(a, f"{name}@{tag}", conf, with_be, concord, total))
    print(f"[{time.monotonic() - t_start:6.1f} s] alloc-cost", flush=True)
    cost = alloc_cost(a, total)
    summary = {"device_total_bytes": total_device, "memory_total_given": total, "lc_reserve": a.lc_reserve, "seconds": a.seconds,
               "verdicts": verdicts(results), "alloc_cost": cost, "wall_s": time.monotonic() - t_start,
               "scenarios": [{k: v for k, v in r.items() if k in ("scenario", "error", "lc_rc", "be_rc")} for r in results]}
    json.dump(summary, open(os.path.join(a.out, "summary.json"), "w"), indent=1)
    print(json.dumps(summary["verdicts"], indent=1))
    print(json.dumps(cost, indent=1))
    ok = all(v["isolation_holds"] for v in summary["verdicts"].values())
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--out", required=True)
    b.add_argument("--concordd", required=True)
    b.add_argument("--lib", required=True)
    b.add_argument("--concord-cli", default="")
    b.add_argument("--policy", default="orion")
    b.add_argument("--device-spec", default="h200")
    b.add_argument("--seconds", type=float, default=20)
    b.add_argument("--lc-reserve", default="12G")
    b.add_argument("--margin-gib", type=float, default=8)
    b.add_argument("--pairs", type=int, default=5000)
    b.add_argument("--cost-rounds", type=int, default=9)
    b.add_argument("--only-cost", action="store_true", help="the cost of an allocation only, no scenario")
    b.add_argument("--device-total-gib", type=float, help="the device's memory, instead of nvidia-smi's (the stand-in driver)")
    for role in ("lc", "be"):
        r = sub.add_parser(role)
        r.add_argument("--out", required=True)
        r.add_argument("--seconds", type=float, required=True)
        r.add_argument("--ready", default="")
        r.add_argument("--go", default="")
        if role == "lc":
            r.add_argument("--rate", type=float, default=50)
    c = sub.add_parser("alloc-cost")
    c.add_argument("--out", required=True)
    c.add_argument("--pairs", type=int, default=20000)
    a = p.parse_args()
    if a.cmd == "bench":
        sys.exit(run_bench(a))
    {"lc": run_lc, "be": run_be, "alloc-cost": run_alloc_cost}[a.cmd](a)


if __name__ == "__main__":
    main()
