#!/usr/bin/env python3
"""Priority streams, the in-process baseline of bench/apps: the LC service and the BE training job
as two threads of one process, the service on a high-priority stream and the job on a stream of
the default (lowest) priority. Writes the two results as lc_service.py and be_train.py would.

  prio_streams.py --lc-model resnet50 --lc-batch 64 [--graph] --rates R1,R2 --requests N \
                  --be-model resnet50 --be-batch 64 --lc-out LC.json --be-out BE.json
  prio_streams.py --lc-model ... --be-model ... --serve DIR

--serve: resident (run.py's rounds), both built and warmed once; each {"op": "pair", "rates",
"requests", "seed", "lead_s", "warmup", "out_lc", "out_be"} job (control.py) starts the training
thread, lets it run `lead_s` alone, runs the service's phases beside it, stops it and writes both.
"""
import argparse
import os
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import be_train  # noqa: E402
import control  # noqa: E402
import lc_service  # noqa: E402
import models  # noqa: E402


class Job(threading.Thread):
    """The training thread: steps while `go` is set, records each step's end."""

    def __init__(self, trainer):
        super().__init__(daemon=True)
        self.trainer, self.go, self.idle, self.quit = trainer, threading.Event(), threading.Event(), threading.Event()
        self.ends, self.loss = [], float("nan")
        self.idle.set()

    def run(self):
        while not self.quit.is_set():
            if not self.go.wait(0.01):
                continue
            self.idle.clear()
            while self.go.is_set():
                self.loss = float(self.trainer.step())
                self.ends.append(time.monotonic())
            self.idle.set()

    def start_training(self):
        self.ends = []
        self.go.set()

    def pause(self):
        self.go.clear()
        self.idle.wait()
        return self.ends


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lc-model", choices=models.ALL, default="resnet50")
    ap.add_argument("--lc-batch", type=int, default=64)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--rates", help="one open-loop phase per rate (R1,R2,...)")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--be-model", choices=models.ALL, default="resnet50")
    ap.add_argument("--be-batch", type=int, default=64)
    ap.add_argument("--llm-config", default="")
    ap.add_argument("--llm-impl", choices=("auto", "transformers", "hand"), default="auto")
    ap.add_argument("--lc-out")
    ap.add_argument("--be-out")
    ap.add_argument("--serve", help="resident: serve run.py's jobs from this control folder")
    a = ap.parse_args()
    if not a.serve and not (a.rates and a.lc_out and a.be_out):
        ap.error("give --serve DIR, or --rates, --lc-out and --be-out")
    # PyTorch maps a priority outside the device's range to the nearest one: -100 is the highest.
    low, high = 0, -100
    svc = argparse.Namespace(model=a.lc_model, batch=a.lc_batch, graph=a.graph, llm_config=a.llm_config, llm_impl=a.llm_impl)
    service = lc_service.make_service(svc, torch.cuda.Stream(priority=high))
    trainer = be_train.make_trainer(a.be_model, a.be_batch, torch.cuda.Stream(priority=low), a.llm_config)
    for _ in range(5):
        trainer.step()
    job = Job(trainer)
    job.start()
    common = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "pid": os.getpid(),
              "scheme": "priority-streams", "stream_priorities": [high, low]}
    lc_info = {"model": a.lc_model, "batch": a.lc_batch, "graph": a.graph, "impl": service.impl, **common}

    def pair(rates, requests, seed, lead_s, warmup, out_lc, out_be):
        job.start_training()
        time.sleep(lead_s)
        try:
            phases = lc_service.run_phases(service, rates, requests, seed, warmup=warmup)
        finally:
            ends = job.pause()
        control.write_atomic(out_lc, {**lc_info, "kind": "open_loop", "seed": seed, "phases": phases, "alone_ref": "alone"})
        control.write_atomic(out_be, {"model": a.be_model, "batch": a.be_batch, "iteration_ends": [round(t, 6) for t in ends],
                                      "loss": job.loss, **common,
                                      "its": (len(ends) - 1) / (ends[-1] - ends[0]) if len(ends) > 1 else float("nan")})

    if a.serve:
        srv = control.Server(a.serve)
        srv.ready(lc_info)
        while (j := srv.next_job()) is not None:
            try:
                if j["op"] != "pair":
                    raise ValueError(f"unknown job '{j['op']}'")
                pair(j["rates"], j["requests"], int(j["seed"]), float(j.get("lead_s", 1.0)), int(j.get("warmup", 10)),
                     j["out_lc"], j["out_be"])
                srv.done(j)
            except Exception as e:  # the job fails, the process serves on
                srv.failed(j, f"{type(e).__name__}: {e}")
    else:
        pair(lc_service.parse_rates(a.rates), a.requests, a.seed, 0.0, 10, a.lc_out, a.be_out)
    job.quit.set()
    job.go.clear()
    job.join(timeout=30)


if __name__ == "__main__":
    main()
