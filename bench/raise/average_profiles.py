#!/usr/bin/env python3
"""Averages RAISE's eight metrics over several stored profile exports (`concord profile export`) of
the same kernels, one Nsight Compute measurement each, into one export: the task vectors with the
measurement noise of one pass averaged out. Every other field comes from the first file. A kernel
missing from any file is an error (the files must measure the same task set). Reads both export
layouts: "raise" facets (schema v3) and metrics inside the profiles (older exports).
Usage: average_profiles.py OUT.json IN1.json IN2.json [...]"""
import argparse
import json
import sys

METRICS = ["AOC", "SME", "IPC", "ISU", "SPU", "DU", "LSU", "TU"]


def key_of(p):
    return json.dumps(p["key"], sort_keys=True)


def raise_class(m, threshold=3.0):
    # src/core/raise.cpp raise_class(): LAT when IPC and DU are both below the threshold.
    if m["IPC"] < threshold and m["DU"] < threshold:
        return "LAT"
    return "COM" if m["IPC"] >= m["DU"] else "MEM"


def raise_entries(f):
    """Key -> the dict holding its RAISE metrics: a "raise" facet's payload (exports since schema
    v3: {"metrics": {...}, "class": ...}) or, in older exports, the profile itself ({"raise":
    {...}, "raise_class": ...}). Returns (entries, metrics field, class field)."""
    facets = [x for x in f.get("facets", []) if x.get("facet") == "raise"]
    if facets or "facets" in f:
        return {key_of(x): x["payload"] for x in facets}, "metrics", "class"
    return {key_of(p): p for p in f["profiles"] if p.get("raise")}, "raise", "raise_class"


def main(out, *inputs):
    files = []
    for path in inputs:
        try:
            files.append(json.load(open(path)))
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"{path}: cannot read: {e}")
    base = files[0]
    index = [raise_entries(f) for f in files]
    base_entries, metrics_field, class_field = index[0]
    n_avg = 0
    for k, entry in base_entries.items():
        vecs = []
        for path, (idx, field, _) in zip(inputs, index):
            q = idx.get(k)
            if q is None or not q.get(field):
                sys.exit(f"{path}: no RAISE metrics for kernel {k}")
            vecs.append(q[field])
        entry[metrics_field] = {m: sum(v[m] for v in vecs) / len(vecs) for m in METRICS}
        entry[class_field] = raise_class(entry[metrics_field])
        n_avg += 1
    json.dump(base, open(out, "w"), indent=1)
    print(f"{out}: RAISE metrics of {n_avg} profiles averaged over {len(inputs)} measurements")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the averaged export")
    ap.add_argument("inputs", nargs="+", help="exports of the same kernels (`concord profile export`), at least two")
    args = ap.parse_args()
    if len(args.inputs) < 2:
        ap.error("give at least two exports to average")
    main(args.out, *args.inputs)
