#!/usr/bin/env python3
"""Where a task-stream run's time goes, from `concord run --trace` files (Chrome trace JSON):
the share of the makespan with no kernel on the GPU, the gaps between one task's consecutive
kernels (a completion seen by the host, the policy, the next launch), and the time-weighted mean
number of kernels and tasks in flight, and how long after some task's last kernel ended the next
task's first kernel started (the host's reaction: a completion seen, a decision, a launch; only
starts within 300 us of an end count). Usage: gaps.py trace.json [trace.json ...]"""
import argparse
import json
import sys
from collections import defaultdict


def tenant_tracks(events):
    """Per tenant (its process in the trace, named "tenant ..."), its kernel slices and its request
    slices, each sorted by start. A fused dispatch counts for both of its tenants."""
    tenants = {e["pid"] for e in events
               if e.get("ph") == "M" and e.get("name") == "process_name" and e["args"]["name"].startswith("tenant ")}
    kernels, requests = defaultdict(list), defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in tenants:
            into = kernels if "kernel" in e.get("args", {}) else requests
            into[e["pid"]].append((e["ts"], e["ts"] + e["dur"]))
    for v in list(kernels.values()) + list(requests.values()):
        v.sort()
    return kernels, requests


def sweep(spans):
    """Time with at least one span open, and the time integral of the number open."""
    points = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda p: (p[0], p[1]))
    busy = area = 0.0
    depth = 0
    last = None
    for t, d in points:
        if last is not None and depth > 0:
            busy += t - last
            area += (t - last) * depth
        depth += d
        last = t
    return busy, area


def main(paths):
    print("| trace | makespan ms | no kernel running | gaps inside tasks (sum, per kernel) | kernels in flight | tasks in flight "
          "| backend us a dispatch | policy us a dispatch | completion seen after end, us (median / p90 / max) "
          "| task start after an end (count, median us, sum as share of the makespan) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        d = json.load(open(path))
        ev = d["traceEvents"] if isinstance(d, dict) else d
        kernels, requests = tenant_tracks(ev)  # requests: arrival to finish
        if not kernels:
            sys.exit(f"gaps.py: {path}: no kernel slices of any tenant")
        spans = [s for v in kernels.values() for s in v]
        t0 = min(a for a, _ in spans)
        t1 = max(b for _, b in spans)
        span = t1 - t0
        busy, area = sweep(spans)
        # A task is in flight from its first kernel's start to its last kernel's end.
        _, task_area = sweep([(v[0][0], v[-1][1]) for v in kernels.values()])
        gaps = 0.0
        n = 0
        for tid, v in kernels.items():
            for (a0, b0), (a1, b1) in zip(v, v[1:]):
                # Consecutive kernels of one request: the next starts after this one ends.
                inside = any(r0 <= a0 and b1 <= r1 + 1e-6 for r0, r1 in requests.get(tid, []))
                if inside and a1 >= b0:
                    gaps += a1 - b0
                    n += 1
        # Task starts that followed an end: from the latest task end before the start.
        ends = sorted(v[-1][1] for v in kernels.values())
        react = []
        for v in kernels.values():
            before = [e for e in ends if e <= v[0][0]]
            if before and v[0][0] - before[-1] < 300:
                react.append(v[0][0] - before[-1])
        react.sort()
        reaction = (f"{len(react)}, {react[len(react) // 2]:.0f}, {100 * sum(react) / span:.1f}%" if react else "-")
        # The engine's counters, from the results JSON beside the trace (x.trace.json -> x.result.json).
        cost = ["-", "-"]
        seen = "-"
        try:
            res = json.load(open(path.replace(".trace.json", ".result.json")))
            lat = sorted(1e6 * (d["seen_s"] - d["end_s"]) for d in res["dispatches"] if "seen_s" in d)
            if lat:
                seen = f"{lat[len(lat) // 2]:.0f} / {lat[int(len(lat) * 0.9)]:.0f} / {lat[-1]:.0f}"
            e = res["engine"]
            cost = [f"{1e6 * e['backend_dispatch_seconds'] / e['dispatches']:.1f}",
                    f"{1e6 * (e['policy_seconds'] - e['backend_dispatch_seconds']) / e['dispatches']:.1f}"]
        except (OSError, KeyError, ZeroDivisionError, ValueError):
            pass
        print(f"| {path} | {span / 1e3:.3f} | {100 * (span - busy) / span:.1f}% | {gaps / 1e3:.3f} ms, "
              f"{gaps / max(n, 1):.1f} us | {area / span:.2f} | {task_area / span:.2f} | {cost[0]} | {cost[1]} | {seen} | {reaction} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("traces", nargs="+", help="`concord run --trace` files")
    args = ap.parse_args()
    try:
        main(args.traces)
    except (OSError, ValueError) as e:
        sys.exit(f"gaps.py: {e}")
