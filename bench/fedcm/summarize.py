#!/usr/bin/env python3
"""Markdown tables of bench/fedcm: STP per workload and scheme (the in-process run, plus the MPS
peers when their JSON is given), ratios to serial, streams and MPS, end-to-end speedup, FEDCM's
scheduling overhead, and the sigma and gamma sweeps. Two STPs: over the whole run (each tenant's
alone time over its own finish) and over the co-run window (until the first tenant finishes: the
work each tenant did in it, at alone speed, over the window; serial scores 1 there, as in FEDCM's
evaluation). Usage: summarize.py [--rename old=new ...] fedcm_bench.json[.gz] [fedcm_mps.json[.gz]]
(--rename relabels schemes, e.g. for a run whose plain "fedcm" had another default:
--rename 'fedcm:gamma=1.2=>fedcm-g12')."""
import argparse
import gzip
import json
import statistics as st
import sys
from collections import defaultdict

SCHEMES = ["serial", "streams", "mps-limited", "mps", "krisp", "fedc", "fedcm"]
PAPER = {2: 1.582, 3: 1.948, 4: 2.294}  # FEDCM over Serial, FEDCM paper, Section V-A (AMD GPU)


def load(path):
    """A results file, plain or gzipped (bench/results keeps the large ones as .json.gz)."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"summarize.py: {path}: {e}")


def overhead(r):
    """The policy's decision time (policy hooks minus the backend launches they make) over the run."""
    return 100 * (r["policy_s"] - r.get("backend_s", 0)) / r["engine_s"]


def window_stp(tenants, alone):
    """STP over the co-run window from each tenant's request times (absolute seconds) and alone time."""
    w = min(t["finish"] for t in tenants)
    total = 0.0
    for t in tenants:
        reqs = t["requests"]
        if not reqs or w <= t["begin"]:
            continue
        done = 0.0
        for start, end in reqs:
            if end <= w:
                done += 1
            elif start < w and end > start:
                done += (w - start) / (end - start)
        total += done * alone[t["name"]] / len(reqs) / (w - t["begin"])
    return total


def main(bench_path, mps_path=None, rename=None):
    b = load(bench_path)
    m = load(mps_path) if mps_path else None
    for path, d in ((bench_path, b), (mps_path, m)):
        if d is not None and d.get("complete") is False:
            print(f"Note: {path} is partial (the bench stopped before its last workload): "
                  f"{len(d['runs'])} runs.\n")
    for r in b["runs"]:
        if not r["sweep"] and rename and r["scheme"] in rename:
            r["scheme"] = rename[r["scheme"]]
    rows = defaultdict(dict)      # workload -> scheme -> run
    n_of = {}
    alone = {}                    # (workload, tenant) -> alone seconds
    sweep = defaultdict(dict)     # workload -> sigma -> stp
    gsweep = defaultdict(dict)    # workload -> gamma -> stp (sigma 0.1)
    order = list(SCHEMES)
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
            if r["scheme"] not in order:
                order.append(r["scheme"])
    if m is not None:
        for r in m["runs"]:
            if not r.get("ok") or any((r["workload"], t["name"]) not in alone for t in r["tenants"]):
                continue  # failed, or its workload is missing from the in-process run (no alone times)
            stp = sum(alone[(r["workload"], t["name"])] / t["shared_s"] for t in r["tenants"])
            serial = rows[r["workload"]].get("serial", {}).get("makespan_s", 0)
            row = {"stp": stp, "makespan_s": r["makespan_s"],
                   "speedup_over_serial": serial / r["makespan_s"] if serial else 0}
            if all(t.get("requests") for t in r["tenants"]):
                # Each peer's clock starts at its wall_start: put every request on one clock.
                ts = []
                for t in r["tenants"]:
                    reqs = [(t["wall_start"] + s, t["wall_start"] + e) for s, e in t["requests"]]
                    ts.append({"name": t["name"], "begin": t["wall_start"] + t.get("begin_s", 0),
                               "finish": max(e for _, e in reqs), "requests": reqs})
                row["stp_window"] = window_stp(ts, {k[1]: v for k, v in alone.items() if k[0] == r["workload"]})
            rows[r["workload"]][r["scheme"]] = row
    schemes = [s for s in order if any(s in v for v in rows.values())]
    print(f"Device: {b.get('device', '?')} ({b['backend']}). STP = sum over tenants of alone / shared time "
          f"(alone: each tenant alone on the whole GPU in the same process run).\n")
    # FEDCM's evaluation keeps only workloads whose tasks' alone times lie within 10x of each other.
    spans = {}
    for (w, _), a in alone.items():
        lo, hi = spans.get(w, (a, a))
        spans[w] = (min(lo, a), max(hi, a))
    wide = sorted(w for w, (lo, hi) in spans.items() if lo <= 0 or hi / lo > 10)
    print(f"Tenants' alone times within 10x of each other (FEDCM's rule): {len(spans) - len(wide)} of {len(spans)} "
          f"workloads" + (f"; wider: {', '.join(wide)}" if wide else "") + ".\n")
    for key, title in (("stp", "STP over the whole run"), ("stp_window", "STP over the co-run window")):
        if not all(key in r[s] for r in rows.values() for s in r):
            print(f"({title}: not in these files)\n")
            continue
        print(f"{title}:\n")
        print("| workload | N | " + " | ".join(f"{s}" for s in schemes) + " | fedcm / serial | fedcm / streams | "
              + ("fedcm / best MPS | " if mps_path else "") + "e2e speedup fedcm | overhead fedcm |")
        print("|---|---:|" + "---:|" * (len(schemes) + 4 + (1 if mps_path else 0)))
        by_n = defaultdict(lambda: defaultdict(list))
        for w in sorted(rows, key=lambda w: (n_of[w], w)):
            r = rows[w]
            cells = [w, str(n_of[w])] + [f"{r[s][key]:.3f}" if s in r else "-" for s in schemes]
            f = r.get("fedcm")
            ratio = lambda s: f[key] / r[s][key] if f and s in r and r[s][key] else None
            for s in schemes:
                if ratio(s):
                    by_n[n_of[w]][s].append(ratio(s))
            cells.append(f"{ratio('serial'):.3f}x" if ratio("serial") else "-")
            cells.append(f"{ratio('streams'):.3f}x" if ratio("streams") else "-")
            if mps_path:
                best = max((r[s][key] for s in ("mps", "mps-limited") if s in r), default=None)
                cells.append(f"{f[key] / best:.3f}x" if f and best else "-")
                if f and best:
                    by_n[n_of[w]]["best-mps"].append(f[key] / best)
            cells.append(f"{f['speedup_over_serial']:.3f}x" if f else "-")
            cells.append(f"{overhead(f):.2f}%" if f and f.get("engine_s") else "-")
            print("| " + " | ".join(cells) + " |")
        print()
        others = [s for s in schemes if s not in ("serial", "streams", "fedcm", "mps", "mps-limited")]
        print("| N | fedcm / serial (ours) | paper (FEDCM / Serial) | fedcm / streams | " + ("fedcm / best MPS | " if mps_path else "")
              + " | ".join(f"fedcm / {s}" for s in others) + " |")
        print("|---:|---:|---:|---:|" + ("---:|" if mps_path else "") + "---:|" * len(others))
        for n in sorted(by_n):
            g = by_n[n]
            mean = lambda k: f"{st.mean(g[k]):.3f}x" if g.get(k) else "-"
            print(f"| {n} | {mean('serial')} | {PAPER.get(n, 0):.3f}x | {mean('streams')} | "
                  + (f"{mean('best-mps')} | " if mps_path else "") + " | ".join(mean(s) for s in others) + " |")
        print()
        # How many workloads reach FEDCM's targets (fedcm >= 1.5x serial at N = 2, 1.9x at N = 4;
        # >= 1.15x streams and the best MPS) and the overhead bar (< 2%).
        bars = {2: 1.5, 4: 1.9}
        print("| N | workloads | fedcm ≥ bar x serial | fedcm ≥ 1.15x streams | " + ("fedcm ≥ 1.15x best MPS | " if mps_path else "")
              + "fedcm > fedc | fedcm > krisp | overhead < 2% |")
        print("|---:|---:|---:|---:|" + ("---:|" if mps_path else "") + "---:|---:|---:|")
        for n in sorted(by_n):
            ws = [w for w in rows if n_of[w] == n and "fedcm" in rows[w]]
            def count(pred):
                return sum(1 for w in ws if pred(rows[w]))
            def over(r, s, x):
                return s in r and r[s][key] > 0 and r["fedcm"][key] / r[s][key] >= x
            bar = bars.get(n)
            cells = [str(n), str(len(ws)), f"{count(lambda r: over(r, 'serial', bar))} (bar {bar}x)" if bar else "-",
                     str(count(lambda r: over(r, "streams", 1.15)))]
            if mps_path:
                cells.append(str(count(lambda r: any(s in r for s in ("mps", "mps-limited")) and r["fedcm"][key] >=
                                       1.15 * max(r[s][key] for s in ("mps", "mps-limited") if s in r))))
            cells.append(str(count(lambda r: "fedc" in r and r["fedcm"][key] > r["fedc"][key])))
            cells.append(str(count(lambda r: "krisp" in r and r["fedcm"][key] > r["krisp"][key])))
            cells.append(str(count(lambda r: r["fedcm"].get("engine_s") and overhead(r["fedcm"]) < 2)))
            print("| " + " | ".join(cells) + " |")
        print()
        means = {s: st.mean(rows[w][s][key] for w in rows) for s in schemes if all(s in rows[w] for w in rows)}
        print("Mean over the workloads: " + ", ".join(f"{s} {v:.3f}" for s, v in means.items()) + "\n")
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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", help="fedcm_bench.json[.gz] (concord_fedcm_bench run --out)")
    ap.add_argument("mps", nargs="?", help="fedcm_mps.json[.gz] (concord_fedcm_bench mps --out)")
    ap.add_argument("--rename", action="append", default=[], metavar="OLD=>NEW", help="relabel a scheme (repeatable)")
    args = ap.parse_args()
    rename = {}
    for item in args.rename:
        if "=>" not in item:
            ap.error(f"--rename {item}: expected OLD=>NEW")
        old, new = item.split("=>", 1)
        rename[old] = new
    try:
        main(args.bench, args.mps, rename=rename)
    except (OSError, ValueError) as e:
        sys.exit(f"summarize.py: {e}")
