#!/usr/bin/env python3
"""Markdown tables of bench/aker (concord_aker_bench):
 - from `run` results: per mix, load and QoS target (a factor of the LC query's solo time, or of
   the LC's p99 alone at the same rate: the target's basis, shown with it), every
   scheme's SLO attainment, LC p99 over the target, BE throughput over BE alone and over the
   baseline scheme's (baymax: Aker's Equation 6), the LC alone at the same arrivals first; then
   per target and scheme the mean over the mixes;
 - from `pairs` results: per pair and fusion ratio a:b, the variants fused and the fused blocks per
   SM, the fused time of both whole ranges over
   the slower solo time and the speedup over serial, the knee (opportune) load ratio and the fused
   time there over the slower part's solo time; the best version per pair (largest makespan
   reduction at its knee) and the median over pairs against the target (<= 1.25).

Usage: summarize.py [RUN.json] [PAIRS.json] [--out TABLES.md]  (each file is recognised by its "bench")"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lsbe"))
from summarize import num, pct, read_json  # noqa: E402  (bench/lsbe's helpers)


def run_row(name, r):
    if r.get("ok") is False:
        return f"| {name} | failed: {r.get('error', '?')[:80]} | | | | |"
    lc = r["lc"]
    be = r.get("be_norm") if r.get("be") else None
    ran_out = any(b.get("ran_out") for b in r.get("be", []))
    return (f"| {name} | {pct(lc['slo_attainment'])} | {1e3 * lc['p99_s']:.3f} | {num(lc.get('p99_over_target'))} | "
            f"{num(be)}{' (ran out)' if ran_out else ''} | {num(r.get('be_over_baseline'))} |")


def basis_name(basis):
    return {"solo": "solo", "alone-p99": "LC alone p99"}.get(basis, basis)


def run_tables(j):
    base = j["config"].get("baseline", "baymax")
    out = [f"# Aker bench: LC/BE runs ({j.get('device', '?')}, backend {j.get('backend', '?')})", ""]
    skipped = j["config"].get("skipped_schemes") or []
    if skipped:
        out += [f"Schemes with no policy in this build, left out: {', '.join(skipped)}.", ""]
    if not j.get("complete"):
        out += ["**The run did not complete**: the tables hold what finished.", ""]
    header = (f"| scheme | SLO attainment % | LC p99 ms | p99 / target | BE / BE alone | BE / {base} |\n"
              "|---|---|---|---|---|---|")
    means = {}  # (factor, scheme) -> lists
    for m in j["mixes"]:
        out.append(f"## {m['mix']} (LC solo {1e3 * m.get('lc_solo_s', 0):.3f} ms)")
        if "error" in m:
            out += ["", f"error: {m['error']}", ""]
        for load in m.get("loads", []):
            for t in load["targets"]:
                basis = t.get("basis", "solo")
                out += ["", f"load {load['load']:.2f}, target {t['factor']:.2f}x {basis_name(basis)} = "
                        f"{1e3 * t['target_s']:.3f} ms", "", header]
                alone = dict(t["lc_alone"], ok=True)
                out.append(run_row("LC alone", alone))
                for r in t["runs"]:
                    out.append(run_row(r["scheme"], r))
                    if r.get("ok"):
                        acc = means.setdefault((basis, t["factor"], r["scheme"]), {"slo": [], "p99": [], "be": [], "base": []})
                        acc["slo"].append(r["lc"]["slo_attainment"])
                        acc["p99"].append(r["lc"]["p99_over_target"])
                        acc["be"].append(r["be_norm"])
                        if r.get("be_over_baseline") is not None:
                            acc["base"].append(r["be_over_baseline"])
        out.append("")
    out += ["## Mean over the mixes", "",
            f"| target | scheme | runs | SLO attainment % | p99 / target | BE / BE alone | BE / {base} |",
            "|---|---|---|---|---|---|---|"]
    for (basis, factor, scheme), a in sorted(means.items()):
        mean = lambda xs: statistics.mean(xs) if xs else None  # noqa: E731
        out.append(f"| {factor:.2f}x {basis_name(basis)} | {scheme} | {len(a['slo'])} | {pct(mean(a['slo']))} | {num(mean(a['p99']))} | "
                   f"{num(mean(a['be']))} | {num(mean(a['base']))} |")
    return out


def pairs_tables(j):
    target = j.get("target_over_slower_solo", 1.25)
    out = [f"# Aker bench: fused pairs ({j.get('device', '?')}, backend {j.get('backend', '?')})", "",
           f"Variants fused: {j.get('config', {}).get('variants', 'default')}.", "",
           "| pair | class | ratio | variants | blocks/SM | whole: fused / slower solo | whole: speedup over serial | "
           "knee load ratio | knee: fused / slower solo | knee: reduction | best |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in j["pairs"]:
        if "error" in p:
            out.append(f"| {p['pair']} | failed: {p['error'][:80]} | | | | | | | | | |")
            continue
        for v in p["versions"]:
            if not v["fits"]:
                out.append(f"| {p['pair']} | {p['class']} | {v['ratio']} | | does not fit | | | | | | |")
                continue
            variants = f"{v['variant_a']}+{v['variant_b']}" if "variant_a" in v else "default"
            if "error" in v:
                out.append(f"| {p['pair']} | {p['class']} | {v['ratio']} | {variants} | {v['blocks_per_sm']} | "
                           f"failed: {v['error'][:60]} | | | | | |")
                continue
            w, k = v["whole"], v["knee"]
            knee = f"{k['load_ratio']:.2f}{' (clamped)' if k['clamped'] else ''}"
            out.append(f"| {p['pair']} | {p['class']} | {v['ratio']} | {variants} | {v['blocks_per_sm']} | {num(w['over_slower_solo'])} | "
                       f"{num(w['speedup_over_serial'])} | {knee} | {num(k['over_slower_solo'])} | {num(k['reduction'])} | "
                       f"{'**best**' if v['ratio'] == p.get('best_ratio') else ''} |")
    med = j.get("median_best_knee_over_slower_solo")
    whole = j.get("median_best_whole_over_slower_solo")
    out += ["", f"Median over pairs of the best version's fused time over the slower solo time: at the knee "
            f"{num(med)}, whole ranges {num(whole)} (target <= {target}: "
            f"{'met' if med is not None and med <= target else 'not met'} at the knee)."]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out")
    args = ap.parse_args()
    lines = []
    for path in args.files:
        j = read_json(path)
        if j.get("bench") == "aker":
            lines += run_tables(j)
        elif j.get("bench") == "aker-pairs":
            lines += pairs_tables(j)
        else:
            sys.exit(f"summarize.py: {path}: not a bench/aker result (bench '{j.get('bench')}')")
        lines.append("")
    text = "\n".join(lines)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
