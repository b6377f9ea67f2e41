"""Simulator fidelity: the same mixes and policies on the GPU and on the simulator (fed the GPU's
stored profiles). Reads the GPU results (fid-<mix>-<policy>.json, in a folder or fidelity.tar.gz),
runs `concord run --backend sim --profiles DB` for each, and reports makespan and per-tenant time
errors: each run's, their median and maximum, and per policy the median, maximum and spread over the
mixes, with the GPU's identity (name, driver, CUDA, clocks) and both builds' commits. Usage: python3 bench/fidelity/compare.py GPU_RESULTS PROFILES_DB OUT.json [CONCORD]
"""
import argparse
import io
import json
import pathlib
import statistics
import subprocess
import sys
import tarfile
import tempfile


def np_sum(run):
    """The whole-run NP sum: metrics.np_sum (results schema 2), metrics.stp before."""
    m = run["metrics"]
    return m["np_sum"] if "np_sum" in m else m["stp"]

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("gpu_results", type=pathlib.Path, help="folder with fid-<mix>-<policy>.json or fidelity.tar.gz")
ap.add_argument("profiles_db", help="the GPU's profile store (concord run --profiles)")
ap.add_argument("out", type=pathlib.Path, help="where the comparison JSON goes")
ap.add_argument("concord", nargs="?", default="build/src/concord", help="the concord binary (default: %(default)s)")
args = ap.parse_args()
gpu_dir, db, out_path, concord = args.gpu_results, args.profiles_db, args.out, args.concord
if not gpu_dir.is_dir():
    sys.exit(f"compare.py: {gpu_dir}: not a folder")
mixes = pathlib.Path(__file__).parent / "mixes"

gpu = {}
archive = gpu_dir / "fidelity.tar.gz"
if archive.exists():
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            name = pathlib.Path(m.name).name
            if name.startswith("fid-") and name.endswith(".json"):
                gpu[name[4:-5]] = json.load(io.TextIOWrapper(tar.extractfile(m)))
else:
    for f in gpu_dir.glob("fid-*.json"):
        gpu[f.stem[4:]] = json.loads(f.read_text())

rows = []
with tempfile.TemporaryDirectory() as tmp:
    for key in sorted(gpu):
        g = gpu[key]
        mix = pathlib.Path(g["workload"]).stem
        sim_out = pathlib.Path(tmp) / f"{key}.json"
        cmd = [concord, "run", str(mixes / f"{mix}.yaml"), "--policy", g["policy"], "--backend", "sim",
               "--profiles", db, "--out", str(sim_out)]
        for k, v in g.get("params", {}).items():
            cmd += ["--param", f"{k}={v}"]
        subprocess.run(cmd, check=True, capture_output=True)
        s = json.loads(sim_out.read_text())
        gm, sm = g["metrics"]["makespan_s"], s["metrics"]["makespan_s"]
        tenant_errors = [abs(st["shared_s"] - gt["shared_s"]) / gt["shared_s"] for gt, st in zip(g["tenants"], s["tenants"])]
        rows.append({"mix": mix, "policy": g["policy"], "gpu_makespan_s": gm, "sim_makespan_s": sm,
                     "makespan_error": abs(sm - gm) / gm, "tenant_time_errors": tenant_errors,
                     "gpu_stp": np_sum(g), "sim_stp": np_sum(s)})

def spread(errors):
    """Median, maximum and spread (max - min) of a list of relative errors."""
    return {"runs": len(errors), "median": statistics.median(errors), "max": max(errors), "min": min(errors),
            "spread": max(errors) - min(errors)}


if not rows:
    sys.exit(f"compare.py: no fid-<mix>-<policy>.json in {gpu_dir}")
mk = [r["makespan_error"] for r in rows]
tt = [e for r in rows for e in r["tenant_time_errors"]]
summary = {"runs": len(rows), "mixes": len({r["mix"] for r in rows}),
           "makespan_error_median": statistics.median(mk), "makespan_error_max": max(mk),
           "tenant_time_error_median": statistics.median(tt), "tenant_time_error_max": max(tt)}
# Per policy: the makespan error's median, maximum and spread over the mixes.
per_policy = {p: spread([r["makespan_error"] for r in rows if r["policy"] == p]) for p in sorted({r["policy"] for r in rows})}
first = next(iter(gpu.values()))
# Provenance: the GPU runs' build and device (name, driver, CUDA, clocks), as their results state them.
out_path.write_text(json.dumps({"device": first["device"], "gpu_commit": first["commit"],
                                "gpu_device_info": first.get("device_info"), "gpu_build": first.get("build"),
                                "sim_build": s.get("build"), "summary": summary, "per_policy": per_policy, "rows": rows},
                               indent=1))
print("| mix | policy | GPU makespan ms | sim makespan ms | error | GPU STP | sim STP | worst tenant error |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['mix']} | {r['policy']} | {r['gpu_makespan_s'] * 1e3:.3f} | {r['sim_makespan_s'] * 1e3:.3f} | "
          f"{r['makespan_error'] * 100:.1f}% | {r['gpu_stp']:.3f} | {r['sim_stp']:.3f} | {max(r['tenant_time_errors']) * 100:.1f}% |")
print("\n| policy | runs | makespan error median | max | spread (max - min) |")
print("|---|---:|---:|---:|---:|")
for p, v in per_policy.items():
    print(f"| {p} | {v['runs']} | {v['median'] * 100:.1f}% | {v['max'] * 100:.1f}% | {v['spread'] * 100:.1f} points |")
info = first.get("device_info") or {}
said = lambda key: info.get(key) if info.get(key) is not None else "not recorded"
print(f"\nGPU: {info.get('name', first['device'])}, driver {said('driver_version')}, CUDA {said('cuda_version')}, "
      f"SM clock {said('clock_hz')} Hz, memory clock {said('memory_clock_hz')} Hz; GPU runs' commit {first['commit']}, "
      f"simulator's {(s.get('build') or {}).get('commit')}")
print(f"\n{summary['runs']} runs over {summary['mixes']} mixes: makespan error median {summary['makespan_error_median'] * 100:.1f}%, "
      f"max {summary['makespan_error_max'] * 100:.1f}%; per-tenant time error median "
      f"{summary['tenant_time_error_median'] * 100:.1f}%, max {summary['tenant_time_error_max'] * 100:.1f}%")
