#!/usr/bin/env python3
"""CPUs for run_gpus.sh: for each GPU used, the LC's and the BE's CPU lists (taskset form), taken
from the CPUs local to that GPU (sysfs local_cpulist of its PCI device) and shared out evenly
among the GPUs that have the same local CPUs. The LC gets the first LC_CPUS (default 2) of its
share, the BE the rest. Prints one line per GPU: "GPU LC_LIST BE_LIST"; nothing when a GPU's
local CPUs cannot be read or its share is under 4 CPUs (the runs are then left unpinned).

  cpu_plan.py FIRST_GPU COUNT
"""
import os
import subprocess
import sys


def cpulist(text):
    cpus = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def span(cpus):
    return ",".join(str(c) for c in cpus)


def local_cpus(gpu):
    bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", str(gpu)],
                         capture_output=True, text=True, timeout=30).stdout.strip()
    # nvidia-smi writes 00000000:18:00.0; sysfs names it 0000:18:00.0.
    dom, rest = bus.split(":", 1)
    path = f"/sys/bus/pci/devices/{dom[-4:].lower()}:{rest.lower()}/local_cpulist"
    with open(path) as f:
        return cpulist(f.read())


def main():
    first, count = int(sys.argv[1]), int(sys.argv[2])
    n_lc = int(os.environ.get("LC_CPUS", "2"))
    try:
        local = {g: tuple(local_cpus(g)) for g in range(first, first + count)}
    except (OSError, ValueError, subprocess.SubprocessError):
        return
    for g in local:
        peers = sorted(h for h in local if local[h] == local[g])
        share = len(local[g]) // len(peers)
        if share < 4:
            return
    for g in local:
        peers = sorted(h for h in local if local[h] == local[g])
        share = len(local[g]) // len(peers)
        mine = list(local[g][peers.index(g) * share:(peers.index(g) + 1) * share])
        print(g, span(mine[:n_lc]), span(mine[n_lc:]))


if __name__ == "__main__":
    main()
