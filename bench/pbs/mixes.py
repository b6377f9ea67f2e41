#!/usr/bin/env python3
"""Writes bench/pbs's workloads: two- and three-tenant BE mixes of the suite's elastic kernels,
each input above the largest L2 (60 MB on the H200) so that co-runners contend in L2 and DRAM,
each tenant a closed loop of `requests` requests of one kernel each (about --target-ms of work
alone on the whole GPU, from the simulator's H100 estimate; one kernel per request lets the bench
end a run when the first tenant is done); alone/KERNEL.yaml holds each kernel alone.

  mixes.py OUTDIR [--concord build/src/concord] [--target-ms 400]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

# name -> (size, input bytes): sizes chosen so that each input is over 60 MB.
KERNELS = {
    "stream_triad": (33554432, 3 * 4 * 33554432),
    "vector_add": (33554432, 3 * 4 * 33554432),
    "kmeans": (1048576, 34 * 4 * 1048576),
    "lbm": (4194304, 2 * 19 * 4 * 4194304),
    "fft_stage": (16777216, 2 * 8 * 16777216),
    "bfs": (4194304, 4 * 4 * 4194304),
    "hotspot": (4096, 3 * 4 * 4096 * 4096),
    "srad": (4096, 6 * 4 * 4096 * 4096),
    "backprop": (4194304, 17 * 4 * 4194304),
    "pathfinder": (4194304, 21 * 4 * 4194304),
    "cfd_flux": (2097152, 10 * 4 * 2097152),
    "stencil": (384, 2 * 4 * 384 ** 3),
    "fma_loop": (62914560, 2 * 4 * 62914560),
    "matmul": (4096, 3 * 4 * 4096 * 4096),
}
L2_BYTES = 60 * 1024 * 1024

# Memory-heavy pairs first (the paper's contended workloads), then compute beside memory.
PAIRS = [
    ("stream_triad", "kmeans"), ("stream_triad", "lbm"), ("stream_triad", "fft_stage"), ("stream_triad", "bfs"),
    ("vector_add", "kmeans"), ("vector_add", "srad"), ("vector_add", "hotspot"), ("kmeans", "lbm"),
    ("kmeans", "bfs"), ("kmeans", "srad"), ("lbm", "fft_stage"), ("lbm", "hotspot"), ("bfs", "fft_stage"),
    ("bfs", "pathfinder"), ("srad", "backprop"), ("hotspot", "cfd_flux"), ("cfd_flux", "kmeans"),
    ("stencil", "stream_triad"), ("backprop", "pathfinder"), ("fma_loop", "stream_triad"), ("matmul", "kmeans"),
    ("fma_loop", "lbm"),
]
TRIPLES = [
    ("stream_triad", "kmeans", "lbm"), ("vector_add", "bfs", "srad"), ("kmeans", "fft_stage", "hotspot"),
    ("lbm", "bfs", "cfd_flux"), ("stream_triad", "backprop", "pathfinder"), ("fma_loop", "kmeans", "stream_triad"),
]


def alone_seconds(concord, kernel, size, work):
    spec = os.path.join(work, f"alone-{kernel}.yaml")
    out = os.path.join(work, f"alone-{kernel}.json")
    with open(spec, "w") as f:
        f.write(f"name: alone-{kernel}\ntenants:\n  - name: {kernel}\n    class: BE\n    kernels:\n"
                f"      - {{kernel: {kernel}, size: {size}}}\n")
    subprocess.run([concord, "-q", "run", spec, "--policy", "serial", "--backend", "sim", "--device", "h100",
                    "--no-serial", "--out", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)["metrics"]["makespan_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--concord", default="build/src/concord")
    ap.add_argument("--target-ms", type=float, default=400)
    args = ap.parse_args()
    for name, (size, bytes_) in KERNELS.items():
        if bytes_ <= L2_BYTES:
            sys.exit(f"mixes.py: {name} at size {size} has {bytes_} input bytes, not above the L2's {L2_BYTES}")
    os.makedirs(args.outdir, exist_ok=True)
    counts = {}
    with tempfile.TemporaryDirectory() as work:
        for name, (size, _) in KERNELS.items():
            s = alone_seconds(args.concord, name, size, work)
            counts[name] = max(1, math.ceil(args.target_ms / 1000 / s))
    os.makedirs(os.path.join(args.outdir, "alone"), exist_ok=True)
    for k, (size, _) in KERNELS.items():  # each kernel alone, for its best alone TLP
        with open(os.path.join(args.outdir, "alone", k + ".yaml"), "w") as f:
            f.write(f"name: alone-{k}\ntenants:\n  - name: {k}\n    class: BE\n    requests: {counts[k]}\n    kernels:\n"
                    f"      - {{kernel: {k}, size: {size}}}\n")
    for mix in PAIRS + TRIPLES:
        name = "-".join(mix)
        with open(os.path.join(args.outdir, name + ".yaml"), "w") as f:
            f.write(f"# bench/pbs: {len(mix)} tenants, each about {args.target_ms:g} ms alone (simulator, H100)\n")
            f.write(f"name: {name}\ntenants:\n")
            for k in mix:
                size = KERNELS[k][0]
                f.write(f"  - name: {k}\n    class: BE\n    requests: {counts[k]}\n    kernels:\n      - {{kernel: {k}, size: {size}}}\n")
    print(f"{len(PAIRS)} pairs and {len(TRIPLES)} triples in {args.outdir}")


if __name__ == "__main__":
    main()
