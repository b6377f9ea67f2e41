#!/usr/bin/env python3
"""The figures docs/results.md states about bench/lsbe runs, from the run files themselves.

  compare.py targets RUN.json
      per scheme: the mix-loads with >= 99% of LC requests within target, the mixes whose LC p99
      is within 1.15x alone at load 0.3, and its BE throughput over orion's and over streams' (the
      range over mix-loads) -- the LC/BE targets (docs/results.md).
  compare.py p99 REF.json OTHER.json [--stat p99|p50] [--rename-ref FROM TO] [--rename-other FROM TO]
      per scheme in both: OTHER's LC p99 (or p50) against REF's at each mix and load, the median relative
      error and how many are within 20% (the simulator against the GPU, or one GPU run against
      another); "LC alone" is the LC alone at the same rate. --rename-* maps a scheme's name in
      that file to the name to compare under (e.g. a default that changed between the runs).

Files are lsbe_bench `run` results, plain or gzipped (bench/results keeps them in archives).
"""
import argparse
import statistics

from summarize import read_json


def runs(data, rename):
    """{(mix, load, scheme): run} for every run that finished, "LC alone" included."""
    out = {}
    for m in data.get("mixes", []):
        for l in m.get("loads", []):
            key = (m["mix"], round(l["load"], 6))
            if "lc_alone" in l:
                out[key + ("LC alone",)] = l["lc_alone"]
            for r in l.get("runs", []):
                if r.get("ok"):
                    out[key + (rename.get(r["scheme"], r["scheme"]),)] = r
    return out


def renames(pairs):
    return {a: b for a, b in pairs or []}


def targets(args):
    data = read_json(args.run)
    rs = runs(data, {})
    schemes = sorted({k[2] for k in rs if k[2] != "LC alone"})
    print("| scheme | mix-loads >= 99% within target | mixes within 1.15x alone p99 at load 0.3 | "
          "BE / orion's BE | BE / streams' BE |")
    print("|---|---|---|---|---|")
    for s in schemes:
        keys = [k for k in rs if k[2] == s]
        slo = sum(rs[k]["lc"]["slo_attainment"] >= 0.99 for k in keys)
        low = [k for k in keys if abs(k[1] - 0.3) < 1e-6]
        tail = sum(rs[k]["lc"]["p99_over_alone"] <= 1.15 for k in low)

        def ratio(base):
            r = [rs[k]["be_norm"] / rs[k[:2] + (base,)]["be_norm"] for k in keys
                 if k[:2] + (base,) in rs and rs[k[:2] + (base,)]["be_norm"] > 0]
            return f"{min(r):.2f}-{max(r):.2f}" if r else "-"

        print(f"| {s} | {slo} of {len(keys)} | {tail} of {len(low)} | {ratio('orion')} | {ratio('streams')} |")


def p99(args):
    ref = runs(read_json(args.ref), renames(args.rename_ref))
    other = runs(read_json(args.other), renames(args.rename_other))
    stat = args.stat + "_s"
    print(f"| scheme | mix-loads | median error of the LC {args.stat} | within 20% | range of OTHER / REF |")
    print("|---|---|---|---|---|")
    for s in sorted({k[2] for k in ref} & {k[2] for k in other}):
        ratios = [other[k]["lc"][stat] / ref[k]["lc"][stat] for k in ref
                  if k[2] == s and k in other and ref[k]["lc"][stat] > 0]
        if not ratios:
            continue
        errors = [r - 1 for r in ratios]
        within = sum(abs(e) <= 0.2 for e in errors)
        print(f"| {s} | {len(ratios)} | {100 * statistics.median(errors):+.0f}% | {within} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    t = sub.add_parser("targets", help="the LC/BE targets per scheme in one run")
    t.add_argument("run")
    p = sub.add_parser("p99", help="one run's LC p99 against another's, per scheme")
    p.add_argument("ref")
    p.add_argument("other")
    p.add_argument("--stat", choices=["p99", "p50"], default="p99", help="the latency figure compared")
    p.add_argument("--rename-ref", nargs=2, action="append", metavar=("FROM", "TO"))
    p.add_argument("--rename-other", nargs=2, action="append", metavar=("FROM", "TO"))
    args = ap.parse_args()
    targets(args) if args.what == "targets" else p99(args)


if __name__ == "__main__":
    main()
