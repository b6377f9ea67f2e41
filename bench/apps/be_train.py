#!/usr/bin/env python3
"""A training job, the BE tenant of bench/apps: forward, backward and an SGD step per iteration,
bf16 autocast, random data and labels.

  be_train.py --model resnet50 --batch 64 --seconds S --out FILE
  be_train.py --model bert --batch 32 --stop-file F --out FILE

It trains until S seconds have passed or the stop file exists, and records the CLOCK_MONOTONIC
time at which each iteration ended (after a host synchronisation every iteration, so the times
are the GPU's), so that throughput can be taken over any window, e.g. the LC tenant's.
--ready FILE is created after the warm-up iterations.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


class Trainer:
    def __init__(self, model, batch, stream=None):
        self.stream = stream or torch.cuda.Stream()
        self.model = model
        self.net, self.x = models.make(model, batch)
        self.net.train()
        classes = 1000 if model == "resnet50" else 2
        self.y = torch.randint(0, classes, (batch,), device="cuda")
        self.opt = torch.optim.SGD(self.net.parameters(), lr=1e-3, momentum=0.9)
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def step(self):
        with torch.cuda.stream(self.stream):
            self.opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = self.loss_fn(self.net(self.x), self.y)
            loss.backward()
            self.opt.step()
        self.stream.synchronize()
        return loss


def train(trainer, seconds, stop_file=None, ready=None, warmup=5):
    loss = float("nan")
    for _ in range(warmup):
        loss = trainer.step()
    if ready:
        open(ready, "w").close()
    ends = []
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end and not (stop_file and os.path.exists(stop_file)):
        loss = trainer.step()
        ends.append(time.monotonic())
    return ends, float(loss)


def rate_in(ends, lo, hi):
    """Iterations per second among `ends` within [lo, hi]."""
    n = sum(1 for t in ends if lo <= t <= hi)
    return n / (hi - lo) if hi > lo else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=models.MODELS, default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--stop-file")
    ap.add_argument("--ready")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.batch < 1 or not a.seconds > 0:
        ap.error("--batch must be >= 1 and --seconds > 0")
    trainer = Trainer(a.model, a.batch)
    ends, loss = train(trainer, a.seconds, a.stop_file, a.ready)
    span = ends[-1] - ends[0] if len(ends) > 1 else float("nan")
    result = {"model": a.model, "batch": a.batch, "pid": os.getpid(), "iteration_ends": ends, "loss": loss,
              "its": (len(ends) - 1) / span if len(ends) > 1 else float("nan"),
              "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    with open(a.out, "w") as f:
        json.dump(result, f)
    print(f"be_train {a.model} b{a.batch}: {len(ends)} iterations, {result['its']:.2f} it/s, loss {loss:.3f}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
