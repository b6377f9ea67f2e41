#!/usr/bin/env python3
"""The interception library's leased launch path, one library against another, through the
stand-in driver (tests/standin): a BE tenant under an open lease (concordd --policy streams, no LC)
makes N launches of a zero-length stand-in kernel with no synchronisation, and the time per launch
is its loop's wall time over N. The libraries run in turns, ROUNDS rounds, with a plain run (no
library) beside them. Only the ratio means anything: the stand-in's times are a host thread's, not
a GPU's, and its own cost per launch is part of every figure.

  standin_cost.py --build BUILD --old OLD.so --new NEW.so [--launches N] [--rounds R] [--json FILE]

BUILD is a build folder holding src/concordd, tests/standin/libcuda.so.1 (its folder) and the
stand-in app. Prints each run, then per library the median per-launch time and the new over old.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def find(build, *names):
    for name in names:
        p = os.path.join(build, name)
        if os.path.exists(p):
            return p
    sys.exit(f"standin_cost.py: {build}: none of {', '.join(names)} (build the stand-in tests and concordd)")


def run_app(app, standin_dir, launches, lib, socket):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = standin_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if lib:
        env.update({"LD_PRELOAD": lib, "CONCORD_SOCKET": socket, "CONCORD_CLASS": "be", "CONCORD_NAME": "cost"})
    out = subprocess.run([app, "be", f"launches={launches}", "ns=0", "grid=1", "sync_every=0"], env=env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"standin_cost.py: {app} failed ({out.returncode}): {out.stderr[-2000:]}")
    line = [l for l in out.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["seconds"] / launches * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--launches", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    for lib in (a.old, a.new):
        if not os.path.isfile(lib):
            sys.exit(f"standin_cost.py: {lib}: no such library")
    if a.launches < 1 or a.rounds < 1:
        sys.exit("standin_cost.py: --launches and --rounds must be at least 1")
    daemon = find(a.build, "src/concordd")
    app = find(a.build, "tests/standin/concord_standin_app")
    standin_dir = os.path.dirname(find(a.build, "tests/standin/libcuda.so.1", "tests/standin/driver/libcuda.so.1"))
    with tempfile.TemporaryDirectory() as tmp:
        socket = os.path.join(tmp, "concordd.sock")
        drivers = os.path.join(tmp, "no-driver")
        os.makedirs(drivers)
        d = subprocess.Popen([daemon, "--socket", socket, "--policy", "streams", "--device-spec", "h100",
                              "--driver-root", drivers, "--log-level", "warn"], stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if os.path.exists(socket):
                    break
                time.sleep(0.05)
            time.sleep(0.2)
            runs = {"plain": [], "old": [], "new": []}
            for r in range(a.rounds):
                order = [("old", a.old), ("new", a.new)] if r % 2 == 0 else [("new", a.new), ("old", a.old)]
                for name, lib in [("plain", None)] + order:
                    us = run_app(app, standin_dir, a.launches, lib, socket)
                    runs[name].append(us)
                    print(f"round {r + 1} {name:5}: {us:.3f} us per launch", flush=True)
        finally:
            d.terminate()
            d.wait(timeout=10)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"median per launch: plain {med['plain']:.3f} us, old {med['old']:.3f} us, new {med['new']:.3f} us")
    print(f"over plain: old +{med['old'] - med['plain']:.3f} us, new +{med['new'] - med['plain']:.3f} us; "
          f"new / old {med['new'] / med['old']:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"launches": a.launches, "rounds": a.rounds, "runs_us": runs, "median_us": med,
                       "new_over_old": med["new"] / med["old"]}, f, indent=1)


if __name__ == "__main__":
    main()
