"""Which share of a BE job's launches and GPU time each room mechanism applied to, from the
kernels the PyTorch profiler saw (be_train.py --kernels-out).

be_train.py records two sets of kernel rows, each row (stream, name, grid, block, shared memory
per block, launches, GPU µs):
- "alone": a window of steps during the warm-up, before the LC service starts, when no cap can
  apply: the streams the job itself launches on, and each kernel's own shared memory;
- "run": windows spread over the run beside the LC service.
A run kernel on a stream the alone window never used went out on the library's SM-count context
(its green streams); one with more shared memory than the same kernel (name, grid, block) alone
was padded to a residency cap. So four classes: none, sms, residency, both. A kernel the alone
window never saw is counted under "unknown" for its padding (its own size is not known).

    shares.py KERNELS.json    prints the table
"""
import json
import sys

CLASSES = ["none", "sms", "residency", "both", "unknown"]


def fold_trace(events, rows):
    """Adds a Chrome trace's kernel events (PyTorch's profiler: "cat" "kernel", args "stream",
    "grid", "block", "shared memory" = static + dynamic) to `rows`, keyed by (stream, name, grid,
    block, shared memory) -> [launches, GPU µs]. Other events are left out."""
    for e in events:
        if str(e.get("cat", "")).lower() != "kernel":
            continue
        a = e.get("args", {})
        k = (a.get("stream"), e.get("name", ""), tuple(a.get("grid", ())), tuple(a.get("block", ())), a.get("shared memory", 0))
        row = rows.setdefault(k, [0, 0.0])
        row[0] += 1
        row[1] += float(e.get("dur", 0.0))
    return rows


def document(alone, run, windows):
    """be_train.py --kernels-out's document from fold_trace's rows."""
    def listed(d):
        return [{"stream": k[0], "name": k[1], "grid": list(k[2]), "block": list(k[3]), "smem": k[4], "launches": v[0], "gpu_us": v[1]}
                for k, v in d.items()]
    return {"alone": listed(alone), "run": listed(run), "windows": windows}


def key(row):
    return (row["name"], tuple(row["grid"]), tuple(row["block"]))


def classify(doc):
    """{class: {"launches": n, "gpu_us": t}} and the totals, from be_train.py's kernels document."""
    alone_streams = {r["stream"] for r in doc["alone"]}
    own_smem = {}
    for r in doc["alone"]:
        k = key(r)
        own_smem[k] = min(own_smem.get(k, r["smem"]), r["smem"])
    out = {c: {"launches": 0, "gpu_us": 0.0} for c in CLASSES}
    for r in doc["run"]:
        moved = r["stream"] not in alone_streams
        own = own_smem.get(key(r))
        if own is None:
            c = "unknown"
        elif r["smem"] > own:
            c = "both" if moved else "residency"
        else:
            c = "sms" if moved else "none"
        out[c]["launches"] += r["launches"]
        out[c]["gpu_us"] += r["gpu_us"]
    total_n = sum(v["launches"] for v in out.values())
    total_t = sum(v["gpu_us"] for v in out.values())
    for v in out.values():
        v["launch_share"] = v["launches"] / total_n if total_n else 0.0
        v["time_share"] = v["gpu_us"] / total_t if total_t else 0.0
    return {"classes": out, "launches": total_n, "gpu_us": total_t, "windows": doc.get("windows", 0)}


def table(rows):
    """Markdown: one row per (combo, scheme) with each class's share of launches / of GPU time."""
    lines = ["| combo | scheme | windows | launches | " + " | ".join(f"{c} (launches / GPU time)" for c in CLASSES) + " |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in CLASSES) + " |"]
    for combo, scheme, s in rows:
        cells = [f"{s['classes'][c]['launch_share']:.1%} / {s['classes'][c]['time_share']:.1%}" for c in CLASSES]
        lines.append(f"| {combo} | {scheme} | {s['windows']} | {s['launches']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: shares.py KERNELS.json")
    print(table([("-", "-", classify(json.load(open(sys.argv[1]))))]))
