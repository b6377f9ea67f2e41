#!/usr/bin/env python3
"""The simulator's LC tail against the GPU's on bench/lsbe: for every mix, load and scheme both
ran, the LC's p99 latency on each and the simulator's error; per scheme the median error and how
many points are within 20% (issue 36's bar for orion, sgdrc and concord), and whether the
simulator ranks the schemes as the GPU does at each point (by LC p99).

  python3 bench/lsbe/sim_vs_gpu.py GPU_LSBE_JSON SIM_LSBE_JSON [--out FILE.json]

Both files are `concord_lsbe_bench run` results (bench/lsbe/run.sh writes OUTDIR/lsbe.json);
the simulator's comes from `BACKEND=sim bench/lsbe/run.sh` on the CPU.
"""
import argparse
import json
import statistics
import sys


def p99(values):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))] if s else float("nan")


def tails(path):
    """(mix, load, scheme) -> LC p99 in seconds; scheme 'alone' is the LC alone at that load."""
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for m in doc["mixes"]:
        for load in m["loads"]:
            out[(m["mix"], load["load"], "alone")] = p99(load["lc_alone"]["lc"]["latencies_s"])
            runs = load["runs"]
            for scheme, r in (runs.items() if isinstance(runs, dict) else ((r.get("scheme"), r) for r in runs)):
                out[(m["mix"], load["load"], scheme)] = p99(r["lc"]["latencies_s"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gpu")
    ap.add_argument("sim")
    ap.add_argument("--out")
    a = ap.parse_args()
    gpu, sim = tails(a.gpu), tails(a.sim)
    rows = [{"mix": k[0], "load": k[1], "scheme": k[2], "gpu_p99_s": gpu[k], "sim_p99_s": sim[k], "error": sim[k] / gpu[k] - 1}
            for k in sorted(sim) if k in gpu and gpu[k] > 0]
    if not rows:
        sys.exit("sim_vs_gpu.py: no (mix, load, scheme) in both files")
    print("| mix | load | scheme | GPU p99 ms | sim p99 ms | error |\n|---|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['mix']} | {r['load']:.1f} | {r['scheme']} | {r['gpu_p99_s'] * 1e3:.2f} | {r['sim_p99_s'] * 1e3:.2f} | {r['error'] * 100:+.0f}% |")
    summary = {}
    for scheme in sorted({r["scheme"] for r in rows}):
        e = [r["error"] for r in rows if r["scheme"] == scheme]
        summary[scheme] = {"points": len(e), "median_error": statistics.median(e), "within_20pct": sum(abs(x) <= 0.2 for x in e)}
    # The ranking by LC p99 among the schemes (not 'alone') at each point both ran.
    points = sorted({(r["mix"], r["load"]) for r in rows})
    same = 0
    for p in points:
        schemes = [r["scheme"] for r in rows if (r["mix"], r["load"]) == p and r["scheme"] != "alone"]
        if sorted(schemes, key=lambda s: gpu[(*p, s)]) == sorted(schemes, key=lambda s: sim[(*p, s)]):
            same += 1
    print("\n| scheme | points | median error | within 20% |\n|---|---:|---:|---:|")
    for scheme, s in summary.items():
        print(f"| {scheme} | {s['points']} | {s['median_error'] * 100:+.0f}% | {s['within_20pct']} of {s['points']} |")
    print(f"\nThe simulator ranks the schemes by LC p99 as the GPU does at {same} of {len(points)} mix-loads.")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rows": rows, "per_scheme": summary, "same_ranking": same, "points": len(points)}, f, indent=1)


if __name__ == "__main__":
    main()
