"""Collects `concord run` results of the pair into one JSON file and prints a Markdown table."""
import argparse
import json
import pathlib
import sys

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("results", type=pathlib.Path, help="folder of `concord run --out` files, one per scheme (serial.json, ...)")
ap.add_argument("out", type=pathlib.Path, help="the collected JSON")
args = ap.parse_args()
src, dst = args.results, args.out
if not (src / "serial.json").exists():
    sys.exit(f"table.py: {src}/serial.json: missing (the serial run is the reference)")
runs = {}
for f in sorted(src.glob("*.json")):
    runs[f.stem] = json.loads(f.read_text())
serial = runs["serial"]["metrics"]["makespan_s"]
alone = [t["alone_s"] for t in runs["serial"]["tenants"]]
rows = []
for name, r in runs.items():
    m = r["metrics"]
    rows.append({"scheme": name, "makespan_ms": m["makespan_s"] * 1e3, "speedup_over_serial": serial / m["makespan_s"],
                 "stp": m.get("np_sum", m.get("stp")), "antt": m["antt"]})
rows.append({"scheme": "ideal (longer alone)", "makespan_ms": max(alone) * 1e3,
             "speedup_over_serial": serial / max(alone), "stp": None, "antt": None})
first = next(iter(runs.values()))
dst.write_text(json.dumps({"device": first["device"], "backend": first["backend"], "commit": first["commit"],
                           "build": first.get("build"), "device_info": first.get("device_info"),
                           "alone_ms": [a * 1e3 for a in alone], "rows": rows, "runs": runs}, indent=1))
print(f"device {first['device']} ({first['backend']}), commit {first['commit']}; alone "
      + ", ".join(f"{a * 1e3:.2f} ms" for a in alone))
print("| scheme | makespan ms | speedup over serial | STP | ANTT |")
print("|---|---:|---:|---:|---:|")
for r in rows:
    fmt = lambda v: "-" if v is None else f"{v:.3f}"
    print(f"| {r['scheme']} | {r['makespan_ms']:.3f} | {r['speedup_over_serial']:.3f}x | {fmt(r['stp'])} | {fmt(r['antt'])} |")
