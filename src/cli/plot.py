"""Figures from Concord's results files, drawn with matplotlib (Debian: python3-matplotlib).
`concord plot` runs this script; it also runs by itself. The figure's format follows the output
file's extension (.svg, .png, .pdf).

Kinds:
  latency   latency CDF of every latency-critical tenant, one line per results file (scheme)
  stp       bars per workload and policy: each workload's headline (--metric headline, the
            default: throughput over serial for a closed-loop workload, LC SLO attainment for an
            open-loop one; a panel per workload), or the STP over the co-run window, the speedup
            over serial, the whole-run NP sum
  fidelity  the simulator against the GPU, one point per mix and policy (bench/fidelity/compare.py)
  sweep     a figure against a swept parameter: the pair's SM split (concord_gpu_bench), FEDCM's
            sigma (concord_fedcm_bench), RAISE's task count (concord_raise_bench)

An input is a JSON file (optionally .gz) or ARCHIVE:PATTERN, the members of a .tar.xz/.tar.gz
whose path matches the shell pattern, e.g. bench/results/gpu-h200/runs-7f3d0e2.tar.xz:run-dnn-*.json.
Inputs that are not the kind's files are errors naming the file and what is missing.
"""
import argparse
import fnmatch
import gzip
import json
import pathlib
import statistics
import sys
import tarfile

EXIT_FAILURE = 1
EXIT_USAGE = 2


class PlotError(Exception):
    """A problem with an input: the message names the file."""


def read_inputs(specs):
    """[(name, parsed JSON)] for each input spec, archive members in path order."""
    out = []
    for spec in specs:
        path, sep, pattern = spec.partition(":")
        if sep and (path.endswith(".tar.xz") or path.endswith(".tar.gz") or path.endswith(".tar")):
            try:
                with tarfile.open(path) as tar:
                    members = sorted((m for m in tar.getmembers() if m.isfile() and
                                      fnmatch.fnmatch(m.name.removeprefix("./"), pattern)), key=lambda m: m.name)
                    if not members:
                        raise PlotError(f"{path}: no member matches '{pattern}'")
                    for m in members:
                        name = f"{path}:{m.name.removeprefix('./')}"
                        out.append((name, parse(name, tar.extractfile(m).read())))
            except (OSError, tarfile.TarError) as e:
                raise PlotError(f"{path}: {e}") from e
        else:
            try:
                data = pathlib.Path(spec).read_bytes()
            except OSError as e:
                raise PlotError(f"{spec}: {e.strerror or e}") from e
            out.append((spec, parse(spec, gzip.decompress(data) if spec.endswith(".gz") else data)))
    return out


def parse(name, data):
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise PlotError(f"{name}: not JSON: {e}") from e


def need(name, obj, *keys):
    """obj[k1][k2]..., or a PlotError naming the file and the missing field."""
    at = obj
    for i, k in enumerate(keys):
        if not isinstance(at, (dict, list)) or (isinstance(at, dict) and k not in at):
            raise PlotError(f"{name}: no field '{'.'.join(str(x) for x in keys[:i + 1])}'")
        at = at[k]
    return at


def run_label(name, run):
    """A concord run's scheme: its policy and parameters."""
    policy = need(name, run, "policy")
    params = run.get("params") or {}
    if policy == "manual" and params:
        return "manual " + ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
    if params:
        return policy + ":" + ";".join(f"{k}={v}" for k, v in sorted(params.items()))
    return policy


def workload_name(run):
    return pathlib.Path(str(run.get("workload", "?"))).stem


def device_note(runs):
    devices = sorted({str(r.get("device")) for _, r in runs if r.get("device")})
    return ", ".join(devices)


# ---- latency -------------------------------------------------------------------------------

def plot_latency(plt, inputs, args):
    panels = {}  # (workload, tenant) -> [(label, latencies ms, target ms)]
    for name, run in inputs:
        tenants = need(name, run, "tenants")
        lc = [t for t in tenants if t.get("class") == "LC"]
        if not lc:
            raise PlotError(f"{name}: no latency-critical tenant (class LC)")
        for t in lc:
            reqs = need(name, t, "requests")
            lat = sorted((need(name, r, "end_s") - need(name, r, "arrival_s")) * 1e3 for r in reqs)
            if not lat:
                raise PlotError(f"{name}: tenant '{t.get('name')}' has no requests")
            target = (t.get("latency_target_s") or 0) * 1e3
            panels.setdefault((workload_name(run), t.get("name", "?")), []).append((run_label(name, run), lat, target))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.4), squeeze=False)
    for ax, ((workload, tenant), lines) in zip(axes[0], sorted(panels.items())):
        for label, lat, _ in lines:
            n = len(lat)
            ax.step(lat, [(i + 1) / n for i in range(n)], where="post", label=label, linewidth=1.3)
        target = max(t for _, _, t in lines)
        if target > 0:
            ax.axvline(target, color="0.4", linestyle="--", linewidth=0.9)
            ax.text(target, 0.02, " target", color="0.3", fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("request latency (ms, log scale)")
        ax.set_ylabel("share of requests")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{workload}: {tenant}", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    return fig, "latency CDF per scheme"


# ---- stp -----------------------------------------------------------------------------------

METRICS = {
    "headline": ("headline", "the workload's headline"),
    "stp": ("stp_window", "STP over the co-run window (serial about 1)"),
    "speedup": ("speedup_over_serial", "speedup over serial"),
    "whole-run": ("np_sum", "whole-run NP sum"),
}
# A headline's axis label, by its name (metrics.headline.name).
HEADLINE_LABELS = {
    "throughput_over_serial": "throughput over serial (serial = 1)",
    "stp_window": "STP over the co-run window",
    "lc_slo_attainment": "LC SLO attainment",
    "be_np_sum": "BE progress (sum of BE NP)",
}


def stp_rows(name, obj, metric):
    """[(workload, scheme, value, label)] from a concord run results file or a concord_fedcm_bench
    file; `label` names the value's axis."""
    key, label = METRICS[metric]
    if "metrics" in obj:  # concord run
        metrics = need(name, obj, "metrics")
        if metric == "headline":
            h = need(name, obj, "metrics", "headline")
            return [(workload_name(obj), run_label(name, obj), need(name, h, "value"),
                     HEADLINE_LABELS.get(h.get("name"), str(h.get("name"))))]
        if key == "np_sum" and key not in metrics and "stp" in metrics:
            key = "stp"  # results of schema version 1
        if key not in metrics:
            hint = " (results of schema version 1 have no headline; try --metric stp)" if metric == "headline" else ""
            raise PlotError(f"{name}: no field 'metrics.{key}'{hint}")
        return [(workload_name(obj), run_label(name, obj), metrics[key], label)]
    if "runs" in obj and obj["runs"] and "scheme" in obj["runs"][0]:  # concord_fedcm_bench
        rows = []
        for r in obj["runs"]:
            if r.get("sweep"):
                continue
            k = {"np_sum": "stp", "headline": "stp_window"}.get(key, key)  # the bench's own names
            if k not in r:
                raise PlotError(f"{name}: a run of {r.get('workload')} has no field '{k}'")
            rows.append((str(r.get("workload")), str(r.get("scheme")), r[k],
                         "STP over the co-run window" if key == "headline" else label))
        return rows
    raise PlotError(f"{name}: neither a concord run results file (metrics) nor a concord_fedcm_bench file (runs[].scheme)")


def plot_stp(plt, inputs, args):
    rows = [row for name, obj in inputs for row in stp_rows(name, obj, args.metric)]
    labels = {w: lab for w, _, _, lab in rows}
    if len(set(labels.values())) > 1:
        return plot_panels(plt, rows)
    workloads = list(dict.fromkeys(w for w, _, _, _ in rows))
    schemes = list(dict.fromkeys(s for _, s, _, _ in rows))
    value = {(w, s): v for w, s, v, _ in rows}
    # Each workload's bars side by side (only the schemes it has), one colour per scheme.
    bars = sum(1 for w in workloads for s in schemes if (w, s) in value)
    fig, ax = plt.subplots(figsize=(min(11, max(4.5, 0.3 * bars + 0.5 * len(workloads) + 1.5)), 3.6))
    x, centres, seen = 0.0, [], set()
    for w in workloads:
        start = x
        for k, s in enumerate(schemes):
            if (w, s) not in value:
                continue
            ax.bar(x, value[(w, s)], width=0.9, color=f"C{k % 10}", hatch="//" if k >= 10 else None,
                   label=s if s not in seen else None)
            seen.add(s)
            x += 1
        centres.append((start + x - 1) / 2)
        x += 1  # a gap between workloads
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    ax.set_xticks(centres)
    ax.set_xticklabels(workloads)
    label = next(iter(labels.values()))
    ax.set_ylabel(label)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=min(len(schemes), 3), loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    return fig, label + " per policy"


def plot_panels(plt, rows):
    """Workloads whose figures differ in kind (a closed-loop mix's throughput over serial beside an
    open-loop mix's SLO attainment): a panel per workload, each with its own axis."""
    workloads = list(dict.fromkeys(w for w, _, _, _ in rows))
    schemes = list(dict.fromkeys(s for _, s, _, _ in rows))
    fig, axes = plt.subplots(1, len(workloads), figsize=(min(14, 1.2 + 0.35 * len(schemes) * len(workloads) + len(workloads)), 3.8),
                             squeeze=False)
    for ax, w in zip(axes[0], workloads):
        mine = [(s, v, lab) for ww, s, v, lab in rows if ww == w]
        for s, v, _ in mine:
            k = schemes.index(s)
            ax.bar(k, v, width=0.9, color=f"C{k % 10}", hatch="//" if k >= 10 else None)
        label = mine[0][2]
        if "serial" in label:
            ax.axhline(1.0, color="0.3", linewidth=0.8)
        if "attainment" in label:
            ax.set_ylim(0, 1.02)
        ax.set_xticks([schemes.index(s) for s, _, _ in mine])
        ax.set_xticklabels([s for s, _, _ in mine], rotation=60, ha="right", fontsize=7)
        ax.set_ylabel(label, fontsize=8)
        ax.set_title(w, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig, "each workload's headline per policy"


# ---- fidelity ------------------------------------------------------------------------------

def plot_fidelity(plt, inputs, args):
    rows = []
    for name, obj in inputs:
        for r in need(name, obj, "rows"):
            rows.append((need(name, r, "policy"), need(name, r, "gpu_makespan_s") * 1e3, need(name, r, "sim_makespan_s") * 1e3,
                         r.get("gpu_stp"), r.get("sim_stp")))
    if not rows:
        raise PlotError(f"{inputs[0][0]}: no rows")
    with_stp = all(g is not None and s is not None for _, _, _, g, s in rows)
    fig, axes = plt.subplots(1, 2 if with_stp else 1, figsize=(9 if with_stp else 4.6, 4), squeeze=False)
    policies = list(dict.fromkeys(p for p, *_ in rows))
    markers = "osD^v<>ph"
    panels = [("makespan (ms)", 1, 2, True)] + ([("STP (whole-run NP sum)", 3, 4, False)] if with_stp else [])
    for ax, (what, gi, si, log) in zip(axes[0], panels):
        lo = min(min(r[gi], r[si]) for r in rows)
        hi = max(max(r[gi], r[si]) for r in rows)
        pad = (hi / lo) ** 0.05 if log else (hi - lo) * 0.05 + 1e-9
        lo, hi = (lo / pad, hi * pad) if log else (lo - pad, hi + pad)
        ax.plot([lo, hi], [lo, hi], color="0.3", linewidth=0.8)
        if log:
            ax.fill_between([lo, hi], [lo * 0.85, hi * 0.85], [lo * 1.15, hi * 1.15], color="0.85", label="within 15%")
            ax.set_xscale("log")
            ax.set_yscale("log")
        for k, p in enumerate(policies):
            pts = [r for r in rows if r[0] == p]
            ax.scatter([r[gi] for r in pts], [r[si] for r in pts], s=18, marker=markers[k % len(markers)], label=p)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(f"GPU {what}")
        ax.set_ylabel(f"simulator {what}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    errors = sorted(abs(s - g) / g for _, g, s, _, _ in rows)
    return fig, f"simulator against GPU: median makespan error {100 * statistics.median(errors):.1f}% over {len(rows)} runs"


# ---- sweep ---------------------------------------------------------------------------------

def sweep_pair(ax, name, obj):
    """concord_gpu_bench: the pair's speedup over serial against the compute tenant's SMs."""
    rows = need(name, obj, "pair", "rows")
    sm_count = obj.get("sm_count")
    for form in ("green split", "smid split"):
        pts = sorted((r["compute_sms"], r["speedup_over_serial"]) for r in rows
                     if str(r.get("scheme", "")).startswith(form) and "compute_sms" in r)
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", markersize=3.5, label=form)
    styles = ["--", "-.", ":", (0, (5, 1))]
    refs = [r for r in rows if r.get("scheme") in ("streams", "fused 1:1")]
    for k, r in enumerate(refs):
        ax.axhline(r["speedup_over_serial"], linestyle=styles[k % len(styles)], linewidth=1, color=f"C{k + 2}",
                   label=r["scheme"])
    alone = obj["pair"].get("alone_s")
    if alone:
        ax.axhline(sum(alone) / max(alone), linestyle=":", color="0.4", linewidth=1, label="ideal (the longer alone)")
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    ax.set_xlabel("SMs of the compute tenant" + (f" (of {sm_count}; the rest to the memory tenant)" if sm_count else ""))
    ax.set_ylabel("speedup over serial")
    return "compute + memory pair: speedup against the SM split"


def sweep_fedcm(ax, name, obj):
    """concord_fedcm_bench: FEDCM's co-run-window STP against sigma, per workload and their mean."""
    runs = [r for r in need(name, obj, "runs") if r.get("sweep")]
    if not runs:
        raise PlotError(f"{name}: no sweep runs (runs[].sweep)")
    by_workload = {}
    for r in runs:
        by_workload.setdefault(r["workload"], []).append((need(name, r, "sigma"), need(name, r, "stp_window")))
    for w, pts in sorted(by_workload.items()):
        pts.sort()
        ax.plot([x for x, _ in pts], [y for _, y in pts], linewidth=0.8, alpha=0.45, label=w)
    sigmas = sorted({s for pts in by_workload.values() for s, _ in pts})
    mean = [statistics.mean(v for pts in by_workload.values() for s, v in pts if s == x) for x in sigmas]
    ax.plot(sigmas, mean, color="black", linewidth=2, marker="o", markersize=3.5, label="mean")
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    ax.set_xlabel("sigma (the share of a tenant's kernels FEDCM ranks critical)")
    ax.set_ylabel("STP over the co-run window (serial = 1)")
    return "FEDCM: STP against sigma"


def sweep_raise(ax, inputs):
    """concord_raise_bench files: each policy's speedup over sq against the task count, one line
    per file (vector set) and policy."""
    for k, (name, obj) in enumerate(inputs):
        runs = [r for r in need(name, obj, "runs") if r.get("group") == "main"]
        if not runs:
            raise PlotError(f"{name}: no runs of the main group")
        by = {}
        for r in runs:
            by.setdefault((need(name, r, "policy"), need(name, r, "tasks")), []).append(need(name, r, "makespan_s"))
        counts = sorted({n for _, n in by})
        sets = f" ({len(inputs)} files)" if len(inputs) > 1 else ""
        for j, policy in enumerate(("raise", "rr", "rd")):
            pts = [(n, statistics.mean(by[("sq", n)]) / statistics.mean(by[(policy, n)])) for n in counts
                   if (policy, n) in by and ("sq", n) in by]
            if pts:
                ax.plot([n for n, _ in pts], [y for _, y in pts], color=f"C{j}", alpha=0.35 + 0.65 / len(inputs),
                        linewidth=1, label=policy + sets if k == 0 else None)
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    ax.set_xlabel("tasks")
    ax.set_ylabel("speedup over SQ (mean over seeds)")
    return "RAISE, RR and RD over SQ against the task count"


def plot_sweep(plt, inputs, args):
    fig, ax = plt.subplots(figsize=(6, 3.6))
    first_name, first = inputs[0]
    if "pair" in first:
        if len(inputs) > 1:
            raise PlotError("sweep of the pair takes one concord_gpu_bench file")
        title = sweep_pair(ax, first_name, first)
    elif "runs" in first and first["runs"] and "scheme" in first["runs"][0]:
        if len(inputs) > 1:
            raise PlotError("sweep of FEDCM takes one concord_fedcm_bench file")
        title = sweep_fedcm(ax, first_name, first)
    elif "runs" in first and first["runs"] and "group" in first["runs"][0]:
        title = sweep_raise(ax, inputs)
    else:
        raise PlotError(f"{first_name}: not a sweep this command knows (concord_gpu_bench pair, "
                        "concord_fedcm_bench sigma sweep, concord_raise_bench task counts)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return fig, title


KINDS = {"latency": plot_latency, "stp": plot_stp, "fidelity": plot_fidelity, "sweep": plot_sweep}


def main():
    ap = argparse.ArgumentParser(prog="concord plot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=sorted(KINDS), help="what to draw")
    ap.add_argument("inputs", nargs="+", help="results files, or ARCHIVE:PATTERN")
    ap.add_argument("-o", "--out", required=True, help="the figure file: .svg, .png or .pdf")
    ap.add_argument("--title", help="the figure's title (default: what it shows, and the device)")
    ap.add_argument("--metric", choices=sorted(METRICS), default="headline", help="stp: which figure the bars show")
    args = ap.parse_args()
    fmt = pathlib.Path(args.out).suffix.lstrip(".").lower()
    if fmt not in ("svg", "png", "pdf"):
        ap.error(f"--out {args.out}: the extension must be .svg, .png or .pdf")
    try:
        inputs = read_inputs(args.inputs)  # before matplotlib, which takes a second to load
    except PlotError as e:
        print(f"concord plot: {e}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"concord plot: matplotlib is missing ({e}); Debian: apt-get install python3-matplotlib", file=sys.stderr)
        return EXIT_FAILURE
    # Small, reproducible SVG: text kept as text, fixed ids, no date.
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "concord", "font.size": 9})
    try:
        fig, title = KINDS[args.kind](plt, inputs, args)
    except PlotError as e:
        print(f"concord plot: {e}", file=sys.stderr)
        return EXIT_FAILURE
    device = device_note(inputs)
    fig.suptitle(args.title or (title + (f" ({device})" if device else "")), fontsize=10)
    fig.tight_layout()
    metadata = {"Date": None} if fmt in ("svg", "pdf") else {}
    try:
        fig.savefig(args.out, format=fmt, metadata=metadata, dpi=150 if fmt == "png" else None)
    except OSError as e:
        print(f"concord plot: {args.out}: {e.strerror or e}", file=sys.stderr)
        return EXIT_FAILURE
    return 0


if __name__ == "__main__":
    sys.exit(main())
