#!/usr/bin/env python3
"""The tables of bench/apps (run.py OUTDIR): per combo and load, each scheme's LC p50 and p99 over
the LC alone at the same rate, its SLO attainment (latency within --slo-factor x the LC alone p99),
and the BE job's iterations per second over the LC's window, over the BE alone.

  summarize.py OUTDIR [--json FILE]
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import percentile  # noqa: E402


def be_rate(be, window):
    """BE iterations per second within the LC's window [first arrival, last end]."""
    lo, hi = window
    ends = be.get("iteration_ends", [])
    n = sum(1 for t in ends if lo <= t <= hi)
    return n / (hi - lo) if hi > lo else float("nan")


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def rows_of(out):
    """One dict per (combo, load, scheme) run found under `out`."""
    rows = []
    for combo in sorted(os.listdir(out)):
        base = os.path.join(out, combo)
        be_alone = load_json(os.path.join(base, "be_alone.json"))
        be_alone_mps = load_json(os.path.join(base, "be_alone_mps.json"))
        if not os.path.isdir(base) or be_alone is None:
            continue
        for ld in sorted(d for d in os.listdir(base) if d.startswith("load")):
            settings = load_json(os.path.join(base, ld, "settings.json")) or {}
            alone = load_json(os.path.join(base, ld, "lc_alone", "lc.json"))
            if alone is None:
                continue
            target = settings.get("target_ms", float("nan")) / 1e3
            for scheme in sorted(os.listdir(os.path.join(base, ld))):
                d = os.path.join(base, ld, scheme)
                if scheme == "lc_alone" or not os.path.isdir(d):
                    continue
                lc, be = load_json(os.path.join(d, "lc.json")), load_json(os.path.join(d, "be.json"))
                row = {"combo": combo, "load": float(ld[4:]), "scheme": scheme}
                if lc is None or be is None:
                    err = os.path.join(d, "error.txt")
                    row["error"] = open(err).read().strip() if os.path.exists(err) else "no results"
                    rows.append(row)
                    continue
                lat = lc["latency_s"]
                row.update({
                    "lc_p50_over_alone": percentile(lat, 50) / alone["p50_s"],
                    "lc_p99_over_alone": percentile(lat, 99) / alone["p99_s"],
                    "slo_attainment": sum(1 for x in lat if x <= target) / len(lat) if lat else float("nan"),
                    "be_over_alone": be_rate(be, lc["window"]) / be_alone["its"],
                    "lc_p99_ms": percentile(lat, 99) * 1e3,
                    "be_its": be_rate(be, lc["window"]),
                    "be_over_alone_mps": be_rate(be, lc["window"]) / be_alone_mps["its"] if be_alone_mps else float("nan"),
                })
                rows.append(row)
    return rows


def fmt(x, digits=2):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args()
    if not os.path.isdir(a.out):
        sys.exit(f"summarize.py: {a.out}: not a directory")
    rows = rows_of(a.out)
    if not rows:
        sys.exit(f"summarize.py: {a.out}: no runs found")
    print("# bench/apps: PyTorch LC service beside PyTorch training, as separate processes\n")
    key = None
    for r in rows:
        if (r["combo"], r["load"]) != key:
            key = (r["combo"], r["load"])
            print(f"\n## {r['combo']}, LC at {r['load']:g} of its alone capacity\n")
            print("| scheme | LC p50 / alone | LC p99 / alone | SLO attainment % | BE / BE alone | BE / BE alone under MPS |")
            print("|---|---:|---:|---:|---:|---:|")
        if "error" in r:
            print(f"| {r['scheme']} | failed: {r['error'].splitlines()[0][:80]} | | | | |")
            continue
        print(f"| {r['scheme']} | {fmt(r['lc_p50_over_alone'])} | {fmt(r['lc_p99_over_alone'])} | "
              f"{fmt(100 * r['slo_attainment'], 1)} | {fmt(r['be_over_alone'])} | {fmt(r['be_over_alone_mps'])} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
