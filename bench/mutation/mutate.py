#!/usr/bin/env python3
"""The mutation check: applies one plausible bug at a time to the source (mutations.tsv), rebuilds
the CPU test binaries in a build directory, runs them, and reports which mutants every test let
through (survivors). A bench, not a test: it takes about a minute a mutant on two cores.

  bench/mutation/mutate.py [--build DIR] [--only SUBSTRING] [--out REPORT.md]

mutations.tsv: one mutant a line, tab-separated: file, the exact text to replace (first
occurrence), the replacement, and what the bug is. Lines starting with '#' are comments."""
import argparse
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
TARGETS = ["concord_unit_tests", "concord_sim_tests"]


def load(path):
    mutants = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 4:
            sys.exit(f"{path}:{n}: expected 4 tab-separated fields (file, from, to, what), got {len(parts)}")
        mutants.append({"line": n, "file": parts[0], "from": parts[1].replace("\\t", "\t"),
                        "to": parts[2].replace("\\t", "\t"), "what": parts[3]})
    return mutants


def build(build_dir):
    r = subprocess.run(["cmake", "--build", str(build_dir), "-j2", "--target", *TARGETS],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def run_tests(build_dir):
    failed = []
    for t in TARGETS:
        r = subprocess.run([str(build_dir / "tests" / t), "--gtest_brief=1"], capture_output=True, text=True,
                           timeout=900)
        if r.returncode != 0:
            failed += [l.split("]", 1)[1].strip().split(" ")[0] for l in r.stdout.splitlines()
                       if l.startswith("[  FAILED  ]") and "listed below" not in l and "FAILED TEST" not in l]
            if not failed:
                failed.append(f"{t} (exit {r.returncode})")
    return sorted(set(failed))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build-mutation", help="build directory (configured here if missing)")
    ap.add_argument("--list", default=str(ROOT / "bench/mutation/mutations.tsv"), help="the mutants")
    ap.add_argument("--only", default="", help="run only mutants whose file contains this")
    ap.add_argument("--out", default="mutation_report.md", help="the Markdown report")
    a = ap.parse_args()
    build_dir = (ROOT / a.build) if not pathlib.Path(a.build).is_absolute() else pathlib.Path(a.build)
    if not (build_dir / "build.ninja").exists():
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DCONCORD_CUDA=OFF", "-DCONCORD_BUILD_BENCH=OFF"], check=True, capture_output=True)
    ok, log = build(build_dir)
    if not ok or run_tests(build_dir):
        sys.exit("mutation: the unmutated tree must build and pass its tests first\n" + log)
    rows = []
    for m in load(pathlib.Path(a.list)):
        if a.only not in m["file"]:
            continue
        path = ROOT / m["file"]
        original = path.read_text()
        if m["from"] not in original:
            rows.append((m, "stale", ["the text to replace is not in the file"], 0))
            continue
        t0 = time.time()
        try:
            path.write_text(original.replace(m["from"], m["to"], 1))
            ok, log = build(build_dir)
            if not ok:
                rows.append((m, "does not build", [log.strip().splitlines()[-1] if log.strip() else "?"], time.time() - t0))
                continue
            failed = run_tests(build_dir)
            rows.append((m, "killed" if failed else "SURVIVED", failed, time.time() - t0))
        finally:
            path.write_text(original)
        print(f"{rows[-1][1]:>14}  {m['file']}: {m['what']}", flush=True)
    build(build_dir)
    counted = [r for r in rows if r[1] in ("killed", "SURVIVED")]
    survived = [r for r in counted if r[1] == "SURVIVED"]
    lines = ["| mutant | file | result | tests that failed |", "|---|---|---|---|"]
    for m, result, failed, _ in rows:
        shown = ", ".join(failed[:4]) + (f" (+{len(failed) - 4})" if len(failed) > 4 else "")
        lines.append(f"| {m['what']} | `{m['file']}` | {result} | {shown} |")
    summary = (f"{len(counted)} mutants built, {len(counted) - len(survived)} killed, {len(survived)} survived "
               f"({100.0 * len(survived) / max(1, len(counted)):.0f}%)")
    pathlib.Path(a.out).write_text(summary + "\n\n" + "\n".join(lines) + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
