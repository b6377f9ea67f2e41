#!/usr/bin/env python3
"""The tables of bench/apps (run.py OUTDIR): per combo and load, each scheme's LC p50 and p99 over
the LC alone at the same rate, its SLO attainment (latency within the target: --slo-factor x the
LC alone p99 at that load), and the BE job's iterations per second over the LC phase's window, over
the BE alone (plain, and as an MPS client). Then, per combo and load, Concord's best scheme (a
concord:* scheme that meets the check if one does, then the one the fewest baselines beat on both
LC p99 and BE rate, then the lowest LC p99), every baseline that beats it on both axes, where it
stands against the MPS frontier (MPS with the BE at 100/75/50/25% and time slicing: the most BE rate
a setting gives at no worse a tail), and the check: a graph combo's LC p99 within 1.15x alone with BE
at least 0.65 of alone; an eager (no CUDA graph) combo no worse than plain MPS on either axis.

With several folders (the repeats of run_gpus.sh, REPEATS=N), each scheme's figures are the
medians over the repeats that have it, and the dominance table is decided on those medians; the
table also says in how many repeats, each decided alone, the check was met.

  summarize.py OUTDIR [OUTDIR...] [--json FILE]
"""
import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import percentile  # noqa: E402
import shares  # noqa: E402

BASELINES = ("timeslice", "mps", "mps-be75", "mps-be50", "mps-be25", "priority-streams")
# The reference points a result must stand above (plain MPS is the BE at 100%).
FRONTIER = ("mps", "mps-be75", "mps-be50", "mps-be25", "timeslice")


def be_rate(be, window):
    """BE iterations per second within the window [first arrival, last end]."""
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
        if not os.path.isdir(base):
            continue
        settings = load_json(os.path.join(base, "settings.json"))
        be_alone = load_json(os.path.join(base, "be_alone.json"))
        be_alone_mps = load_json(os.path.join(base, "be_alone_mps.json"))
        alone = load_json(os.path.join(base, "lc_alone", "lc.json"))
        if settings is None or be_alone is None or alone is None:
            continue
        graph = bool(alone.get("graph"))
        for scheme in sorted(os.listdir(base)):
            d = os.path.join(base, scheme)
            if scheme == "lc_alone" or scheme.startswith(("work", "shares_")) or not os.path.isdir(d):
                continue
            lc, be = load_json(os.path.join(d, "lc.json")), load_json(os.path.join(d, "be.json"))
            for i, load in enumerate(settings["loads"]):
                row = {"combo": combo, "graph": graph, "load": load, "scheme": scheme}
                if lc is None or be is None or i >= len(lc.get("phases", [])):
                    err = os.path.join(d, "error.txt")
                    row["error"] = open(err).read().strip() if os.path.exists(err) else "no results"
                    rows.append(row)
                    continue
                phase, ref = lc["phases"][i], alone["phases"][i]
                lat = phase["latency_s"]
                target = settings["targets_ms"][i] / 1e3
                its = be_rate(be, phase["window"])
                row.update({
                    "lc_p50_over_alone": percentile(lat, 50) / ref["p50_s"],
                    "lc_p99_over_alone": percentile(lat, 99) / ref["p99_s"],
                    "slo_attainment": sum(1 for x in lat if x <= target) / len(lat) if lat else float("nan"),
                    "be_over_alone": its / be_alone["its"],
                    "lc_p99_ms": percentile(lat, 99) * 1e3,
                    "be_its": its,
                    "be_over_alone_mps": its / be_alone_mps["its"] if be_alone_mps else float("nan"),
                })
                rows.append(row)
    rows.sort(key=lambda r: (r["combo"], r["load"], r["scheme"]))
    return rows


# The library's counters (CONCORD_INTERCEPT_STATS) a scheme's BE share table shows, each over the
# BE's leased launches.
MECHANISMS = (("room_asked", "asked for room"), ("room_sms", "on an SM-count context"), ("room_padded", "padded"),
              ("room_unpadded", "at the cap already"), ("room_fallbacks", "cap not applied"),
              ("green_fallbacks", "green context refused"), ("gate_waits", "waited at a closed gate"),
              ("cap_waits", "waited at the in-flight cap"), ("priority_attribute", "priority attribute"))


def library_tables(out):
    """Per combo: the BE alone under each --be-alone-under scheme over the BE alone under plain MPS
    (the library's cost with caps armed), and per concord scheme the share of the BE's launches
    each mechanism touched (from its be_intercept.json)."""
    alone, touched = [], []
    for combo in sorted(os.listdir(out)):
        base = os.path.join(out, combo)
        if not os.path.isdir(base):
            continue
        mps = load_json(os.path.join(base, "be_alone_mps.json"))
        for f in sorted(os.listdir(base)):
            if f.startswith("be_alone_concord-") and f.endswith(".json") and not f.endswith("_intercept.json"):
                r = load_json(os.path.join(base, f))
                if r and mps:
                    alone.append((combo, f[len("be_alone_"):-len(".json")], r["its"], mps["its"]))
        for scheme in sorted(os.listdir(base)):
            if scheme.startswith("shares_"):
                continue
            s = load_json(os.path.join(base, scheme, "be_intercept.json"))
            if not s or not s.get("leased"):
                continue
            touched.append((combo, scheme, s["leased"], {k: s.get(k, 0) / s["leased"] for k, _ in MECHANISMS}))
    return alone, touched


def profiled_shares(out):
    """(combo, scheme, shares.classify()) of each run.py --shares-under run found under `out`."""
    found = []
    for combo in sorted(os.listdir(out)):
        base = os.path.join(out, combo)
        if not os.path.isdir(base):
            continue
        for d in sorted(os.listdir(base)):
            doc = load_json(os.path.join(base, d, "kernels.json")) if d.startswith("shares_") else None
            if doc:
                found.append((combo, d[len("shares_"):], shares.classify(doc)))
    return found


NUMERIC = ("lc_p50_over_alone", "lc_p99_over_alone", "slo_attainment", "be_over_alone", "lc_p99_ms", "be_its",
           "be_over_alone_mps")


def medians(runs):
    """Rows of several repeats -> one row per (combo, load, scheme): the median of each figure over
    the repeats that measured it, `runs` their count; a scheme that failed in every repeat keeps
    its first error."""
    groups = {}
    for rows in runs:
        for r in rows:
            groups.setdefault((r["combo"], r["load"], r["scheme"]), []).append(r)
    out = []
    for key, rs in sorted(groups.items()):
        ok = [r for r in rs if "error" not in r]
        if not ok:
            out.append(dict(rs[0]))
            continue
        row = {"combo": key[0], "load": key[1], "scheme": key[2], "graph": ok[0]["graph"], "runs": len(ok)}
        for f in NUMERIC:
            vals = [r[f] for r in ok if not math.isnan(r[f])]
            row[f] = statistics.median(vals) if vals else float("nan")
        out.append(row)
    return out


def beats(a, b):
    """Whether run `a` is better than run `b` on both axes: lower LC p99 and higher BE rate."""
    return a["lc_p99_ms"] < b["lc_p99_ms"] and a["be_its"] > b["be_its"]


def frontier_be(frontier, p99_ms):
    """The MPS frontier at a tail: the most BE rate any of its settings gives with an LC p99 no
    worse than `p99_ms` (None when every setting's tail is worse). The settings are discrete, so
    the frontier is a step, not a line between them."""
    ok = [r["be_its"] for r in frontier if r["lc_p99_ms"] <= p99_ms]
    return max(ok) if ok else None


def check_of(r, mps):
    """The check for one Concord run: (description, met or None when it cannot be
    decided). A graph combo: LC p99 <= 1.15x alone with BE >= 0.65 of alone; an eager combo: no
    worse than plain MPS on either axis."""
    if r["graph"]:
        return "LC p99 <= 1.15x alone, BE >= 0.65 of alone", r["lc_p99_over_alone"] <= 1.15 and r["be_over_alone"] >= 0.65
    if mps is None:
        return "", None
    return "LC p99 <= MPS's, BE >= MPS's", r["lc_p99_ms"] <= mps["lc_p99_ms"] and r["be_its"] >= mps["be_its"]


def verdicts(rows):
    """Per (combo, load): Concord's best scheme (one that meets the check if any does; then the one
    the fewest baselines beat on both axes; then the lowest LC p99), the baselines that beat it on
    both axes, where it stands against the MPS frontier (MPS with the BE at 100/75/50/25% and time
    slicing: above it when no setting gives as much BE at as low a tail), and the check."""
    out = []
    groups = {}
    for r in rows:
        if "error" not in r:
            groups.setdefault((r["combo"], r["load"]), []).append(r)
    for (combo, load), rs in sorted(groups.items()):
        base = [r for r in rs if r["scheme"] in BASELINES]
        frontier = [r for r in rs if r["scheme"] in FRONTIER]
        ours = [r for r in rs if r["scheme"].startswith("concord-")]
        if not ours:
            continue
        mps = next((r for r in rs if r["scheme"] == "mps"), None)

        def rank(r):
            _, met = check_of(r, mps)
            return (not met, sum(beats(b, r) for b in base), r["lc_p99_ms"])

        best = min(ours, key=rank)
        v = {"combo": combo, "load": load, "graph": best["graph"], "best": best["scheme"],
             "lc_p99_over_alone": best["lc_p99_over_alone"], "be_over_alone": best["be_over_alone"],
             "beaten_by": [b["scheme"] for b in base if beats(b, best)]}
        if frontier:
            f = frontier_be(frontier, best["lc_p99_ms"])
            v["frontier_be_over_alone"] = None if f is None else f / best["be_its"] * best["be_over_alone"]
            v["above_frontier"] = f is None or best["be_its"] >= f
            v["frontier_points"] = sorted(r["scheme"] for r in frontier)
        if mps is not None:
            v["p99_over_mps"] = best["lc_p99_ms"] / mps["lc_p99_ms"]
            v["be_over_mps"] = best["be_its"] / mps["be_its"]
        check, met = check_of(best, mps)
        if met is not None:
            v["check"] = check
            v["met"] = met
        out.append(v)
    return out


def fmt(x, digits=2):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="+", help="run.py's OUTDIR; several: repeats, summarised by their medians")
    ap.add_argument("--json", help="also write the rows and verdicts here")
    a = ap.parse_args()
    for d in a.out:
        if not os.path.isdir(d):
            sys.exit(f"summarize.py: {d}: not a directory")
    runs = [rows_of(d) for d in a.out]
    runs = [r for r in runs if r]
    if not runs:
        sys.exit(f"summarize.py: {', '.join(a.out)}: no runs found")
    rows = runs[0] if len(runs) == 1 else medians(runs)
    # Each repeat decided alone: how often the check was met.
    per_repeat = {}
    if len(runs) > 1:
        for rs in runs:
            for v in verdicts(rs):
                if "met" in v:
                    n = per_repeat.setdefault((v["combo"], v["load"]), [0, 0])
                    n[0] += v["met"]
                    n[1] += 1
    print("# bench/apps: PyTorch LC service beside PyTorch training, as separate processes\n")
    if len(runs) > 1:
        print(f"Medians over {len(runs)} repeats (each scheme's figure; 'runs' where a scheme has fewer).\n")
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
        runs_note = f" ({r['runs']} runs)" if r.get("runs", len(runs)) != len(runs) else ""
        print(f"| {r['scheme']}{runs_note} | {fmt(r['lc_p50_over_alone'])} | {fmt(r['lc_p99_over_alone'])} | "
              f"{fmt(100 * r['slo_attainment'], 1)} | {fmt(r['be_over_alone'])} | {fmt(r['be_over_alone_mps'])} |")
    vs = verdicts(rows)
    print("\n## Dominance: Concord's best scheme per combo and load, the baselines better on both axes, the MPS frontier\n")
    print("| combo | load | Concord's best | LC p99 / alone | BE / alone | baselines better on both | MPS frontier's BE at that p99 | above the frontier | check | met |")
    print("|---|---:|---|---:|---:|---|---:|---|---|---|")
    for v in vs:
        extra = ""
        if "p99_over_mps" in v:
            extra = f" (p99 {fmt(v['p99_over_mps'])}x MPS's, BE {fmt(v['be_over_mps'])}x)"
        met = "" if "met" not in v else ("yes" if v["met"] else "NO")
        if (v["combo"], v["load"]) in per_repeat:
            k, n = per_repeat[(v["combo"], v["load"])]
            met += f" (met in {k} of {n} repeats)"
            v["met_in_repeats"] = [k, n]
        above = "" if "above_frontier" not in v else ("yes" if v["above_frontier"] else "NO")
        print(f"| {v['combo']} | {v['load']:g} | {v['best']} | {fmt(v['lc_p99_over_alone'])} | {fmt(v['be_over_alone'])} | "
              f"{', '.join(v['beaten_by']) or 'none'} | {fmt(v.get('frontier_be_over_alone'))} | {above} | "
              f"{v.get('check', '')}{extra} | {met} |")
    alone, mech = library_tables(a.out[0])
    if alone:
        print("\n## The BE alone under the library, caps armed (no LC), over the BE alone under plain MPS\n")
        print("| combo | scheme | BE it/s | under MPS | ratio |")
        print("|---|---|---:|---:|---:|")
        for combo, scheme, its, mps_its in alone:
            print(f"| {combo} | {scheme} | {fmt(its)} | {fmt(mps_its)} | {fmt(its / mps_its, 3)} |")
    if mech:
        print("\n## Which share of the BE's launches each mechanism touched (the library's counters, whole run)\n")
        print("| combo | scheme | BE launches | " + " | ".join(label for _, label in MECHANISMS) + " |")
        print("|---|---|---:|" + "---:|" * len(MECHANISMS))
        for combo, scheme, n, share in mech:
            print(f"| {combo} | {scheme} | {n} | " + " | ".join(f"{100 * share[k]:.1f}%" for k, _ in MECHANISMS) + " |")
    profiled = profiled_shares(a.out[0])
    if profiled:
        print("\n## Which share of the BE's launches and GPU time each room mechanism applied to (profiled windows, "
              "run.py --shares-under)\n")
        print(shares.table(profiled))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "verdicts": vs, "be_alone_under": alone, "mechanism_shares": mech,
                       "profiled_shares": [{"combo": c, "scheme": s, **v} for c, s, v in profiled]}, f, indent=1)


if __name__ == "__main__":
    main()
