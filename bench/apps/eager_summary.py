#!/usr/bin/env python3
"""The table of eager_alone.sh: per model and mode, the mean service time of each run (one
process, REQUESTS back-to-back requests), their mean and median, and both over plain MPS's. With
several folders (eager_alone.sh on several GPUs at once) the runs of all of them are pooled.

  eager_summary.py --modes "mps concord" OUTDIR [OUTDIR...] -- MODEL:BATCH...
"""
import argparse
import json
import pathlib
import statistics
import sys


def main():
    argv = sys.argv[1:]
    models = []
    if "--" in argv:
        i = argv.index("--")
        argv, models = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="mps concord disabled streams")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args(argv)
    if not models:
        ap.error("name the models after --, e.g. -- bert:8 gpt:16")
    modes = a.modes.split()
    print("| model | batch | mode | runs | mean ms (per run) | median of run means, ms | mean / MPS's | median / MPS's |")
    print("|---|---:|---|---:|---|---:|---:|---:|")
    for mb in models:
        model, batch = mb.split(":")
        runs = {m: [json.load(open(f)) for d in a.dirs for f in sorted(pathlib.Path(d).glob(f"{model}-{batch}-{m}-*.json"))
                    if not f.name.endswith(".stats.json")] for m in modes}
        if not runs.get("mps"):
            continue
        base = statistics.mean(r["mean_s"] for r in runs["mps"])
        base_med = statistics.median(r["mean_s"] for r in runs["mps"])
        for m in modes:
            if not runs[m]:
                continue
            means = [r["mean_s"] for r in runs[m]]
            per = ", ".join(f"{x * 1e3:.2f}" for x in means)
            print(f"| {model} | {batch} | {m} | {len(means)} | {statistics.mean(means) * 1e3:.3f} ({per}) | "
                  f"{statistics.median(means) * 1e3:.3f} | {statistics.mean(means) / base:.3f} | "
                  f"{statistics.median(means) / base_med:.3f} |")


if __name__ == "__main__":
    main()
