#!/usr/bin/env python3
"""An inference service, the LC tenant of bench/apps: one model in fp16, batch B, inference only.

  lc_service.py --model resnet50 --batch 64 [--graph] --calibrate N --out FILE
      N requests back to back: the service time alone (p50, p99, mean), hence its capacity.
  lc_service.py --model resnet50 --batch 64 [--graph] --rates R1,R2,... --requests N --out FILE
      Open loop, one phase per rate, one after the other: N requests with Poisson arrivals at R per
      second (seeded), served one at a time in arrival order; a request's latency runs from its
      arrival to the end of its work (queueing included), as a service's client sees it. Each
      phase has its own window (first arrival to last end), so a job beside the service can be
      measured over each.
  lc_service.py --model M --batch B [--graph] --serve DIR
      Resident (run.py's rounds): built and warmed once, then serves the jobs run.py writes into
      DIR (control.py): {"op": "calibrate", "n", "out"}, {"op": "phases", "rates", "requests",
      "seed", "out", "extra"} and {"op": "trace", "rate", "requests", "seed", "out"}.
  lc_service.py --model M --batch B [--graph] --selftest
      Builds, serves two requests back to back and two at a low rate, prints one JSON line.

Models: resnet50, bert, gpt (one decoder step) and llama: an LLM decode service (llm.py: a prefill
of --llm-config's prompt tokens, then its new_tokens decode steps; each phase also records each
request's time to first token, `ttft_s`, and its per-token times, `tpot_s`). With --graph the
forward pass (for llama: one decode step) is captured once as a CUDA graph and replayed.

Each request also records where its time went, for the host side of an eager service: `issue_s`
(from the service's start on it to the host's last launch returning), `cpu_s` (the serving thread's
CPU time) and `rq_wait_s` (the serving thread's time runnable but waiting for a CPU, from
/proc/thread-self/schedstat; absent where the kernel does not keep it). Each phase records the
thread's involuntary context switches. When the process runs under Concord's interception library
(LD_PRELOAD), each request is marked with concord_request_begin/end so the daemon sees request
boundaries. --ready FILE is created once the model is warm; --start-at T (CLOCK_MONOTONIC seconds)
delays the first arrival until then.
"""
import argparse
import ctypes
import gzip
import json
import os
import random
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import control  # noqa: E402
import models  # noqa: E402
from stats import percentile  # noqa: E402


def request_marks():
    """concord_request_begin/end when the interception library is loaded, else no-ops."""
    try:
        lib = ctypes.CDLL(None)
        begin, end = lib.concord_request_begin, lib.concord_request_end
        begin.restype = end.restype = ctypes.c_int
        return begin, end, True
    except (OSError, AttributeError):
        return (lambda: 0), (lambda: 0), False


class ThreadClock:
    """The calling thread's run-queue wait (schedstat, ns) and involuntary context switches."""

    def __init__(self):
        try:
            self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            os.pread(self.fd, 128, 0)
        except OSError:
            self.fd = None

    def wait_s(self):
        if self.fd is None:
            return None
        return int(os.pread(self.fd, 128, 0).split()[1]) / 1e9

    @staticmethod
    def involuntary():
        try:
            with open("/proc/thread-self/status") as f:
                for line in f:
                    if line.startswith("nonvoluntary_ctxt_switches:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None


class Service:
    def __init__(self, model, batch, graph, stream=None):
        self.stream = stream or torch.cuda.Stream()
        net, x = models.make(model, batch)
        net = net.half().eval()
        self.x = x.half() if x.is_floating_point() else x
        self.net = net
        with torch.inference_mode(), torch.cuda.stream(self.stream):
            for _ in range(5):  # warm up (cuDNN's algorithm choice, lazy module loading)
                self.out = net(self.x)
        self.stream.synchronize()
        self.graph = None
        if graph:
            self.graph = torch.cuda.CUDAGraph()
            with torch.inference_mode(), torch.cuda.graph(self.graph, stream=self.stream):
                self.out = net(self.x)
            self.stream.synchronize()
        self.impl = "torch"

    def serve(self):
        """One request; the time the host's last launch returned."""
        with torch.inference_mode(), torch.cuda.stream(self.stream):
            if self.graph is not None:
                self.graph.replay()
            else:
                self.out = self.net(self.x)
        issued = time.monotonic()
        self.stream.synchronize()
        return issued


class DecodeService:
    """llm.DecodeService in the shape Service has: serve() returns its token times."""

    def __init__(self, batch, graph, stream, cfg, impl):
        import llm
        self.inner = llm.DecodeService(batch, graph, stream, cfg, impl)
        self.impl, self.fallback_errors = self.inner.impl, self.inner.fallback_errors
        self.describe = llm.describe(self.inner.cfg)

    def serve(self):
        return self.inner.serve()


def make_service(a, stream):
    if a.model == "llama":
        import llm
        return DecodeService(a.batch, a.graph, stream, llm.parse_config(a.llm_config), a.llm_impl)
    return Service(a.model, a.batch, a.graph, stream)


def serve_one(service, clock):
    """One request's end time and its record (issue time, CPU time, run-queue wait, tokens)."""
    start, cpu0, rq0 = time.monotonic(), time.thread_time(), clock.wait_s()
    r = service.serve()
    e = time.monotonic()
    rec = {"start": start, "cpu_s": time.thread_time() - cpu0}
    if rq0 is not None:
        rec["rq_wait_s"] = clock.wait_s() - rq0
    if isinstance(r, list):  # token times: after the prefill, then after each decode step
        rec["tokens"] = r
    else:
        rec["issue_s"] = r - start
    return e, rec


def run_open_loop(service, rate, requests, seed, start_at=None, warmup=10):
    begin, end, marked = request_marks()
    clock = ThreadClock()
    for _ in range(warmup):
        service.serve()
    rng = random.Random(seed)
    t0 = max(time.monotonic(), start_at or 0.0) + 0.05
    arrivals, t = [], t0
    for _ in range(requests):
        t += rng.expovariate(rate)
        arrivals.append(t)
    lat, ends, recs = [], [], []
    switches = clock.involuntary()
    for a in arrivals:
        now = time.monotonic()
        if a > now:
            time.sleep(max(0.0, a - now - 200e-6))
            while time.monotonic() < a:
                pass
        begin()
        e, rec = serve_one(service, clock)
        end()
        lat.append(e - a)
        ends.append(e)
        recs.append(rec)
    after = clock.involuntary()
    r = {"arrivals": arrivals, "latency_s": lat, "window": [arrivals[0], ends[-1]], "marked": marked,
         "cpu_s": [x["cpu_s"] for x in recs]}
    if all("issue_s" in x for x in recs):
        r["issue_s"] = [x["issue_s"] for x in recs]
    if all("rq_wait_s" in x for x in recs):
        r["rq_wait_s"] = [x["rq_wait_s"] for x in recs]
    if switches is not None and after is not None:
        r["involuntary_switches"] = after - switches
    if all("tokens" in x for x in recs):
        r["ttft_s"] = [x["tokens"][0] - a for x, a in zip(recs, arrivals)]
        r["tpot_s"] = [[b - a for a, b in zip(x["tokens"], x["tokens"][1:])] for x in recs]
    return r


def rounded(x):
    """Seconds to the microsecond (the files stay small; nothing here is finer)."""
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def run_phases(service, rates, requests, seed, start_at=None, warmup=10):
    """One open loop per rate, in turn (seed + index), each with its own latencies and window.
    `requests` is a count for every phase or a list of counts, one per rate; `warmup` requests
    are served back to back before each phase."""
    counts = requests if isinstance(requests, list) else [requests] * len(rates)
    phases = []
    for i, rate in enumerate(rates):
        r = run_open_loop(service, rate, counts[i], seed + i, start_at if i == 0 else None, warmup)
        phases.append(rounded({"rate_rps": rate, **r, "p50_s": percentile(r["latency_s"], 50),
                               "p99_s": percentile(r["latency_s"], 99)}))
    return phases


def calibrate(service, n):
    clock = ThreadClock()
    times, recs = [], []
    for _ in range(n):
        e, rec = serve_one(service, clock)
        times.append(e - rec["start"])
        recs.append(rec)
    return {"kind": "calibrate", "service_s": rounded(times), "p50_s": percentile(times, 50), "p99_s": percentile(times, 99),
            "mean_s": sum(times) / len(times), "cpu_s": rounded([x["cpu_s"] for x in recs])}


def trace(service, rate, requests, seed, out):
    """`requests` requests at `rate` under PyTorch's profiler (CUDA kernels and runtime calls):
    the kernels' summed GPU time, the gaps between them, the runtime calls' host time, over the
    traced window; the trace itself gzipped beside `out`."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.monotonic()
        run_open_loop(service, rate, requests, seed, warmup=0)
        wall = time.monotonic() - t0
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
        with open(path, "rb") as f, gzip.open(out[:-len(".json")] + ".trace.json.gz", "wb") as g:
            g.write(f.read())
    finally:
        os.remove(path)
    kernels = sorted((e["ts"], e.get("dur", 0.0)) for e in events if str(e.get("cat", "")).lower() == "kernel")
    runtime = [e.get("dur", 0.0) for e in events if str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver")]
    gaps = [b[0] - (a[0] + a[1]) for a, b in zip(kernels, kernels[1:])]
    return {"kind": "trace", "requests": requests, "rate_rps": rate, "wall_s": wall, "kernels": len(kernels),
            "kernel_us": sum(d for _, d in kernels), "gap_us": sum(g for g in gaps if g > 0),
            "gap_p50_us": percentile([g for g in gaps if g > 0], 50), "runtime_calls": len(runtime),
            "runtime_us": sum(runtime)}


def parse_rates(text):
    try:
        rates = [float(x) for x in text.split(",") if x]
    except ValueError:
        rates = []
    if not rates or any(not r > 0 for r in rates):
        raise SystemExit(f"--rates '{text}': expected positive numbers separated by commas")
    return rates


def identity(a, service):
    d = {"model": a.model, "batch": a.batch, "graph": a.graph, "pid": os.getpid(), "impl": service.impl,
         "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    if hasattr(service, "describe"):
        d["describe"] = service.describe
    if getattr(service, "fallback_errors", None):
        d["fallback_errors"] = service.fallback_errors
    return d


def serve_jobs(a, service):
    srv = control.Server(a.serve)
    srv.ready(identity(a, service))
    while (job := srv.next_job()) is not None:
        try:
            if job["op"] == "calibrate":
                doc = {**identity(a, service), **calibrate(service, int(job["n"]))}
            elif job["op"] == "phases":
                phases = run_phases(service, job["rates"], job["requests"], int(job["seed"]), warmup=int(job.get("warmup", 10)))
                doc = {**identity(a, service), "kind": "open_loop", "seed": job["seed"], "phases": phases, **job.get("extra", {})}
            elif job["op"] == "trace":
                doc = {**identity(a, service), **trace(service, job["rate"], int(job["requests"]), int(job["seed"]), job["out"])}
            else:
                raise ValueError(f"unknown job '{job['op']}'")
            control.write_atomic(job["out"], doc)
            srv.done(job)
        except Exception as e:  # the job fails, the process serves on
            srv.failed(job, f"{type(e).__name__}: {e}")


def selftest(a, service):
    t = time.monotonic()
    back = [serve_one(service, ThreadClock())[1] for _ in range(2)]
    took = time.monotonic() - t
    mean = took / 2
    loop = run_open_loop(service, 0.5 / mean, 2, 1, warmup=0)
    out = {**identity(a, service), "selftest": "ok", "request_s": round(mean, 6), "open_loop_latency_s": rounded(loop["latency_s"])}
    if "tokens" in back[0]:
        ts = back[0]["tokens"]
        out.update({"tokens_per_request": len(ts) - 1, "prefill_s": round(ts[0] - back[0]["start"], 6),
                    "per_token_ms": round((ts[-1] - ts[0]) / (len(ts) - 1) * 1e3, 4)})
    else:
        out["issue_s"] = round(back[0]["issue_s"], 6)
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=models.ALL, default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--calibrate", type=int, default=0, help="N back-to-back requests: the service time alone")
    ap.add_argument("--rates", default="", help="Poisson arrivals per second, one phase per rate (R1,R2,...)")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--priority", choices=("normal", "high"), default="normal", help="the service stream's priority")
    ap.add_argument("--serve", help="resident: serve run.py's jobs from this control folder")
    ap.add_argument("--selftest", action="store_true", help="a tiny run; one JSON line on stdout")
    ap.add_argument("--llm-config", default="", help="llama: key=value,... over llm.CONFIG (hidden, layers, prompt, ...)")
    ap.add_argument("--llm-impl", choices=("auto", "transformers", "hand"), default="auto")
    ap.add_argument("--ready", help="create this file once warm")
    ap.add_argument("--start-at", type=float, help="CLOCK_MONOTONIC seconds before which no request arrives")
    ap.add_argument("--out")
    a = ap.parse_args()
    modes = (a.calibrate > 0) + bool(a.rates) + bool(a.serve) + a.selftest
    if modes != 1:
        ap.error("give exactly one of --calibrate N, --rates R1,R2,..., --serve DIR and --selftest")
    if (a.calibrate or a.rates) and not a.out:
        ap.error("--out is needed with --calibrate and --rates")
    rates = parse_rates(a.rates) if a.rates else []
    if a.batch < 1 or a.requests < 1:
        ap.error("--batch and --requests must be >= 1")
    # PyTorch maps a priority outside the device's range to the nearest one: -100 is the highest.
    stream = torch.cuda.Stream(priority=-100 if a.priority == "high" else 0)
    torch.manual_seed(a.seed)
    service = make_service(a, stream)
    if a.ready:
        open(a.ready, "w").close()
    if a.serve:
        return serve_jobs(a, service)
    if a.selftest:
        return selftest(a, service)
    result = identity(a, service)
    if a.calibrate:
        result.update(calibrate(service, a.calibrate))
    else:
        result.update({"kind": "open_loop", "seed": a.seed, "phases": run_phases(service, rates, a.requests, a.seed, a.start_at)})
    with open(a.out, "w") as f:
        json.dump(result, f)
    for p in result.get("phases", [result]):
        print(f"lc_service {a.model} b{a.batch}{' graph' if a.graph else ''}: p50 {p['p50_s'] * 1e3:.2f} ms, "
              f"p99 {p['p99_s'] * 1e3:.2f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
