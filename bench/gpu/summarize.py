"""Markdown tables from a GPU results folder (scripts/gpu_run.sh output, or bench/results/gpu-*/).

Usage: python3 bench/gpu/summarize.py FOLDER   (reads gpu_bench.json and run-*.json or runs.tar.gz)
"""
import argparse
import io
import json
import pathlib
import sys
import tarfile

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("folder", type=pathlib.Path, help="scripts/gpu_run.sh output or bench/results/gpu-*/")
folder = ap.parse_args().folder
try:
    bench = json.loads((folder / "gpu_bench.json").read_text())
except (OSError, ValueError) as e:
    sys.exit(f"summarize.py: {e}")
print(f"Device: {bench['device']}, {bench['sm_count']} SMs, CUDA driver API {bench['cuda_driver_api']}, runtime {bench['cuda_runtime']}\n")

rows = bench["overhead"]
print("| kernel | size | plain ms | elastic ms | overhead | blocks/SM plain, elastic |")
print("|---|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['kernel']} | {r['size']} | {r['plain_s'] * 1e3:.3f} | {r['elastic_s'] * 1e3:.3f} | {r['overhead'] * 100:+.1f}% "
          f"| {r['standalone_occupancy']}, {r['occupancy']} |")
over = sorted(r["overhead"] for r in rows)
print(f"\nMedian overhead {over[len(over) // 2] * 100:+.1f}%, worst {over[-1] * 100:+.1f}% over {len(over)} kernels.\n")

pair = bench["pair"]
print(f"Pair alone: fma_loop {pair['alone_s'][0] * 1e3:.3f} ms, stream_triad {pair['alone_s'][1] * 1e3:.3f} ms\n")
print("| scheme | ms | speedup over serial |")
print("|---|---:|---:|")
for r in pair["rows"]:
    print(f"| {r['scheme']} | {r['seconds'] * 1e3:.3f} | {r['speedup_over_serial']:.3f}x |")
serial = pair["rows"][0]["seconds"]
print(f"| ideal (longer alone) | {pair['ideal_s'] * 1e3:.3f} | {serial / pair['ideal_s']:.3f}x |\n")

runs = {}
archive = folder / "runs.tar.gz"
if archive.exists():
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            if m.name.endswith(".json"):
                runs[pathlib.Path(m.name).stem] = json.load(io.TextIOWrapper(tar.extractfile(m)))
else:
    for f in folder.glob("run-*.json"):
        runs[f.stem] = json.loads(f.read_text())
print("| workload | policy | STP | ANTT | FI | makespan ms | speedup over serial | LC p99 ms | LC SLO |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for name in sorted(runs):
    r = runs[name]
    m = r["metrics"]
    lc = [t for t in r["tenants"] if t["class"] == "LC"]
    p99 = f"{lc[0]['latency_p99_s'] * 1e3:.2f}" if lc else "-"
    slo = f"{lc[0]['slo_attainment'] * 100:.0f}%" if lc else "-"
    label = r["policy"] + (" " + name.split("manual-", 1)[1] if r["policy"] == "manual" else "")
    print(f"| {pathlib.Path(r['workload']).stem} | {label} | {m.get('np_sum', m.get('stp')):.3f} | {m['antt']:.3f} | {m['fi']:.3f} | "
          f"{m['makespan_s'] * 1e3:.2f} | {m.get('speedup_over_serial', 0):.3f}x | {p99} | {slo} |")
