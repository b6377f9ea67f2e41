#!/usr/bin/env python3
"""Markdown tables of bench/lsbe (concord_lsbe_bench): per mix and LC load, every scheme's SLO
attainment, LC p99 (and over the LC's isolated p99), BE throughput over BE alone, overall
throughput (LC goodput over its alone capacity plus BE throughput over BE alone) and the SMs BE
held on average; the LC alone at the same rate first, the MPS variants (from `mps` results) last.
The LC p99 and its ratio to the LC alone's carry 95% bootstrap intervals (bench/apps/stats.py:
requests resampled in moving blocks, both sides of the ratio); a p99 from fewer than 2,000
requests is marked "few" (under 20 requests above it). Then the mean over the mixes per load and
scheme.

Usage: summarize.py RUN.json [MPS.json] [--out TABLES.md]"""
import argparse
import gzip
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps"))
import stats  # noqa: E402

RESAMPLES = 500


def read_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"summarize.py: {path}: {e}")


def pct(x):
    return f"{100 * x:.1f}"


def num(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def p99_cells(lc, alone):
    """The LC p99 (ms) and its ratio to the LC alone's, each with a 95% bootstrap interval where
    the run kept its requests' latencies."""
    lat = lc.get("latencies_s")
    if not lat:
        return f"{1e3 * lc['p99_s']:.3f}", num(lc["p99_over_alone"])
    mine = stats.quantile_replicates([lat], (99,), RESAMPLES, seed=len(lat))[99]
    few = "" if stats.enough_for(99, len(lat)) else " few"
    p99 = stats.estimate(stats.percentile(lat, 99), mine)
    cell = f"{1e3 * p99['value']:.3f} [{1e3 * p99['lo']:.3f}, {1e3 * p99['hi']:.3f}]{few}"
    if not alone or lc.get("p99_over_alone") is None:
        return cell, num(lc.get("p99_over_alone"))
    theirs = stats.quantile_replicates([alone], (99,), RESAMPLES, seed=len(alone) + 1)[99]
    ratio = stats.estimate(lc["p99_over_alone"], stats.ratio_replicates(mine, theirs))
    return cell, f"{num(ratio['value'])} [{num(ratio['lo'])}, {num(ratio['hi'])}]"


def row(name, r, share=True, alone=None):
    """One table row from a run's figures (a failed run says why); `alone`: the LC alone's
    latencies at the same rate, for the ratio's interval."""
    if r.get("ok") is False:
        return f"| {name} | failed: {r.get('error', '?')[:80]} | | | | | |"
    lc = r["lc"]
    be = r.get("be_norm") if r.get("be") else None
    ran_out = any(b.get("ran_out") for b in r.get("be", []))
    sms = r.get("be_sm_share_mean") if share else None
    if sms is None and r.get("be_thread_percentage") is not None:
        sms_text = f"MPS {r['be_thread_percentage']}%"
    elif sms is None and "be_thread_percentage" in r:
        sms_text = "MPS none"
    else:
        sms_text = pct(sms) if sms is not None else "–"
    p99, ratio = p99_cells(lc, alone)
    return (f"| {name} | {pct(lc['slo_attainment'])} | {p99} | {ratio} | "
            f"{num(be)}{' (ran out)' if ran_out else ''} | {num(r['overall_norm'])} | {sms_text} |")


HEADER = ("| scheme | SLO attainment % | LC p99 ms [95%] | p99 / alone p99 [95%] | BE / BE alone | overall | BE SMs % |\n"
          "|---|---|---|---|---|---|---|")


def mps_index(mps):
    """(mix, load) -> list of MPS runs."""
    out = {}
    if not mps:
        return out
    for m in mps.get("mixes", []):
        for l in m.get("loads", []):
            out[(m["mix"], round(l["load"], 9))] = l
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="results of concord_lsbe_bench run")
    ap.add_argument("mps", nargs="?", help="results of concord_lsbe_bench mps")
    ap.add_argument("--out", help="write the tables here (default: standard output)")
    args = ap.parse_args()
    run = read_json(args.run)
    if run.get("bench") != "lsbe":
        sys.exit(f"summarize.py: {args.run}: not results of concord_lsbe_bench run")
    mps = read_json(args.mps) if args.mps else None
    if mps is not None and mps.get("bench") != "lsbe-mps":
        sys.exit(f"summarize.py: {args.mps}: not results of concord_lsbe_bench mps")
    by_load = mps_index(mps)

    lines = []
    info = run.get("device_info", {})
    where = "the simulator" if info.get("simulated") else "the GPU"
    cfg = run["config"]
    lines.append(f"LC/BE bench on {where}: {run.get('device', '?')} (driver {info.get('driver_version')}, "
                 f"CUDA {info.get('cuda_version')}), commit {run.get('build', {}).get('commit', '?')}; "
                 f"{'complete' if run.get('complete') else 'PARTIAL (the bench stopped early)'}. "
                 f"Seed {cfg['seed']}, target {cfg['target_factor']} x the LC's isolated p99.")
    if cfg.get("skipped_schemes"):
        lines.append("")
        lines.append(f"Not in this build, left out: {', '.join(cfg['skipped_schemes'])}.")
    if mps is not None:
        lines.append("")
        lines.append(f"MPS runs: backend {mps.get('backend')}, commit {mps.get('build', {}).get('commit', '?')}"
                     f"{'' if mps.get('complete') else ', PARTIAL'}.")
        if mps.get("backend") == "sim":
            lines.append("(MPS on the simulator: each process has its own simulated clock, so these rows only "
                         "exercise the process plumbing; their figures are not comparable.)")
    lines.append("")
    lines.append("Overall = LC goodput / LC alone capacity + sum over BE tenants of BE kernels per second / "
                 "alone; time-sharing the GPU scores at most about 1. BE SMs: the time average of the SMs "
                 "BE dispatches held over the LC's active window. \"(ran out)\": a BE tenant finished its "
                 "requests before the LC did, so its throughput undercounts.")
    means = {}  # (load, scheme) -> lists
    for m in run["mixes"]:
        lines.append("")
        lines.append(f"## {m['mix']}")
        if "error" in m:
            lines.append(f"failed: {m['error']}")
        if "lc_alone" not in m:
            continue
        la = m["lc_alone"]
        bes = ", ".join(f"{b['tenant']} {b['kernels_per_s']:.0f} kernels/s" for b in m.get("be_alone", []))
        lines.append(f"LC {m['lc_tenant']} alone: {la['capacity_rps']:.0f} requests/s, p50 {1e3 * la['p50_s']:.3f} ms, "
                     f"p99 {1e3 * la['p99_s']:.3f} ms ({m['lc_requests']} requests, closed loop). BE alone: {bes}.")
        for l in m.get("loads", []):
            lines.append("")
            alone = l.get("lc_alone_p99_s")
            basis = f" = {l['target_s'] / alone:g} x the LC's p99 alone at this rate" if alone else ""
            lines.append(f"### {m['mix']}, load {l['load']:g} ({l['rate_rps']:.0f} requests/s, target "
                         f"{1e3 * l['target_s']:.3f} ms{basis})")
            lines.append("")
            lines.append(HEADER)
            alone_lat = l["lc_alone"].get("lc", {}).get("latencies_s") if isinstance(l.get("lc_alone"), dict) else None
            lines.append(row("LC alone", l["lc_alone"]))
            runs = list(l.get("runs", []))
            extra = by_load.get((m["mix"], round(l["load"], 9)))
            if extra:
                runs += extra.get("runs", [])
            for r in runs:
                lines.append(row(r["scheme"], r, share="be_sm_share_mean" in r, alone=alone_lat))
                if r.get("ok") is not False:
                    acc = means.setdefault((l["load"], r["scheme"]), {"slo": [], "p99": [], "be": [], "overall": []})
                    acc["slo"].append(r["lc"]["slo_attainment"])
                    acc["p99"].append(r["lc"]["p99_over_alone"])
                    acc["be"].append(r["be_norm"])
                    acc["overall"].append(r["overall_norm"])
            if extra and extra.get("skipped"):
                lines.append(f"\n({extra['skipped']})")
    if means:
        lines.append("")
        lines.append("## Mean over the mixes")
        lines.append("")
        lines.append("| load | scheme | mixes | SLO attainment % | p99 / alone p99 (geomean) | BE / BE alone | overall |")
        lines.append("|---|---|---|---|---|---|---|")
        for (load, scheme), acc in sorted(means.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            geo = math.exp(statistics.fmean(math.log(max(x, 1e-12)) for x in acc["p99"]))
            lines.append(f"| {load:g} | {scheme} | {len(acc['slo'])} | {pct(statistics.fmean(acc['slo']))} | {geo:.2f} | "
                         f"{statistics.fmean(acc['be']):.2f} | {statistics.fmean(acc['overall']):.2f} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
