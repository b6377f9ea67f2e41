#!/usr/bin/env python3
"""Does a Concord scheme change what the BE job computes? The BE training (be_train.py --steps, seeded
and deterministic) runs twice as an MPS client: alone without the library, and under the library
and concordd with SCHEME while an LC process keeps its work-in-flight flag up (a loop of matrix
products under the library as an LC tenant), so the scheme's caps apply to the BE's launches.
The two runs' losses and final parameters must agree bit for bit.

  correctness.py OUTDIR [--scheme concord:orion:s66:r2:b0] [--model resnet50] [--batch 32] [--steps 20]

Writes OUTDIR/correctness.json (equal_losses, equal_params, the BE's library counters) and exits
1 when they differ. Needs CONCORDD and INTERCEPT as run.py does.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procs  # noqa: E402  (the MPS, daemon and process helpers)

LC_BUSY = os.path.join(procs.HERE, "..", "intercept", "lc_busy.py")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--scheme", default="concord:orion:s66:r2:b0")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=240.0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = os.path.join(a.out, "work")
    os.makedirs(work, exist_ok=True)
    det = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    cmd = lambda out: [procs.PY, os.path.join(procs.HERE, "be_train.py"), "--model", a.model, "--batch", str(a.batch),  # noqa: E731
                       "--steps", str(a.steps), "--out", out]
    plain = os.path.join(a.out, "be_plain.json")
    with procs.Mps(work) as mps, open(os.path.join(a.out, "be_plain.log"), "w") as log:
        procs.finish(subprocess.Popen(cmd(plain), stdout=log, stderr=subprocess.STDOUT, env={**procs.base_env(), **mps.env, **det}),
                   a.timeout, "the BE alone")
    policy, extra = procs.concord_scheme(a.scheme)
    under = os.path.join(a.out, "be_concord.json")
    stats = os.path.join(a.out, "be_intercept.json")
    stop, ready = os.path.join(a.out, "busy.stop"), os.path.join(a.out, "busy.ready")
    for f in (stop, ready):
        if os.path.exists(f):
            os.remove(f)
    with procs.Mps(work) as mps, procs.Concordd(work, policy, mps.env, extra) as daemon, \
            open(os.path.join(a.out, "lc_busy.log"), "w") as lc_log, open(os.path.join(a.out, "be_concord.log"), "w") as be_log:
        common = {**procs.base_env(), **mps.env, "LD_PRELOAD": os.environ["INTERCEPT"], "CONCORD_SOCKET": daemon.socket}
        lc = subprocess.Popen([procs.PY, LC_BUSY, ready, stop], stdout=lc_log, stderr=subprocess.STDOUT,
                              env={**common, "CONCORD_CLASS": "lc", "CONCORD_NAME": "busy", "CONCORD_TARGET_MS": "100"})
        try:
            procs.wait_file(ready, lc, a.timeout)
            time.sleep(1.0)
            procs.finish(subprocess.Popen(cmd(under), stdout=be_log, stderr=subprocess.STDOUT,
                                        env={**common, **det, "CONCORD_CLASS": "be", "CONCORD_NAME": "be",
                                             "CONCORD_INTERCEPT_STATS": stats}), a.timeout, "the BE under Concord")
        finally:
            open(stop, "w").close()
            procs.finish(lc, 60, "the LC busy loop")
    p, c = json.load(open(plain)), json.load(open(under))
    s = json.load(open(stats)) if os.path.exists(stats) else {}
    result = {"scheme": a.scheme, "model": a.model, "batch": a.batch, "steps": a.steps,
              "equal_losses": p["losses"] == c["losses"], "equal_params": p["params_sha256"] == c["params_sha256"],
              "losses_plain": p["losses"], "losses_concord": c["losses"], "be_intercept": s}
    with open(os.path.join(a.out, "correctness.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"correctness {a.scheme}: losses equal {result['equal_losses']}, parameters equal {result['equal_params']}, "
          f"room asked {s.get('room_asked')}, on SM-count contexts {s.get('room_sms')}, padded {s.get('room_padded')}, "
          f"of {s.get('leased')} launches")
    return 0 if result["equal_losses"] and result["equal_params"] else 1


if __name__ == "__main__":
    sys.exit(main())
