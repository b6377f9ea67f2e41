#!/usr/bin/env python3
"""One concordd for every GPU of a node: an LC service and a BE training job on GPU 0, another BE
training job on GPU 1, all unmodified PyTorch processes under libconcord_intercept.so, registered
with one daemon that runs one engine (lane) per GPU. It measures whether the daemon keeps the GPUs
apart: GPU 1's BE should train at its alone rate while GPU 0's LC and BE share their GPU under the
policy.

  one_daemon.py OUTDIR [--combo resnet50:64:graph/resnet50:64] [--load 0.3] [--requests 250]
                [--policy orion] [--be-alone-s 12]

Phases (all processes MPS clients of one MPS control daemon for the node, each picking its GPU with
CUDA_VISIBLE_DEVICES):
  1. the LC service alone on GPU 0, back to back (its service time, hence the rate at --load), then
     at the load (its alone p99);
  2. each BE alone on its GPU for --be-alone-s (plain MPS clients: the alone rates);
  3. one concordd (--devices all, --policy), the two BE jobs started and warm, then the LC service
     at the load; each BE's rate over the LC's window.
With one GPU it runs phases 1-3 on GPU 0 alone and says so. Writes OUTDIR/summary.json and
OUTDIR/summary.md; the daemon's log (each tenant's device) and its metrics text are kept beside.

Environment: CONCORDD and INTERCEPT as for run.py; PYTHON.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import procs  # noqa: E402  (the MPS, daemon and process helpers)
from stats import percentile  # noqa: E402
from summarize import be_rate  # noqa: E402


def gpus():
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,pci.bus_id,name", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return [dict(zip(("index", "bus_id", "name"), (x.strip() for x in line.split(",")))) for line in out.splitlines() if line.strip()]


def metrics(path):
    """The daemon's Prometheus text from its Unix socket."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(path)
    s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return data.decode().split("\r\n\r\n", 1)[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--combo", default="resnet50:64:graph/resnet50:64")
    ap.add_argument("--load", type=float, default=0.3)
    ap.add_argument("--requests", type=int, default=250)
    ap.add_argument("--policy", default="orion")
    ap.add_argument("--be-alone-s", type=float, default=12.0)
    ap.add_argument("--timeout", type=float, default=240.0)
    a = ap.parse_args()
    for var in ("CONCORDD", "INTERCEPT"):
        if not os.environ.get(var):
            raise SystemExit(f"one_daemon.py: set {var}")
    c = procs.parse_combo(a.combo)
    os.makedirs(a.out, exist_ok=True)
    work = os.path.join(a.out, "work")
    os.makedirs(work, exist_ok=True)
    node = gpus()
    be_gpus = ["0", "1"] if len(node) > 1 else ["0"]
    summary = {"combo": a.combo, "load": a.load, "policy": a.policy, "gpus": node, "requests": a.requests}

    def on(gpu, extra=None):
        return {**mps.env, "CUDA_VISIBLE_DEVICES": gpu, **(extra or {})}

    with procs.Mps(work) as mps:
        # 1. The LC alone on GPU 0.
        cal = os.path.join(a.out, "lc_calibrate.json")
        with open(os.path.join(a.out, "lc_calibrate.log"), "w") as log:
            procs.finish(subprocess.Popen(procs.lc_cmd(c, cal, calibrate=200), stdout=log, stderr=subprocess.STDOUT,
                                        env={**procs.base_env(), **on("0")}), a.timeout, "the LC calibration")
        service_s = json.load(open(cal))["mean_s"]
        rate = a.load / service_s
        alone = os.path.join(a.out, "lc_alone.json")
        with open(os.path.join(a.out, "lc_alone.log"), "w") as log:
            procs.finish(subprocess.Popen(procs.lc_cmd(c, alone, [rate], a.requests), stdout=log, stderr=subprocess.STDOUT,
                                        env={**procs.base_env(), **on("0")}), a.timeout, "the LC alone")
        lc_alone_p99 = json.load(open(alone))["phases"][0]["p99_s"]
        summary.update({"lc_service_s": service_s, "rate_rps": rate, "lc_alone_p99_s": lc_alone_p99})
        # 2. Each BE alone on its GPU.
        be_alone = {}
        for g in be_gpus:
            out = os.path.join(a.out, f"be{g}_alone.json")
            with open(os.path.join(a.out, f"be{g}_alone.log"), "w") as log:
                procs.finish(subprocess.Popen(procs.be_cmd(c, out, seconds=a.be_alone_s), stdout=log, stderr=subprocess.STDOUT,
                                            env={**procs.base_env(), **on(g)}), a.timeout, f"BE alone on GPU {g}")
            be_alone[g] = json.load(open(out))["its"]
        summary["be_alone_its"] = be_alone
        # 3. One daemon, every GPU: the BE jobs, then the LC at the load.
        # Each GPU's lane plans for that GPU's model (--device-spec auto).
        os.environ["CONCORD_DEVICE_SPEC"] = "auto"
        with procs.Concordd(work, a.policy, mps.env, ["--devices", "all"]) as daemon:
            common = {"LD_PRELOAD": os.environ["INTERCEPT"], "CONCORD_SOCKET": daemon.socket}
            stop = os.path.join(a.out, "stop")
            bes = {}
            try:
                for g in be_gpus:
                    ready = os.path.join(a.out, f"be{g}.ready")
                    env = on(g, {**common, "CONCORD_CLASS": "be", "CONCORD_NAME": f"be-gpu{g}",
                                 "CONCORD_INTERCEPT_STATS": os.path.join(a.out, f"be{g}_intercept.json")})
                    log = open(os.path.join(a.out, f"be{g}.log"), "w")
                    bes[g] = subprocess.Popen(procs.be_cmd(c, os.path.join(a.out, f"be{g}.json"), stop=stop, ready=ready),
                                              stdout=log, stderr=subprocess.STDOUT, env={**procs.base_env(), **env})
                    procs.wait_file(ready, bes[g], a.timeout)
                target_ms = 1.5 * lc_alone_p99 * 1e3
                env = on("0", {**common, "CONCORD_CLASS": "lc", "CONCORD_NAME": "lc-gpu0", "CONCORD_TARGET_MS": f"{target_ms:.3f}",
                               "CONCORD_INTERCEPT_STATS": os.path.join(a.out, "lc_intercept.json")})
                with open(os.path.join(a.out, "lc.log"), "w") as log:
                    lc = subprocess.Popen(procs.lc_cmd(c, os.path.join(a.out, "lc.json"), [rate], a.requests), stdout=log,
                                          stderr=subprocess.STDOUT, env={**procs.base_env(), **env})
                    # The daemon's metrics while the LC serves: the sample with the most tenants.
                    text, most = "", -1
                    while lc.poll() is None:
                        sample = metrics(os.path.join(work, "metrics.sock"))
                        n = sum(int(l.rsplit(" ", 1)[1]) for l in sample.splitlines() if l.startswith("concord_device_tenants{"))
                        if n > most:
                            text, most = sample, n
                        time.sleep(0.5)
                    procs.finish(lc, a.timeout, "the LC service")
            finally:
                open(stop, "w").close()
                for g, p in bes.items():
                    procs.finish(p, 60, f"the BE job on GPU {g}")
        with open(os.path.join(a.out, "metrics.txt"), "w") as f:
            f.write(text)
    phase = json.load(open(os.path.join(a.out, "lc.json")))["phases"][0]
    window = phase["window"]
    together = {g: be_rate(json.load(open(os.path.join(a.out, f"be{g}.json"))), window) for g in be_gpus}
    lat = phase["latency_s"]
    summary.update({
        "lc_p99_s": phase["p99_s"], "lc_p99_vs_alone": phase["p99_s"] / lc_alone_p99, "lc_target_ms": 1.5 * lc_alone_p99 * 1e3,
        "lc_slo_attainment": sum(1 for x in lat if x * 1e3 <= 1.5 * lc_alone_p99 * 1e3) / len(lat),
        "be_its": together, "be_vs_alone": {g: together[g] / be_alone[g] for g in be_gpus},
        "device_tenants": [l for l in text.splitlines() if l.startswith("concord_device_tenants")],
        "intercept": {k: json.load(open(os.path.join(a.out, f"{k}_intercept.json"))) for k in ["lc"] + [f"be{g}" for g in be_gpus]
                      if os.path.exists(os.path.join(a.out, f"{k}_intercept.json"))},
    })
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    lines = [f"# One concordd, {len(node)} GPU(s): {a.combo}, load {a.load}, policy {a.policy}", "",
             "| GPU | tenant | alone | with the node's other tenants | ratio |", "|---|---|---|---|---|",
             f"| 0 | LC p99 | {lc_alone_p99 * 1e3:.2f} ms | {phase['p99_s'] * 1e3:.2f} ms | {summary['lc_p99_vs_alone']:.2f}x |"]
    for g in be_gpus:
        lines.append(f"| {g} | BE it/s | {be_alone[g]:.2f} | {together[g]:.2f} | {summary['be_vs_alone'][g]:.2f} |")
    if len(be_gpus) == 1:
        lines += ["", "One GPU on this machine: the second GPU's BE was not run."]
    lines += ["", "Device tenants seen by the daemon during the run:", ""] + [f"    {l}" for l in summary["device_tenants"]]
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
