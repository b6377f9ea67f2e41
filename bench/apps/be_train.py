#!/usr/bin/env python3
"""A training job, the BE tenant of bench/apps: forward, backward and an SGD step per iteration,
bf16 autocast, random data and labels.

  be_train.py --model resnet50 --batch 64 --seconds S --out FILE
  be_train.py --model bert --batch 32 --stop-file F --out FILE

It trains until S seconds have passed or the stop file exists, and records the CLOCK_MONOTONIC
time at which each iteration ended (after a host synchronisation every iteration, so the times
are the GPU's), so that throughput can be taken over any window, e.g. the LC tenant's.
--ready FILE is created after the warm-up iterations. --kernels-out FILE profiles a window of the
warm-up and a fifth of the run's steps and writes the kernels seen (stream, shared memory, GPU
time), from which shares.py says which room mechanism applied to which share of the job.

  be_train.py --model resnet50 --batch 64 --steps N --seed S --out FILE

trains exactly N steps from a seeded start with deterministic kernels (cuDNN deterministic,
torch.use_deterministic_algorithms; CUBLAS_WORKSPACE_CONFIG must be set, as PyTorch says) and
writes each step's loss and a SHA-256 of every parameter's bytes after the last step: two runs
that agree bit for bit computed the same thing (correctness under a scheduler).

  be_train.py --model llama --batch 8 --serve DIR

Resident (run.py's rounds): built and warmed once, then serves the jobs run.py writes into DIR
(control.py): {"op": "train"} starts training (answered at once) and the next job, {"op":
"pause", "out": FILE}, stops it after the step under way and writes the iteration ends since the
train job into FILE. Models: resnet50, bert (BERT-base-like encoder, sequence 128), gpt (the
decoder step's model) and llama (llm.py: a Llama-style decoder, causal LM loss over
--llm-config's train_seq tokens).
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import control  # noqa: E402
import models  # noqa: E402
import shares  # noqa: E402


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


def make_trainer(model, batch, stream=None, llm_config=""):
    """The training job of `model` (llama: llm.Trainer, the others: Trainer)."""
    if model == "llama":
        import llm
        return llm.Trainer(batch, stream, llm.parse_config(llm_config))
    return Trainer(model, batch, stream)


def serve_jobs(folder, trainer, info, warmup=5):
    """run.py's resident BE: train between a train job and the next job (its pause)."""
    for _ in range(warmup):
        trainer.step()
    srv = control.Server(folder)
    srv.ready(info)
    ends, loss = [], float("nan")
    while (job := srv.next_job()) is not None:
        try:
            if job["op"] == "train":
                ends = []
                srv.done(job)
                while not srv.pending():
                    loss = trainer.step()
                    ends.append(time.monotonic())
            elif job["op"] == "pause":
                control.write_atomic(job["out"], {**info, "iteration_ends": [round(t, 6) for t in ends], "loss": float(loss),
                                                  "its": (len(ends) - 1) / (ends[-1] - ends[0]) if len(ends) > 1 else float("nan")})
                ends = []
                srv.done(job)
            else:
                raise ValueError(f"unknown job '{job['op']}'")
        except Exception as e:  # the job fails, the process serves on
            srv.failed(job, f"{type(e).__name__}: {e}")


def train(trainer, seconds, stop_file=None, ready=None, warmup=5, kernels=None):
    loss = float("nan")
    for _ in range(warmup):
        loss = trainer.step()
    if kernels:
        kernels.alone_window(trainer)
    if ready:
        open(ready, "w").close()
    ends = []
    t_end = time.monotonic() + seconds
    if kernels:
        kernels.start()
    while time.monotonic() < t_end and not (stop_file and os.path.exists(stop_file)):
        loss = trainer.step()
        ends.append(time.monotonic())
        if kernels:
            kernels.step()
    if kernels:
        kernels.stop()
    return ends, float(loss)


class KernelWindows:
    """The kernels the PyTorch profiler sees (shares.py classifies them): a window of steps during
    the warm-up, before any LC work ("alone"), then `active` of every `every` steps of the run
    ("run"). Each window's trace is folded into rows (stream, name, grid, block, shared memory:
    launches, GPU µs) and deleted. The profiler slows the job: its rate in such a run is not used."""

    def __init__(self, every=25, active=5):
        from torch.profiler import ProfilerActivity, profile, schedule
        self.profile, self.activities = profile, [ProfilerActivity.CUDA]
        self.schedule = schedule(wait=every - active - 1, warmup=1, active=active)
        self.rows = {"alone": {}, "run": {}}
        self.windows = 0
        self.prof = None

    def fold(self, prof, into):
        import tempfile
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                events = json.load(f).get("traceEvents", [])
        finally:
            os.remove(path)
        shares.fold_trace(events, self.rows[into])

    def alone_window(self, trainer, steps=3):
        with self.profile(activities=self.activities) as prof:
            for _ in range(steps):
                trainer.step()
        self.fold(prof, "alone")

    def ready(self, prof):
        self.windows += 1
        self.fold(prof, "run")

    def start(self):
        self.prof = self.profile(activities=self.activities, schedule=self.schedule, on_trace_ready=self.ready)
        self.prof.start()

    def step(self):
        self.prof.step()

    def stop(self):
        self.prof.stop()

    def document(self):
        return shares.document(self.rows["alone"], self.rows["run"], self.windows)


def train_steps(model, batch, steps, seed):
    """`steps` seeded, deterministic steps: each step's loss and the parameters' SHA-256."""
    import hashlib
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    trainer = Trainer(model, batch)
    losses = [float(trainer.step()) for _ in range(steps)]
    h = hashlib.sha256()
    for p in trainer.net.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    return losses, h.hexdigest()


def rate_in(ends, lo, hi):
    """Iterations per second among `ends` within [lo, hi]."""
    n = sum(1 for t in ends if lo <= t <= hi)
    return n / (hi - lo) if hi > lo else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=models.ALL, default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--stop-file")
    ap.add_argument("--ready")
    ap.add_argument("--out")
    ap.add_argument("--steps", type=int, help="train exactly this many deterministic steps and record losses and parameters")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kernels-out", help="profile windows of the run and write the kernels seen (shares.py reads them)")
    ap.add_argument("--serve", help="resident: serve run.py's jobs from this control folder")
    ap.add_argument("--llm-config", default="", help="llama: key=value,... over llm.CONFIG")
    a = ap.parse_args()
    if a.batch < 1 or not a.seconds > 0:
        ap.error("--batch must be >= 1 and --seconds > 0")
    if a.serve:
        trainer = make_trainer(a.model, a.batch, llm_config=a.llm_config)
        info = {"model": a.model, "batch": a.batch, "pid": os.getpid(), "impl": getattr(trainer, "impl", "torch"),
                "device": torch.cuda.get_device_name(), "torch": torch.__version__}
        return serve_jobs(a.serve, trainer, info)
    if a.out is None:
        ap.error("--out is needed unless --serve")
    if a.steps is not None:
        if a.steps < 1:
            ap.error("--steps must be >= 1")
        losses, params = train_steps(a.model, a.batch, a.steps, a.seed)
        with open(a.out, "w") as f:
            json.dump({"model": a.model, "batch": a.batch, "steps": a.steps, "seed": a.seed, "losses": losses,
                       "params_sha256": params, "device": torch.cuda.get_device_name(), "torch": torch.__version__}, f)
        print(f"be_train {a.model} b{a.batch}: {a.steps} deterministic steps, last loss {losses[-1]:.4f}", file=sys.stderr)
        return
    trainer = make_trainer(a.model, a.batch, llm_config=a.llm_config)
    kernels = KernelWindows() if a.kernels_out else None
    ends, loss = train(trainer, a.seconds, a.stop_file, a.ready, kernels=kernels)
    if kernels:
        with open(a.kernels_out, "w") as f:
            json.dump(kernels.document(), f)
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
