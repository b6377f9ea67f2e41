#!/usr/bin/env python3
"""Priority streams, the in-process baseline of bench/apps: the LC service and the BE training job
as two threads of one process, the service on a high-priority stream and the job on a stream of
the default (lowest) priority. Writes the two results as lc_service.py and be_train.py would.

  prio_streams.py --lc-model resnet50 --lc-batch 64 [--graph] --rates R1,R2 --requests N \
                  --be-model resnet50 --be-batch 64 --lc-out LC.json --be-out BE.json
"""
import argparse
import json
import os
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import be_train  # noqa: E402
import lc_service  # noqa: E402
import models  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lc-model", choices=models.MODELS, default="resnet50")
    ap.add_argument("--lc-batch", type=int, default=64)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--rates", required=True, help="one open-loop phase per rate (R1,R2,...)")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--be-model", choices=models.MODELS, default="resnet50")
    ap.add_argument("--be-batch", type=int, default=64)
    ap.add_argument("--lc-out", required=True)
    ap.add_argument("--be-out", required=True)
    a = ap.parse_args()
    # PyTorch maps a priority outside the device's range to the nearest one: -100 is the highest.
    low, high = 0, -100
    service = lc_service.Service(a.lc_model, a.lc_batch, a.graph, torch.cuda.Stream(priority=high))
    trainer = be_train.Trainer(a.be_model, a.be_batch, torch.cuda.Stream(priority=low))
    stop = threading.Event()
    be = {}

    def job():
        for _ in range(5):
            trainer.step()
        be["ready"] = time.monotonic()
        ends, loss = [], float("nan")
        while not stop.is_set():
            loss = trainer.step()
            ends.append(time.monotonic())
        be["ends"], be["loss"] = ends, float(loss)

    t = threading.Thread(target=job)
    t.start()
    while "ready" not in be:
        time.sleep(0.01)
    phases = lc_service.run_phases(service, lc_service.parse_rates(a.rates), a.requests, a.seed)
    stop.set()
    t.join()
    common = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "pid": os.getpid(),
              "scheme": "priority-streams", "stream_priorities": [high, low]}
    with open(a.lc_out, "w") as f:
        json.dump({"model": a.lc_model, "batch": a.lc_batch, "graph": a.graph, "kind": "open_loop", "seed": a.seed,
                   "phases": phases, **common}, f)
    ends = be["ends"]
    with open(a.be_out, "w") as f:
        json.dump({"model": a.be_model, "batch": a.be_batch, "iteration_ends": ends, "loss": be["loss"],
                   "its": (len(ends) - 1) / (ends[-1] - ends[0]) if len(ends) > 1 else float("nan"), **common}, f)


if __name__ == "__main__":
    main()
