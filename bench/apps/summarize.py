#!/usr/bin/env python3
"""The tables of bench/apps (run.py OUTDIR), every figure with its 95% bootstrap interval
(stats.py says how each is resampled).

Per combo, load and scheme, pooled over the rounds: the LC's p50 and p99 (ms), its p99 over the LC
alone's (alone measured again in every round, in the scheme's own group: a plain process for
`timeslice` and `priority-streams`, an MPS client for the MPS-based and Concord schemes), each
round's ratio, the SLO attainment (latency within the target: --slo-factor x the LC alone p99 at
that load), and the BE job's iterations per second over the LC phases' windows, over the BE alone
(a plain process, and an MPS client), each re-measured in every round. An LLM decode service (its
phases carry per-token times) adds its time to first token and its per-token latency, whose
tokens are resampled request by request. A p99 from fewer than 2,000 samples (20 above it) is
marked "too few samples", a per-token p99 also when its tokens come from fewer than 20 requests.
A point pools the rounds in which both the scheme and its group's LC alone ran (a deadline may
cut a round short); the tables say how many, and why the others are left out.

Then the dominance table: Concord's default configuration (--default, the scheme run as
concordd with no --policy) against every baseline at each point, on both axes (LC p99, BE rate):
"beats", "loses" or "within noise" by whether the intervals separate, and on both together
"dominates", "dominated", "trade-off" or "within noise". Beside it, labelled as such, the best of
the other concord:* variants, picked after the run.

  summarize.py OUTDIR [OUTDIR...] [--default SCHEME] [--json FILE] [--resamples N] [--seed S]

Several OUTDIRs are rounds of the same combos (e.g. calls made one after another): their rounds
are pooled. The raw files of runs made before rounds existed (one scheme folder per combo, the LC
alone in lc_alone/, the BE alone in be_alone.json) read as one round each.
"""
import argparse
import json
import math
import os
import re
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shares  # noqa: E402
import stats  # noqa: E402

BASELINES = ("timeslice", "mps", "mps-prio", "mps-prio-be50", "mps-be75", "mps-be50", "mps-be25", "priority-streams")
# Each group's LC alone: the reference of the schemes measured beside it.
PLAIN_GROUP = ("timeslice", "priority-streams")
ALONE_PLAIN, ALONE_MPS = "alone", "alone-mps"
BE_ALONE_PLAIN, BE_ALONE_MPS = "be-alone", "be-alone-mps"
ENTRIES = (ALONE_PLAIN, ALONE_MPS, BE_ALONE_PLAIN, BE_ALONE_MPS)
DEFAULT_SCHEME = "concord"


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _error(d):
    err = os.path.join(d, "error.txt")
    if os.path.exists(err):
        with open(err) as f:
            return f.read().strip() or "failed"
    return "no results"


def _be_window_doc(doc):
    """A BE-alone document's iteration ends and window (the runs before rounds had no window: its
    first and last iteration end)."""
    ends = doc.get("iteration_ends", [])
    window = doc.get("window") or ([ends[0], ends[-1]] if len(ends) > 1 else None)
    return {"iteration_ends": ends, "window": window}


def empty_round():
    return {"alone": {}, "be_alone": {}, "schemes": {}, "skipped": set()}


def read_round(d, legacy):
    """One round's documents: {"alone": {group: lc doc}, "be_alone": {kind: doc}, "schemes":
    {scheme: {"lc", "be", "ref", "error", "dir"}}, "skipped": {entry, ...}}."""
    r = empty_round()
    if legacy:
        alone = load_json(os.path.join(d, "lc_alone", "lc.json"))
        if alone:
            r["alone"][ALONE_PLAIN] = alone
        for name, kind in (("be_alone.json", BE_ALONE_PLAIN), ("be_alone_mps.json", BE_ALONE_MPS)):
            doc = load_json(os.path.join(d, name))
            if doc:
                r["be_alone"][kind] = _be_window_doc(doc)
    else:
        for group in (ALONE_PLAIN, ALONE_MPS):
            doc = load_json(os.path.join(d, group, "lc.json"))
            if doc:
                r["alone"][group] = doc
        for kind in (BE_ALONE_PLAIN, BE_ALONE_MPS):
            doc = load_json(os.path.join(d, kind, "be.json"))
            if doc:
                r["be_alone"][kind] = _be_window_doc(doc)
    for scheme in sorted(os.listdir(d)):
        sd = os.path.join(d, scheme)
        if (not os.path.isdir(sd) or scheme in ENTRIES or scheme in ("lc_alone", "logs") or re.match(r"round\d+$", scheme)
                or scheme.startswith(("work", "shares_"))):
            continue
        lc, be = load_json(os.path.join(sd, "lc.json")), load_json(os.path.join(sd, "be.json"))
        entry = {"dir": sd}
        if lc is None or be is None:
            entry["error"] = _error(sd)
        else:
            entry.update(lc=lc, be=be)
            # Runs before rounds compared every scheme with the plain LC alone.
            entry["ref"] = lc.get("alone_ref") or (ALONE_PLAIN if legacy or scheme in PLAIN_GROUP else ALONE_MPS)
        r["schemes"][scheme] = entry
    return r


def read_skipped(base):
    """{round number: {entry, ...}}: the jobs run.py's --deadline-s left out (skipped.txt)."""
    skipped = {}
    try:
        with open(os.path.join(base, "skipped.txt")) as f:
            for line in f:
                m = re.match(r"round (\d+) (\S+)$", line.strip())
                if m:
                    skipped.setdefault(int(m.group(1)), set()).add(m.group(2))
    except OSError:
        pass
    return skipped


def read_combos(outs):
    """{combo: {"settings", "rounds": [round, ...]}} over every OUTDIR, rounds in order; a round
    the deadline left out whole is an empty round, its jobs in "skipped"."""
    combos = {}
    for out in outs:
        for combo in sorted(os.listdir(out)):
            base = os.path.join(out, combo)
            settings = load_json(os.path.join(base, "settings.json"))
            if not os.path.isdir(base) or settings is None:
                continue
            c = combos.setdefault(combo, {"settings": settings, "rounds": []})
            made = {int(d[5:]) for d in os.listdir(base) if re.match(r"round\d+$", d)}
            if made:
                skipped = read_skipped(base)
                for k in sorted(made | set(skipped)):
                    r = read_round(os.path.join(base, f"round{k}"), legacy=False) if k in made else empty_round()
                    r["skipped"] = skipped.get(k, set())
                    c["rounds"].append(r)
            elif os.path.isdir(os.path.join(base, "lc_alone")):
                c["rounds"].append(read_round(base, legacy=True))
    return combos


def _seed(base, *key):
    return (zlib.crc32("|".join(str(k) for k in key).encode()) ^ base) & 0x7FFFFFFF


def _phase(doc, i):
    phases = doc.get("phases", []) if doc else []
    return phases[i] if i < len(phases) else None


def _ms(est):
    return {k: v * 1e3 for k, v in est.items()}


class Figures:
    """The pooled figures of one set of phases (a scheme at a load, or an alone): point values and
    bootstrap replicates."""

    def __init__(self, phases, resamples, seed):
        self.n = sum(len(p["latency_s"]) for p in phases)
        lat = [p["latency_s"] for p in phases]
        self.p50 = stats.percentile([x for r in lat for x in r], 50)
        self.p99 = stats.percentile([x for r in lat for x in r], 99)
        self.reps = stats.quantile_replicates(lat, (50, 99), resamples, seed)
        self.per_round_p99 = [stats.percentile(r, 99) for r in lat]
        self.llm = all("tpot_s" in p for p in phases) and bool(phases)
        if self.llm:
            tokens = [p["tpot_s"] for p in phases]  # per round: per request, its per-token times
            flat = [x for r in tokens for req in r for x in req]
            self.tokens = len(flat)
            self.tokens_enough = stats.enough_clustered(99, [req for r in tokens for req in r])
            self.tpot_p50, self.tpot_p99 = stats.percentile(flat, 50), stats.percentile(flat, 99)
            self.tpot_reps = stats.cluster_quantile_replicates(tokens, (50, 99), resamples, seed + 1)
            ttft = [p["ttft_s"] for p in phases]
            self.ttft_p99 = stats.percentile([x for r in ttft for x in r], 99)
            self.ttft_reps = stats.quantile_replicates(ttft, (99,), resamples, seed + 2)


def _rounds_of(rounds, scheme, i):
    """The rounds a scheme's point at load i is judged on: those in which both the scheme and its
    group's LC alone ran ([(round index, entry)]), and why each other round is left out."""
    used, left_out = [], []
    for k, r in enumerate(rounds):
        e = r["schemes"].get(scheme)
        if scheme in r["skipped"]:
            # Checked first: a skipped job's folder may hold its group's residents' files.
            left_out.append(f"round {k + 1}: not run (the deadline)")
        elif e is None:
            left_out.append(f"round {k + 1}: not run")
        elif "error" in e or _phase(e["lc"], i) is None:
            left_out.append(f"round {k + 1}: " + e.get("error", "no phase at this load").splitlines()[0][:80])
        elif _phase(r["alone"].get(e["ref"]), i) is None:
            why = "not run (the deadline)" if e["ref"] in r["skipped"] else "missing"
            left_out.append(f"round {k + 1}: its alone ({e['ref']}) {why}")
        else:
            used.append((k, e))
    return used, left_out


def _be_alone(rounds, ks, resamples, seed, *key):
    """{kind: (rate, replicates)}: the BE alone, plain and under MPS, over the rounds ks that have it."""
    out = {}
    for kind in (BE_ALONE_PLAIN, BE_ALONE_MPS):
        per_round = [stats.iteration_times(rounds[k]["be_alone"][kind]["iteration_ends"], rounds[k]["be_alone"][kind]["window"])
                     for k in ks if kind in rounds[k]["be_alone"] and rounds[k]["be_alone"][kind]["window"]]
        if per_round:
            out[kind] = (stats.rate(per_round), stats.rate_replicates(per_round, resamples, _seed(seed, *key, kind)))
    return out


def rows_of(outs, resamples=stats.RESAMPLES, seed=1):
    """One dict per (combo, load, scheme) found under `outs` (a directory or a list of them). Each
    point pools the rounds in which the scheme and its group's LC alone both ran, against that
    alone and the BE alone of the same rounds; the rounds left out are listed with the reason."""
    if isinstance(outs, str):
        outs = [outs]
    rows = []
    for combo, c in sorted(read_combos(outs).items()):
        settings, rounds = c["settings"], c["rounds"]
        cache = {}

        def subset(ks):
            """The rounds ks as a seed's key: none when they are every round."""
            return () if len(ks) == len(rounds) else ks

        def alone_of(group, i, ks):
            """The LC alone of one group at load i over the rounds ks (computed once per set)."""
            key = ("lc", group, i, ks)
            if key not in cache:
                cache[key] = Figures([_phase(rounds[k]["alone"][group], i) for k in ks], resamples,
                                     _seed(seed, combo, settings["loads"][i], group, *subset(ks)))
            return cache[key]

        def be_alone_of(ks):
            if ("be", ks) not in cache:
                cache[("be", ks)] = _be_alone(rounds, ks, resamples, seed, combo, *subset(ks))
            return cache[("be", ks)]

        schemes = sorted({s for r in rounds for s in r["schemes"]})
        for i, load in enumerate(settings["loads"]):
            target = settings["targets_ms"][i] / 1e3 if i < len(settings.get("targets_ms", [])) else float("nan")
            for scheme in schemes:
                row = {"combo": combo, "load": load, "scheme": scheme, "rounds_planned": max(settings.get("rounds", 0), len(rounds))}
                used, left_out = _rounds_of(rounds, scheme, i)
                if left_out:
                    row["left_out"] = left_out
                if not used:
                    row["error"] = "; ".join(left_out) if left_out else "no results"
                    rows.append(row)
                    continue
                ks = tuple(k for k, _ in used)
                ok = [e for _, e in used]
                refs = {e["ref"] for e in ok}
                if len(refs) > 1:
                    row["error"] = f"its rounds name different alones ({', '.join(sorted(refs))})"
                    rows.append(row)
                    continue
                ref = ok[0]["ref"]
                phases = [_phase(e["lc"], i) for e in ok]
                f = Figures(phases, resamples, _seed(seed, combo, load, scheme))
                a = alone_of(ref, i, ks)
                graph = bool(ok[0]["lc"].get("graph"))
                row.update({"graph": graph, "llm": f.llm, "rounds": len(ok), "round_numbers": [k + 1 for k in ks],
                            "requests": f.n, "alone_ref": ref, "enough": stats.enough_for(99, f.n),
                            "lc_p50_ms": _ms(stats.estimate(f.p50, f.reps[50])),
                            "lc_p99_ms": _ms(stats.estimate(f.p99, f.reps[99])),
                            "alone_p99_ms": _ms(stats.estimate(a.p99, a.reps[99])),
                            "lc_p50_over_alone": stats.estimate(f.p50 / a.p50, stats.ratio_replicates(f.reps[50], a.reps[50])),
                            "lc_p99_over_alone": stats.estimate(f.p99 / a.p99, stats.ratio_replicates(f.reps[99], a.reps[99]))})
                # Each round's ratio, against that round's alone.
                row["p99_over_alone_rounds"] = [stats.percentile(_phase(e["lc"], i)["latency_s"], 99)
                                                / stats.percentile(_phase(rounds[k]["alone"][ref], i)["latency_s"], 99)
                                                for k, e in used]
                lat = [x for p in phases for x in p["latency_s"]]
                row["slo_attainment"] = sum(1 for x in lat if x <= target) / len(lat) if lat and not math.isnan(target) else float("nan")
                if f.llm and a.llm:
                    row.update({"tokens": f.tokens, "tokens_enough": f.tokens_enough,
                                "tpot_p50_ms": _ms(stats.estimate(f.tpot_p50, f.tpot_reps[50])),
                                "tpot_p99_ms": _ms(stats.estimate(f.tpot_p99, f.tpot_reps[99])),
                                "tpot_p99_over_alone": stats.estimate(f.tpot_p99 / a.tpot_p99,
                                                                      stats.ratio_replicates(f.tpot_reps[99], a.tpot_reps[99])),
                                "ttft_p99_ms": _ms(stats.estimate(f.ttft_p99, f.ttft_reps[99]))})
                # The BE over the LC phases' windows, pooled over the rounds.
                wins = [stats.iteration_times(e["be"].get("iteration_ends", []), _phase(e["lc"], i)["window"]) for e in ok]
                its = stats.rate(wins)
                its_reps = stats.rate_replicates(wins, resamples, _seed(seed, combo, load, scheme, "be"))
                row["be_its"] = stats.estimate(its, its_reps)
                be_alone = be_alone_of(ks)
                for kind, key in ((BE_ALONE_PLAIN, "be_over_alone"), (BE_ALONE_MPS, "be_over_alone_mps")):
                    if kind in be_alone:
                        value, reps = be_alone[kind]
                        row[key] = stats.estimate(its / value, stats.ratio_replicates(its_reps, reps))
                rows.append(row)
    rows.sort(key=lambda r: (r["combo"], r["load"], r["scheme"]))
    return rows


def lc_axis(row):
    """The LC figure a point is judged on: the per-token p99 of an LLM decode service (its
    per-request p99 rests on too few requests), else the request p99."""
    return "tpot_p99_ms" if row.get("llm") and "tpot_p99_ms" in row else "lc_p99_ms"


def compare(ours, theirs):
    """Our row against a baseline's on both axes: (LC verdict, BE verdict, dominance)."""
    key = lc_axis(ours)
    lc = stats.axis_verdict(ours[key], theirs[key], lower_is_better=True) if key in theirs else "within noise"
    be = stats.axis_verdict(ours["be_its"], theirs["be_its"], lower_is_better=False)
    return lc, be, stats.dominance(lc, be)


def verdicts(rows, default=DEFAULT_SCHEME):
    """Per (combo, load): the default scheme against every baseline present, the targets, and the
    best of the other concord-* variants (picked after the run: the one no baseline dominates,
    then the lowest LC p99)."""
    groups = {}
    for r in rows:
        if "error" not in r:
            groups.setdefault((r["combo"], r["load"]), {})[r["scheme"]] = r
    out = []
    for (combo, load), rs in sorted(groups.items()):
        base = {s: r for s, r in rs.items() if s in BASELINES}
        v = {"combo": combo, "load": load, "default": default}
        ours = rs.get(default)
        if ours is not None:
            v["against"] = {s: dict(zip(("lc", "be", "dominance"), compare(ours, b))) for s, b in sorted(base.items())}
            v["dominated_by"] = sorted(s for s, c in v["against"].items() if c["dominance"] == "dominated")
            v["dominated_by_mps_or_prio"] = any(s in ("mps", "mps-prio") for s in v["dominated_by"])
            v["enough"] = ours["enough"] if lc_axis(ours) == "lc_p99_ms" else ours.get("tokens_enough", False)
            if ours.get("graph"):
                # The LC's judged tail over alone; the BE over its plain alone, else (no plain group run) its MPS one.
                v["lc_over_alone"] = ours["tpot_p99_over_alone" if lc_axis(ours) == "tpot_p99_ms" else "lc_p99_over_alone"]
                v["target_lc"] = stats.against_target(v["lc_over_alone"], 1.15)
                be_key = next((k for k in ("be_over_alone", "be_over_alone_mps") if k in ours), None)
                if be_key:
                    v["be_over_alone"] = {**ours[be_key], "of": "plain" if be_key == "be_over_alone" else "MPS"}
                    v["target_be"] = stats.against_target(ours[be_key], 0.65, lower_is_better=False)
        others = [r for s, r in rs.items() if s.startswith("concord") and s != default]
        if others:
            def rank(r):
                dominated = sum(compare(r, b)[2] == "dominated" for b in base.values())
                return (dominated, r[lc_axis(r)]["value"])
            best = min(others, key=rank)
            v["best_of"] = {"scheme": best["scheme"], "of": sorted(r["scheme"] for r in others),
                            "against": {s: dict(zip(("lc", "be", "dominance"), compare(best, b))) for s, b in sorted(base.items())}}
        out.append(v)
    return out


def fmt(x, digits=2):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def rounds_cell(row):
    """The rounds a point pools, "2 of 3" where some were left out."""
    return str(row["rounds"]) if row["rounds"] >= row["rounds_planned"] else f"{row['rounds']} of {row['rounds_planned']}"


def fmt_est(e, digits=2):
    if not e:
        return "–"
    return f"{fmt(e['value'], digits)} [{fmt(e['lo'], digits)}, {fmt(e['hi'], digits)}]"


def tables(rows, vs):
    """The Markdown of rows_of() and verdicts()."""
    lines = ["# bench/apps: PyTorch LC service beside PyTorch training, as separate processes", "",
             "Figures pooled over the rounds, each with its 95% bootstrap interval; p99 / alone against the LC alone "
             "of the scheme's group in the same rounds.", ""]
    key, notes = None, []

    def flush():
        if notes:
            lines.extend(["", "Rounds left out: " + "; ".join(notes) + "."])
            notes.clear()

    for r in rows:
        if (r["combo"], r["load"]) != key:
            flush()
            key = (r["combo"], r["load"])
            lines += ["", f"## {r['combo']}, LC at {r['load']:g} of its alone capacity", "",
                      "| scheme | rounds | requests | LC p50 ms | LC p99 ms | LC p99 / alone | per round | SLO % | BE it/s | "
                      "BE / alone | BE / alone (MPS) |",
                      "|---|---:|---:|---|---|---|---|---:|---|---|---|"]
        if r.get("left_out") and "error" not in r:
            notes.append(f"{r['scheme']} ({', '.join(r['left_out'])})")
        if "error" in r:
            lines.append(f"| {r['scheme']} | none: {r['error'].splitlines()[0][:120]} | | | | | | | | | |")
            continue
        few = "" if r["enough"] else " (too few samples)"
        lines.append(f"| {r['scheme']} | {rounds_cell(r)} | {r['requests']} | {fmt_est(r['lc_p50_ms'])} | {fmt_est(r['lc_p99_ms'])}{few} | "
                     f"{fmt_est(r['lc_p99_over_alone'])} | {', '.join(fmt(x) for x in r['p99_over_alone_rounds'])} | "
                     f"{fmt(100 * r['slo_attainment'], 1)} | {fmt_est(r['be_its'])} | {fmt_est(r.get('be_over_alone'))} | "
                     f"{fmt_est(r.get('be_over_alone_mps'))} |")
    flush()
    llm = [r for r in rows if r.get("llm") and "tpot_p99_ms" in r]
    if llm:
        lines += ["", "## LLM decode services: time to first token and per-token latency", "",
                  "| combo | load | scheme | requests | tokens | TTFT p99 ms | per-token p50 ms | per-token p99 ms | per-token p99 / alone |",
                  "|---|---:|---|---:|---:|---|---|---|---|"]
        for r in llm:
            few = "" if r["tokens_enough"] else " (too few samples)"
            lines.append(f"| {r['combo']} | {r['load']:g} | {r['scheme']} | {r['requests']} | {r['tokens']} | {fmt_est(r['ttft_p99_ms'])} | "
                         f"{fmt_est(r['tpot_p50_ms'])} | {fmt_est(r['tpot_p99_ms'])}{few} | {fmt_est(r['tpot_p99_over_alone'])} |")
    lines += ["", "## Dominance: the default configuration against every baseline", "",
              "Per axis: beats / loses when the intervals separate, else within noise (LC: request p99; per-token p99 for "
              "an LLM decode service). Both axes: dominates, dominated, trade-off, within noise.", "",
              "| combo | load | configuration | baseline | LC | BE | both |", "|---|---:|---|---|---|---|---|"]
    for v in vs:
        if "against" not in v:
            continue
        note = "" if v["enough"] else " (too few samples)"
        for s, c in v["against"].items():
            lines.append(f"| {v['combo']} | {v['load']:g} | {v['default']}{note} | {s} | {c['lc']} | {c['be']} | {c['dominance']} |")
    best = [v for v in vs if "best_of" in v]
    if best:
        lines += ["", "## Beside it: the best of the other Concord variants, picked after the run", "",
                  "Not a configuration a user runs: the variant is chosen per point from the results.", "",
                  "| combo | load | best of | picked | dominated by | trade-off against | beats on both |", "|---|---:|---|---|---|---|---|"]
        for v in best:
            b = v["best_of"]
            by = lambda d: ", ".join(s for s, c in b["against"].items() if c["dominance"] == d) or "none"  # noqa: E731
            lines.append(f"| {v['combo']} | {v['load']:g} | {len(b['of'])} | {b['scheme']} | {by('dominated')} | {by('trade-off')} | "
                         f"{by('dominates')} |")
    targets = [v for v in vs if "target_lc" in v]
    if targets:
        lines += ["", "## Graph services: LC p99 <= 1.15x alone with BE >= 0.65 of alone (the default configuration)", "",
                  "LC: the request p99 (per-token for an LLM decode service); BE over its plain alone, or its MPS alone "
                  "where no plain group ran.", "",
                  "| combo | load | LC p99 / alone | BE / alone | LC target | BE target |", "|---|---:|---|---|---|---|"]
        for v in targets:
            be = v.get("be_over_alone")
            be_cell = f"{fmt_est(be)}{' (MPS)' if be and be['of'] == 'MPS' else ''}" if be else "–"
            lines.append(f"| {v['combo']} | {v['load']:g} | {fmt_est(v['lc_over_alone'])} | {be_cell} | "
                         f"{v['target_lc']} | {v.get('target_be', '–')} |")
    return "\n".join(lines) + "\n"


# The library's counters (CONCORD_INTERCEPT_STATS) a scheme's BE share table shows, each over the
# BE's leased launches.
MECHANISMS = (("room_asked", "asked for room"), ("room_sms", "on an SM-count context"), ("room_padded", "padded"),
              ("room_unpadded", "at the cap already"), ("room_fallbacks", "cap not applied"),
              ("green_fallbacks", "green context refused"), ("gate_waits", "waited at a closed gate"),
              ("cap_waits", "waited at the in-flight cap"), ("priority_attribute", "priority attribute"))


def _scheme_dirs(out):
    """(combo, scheme, folder) of every scheme run under `out`, rounds and legacy layout alike."""
    for combo in sorted(os.listdir(out)):
        base = os.path.join(out, combo)
        if not os.path.isdir(base):
            continue
        rounds = sorted(d for d in os.listdir(base) if re.match(r"round\d+$", d))
        for d in [os.path.join(base, x) for x in rounds] or [base]:
            for scheme in sorted(os.listdir(d)):
                if os.path.isdir(os.path.join(d, scheme)):
                    yield combo, scheme, os.path.join(d, scheme)


def library_tables(out):
    """Per combo: the BE alone under each --be-alone-under scheme over the BE alone under plain MPS
    (the library's cost with caps armed), and per concord scheme run the share of the BE's launches
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
    for combo, scheme, d in _scheme_dirs(out):
        if scheme.startswith("shares_"):
            continue
        s = load_json(os.path.join(d, "be_intercept.json"))
        if not s or not s.get("leased"):
            continue
        where = os.path.basename(os.path.dirname(d))
        label = f"{scheme}, round {where[5:]}" if re.match(r"round\d+$", where) else scheme
        touched.append((combo, label, s["leased"], {k: s.get(k, 0) / s["leased"] for k, _ in MECHANISMS}))
    return alone, touched


def profiled_shares(out):
    """(combo, scheme, shares.classify()) of each run.py --shares-under run found under `out`."""
    found = []
    for combo, d, path in _scheme_dirs(out):
        doc = load_json(os.path.join(path, "kernels.json")) if d.startswith("shares_") else None
        if doc:
            found.append((combo, d[len("shares_"):], shares.classify(doc)))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="+", help="run.py's OUTDIR; several: their rounds pooled")
    ap.add_argument("--default", default=DEFAULT_SCHEME, help="the scheme judged as Concord's default configuration")
    ap.add_argument("--json", help="also write the rows and verdicts here")
    ap.add_argument("--resamples", type=int, default=stats.RESAMPLES)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    for d in a.out:
        if not os.path.isdir(d):
            sys.exit(f"summarize.py: {d}: not a directory")
    rows = rows_of(a.out, a.resamples, a.seed)
    if not rows:
        sys.exit(f"summarize.py: {', '.join(a.out)}: no runs found")
    vs = verdicts(rows, a.default)
    text = tables(rows, vs)
    alone, mech = [], []
    for out in a.out:
        more_alone, more_mech = library_tables(out)
        alone += more_alone
        mech += more_mech
    if alone:
        text += "\n## The BE alone under the library, caps armed (no LC), over the BE alone under plain MPS\n\n"
        text += "| combo | scheme | BE it/s | under MPS | ratio |\n|---|---|---:|---:|---:|\n"
        text += "".join(f"| {c} | {s} | {fmt(i)} | {fmt(m)} | {fmt(i / m, 3)} |\n" for c, s, i, m in alone)
    if mech:
        text += "\n## Which share of the BE's launches each mechanism touched (the library's counters, whole run)\n\n"
        text += "| combo | scheme | BE launches | " + " | ".join(label for _, label in MECHANISMS) + " |\n"
        text += "|---|---|---:|" + "---:|" * len(MECHANISMS) + "\n"
        text += "".join(f"| {c} | {s} | {n} | " + " | ".join(f"{100 * share[k]:.2f}%" for k, _ in MECHANISMS) + " |\n"
                        for c, s, n, share in mech)
    profiled = [found for out in a.out for found in profiled_shares(out)]
    if profiled:
        text += ("\n## Which share of the BE's launches and GPU time each room mechanism applied to (profiled windows, "
                 "run.py --shares-under)\n\n" + shares.table(profiled) + "\n")
    sys.stdout.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"resamples": a.resamples, "seed": a.seed, "default": a.default, "rows": rows, "verdicts": vs,
                       "be_alone_under": alone, "mechanism_shares": mech,
                       "profiled_shares": [{"combo": c, "scheme": s, **v} for c, s, v in profiled]}, f, indent=1)


if __name__ == "__main__":
    main()
