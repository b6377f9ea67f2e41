#!/usr/bin/env python3
"""Markdown tables of bench/fedcm: STP per workload and scheme (the in-process run, plus the MPS
peers when their JSON is given), ratios to serial, streams and MPS, end-to-end speedup, FEDCM's
scheduling overhead, and the sigma sweep. Usage: summarize.py fedcm_bench.json [fedcm_mps.json]"""
import json
import statistics as st
import sys
from collections import defaultdict

SCHEMES = ["serial", "streams", "mps-limited", "mps", "krisp", "fedc", "fedcm"]
PAPER = {2: 1.582, 3: 1.948, 4: 2.294}  # FEDCM over Serial, fedcm.md V-A (AMD GPU)


def overhead(r):
    """The policy's decision time (policy hooks minus the backend launches they make) over the run."""
    return 100 * (r["policy_s"] - r.get("backend_s", 0)) / r["engine_s"]


def main(bench_path, mps_path=None):
    b = json.load(open(bench_path))
    rows = defaultdict(dict)      # workload -> scheme -> run
    n_of = {}
    alone = {}                    # (workload, tenant) -> alone seconds
    sweep = defaultdict(dict)     # workload -> sigma -> stp
    gsweep = defaultdict(dict)    # workload -> gamma -> stp (sigma 0.1)
    for r in b["runs"]:
        n_of[r["workload"]] = r["tenants_n"]
        for t in r["tenants"]:
            alone[(r["workload"], t["name"])] = t["alone_s"]
        if r["sweep"] and abs(r.get("gamma", 1.1) - 1.1) > 1e-9:
            gsweep[r["workload"]][r["gamma"]] = r
        elif r["sweep"]:
            sweep[r["workload"]][r["sigma"]] = r
        else:
            rows[r["workload"]][r["scheme"]] = r
    if mps_path:
        m = json.load(open(mps_path))
        for r in m["runs"]:
            if not r.get("ok"):
                continue
            stp = sum(alone[(r["workload"], t["name"])] / t["shared_s"] for t in r["tenants"])
            serial = rows[r["workload"]].get("serial", {}).get("makespan_s", 0)
            rows[r["workload"]][r["scheme"]] = {"stp": stp, "makespan_s": r["makespan_s"],
                                                "speedup_over_serial": serial / r["makespan_s"] if serial else 0}
    schemes = [s for s in SCHEMES if any(s in v for v in rows.values())]
    print(f"Device: {b.get('device', '?')} ({b['backend']}). STP = sum over tenants of alone / shared time "
          f"(alone: each tenant alone on the whole GPU in the same process run).\n")
    print("| workload | N | " + " | ".join(f"STP {s}" for s in schemes) + " | fedcm / serial | fedcm / streams | "
          + ("fedcm / best MPS | " if mps_path else "") + "e2e speedup fedcm | overhead fedcm |")
    print("|---|---:|" + "---:|" * (len(schemes) + 4 + (1 if mps_path else 0)))
    by_n = defaultdict(lambda: defaultdict(list))
    for w in sorted(rows, key=lambda w: (n_of[w], w)):
        r = rows[w]
        cells = [w, str(n_of[w])] + [f"{r[s]['stp']:.3f}" if s in r else "-" for s in schemes]
        f = r.get("fedcm")
        ratio = lambda s: f["stp"] / r[s]["stp"] if f and s in r else None
        for s in schemes:
            if ratio(s):
                by_n[n_of[w]][s].append(ratio(s))
        cells.append(f"{ratio('serial'):.3f}x" if ratio("serial") else "-")
        cells.append(f"{ratio('streams'):.3f}x" if ratio("streams") else "-")
        if mps_path:
            best = max((r[s]["stp"] for s in ("mps", "mps-limited") if s in r), default=None)
            cells.append(f"{f['stp'] / best:.3f}x" if f and best else "-")
            if f and best:
                by_n[n_of[w]]["best-mps"].append(f["stp"] / best)
        cells.append(f"{f['speedup_over_serial']:.3f}x" if f else "-")
        cells.append(f"{overhead(f):.2f}%" if f and f.get("engine_s") else "-")
        print("| " + " | ".join(cells) + " |")
    print()
    print("| N | fedcm / serial (ours) | paper (FEDCM / Serial) | fedcm / streams | " + ("fedcm / best MPS | " if mps_path else "")
          + "fedcm / fedc | fedcm / krisp |")
    print("|---:|---:|---:|---:|" + ("---:|" if mps_path else "") + "---:|---:|")
    for n in sorted(by_n):
        g = by_n[n]
        mean = lambda k: f"{st.mean(g[k]):.3f}x" if g.get(k) else "-"
        print(f"| {n} | {mean('serial')} | {PAPER.get(n, 0):.3f}x | {mean('streams')} | "
              + (f"{mean('best-mps')} | " if mps_path else "") + f"{mean('fedc')} | {mean('krisp')} |")
    print()
    means = {s: st.mean(rows[w][s]["stp"] for w in rows if s in rows[w]) for s in schemes if all(s in rows[w] for w in rows)}
    print("Mean STP over the workloads: " + ", ".join(f"{s} {v:.3f}" for s, v in means.items()) + "\n")
    if sweep:
        sigmas = sorted({s for v in sweep.values() for s in v})
        print("FEDCM's sigma sweep: STP, and the scheduling overhead (wall time deciding in the policy, without the backend's\n"
              "launch calls, over the run's wall time)\n")
        print("| workload | " + " | ".join(f"σ={s:g}" for s in sigmas) + " |")
        print("|---|" + "---:|" * len(sigmas))
        for w in sorted(sweep, key=lambda w: (n_of[w], w)):
            print(f"| {w} | " + " | ".join(
                f"{sweep[w][s]['stp']:.3f} ({overhead(sweep[w][s]):.2f}%)" if s in sweep[w] else "-"
                for s in sigmas) + " |")
        print()
    if gsweep:
        gammas = sorted({g for v in gsweep.values() for g in v} | {1.1})
        print("FEDCM's gamma sweep (σ = 0.1; γ = 1.1 is the main run's fedcm; fedc never bypasses): STP\n")
        print("| workload | " + " | ".join(f"γ={g:g}" for g in gammas) + " | fedc |")
        print("|---|" + "---:|" * (len(gammas) + 1))
        cols = defaultdict(list)
        for w in sorted(gsweep, key=lambda w: (n_of[w], w)):
            cells = []
            for g in gammas:
                r = rows[w].get("fedcm") if abs(g - 1.1) < 1e-9 else gsweep[w].get(g)
                cells.append(f"{r['stp']:.3f}" if r else "-")
                if r:
                    cols[g].append(r["stp"])
            cols["fedc"].append(rows[w]["fedc"]["stp"])
            print(f"| {w} | " + " | ".join(cells) + f" | {rows[w]['fedc']['stp']:.3f} |")
        print("| mean | " + " | ".join(f"{st.mean(cols[g]):.3f}" for g in gammas) + f" | {st.mean(cols['fedc']):.3f} |")
        print()


if __name__ == "__main__":
    main(*sys.argv[1:3])
