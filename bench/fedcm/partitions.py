#!/usr/bin/env python3
"""Markdown table of scripts/fedcm_partitions.sh's results: per workload, STP (whole run and co-run
window) of serial, streams, FedC, FEDCM and the best static SM partition over the weights tried,
and how far the best partition and FEDCM are from streams."""
import argparse
import json
import sys


def main(paths):
    print("| workload | N | serial | streams | fedc | fedcm | best partition (weights) | worst partition | "
          "best partition / streams | fedcm / streams | window: streams | window: best partition (weights) |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|")
    ratios = []
    for path in paths:
        runs = [r for r in json.load(open(path))["runs"] if not r.get("sweep")]
        by = {r["scheme"]: r for r in runs}
        parts = [r for r in runs if r["scheme"].startswith("static-partition")]
        if not parts or "streams" not in by:
            continue
        best = max(parts, key=lambda r: r["stp"])
        worst = min(parts, key=lambda r: r["stp"])
        best_w = max(parts, key=lambda r: r["stp_window"])
        w = lambda r: r["scheme"].split("weights=")[1]
        s = by["streams"]
        ratios.append((best["stp"] / s["stp"], by["fedcm"]["stp"] / s["stp"] if "fedcm" in by else float("nan")))
        print(f"| {best['workload']} | {best['tenants_n']} | {by['serial']['stp']:.3f} | {s['stp']:.3f} | "
              f"{by.get('fedc', {}).get('stp', float('nan')):.3f} | {by.get('fedcm', {}).get('stp', float('nan')):.3f} | "
              f"{best['stp']:.3f} ({w(best)}) | {worst['stp']:.3f} | {ratios[-1][0]:.3f}x | {ratios[-1][1]:.3f}x | "
              f"{s['stp_window']:.3f} | {best_w['stp_window']:.3f} ({w(best_w)}) |")
    if ratios:
        n = len(ratios)
        print(f"\nMean over {n} workloads: best partition / streams {sum(r[0] for r in ratios) / n:.3f}x, "
              f"fedcm / streams {sum(r[1] for r in ratios) / n:.3f}x")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("results", nargs="+", help="results JSON of scripts/fedcm_partitions.sh (concord_fedcm_bench run --out)")
    args = ap.parse_args()
    try:
        main(args.results)
    except (OSError, ValueError) as e:
        sys.exit(f"partitions.py: {e}")
