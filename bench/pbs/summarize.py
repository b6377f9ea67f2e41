#!/usr/bin/env python3
"""Tables from bench/pbs/run.sh's OUTDIR: per mix and scheme the paper's SD-based WS, FI and HS
over the co-run window, each tenant's slowdown SD_i being its rate shared over its rate alone on
its own share of SMs at its best alone TLP (pbs-effective-bandwidth.md, Table III); the means over
mixes relative to ++bestTLP; PBS against the oracle (the best combination per metric); the search
cost (time and TLP changes until the first settle); the simulator's WS beside the GPU's.

  summarize.py OUTDIR [--backend cuda|sim]
"""
import argparse
import glob
import json
import math
import os
import statistics

SCHEMES = ["maxtlp", "besttlp", "dyncta", "modbypass", "pbs-ws", "pbs-fi", "pbs-hs"]


def load(path):
    with open(path) as f:
        return json.load(f)


def sd_metrics(run, best_alone):
    """WS, FI, HS from each tenant's slowdown SD_i = np_window_i * alone_s_i / best_alone_i."""
    sd = []
    for i, t in enumerate(run["tenants"]):
        if t.get("np_window") is None or t.get("alone_s") is None:
            return None  # a run cut short (stopped by a time limit): no figures
        sd.append(t["np_window"] * t["alone_s"] / best_alone[i])
    ws = sum(sd)
    fi = min(sd) / max(sd) if max(sd) > 0 else 0
    hs = len(sd) / sum(1 / x for x in sd) if min(sd) > 0 else 0
    return ws, fi, hs


def best_alone_times(d, k):
    out = []
    for i in range(k):
        times = [load(p)["metrics"]["makespan_s"] for p in glob.glob(f"{d}/alone-{i}-*.json")]
        out.append(min(times))
    return out


def search_cost(trace):
    if not os.path.exists(trace):
        return None
    with open(trace) as f:
        for line in f:
            e = json.loads(line)
            if e["event"] == "settled":
                return e["t"], e["tlp_changes"], e["samples"], e["tlp"]
    return None


def gmean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--backend", default=None, help="cuda or sim (default: cuda when present)")
    args = ap.parse_args()
    backend = args.backend or ("cuda" if os.path.isdir(f"{args.outdir}/cuda") else "sim")
    mixes = sorted(os.listdir(f"{args.outdir}/{backend}"))
    rows = {}
    for mix in mixes:
        d = f"{args.outdir}/{backend}/{mix}"
        k = len(mix.split("-"))
        try:
            best = best_alone_times(d, k)
        except ValueError:
            continue
        r = {}
        for s in SCHEMES + [None]:
            if s is None:
                oracle = [o for o in (sd_metrics(load(p), best) for p in glob.glob(f"{d}/oracle-*.json")) if o]
                if oracle:
                    r["oracle"] = tuple(max(o[m] for o in oracle) for m in range(3))
                    r["oracle_n"] = len(oracle)
                continue
            p = f"{d}/{s}.json"
            if os.path.exists(p) and sd_metrics(load(p), best):
                r[s] = sd_metrics(load(p), best)
            sim = f"{args.outdir}/sim/{mix}/{s}.json"
            if backend == "cuda" and os.path.exists(sim):
                r["sim:" + s] = sd_metrics(load(sim), best_alone_times(f"{args.outdir}/sim/{mix}", k)
                                           if glob.glob(f"{args.outdir}/sim/{mix}/alone-*.json") else best)
            if s.startswith("pbs"):
                r["cost:" + s] = search_cost(f"{d}/{s}.trace.jsonl")
        rows[mix] = r

    print(f"# bench/pbs on {backend} ({len(rows)} mixes)\n")
    print("SD-based metrics over the co-run window (SD: rate shared / rate alone on the same SMs at the best alone TLP).\n")
    for m, name in enumerate(["WS", "FI", "HS"]):
        print(f"## {name}\n")
        print("| mix | " + " | ".join(SCHEMES + ["oracle"]) + " |")
        print("|---" * (len(SCHEMES) + 2) + "|")
        for mix, r in rows.items():
            cells = [f"{r[s][m]:.3f}" if s in r else "-" for s in SCHEMES + ["oracle"]]
            print(f"| {mix} | " + " | ".join(cells) + " |")
        print()
    print("## Means over mixes, relative to ++bestTLP (WS: arithmetic mean of ratios; FI, HS: geometric)\n")
    print("| scheme | WS | FI | HS |")
    print("|---|---|---|---|")
    for s in SCHEMES + ["oracle"]:
        ratios = [[], [], []]
        for r in rows.values():
            if s in r and "besttlp" in r:
                for m in range(3):
                    if r["besttlp"][m] > 0:
                        ratios[m].append(r[s][m] / r["besttlp"][m])
        if ratios[0]:
            print(f"| {s} | {statistics.mean(ratios[0]):.3f} | {gmean(ratios[1]):.3f} | {gmean(ratios[2]):.3f} |")
    print("\n## PBS against the oracle (the best of its combinations for the same metric)\n")
    print("| mix | oracle runs | PBS-WS / optWS | PBS-FI / optFI | PBS-HS / optHS |")
    print("|---|---|---|---|---|")
    gaps = [[], [], []]
    for mix, r in rows.items():
        if "oracle" not in r:
            continue
        cells = []
        for m, s in enumerate(["pbs-ws", "pbs-fi", "pbs-hs"]):
            if s in r and r["oracle"][m] > 0:
                g = r[s][m] / r["oracle"][m]
                gaps[m].append(g)
                cells.append(f"{g:.3f}")
            else:
                cells.append("-")
        print(f"| {mix} | {r['oracle_n']} | " + " | ".join(cells) + " |")
    if gaps[0]:
        print(f"| mean | | {statistics.mean(gaps[0]):.3f} | {statistics.mean(gaps[1]):.3f} | {statistics.mean(gaps[2]):.3f} |")
    print("\n## Search cost (until the first settle)\n")
    print("| mix | scheme | time (ms) | TLP changes | samples | combination |")
    print("|---|---|---|---|---|---|")
    for mix, r in rows.items():
        for s in ["pbs-ws", "pbs-fi", "pbs-hs"]:
            c = r.get("cost:" + s)
            if c:
                print(f"| {mix} | {s} | {1000 * c[0]:.1f} | {c[1]} | {c[2]} | {tuple(c[3])} |")
            elif s in r:
                print(f"| {mix} | {s} | never settled | | | |")
    if backend == "cuda":
        print("\n## The simulator's WS beside the GPU's\n")
        print("| mix | " + " | ".join(f"{s} gpu/sim" for s in SCHEMES) + " |")
        print("|---" * (len(SCHEMES) + 1) + "|")
        for mix, r in rows.items():
            cells = [f"{r[s][0]:.2f}/{r['sim:' + s][0]:.2f}" if s in r and "sim:" + s in r else "-" for s in SCHEMES]
            print(f"| {mix} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
