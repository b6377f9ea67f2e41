#!/usr/bin/env python3
"""The library's cost on a BE training job alone: the same job in turns as a plain MPS client and
under the library and a daemon (a concord:* scheme, caps armed, no LC tenant), ROUNDS times, under
one MPS server, so that the drift between calls (8% on the lent H200) falls on both alike.

    be_overhead.py OUTDIR [--combo resnet50:64:graph/resnet50:64] [--scheme concord:orion:s66:r2]
                          [--rounds 3] [--seconds 12]

Writes OUTDIR/be_overhead.json: each turn's rate (it/s), the library's counters of each library
turn, and the median over rounds of the per-round ratio (under the library / plain MPS).
Environment: CONCORDD and INTERCEPT as for run.py."""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procs  # noqa: E402  (the MPS, daemon and process helpers)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--combo", default="resnet50:64:graph/resnet50:64")
    ap.add_argument("--scheme", default="concord:orion:s66:r2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    if a.rounds < 1 or a.seconds <= 0:
        ap.error("--rounds must be at least 1 and --seconds positive")
    if not a.scheme.startswith("concord:"):
        ap.error(f"--scheme {a.scheme}: a concord:* scheme")
    try:
        policy, extra = procs.concord_scheme(a.scheme)
    except RuntimeError as e:
        ap.error(str(e))
    c = procs.parse_combo(a.combo)
    os.makedirs(a.out, exist_ok=True)
    work = os.path.join(a.out, "work")
    os.makedirs(work, exist_ok=True)
    turns = []
    result = {"combo": a.combo, "scheme": a.scheme, "seconds": a.seconds, "turns": turns}

    def save():
        rounds = {}
        for t in turns:
            rounds.setdefault(t["round"], {})[t["mode"]] = t["its"]
        ratios = [r["library"] / r["mps"] for r in rounds.values() if r.get("mps") and r.get("library")]
        result["ratios"] = ratios
        result["median_ratio"] = statistics.median(ratios) if ratios else None
        with open(os.path.join(a.out, "be_overhead.json"), "w") as f:
            json.dump(result, f, indent=1)

    with procs.Mps(work) as mps:
        for r in range(a.rounds):
            # Alternate which goes first, so that neither always follows a warm GPU.
            for mode in (["mps", "library"] if r % 2 == 0 else ["library", "mps"]):
                name = f"r{r}-{mode}"
                out = os.path.join(a.out, name + ".json")
                cmd = procs.be_cmd(c, out, seconds=a.seconds)
                log = open(os.path.join(a.out, name + ".log"), "w")
                try:
                    if mode == "mps":
                        procs.finish(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**procs.base_env(), **mps.env}),
                                   a.timeout, name)
                    else:
                        with procs.Concordd(work, policy, mps.env, extra) as daemon:
                            stats = os.path.join(a.out, name + "_intercept.json")
                            env = {**procs.base_env(), **mps.env, "LD_PRELOAD": os.environ["INTERCEPT"], "CONCORD_SOCKET": daemon.socket,
                                   "CONCORD_CLASS": "be", "CONCORD_NAME": "be", "CONCORD_INTERCEPT_STATS": stats}
                            procs.finish(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), a.timeout, name)
                except (RuntimeError, subprocess.SubprocessError, OSError) as e:
                    print(f"{name}: {e}", file=sys.stderr)
                    continue
                finally:
                    log.close()
                turn = {"round": r, "mode": mode, "its": json.load(open(out)).get("its")}
                if mode == "library" and os.path.exists(stats):
                    turn["counters"] = json.load(open(stats))
                turns.append(turn)
                save()
                print(f"{name}: {turn['its']} it/s", flush=True)
    save()
    print(json.dumps({k: result[k] for k in ("scheme", "ratios", "median_ratio")}))


if __name__ == "__main__":
    main()
