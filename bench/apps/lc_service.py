#!/usr/bin/env python3
"""An inference service, the LC tenant of bench/apps: one model in fp16, batch B, inference only.

  lc_service.py --model resnet50 --batch 64 [--graph] --calibrate N --out FILE
      N requests back to back: the service time alone (p50, p99, mean), hence its capacity.
  lc_service.py --model resnet50 --batch 64 [--graph] --rates R1,R2,... --requests N --out FILE
      Open loop, one phase per rate, one after the other: N requests with Poisson arrivals at R per
      second (seeded), served one at a time in arrival order; a request's latency runs from its
      arrival to the end of its forward pass (queueing included), as a service's client sees it.
      Each phase has its own window (first arrival to last end), so a job beside the service can be
      measured over each.

With --graph the forward pass is captured once as a CUDA graph and each request replays it.
When the process runs under Concord's interception library (LD_PRELOAD), each request is marked
with concord_request_begin/end so the daemon sees request boundaries. --ready FILE is created once
the model is warm; --start-at T (CLOCK_MONOTONIC seconds) delays the first arrival until then.
"""
import argparse
import ctypes
import json
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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

    def serve(self):
        with torch.inference_mode(), torch.cuda.stream(self.stream):
            if self.graph is not None:
                self.graph.replay()
            else:
                self.out = self.net(self.x)
        self.stream.synchronize()


def run_open_loop(service, rate, requests, seed, start_at=None, warmup=10):
    begin, end, marked = request_marks()
    for _ in range(warmup):
        service.serve()
    rng = random.Random(seed)
    t0 = max(time.monotonic(), start_at or 0.0) + 0.05
    arrivals, t = [], t0
    for _ in range(requests):
        t += rng.expovariate(rate)
        arrivals.append(t)
    lat, ends = [], []
    for a in arrivals:
        now = time.monotonic()
        if a > now:
            time.sleep(max(0.0, a - now - 200e-6))
            while time.monotonic() < a:
                pass
        begin()
        service.serve()
        end()
        e = time.monotonic()
        lat.append(e - a)
        ends.append(e)
    return {"arrivals": arrivals, "latency_s": lat, "window": [arrivals[0], ends[-1]], "marked": marked}


def run_phases(service, rates, requests, seed, start_at=None):
    """One open loop per rate, in turn (seed + index), each with its own latencies and window."""
    phases = []
    for i, rate in enumerate(rates):
        r = run_open_loop(service, rate, requests, seed + i, start_at if i == 0 else None)
        phases.append({"rate_rps": rate, **r, "p50_s": percentile(r["latency_s"], 50), "p99_s": percentile(r["latency_s"], 99)})
    return phases


def parse_rates(text):
    try:
        rates = [float(x) for x in text.split(",") if x]
    except ValueError:
        rates = []
    if not rates or any(not r > 0 for r in rates):
        raise SystemExit(f"--rates '{text}': expected positive numbers separated by commas")
    return rates


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=models.MODELS, default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--calibrate", type=int, default=0, help="N back-to-back requests: the service time alone")
    ap.add_argument("--rates", default="", help="Poisson arrivals per second, one phase per rate (R1,R2,...)")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--priority", choices=("normal", "high"), default="normal", help="the service stream's priority")
    ap.add_argument("--ready", help="create this file once warm")
    ap.add_argument("--start-at", type=float, help="CLOCK_MONOTONIC seconds before which no request arrives")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if (a.calibrate > 0) == bool(a.rates):
        ap.error("give exactly one of --calibrate N and --rates R1,R2,...")
    rates = parse_rates(a.rates) if a.rates else []
    if a.batch < 1 or a.requests < 1:
        ap.error("--batch and --requests must be >= 1")
    # PyTorch maps a priority outside the device's range to the nearest one: -100 is the highest.
    stream = torch.cuda.Stream(priority=-100 if a.priority == "high" else 0)
    service = Service(a.model, a.batch, a.graph, stream)
    if a.ready:
        open(a.ready, "w").close()
    result = {"model": a.model, "batch": a.batch, "graph": a.graph, "pid": os.getpid(),
              "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    if a.calibrate:
        times = []
        for _ in range(a.calibrate):
            t = time.monotonic()
            service.serve()
            times.append(time.monotonic() - t)
        result.update({"kind": "calibrate", "service_s": times, "p50_s": percentile(times, 50),
                       "p99_s": percentile(times, 99), "mean_s": sum(times) / len(times)})
    else:
        phases = run_phases(service, rates, a.requests, a.seed, a.start_at)
        result.update({"kind": "open_loop", "seed": a.seed, "phases": phases})
    with open(a.out, "w") as f:
        json.dump(result, f)
    for p in result.get("phases", [result]):
        print(f"lc_service {a.model} b{a.batch}{' graph' if a.graph else ''}: p50 {p['p50_s'] * 1e3:.2f} ms, "
              f"p99 {p['p99_s'] * 1e3:.2f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
