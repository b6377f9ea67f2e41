#!/usr/bin/env python3
"""The two tenants of bench/restart/restart.sh, PyTorch programs run under
LD_PRELOAD=libconcord_intercept.so while concordd is killed, stopped and started again.

  tenants.py lc --out FILE --seconds S [--rate 50] [--size 2048] [--kernels 4]
      An LC service: requests arriving on a fixed grid of RATE a second for S seconds, each
      `kernels` matrix products of SIZE x SIZE between concord_request_begin/end (when the library
      is there), synchronised at its end. A request's latency runs from its arrival to its end.
      FILE: {"requests": [[arrival_unix_s, latency_ms], ...], "late": n}.
  tenants.py be --out FILE --seconds S [--size 8192]
      A BE job: matrix products of SIZE x SIZE back to back, synchronised every 4, for S seconds.
      FILE: {"syncs": [unix_s, ...]} (one entry per 4 products).

Both touch FILE.ready after their first step.
"""
import argparse
import json
import os
import sys
import time

# The request marks of the library (no-ops without it), as the memory bench calls them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "memory"))
from quota_torch import request_marks  # noqa: E402


def run_lc(a):
    import torch
    begin, end = request_marks()
    x = torch.randn(a.size, a.size, device="cuda")
    y = x @ x
    torch.cuda.synchronize()
    open(a.out + ".ready", "w").close()
    period = 1.0 / a.rate
    start = time.time()
    requests, late = [], 0
    n = 0
    while True:
        arrival = start + n * period
        if arrival - start >= a.seconds:
            break
        now = time.time()
        if now < arrival:
            time.sleep(arrival - now)
        else:
            late += 1
        begin()
        for _ in range(a.kernels):
            y = x @ x
        torch.cuda.synchronize()
        end()
        requests.append([round(arrival, 6), round(1e3 * (time.time() - arrival), 4)])
        n += 1
    del y
    with open(a.out, "w") as f:
        json.dump({"requests": requests, "late": late, "rate": a.rate, "size": a.size, "kernels": a.kernels}, f)


def run_be(a):
    import torch
    x = torch.randn(a.size, a.size, device="cuda")
    y = x @ x
    torch.cuda.synchronize()
    open(a.out + ".ready", "w").close()
    start = time.time()
    syncs = []
    while time.time() - start < a.seconds:
        for _ in range(4):
            y = x @ x
        torch.cuda.synchronize()
        syncs.append(round(time.time(), 6))
    del y
    with open(a.out, "w") as f:
        json.dump({"syncs": syncs, "size": a.size}, f)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=["lc", "be"])
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--rate", type=float, default=50)
    p.add_argument("--size", type=int, default=None)
    p.add_argument("--kernels", type=int, default=4)
    a = p.parse_args()
    if a.size is None:
        a.size = 2048 if a.role == "lc" else 8192
    (run_lc if a.role == "lc" else run_be)(a)


if __name__ == "__main__":
    main()
