#!/usr/bin/env python3
"""The LC's service time per phase of a bench/apps run, and how close each phase ran to saturation.

An open-loop LC serves its requests one at a time in arrival order, so a request starts when it
arrives or when the one before it ends, whichever is later, and its service time is its end minus
that start. The phase's utilisation is its arrival rate times its mean service time: at 1 or
above, the queue grows for the whole phase and its p99 is the phase's length, whatever the
scheme. Beside them, the host's CPU time and issue time per request and the run-queue wait that
run.py records, which tell a host-bound service (CPU time close to the service time) from a
GPU-bound one.

  service_times.py RUN_DIR [RUN_DIR...] [--json FILE]

RUN_DIR is run.py's folder (or one combo's folder in it); every lc.json under it is read.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stats  # noqa: E402


def service_times(arrivals, latencies):
    """Each request's service time (s): its end minus the later of its arrival and the previous end."""
    out, previous_end = [], float("-inf")
    for arrived, latency in zip(arrivals, latencies):
        start = max(arrived, previous_end)
        end = arrived + latency
        out.append(end - start)
        previous_end = end
    return out


def quantile(xs, q):
    return stats.percentile(xs, 100 * q)


def phase_row(phase):
    lat = phase.get("latency_s") or []
    svc = service_times(phase.get("arrivals") or [], lat)
    if not svc:
        return None
    mean = sum(svc) / len(svc)
    row = {"rate_rps": phase["rate_rps"], "requests": len(svc), "service_p50_ms": 1e3 * quantile(svc, 0.5),
           "service_p99_ms": 1e3 * quantile(svc, 0.99), "service_mean_ms": 1e3 * mean,
           "utilisation": phase["rate_rps"] * mean, "latency_p99_ms": 1e3 * quantile(lat, 0.99)}
    for key, name in (("cpu_s", "cpu_p50_ms"), ("issue_s", "issue_p50_ms"), ("rq_wait_s", "rq_wait_p99_ms")):
        if phase.get(key):
            row[name] = 1e3 * quantile(phase[key], 0.99 if key == "rq_wait_s" else 0.5)
    return row


def collect(dirs):
    rows = []
    for top in dirs:
        if not os.path.isdir(top):
            sys.exit(f"service_times.py: {top}: not a folder")
        for here, _, files in sorted(os.walk(top)):
            if "lc.json" not in files:
                continue
            path = os.path.join(here, "lc.json")
            try:
                with open(path) as f:
                    doc = json.load(f)
            except (OSError, json.JSONDecodeError) as e:
                sys.exit(f"service_times.py: {path}: {e}")
            where = os.path.relpath(here, top)
            for phase in doc.get("phases", []):
                row = phase_row(phase)
                if row:
                    rows.append({"where": where, **row})
    return rows


def table(rows):
    cols = ("rate_rps", "requests", "service_p50_ms", "service_p99_ms", "utilisation", "cpu_p50_ms", "rq_wait_p99_ms",
            "latency_p99_ms")
    text = "| run | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols) + "\n"
    for r in rows:
        cells = [f"{r[c]:.2f}" if isinstance(r.get(c), float) else str(r.get(c, "–")) for c in cols]
        text += f"| {r['where']} | " + " | ".join(cells) + " |\n"
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = collect(a.dirs)
    if not rows:
        sys.exit(f"service_times.py: {', '.join(a.dirs)}: no lc.json with phases")
    print(table(rows), end="")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
