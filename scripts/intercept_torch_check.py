#!/usr/bin/env python3
"""libconcord_intercept.so under PyTorch: a small model's training steps (forward, backward, SGD) and
a CUDA-graph replay of its forward pass, run plain and under LD_PRELOAD, must give the same losses
and parameters (docs/intercept.md).

    python3 scripts/intercept_torch_check.py OUT_DIR [--lib PATH] [--socket PATH] [--steps N]

Without --socket the preloaded run has no daemon (the library passes every launch through); with
--socket it registers with the concordd listening there. Writes OUT_DIR/torch_check.json (both
runs' figures, the largest differences, the library's counters) and exits 0 when the runs agree
within --tolerance (default 1e-5, relative), 1 when they do not, 2 when a run failed.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

WORKER = r"""
import json, sys, torch
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AvgPool2d(4),
    torch.nn.Flatten(), torch.nn.Linear(32 * 16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
gen = torch.Generator(device="cpu").manual_seed(1)
x = torch.randn(64, 3, 32, 32, generator=gen).to(dev)
y = torch.randint(0, 10, (64,), generator=gen).to(dev)
side = torch.cuda.Stream()
losses = []
for step in range(int(sys.argv[1])):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    # Work on a second stream that depends on the first (an event hand-off in the application).
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        norm = sum(p.detach().float().pow(2).sum() for p in model.parameters())
    torch.cuda.current_stream().wait_stream(side)
    losses.append([loss.item(), norm.item()])
# A CUDA graph of the forward pass (launches during capture pass through), replayed.
model.eval()
static_x = x.clone()
warm = torch.cuda.Stream()
warm.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(warm), torch.no_grad():
    for _ in range(3):
        model(static_x)
torch.cuda.current_stream().wait_stream(warm)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph), torch.no_grad():
    static_out = model(static_x)
replays = []
for k in range(3):
    static_x.copy_(x * (1.0 + 0.1 * k))
    graph.replay()
    replays.append(static_out.sum().item())
torch.cuda.synchronize()
params = [p.detach().double().cpu().flatten().tolist() for p in model.parameters()]
print(json.dumps({"losses": losses, "replays": replays, "params": params}))
"""


def run(env_extra, steps):
    env = dict(os.environ)
    env.update(env_extra)
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    p = subprocess.run([sys.executable, "-c", WORKER, str(steps)], env=env, capture_output=True, text=True, timeout=600)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        return None, p.returncode, p.stderr[-4000:]
    return json.loads(lines[-1]), p.returncode, p.stderr[-4000:]


def rel_diff(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--lib", default=".gpu/lib/libconcord_intercept.so")
    ap.add_argument("--socket", default="")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lib = pathlib.Path(args.lib).resolve()
    if not lib.exists():
        print(f"no library at {lib} (--lib)", file=sys.stderr)
        return 2
    stats = out / "torch_check_stats.json"
    preload_env = {"LD_PRELOAD": str(lib), "CONCORD_INTERCEPT_STATS": str(stats), "CONCORD_NAME": "torch-check",
                   "CONCORD_SOCKET": args.socket or str(out / "no-daemon.sock")}
    plain, rc_plain, err_plain = run({}, args.steps)
    preloaded, rc_pre, err_pre = run(preload_env, args.steps)
    report = {"steps": args.steps, "socket": args.socket or None, "library": str(lib),
              "plain_rc": rc_plain, "preloaded_rc": rc_pre, "plain_stderr": err_plain, "preloaded_stderr": err_pre}
    if plain is None or preloaded is None:
        report["verdict"] = "a run failed"
        (out / "torch_check.json").write_text(json.dumps(report, indent=1) + "\n")
        print(json.dumps({k: report[k] for k in ("plain_rc", "preloaded_rc", "verdict")}))
        print(err_plain if plain is None else err_pre, file=sys.stderr)
        return 2
    worst_loss = max(rel_diff(a, b) for la, lb in zip(plain["losses"], preloaded["losses"]) for a, b in zip(la, lb))
    worst_replay = max(rel_diff(a, b) for a, b in zip(plain["replays"], preloaded["replays"]))
    worst_param = max(rel_diff(a, b) for pa, pb in zip(plain["params"], preloaded["params"]) for a, b in zip(pa, pb))
    agree = max(worst_loss, worst_replay, worst_param) <= args.tolerance
    report.update({"worst_rel_diff_loss": worst_loss, "worst_rel_diff_replay": worst_replay,
                   "worst_rel_diff_param": worst_param, "tolerance": args.tolerance,
                   "plain_losses": plain["losses"], "preloaded_losses": preloaded["losses"],
                   "plain_replays": plain["replays"], "preloaded_replays": preloaded["replays"],
                   "library_counters": json.loads(stats.read_text()) if stats.exists() else None,
                   "verdict": "agree" if agree else "differ"})
    (out / "torch_check.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: report[k] for k in ("verdict", "worst_rel_diff_loss", "worst_rel_diff_replay",
                                             "worst_rel_diff_param", "library_counters")}))
    counters = report["library_counters"] or {}
    if counters.get("launches", 0) == 0:
        print("the library saw no launch: was it preloaded?", file=sys.stderr)
        return 1
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
