#!/usr/bin/env python3
"""Tables from bench/pbs/run.sh's OUTDIR (concord_pbs_bench's per-mix files): per mix and scheme
the paper's SD-based WS, FI and HS (the PBS paper, Table III: SD_i = tenant i's rate
shared over its rate alone on the same SMs at its best alone TLP), over two windows:
  whole         the co-run window (every tenant running), search and all;
  after settle  the part of it after PBS's search first settled (the other schemes search
                nothing: their whole window is repeated there);
then the means over mixes relative to ++bestTLP, PBS against the oracle (the best fixed TLP
combination per metric), the search cost, kernels that ran without a measured `pbs` facet, and
after a GPU run the simulator's WS beside the GPU's.

  summarize.py OUTDIR [--backend cuda|sim]
"""
import argparse
import glob
import json
import math
import os
import statistics

SCHEMES = ["maxtlp", "besttlp", "dyncta", "modbypass", "pbs-ws", "pbs-fi", "pbs-hs"]
WINDOWS = [("whole", "whole co-run window"), ("after_settle", "after the search settled")]
METRICS = ["ws", "fi", "hs"]


def load(path):
    with open(path) as f:
        return json.load(f)


def figures(run, window):
    """(WS, FI, HS) of a run over `window`, or None; schemes without a search use their whole window."""
    if not run.get("ok"):
        return None
    m = run.get(window)
    if m is None and window == "after_settle" and not run.get("scheme", "").startswith("pbs"):
        m = run.get("whole")
    return tuple(m[k] for k in METRICS) if m else None


def gmean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def collect(outdir, backend):
    rows = {}
    base = f"{outdir}/{backend}"
    if not os.path.isdir(base):
        return rows
    for mix in sorted(d for d in os.listdir(base) if os.path.isdir(f"{base}/{d}")):
        d = f"{base}/{mix}"
        r = {"runs": {}, "oracle": []}
        for s in SCHEMES:
            if os.path.exists(f"{d}/{s}.json"):
                r["runs"][s] = load(f"{d}/{s}.json")
        r["oracle"] = [load(p) for p in sorted(glob.glob(f"{d}/oracle-*.json"))]
        rows[mix] = r
    return rows


def fmt(x):
    return f"{x:.3f}" if x is not None else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--backend", default=None, help="cuda or sim (default: cuda when present)")
    args = ap.parse_args()
    backend = args.backend or ("cuda" if os.path.isdir(f"{args.outdir}/cuda") else "sim")
    rows = collect(args.outdir, backend)
    print(f"# bench/pbs on {backend} ({len(rows)} mixes)\n")
    print("SD: a tenant's kernels per second shared over alone on the same SMs at its best alone TLP.\n")
    for window, wname in WINDOWS:
        for m, name in enumerate(["WS", "FI", "HS"]):
            print(f"## {name}, {wname}\n")
            print("| mix | " + " | ".join(SCHEMES + ["oracle"]) + " |")
            print("|---" * (len(SCHEMES) + 2) + "|")
            for mix, r in rows.items():
                cells = []
                for s in SCHEMES:
                    f = figures(r["runs"][s], window) if s in r["runs"] else None
                    cells.append(fmt(f[m] if f else None))
                oracle = [figures(o, "whole") for o in r["oracle"]]
                oracle = [o for o in oracle if o]
                cells.append(fmt(max(o[m] for o in oracle) if oracle else None))
                print(f"| {mix} | " + " | ".join(cells) + " |")
            print()
    for window, wname in WINDOWS:
        print(f"## Means over mixes relative to ++bestTLP, {wname} (WS: arithmetic mean of ratios; FI, HS: geometric)\n")
        print("| scheme | WS | FI | HS | mixes |")
        print("|---|---|---|---|---|")
        for s in SCHEMES + ["oracle"]:
            ratios = [[], [], []]
            for r in rows.values():
                b = figures(r["runs"]["besttlp"], window) if "besttlp" in r["runs"] else None
                if not b:
                    continue
                if s == "oracle":
                    oracle = [o for o in (figures(o, "whole") for o in r["oracle"]) if o]
                    f = tuple(max(o[m] for o in oracle) for m in range(3)) if oracle else None
                else:
                    f = figures(r["runs"][s], window) if s in r["runs"] else None
                if f:
                    for m in range(3):
                        if b[m] > 0:
                            ratios[m].append(f[m] / b[m])
            if ratios[0]:
                print(f"| {s} | {statistics.mean(ratios[0]):.3f} | {gmean(ratios[1]):.3f} | {gmean(ratios[2]):.3f} | {len(ratios[0])} |")
        print()
    print("## PBS against the oracle (its best fixed combination for the same metric, measured over its whole co-run window)\n")
    print("| mix | oracle runs | PBS-WS / optWS | PBS-FI / optFI | PBS-HS / optHS | same, after settle |")
    print("|---|---|---|---|---|---|")
    gaps = {w: [[], [], []] for w, _ in WINDOWS}
    for mix, r in rows.items():
        oracle = [(o, figures(o, "whole")) for o in r["oracle"]]
        oracle = [(o, f) for o, f in oracle if f]
        if not oracle:
            continue
        cells = {}
        for window, _ in WINDOWS:
            cells[window] = []
            for m, s in enumerate(["pbs-ws", "pbs-fi", "pbs-hs"]):
                f = figures(r["runs"][s], window) if s in r["runs"] else None
                best = max(o[1][m] for o in oracle)
                if f and best > 0:
                    gaps[window][m].append(f[m] / best)
                    cells[window].append(f"{f[m] / best:.3f}")
                else:
                    cells[window].append("-")
        print(f"| {mix} | {len(oracle)} | " + " | ".join(cells["whole"]) + " | " + " / ".join(cells["after_settle"]) + " |")
    if gaps["whole"][0]:
        after = " / ".join(f"{statistics.mean(g):.3f}" if g else "-" for g in gaps["after_settle"])
        print("| mean | | " + " | ".join(f"{statistics.mean(g):.3f}" if g else "-" for g in gaps["whole"]) + f" | {after} |")
    print("\n## The oracle's best combinations\n")
    print("| mix | optWS | optFI | optHS |")
    print("|---|---|---|---|")
    for mix, r in rows.items():
        oracle = [(o, figures(o, "whole")) for o in r["oracle"]]
        oracle = [(o, f) for o, f in oracle if f]
        if oracle:
            best = [max(oracle, key=lambda x: x[1][m]) for m in range(3)]
            print(f"| {mix} | " + " | ".join(f"{tuple(o['tlp'])} {f[m]:.3f}" for m, (o, f) in enumerate(best)) + " |")
    print("\n## Search cost and windows (PBS; settle: the first one)\n")
    print("| mix | scheme | settle (ms) | co-run window (ms) | share of it after settle | TLP changes | policy stats |")
    print("|---|---|---|---|---|---|---|")
    for mix, r in rows.items():
        for s in ["pbs-ws", "pbs-fi", "pbs-hs"]:
            run = r["runs"].get(s)
            if not run:
                continue
            w = run.get("window_s") or [0, 0]
            length = w[1] - w[0]
            settle = run.get("settle_s")
            share = (w[1] - max(settle, w[0])) / length if settle is not None and length > 0 else None
            stats = run.get("policy_stats", {})
            st = ", ".join(f"{k}={v:g}" for k, v in sorted(stats.items()))
            print(f"| {mix} | {s} | {1000 * settle:.1f} | {1000 * length:.1f} | {fmt(share)} | "
                  f"{run.get('tlp_changes', '')} | {st} |" if settle is not None else
                  f"| {mix} | {s} | never settled | {1000 * length:.1f} | | | {st} |")
    missing = {}
    for mix, r in rows.items():
        for s, run in r["runs"].items():
            n = run.get("policy_stats", {}).get("kernels_without_pbs_facet")
            if n:
                missing.setdefault(s, []).append(mix)
    if missing:
        print("\n## Kernels without a measured `pbs` facet\n")
        print("These ran with no Nsight Compute miss rates (`concord profile ncu` stores them): PBS's EB counts the")
        print("spec's bytes per block, and Mod+Bypass bypasses no L1 for them.\n")
        for s, mixes in missing.items():
            print(f"- {s}: {len(mixes)} mixes ({', '.join(mixes[:4])}{', ...' if len(mixes) > 4 else ''})")
    if backend == "cuda":
        sim = collect(args.outdir, "sim")
        if sim:
            print("\n## The simulator's WS beside the GPU's (whole window)\n")
            print("| mix | " + " | ".join(f"{s} gpu/sim" for s in SCHEMES) + " |")
            print("|---" * (len(SCHEMES) + 1) + "|")
            for mix, r in rows.items():
                cells = []
                for s in SCHEMES:
                    g = figures(r["runs"][s], "whole") if s in r["runs"] else None
                    p = figures(sim[mix]["runs"][s], "whole") if mix in sim and s in sim[mix]["runs"] else None
                    cells.append(f"{g[0]:.2f}/{p[0]:.2f}" if g and p else "-")
                print(f"| {mix} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
