#!/usr/bin/env python3
"""Markdown tables of bench/raise's results JSON (raise_bench.json): makespan mean and standard
deviation over seeds per task count and policy, speedup over SQ, and the sensitivity runs."""
import argparse
import json
import statistics as st
import sys
from collections import defaultdict


def ms(v):
    return v * 1e3


def main(path):
    d = json.load(open(path))
    runs = d["runs"]
    print(f"Device: {d.get('device', '?')} ({d['backend']}); task templates {d['tasks']} "
          f"({d['profiled_task_types']} of {d['task_types']} types with measured RAISE vectors); "
          f"{len(runs)} runs in {d.get('seconds', 0):.0f} s{' (stopped early: time budget)' if d.get('stopped_early') else ''}.\n")
    if d.get("task_classes"):
        c = d["task_classes"]
        print("Task types (stated: the tasks file's raise_type; else read from the measured vector): " +
              ", ".join(f"{n} {v['class']}{' (stated)' if v['stated'] else ''}" for n, v in c.items()) + ".\n")
    main_runs = defaultdict(list)
    for r in runs:
        if r["group"] == "main":
            main_runs[(r["tasks"], r["policy"])].append(r["makespan_s"])
    policies = [p for p in ["raise", "sq", "rr", "rd"] if any(k[1] == p for k in main_runs)]
    policies += sorted({k[1] for k in main_runs} - set(policies))  # variants such as raise:tie=0
    counts = sorted({k[0] for k in main_runs})
    print("| tasks | " + " | ".join(f"{p} ms (mean ± sd)" for p in policies) + " | " +
          " | ".join(f"speedup of {p} over sq" for p in policies if p != "sq") + " | seeds |")
    print("|---:|" + "---:|" * (2 * len(policies) - 1) + "---:|")
    speed = defaultdict(list)
    sds = defaultdict(list)
    for n in counts:
        row = [str(n)]
        for p in policies:
            v = main_runs.get((n, p), [])
            sd = st.stdev(v) if len(v) > 1 else 0.0
            sds[p].append(ms(sd))
            row.append(f"{ms(st.mean(v)):.2f} ± {ms(sd):.2f}" if v else "-")
        sq = main_runs.get((n, "sq"))
        for p in policies:
            if p == "sq":
                continue
            v = main_runs.get((n, p))
            if sq and v:
                s = st.mean(sq) / st.mean(v)
                speed[p].append(s)
                row.append(f"{s:.3f}x")
            else:
                row.append("-")
        row.append(str(min(len(main_runs.get((n, p), [])) for p in policies)))
        print("| " + " | ".join(row) + " |")
    print()
    for p in policies:
        if p != "sq" and speed[p]:
            print(f"- {p} over sq: mean {st.mean(speed[p]):.3f}x, max {max(speed[p]):.3f}x, min {min(speed[p]):.3f}x "
                  f"over {len(speed[p])} task counts")
    for p in policies:
        if sds[p]:
            print(f"- {p}: mean standard deviation of the makespan over seeds {st.mean(sds[p]):.3f} ms")
    print()

    def group(name, key):
        g = defaultdict(list)
        for r in runs:
            if r["group"] == name:
                g[(r["policy"], key(r))].append(r["makespan_s"])
        return g

    sq36 = [r["makespan_s"] for r in runs if r["group"] == "main" and r["policy"] == "sq"]
    sens_tasks = next((r["tasks"] for r in runs if r["group"] != "main"), None)
    sq_ref = [r["makespan_s"] for r in runs if r["group"] == "main" and r["policy"] == "sq" and r["tasks"] == sens_tasks]
    g = group("order", lambda r: r["params"]["dims"])
    if g:
        print(f"The order alone: every policy at one fixed variant ({sens_tasks} tasks; sq at the same variant = 1):\n")
        pols = sorted({k[0] for k in g}, key=lambda p: ["raise", "sq", "rr", "rd"].index(p) if p in ["raise", "sq", "rr", "rd"] else 9)
        print("| dims | " + " | ".join(f"{p} ms" for p in pols) + " | " + " | ".join(f"{p} over sq" for p in pols if p != "sq") + " |")
        print("|---|" + "---:|" * (2 * len(pols) - 1))
        for d in ["min", "mid", "max"]:
            if ("sq", d) not in g:
                continue
            ref = st.mean(g[("sq", d)])
            cells = [f"{ms(st.mean(g[(p, d)])):.2f}" if (p, d) in g else "-" for p in pols]
            cells += [f"{ref / st.mean(g[(p, d)]):.3f}x" if (p, d) in g else "-" for p in pols if p != "sq"]
            print(f"| {d} | " + " | ".join(cells) + " |")
        print()
    def sweep(name, title):
        """One raise parameter's sweep against sq at the sensitivity task count."""
        # Numbers in order, then words (`auto`: the threshold from the tasks' mean, + 0.5).
        def key(r):
            v = r["params"][name]
            try:
                return (0, float(v))
            except ValueError:
                return (1, v)
        g = group(name, key)
        if not g:
            return
        print(f"{title}:\n")
        print(f"| {name} | raise ms | speedup over sq |")
        print("|---:|---:|---:|")
        for (_, v), m in sorted(g.items(), key=lambda kv: kv[0][1]):
            s = f"{st.mean(sq_ref) / st.mean(m):.3f}x" if sq_ref else "-"
            label = f"{v[1]:g}" if v[0] == 0 else v[1]
            used = sorted({round(r[name], 2) for r in runs if r["group"] == name and r["params"][name] == v[1] and name in r})
            if v[0] == 1 and used:  # the value an `auto` run resolved to
                label += " (" + ", ".join(f"{u:.2f}" for u in used) + ")"

            print(f"| {label} | {ms(st.mean(m)):.2f} | {s} |")
        print()

    for name in ["alpha", "beta"]:
        sweep(name, f"Sensitivity to {name} ({sens_tasks} tasks; the other threshold 3)")
    g = group("streams", lambda r: int(r["params"]["streams"]))
    if g:
        print(f"Sensitivity to N_str ({sens_tasks} tasks), against rd with the same streams (Fig. 11):\n")
        print("| N_str | raise ms | rd ms | speedup of raise over rd |")
        print("|---:|---:|---:|---:|")
        for k in sorted({k[1] for k in g}):
            a, b = g.get(("raise", k)), g.get(("rd", k))
            print(f"| {k} | {ms(st.mean(a)):.2f} | {ms(st.mean(b)):.2f} | {st.mean(b) / st.mean(a):.3f}x |")
        print()
    sweep("tie", f"RAISE's tie band ({sens_tasks} tasks; 0 = the paper's strict maximum, 0.1 the default)")
    g = group("dims", lambda r: r["params"]["dims"])
    if g:
        print(f"Fixed against dynamic dimensions ({sens_tasks} tasks, Fig. 12):\n")
        print("| dims | raise ms | speedup of dynamic over this |")
        print("|---|---:|---:|")
        dyn = g.get(("raise", "dynamic"))
        for k in ["min", "mid", "max", "dynamic"]:
            if ("raise", k) in g:
                m = g[("raise", k)]
                print(f"| {k} | {ms(st.mean(m)):.2f} | {st.mean(m) / st.mean(dyn):.3f}x |")
        print()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("results", nargs="?", default="raise_bench.json", help="raise_bench.json (default: %(default)s)")
    try:
        main(ap.parse_args().results)
    except (OSError, ValueError) as e:
        sys.exit(f"summarize.py: {e}")
