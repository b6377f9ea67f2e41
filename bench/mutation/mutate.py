#!/usr/bin/env python3
"""The mutation check: applies one plausible bug at a time to the source (mutations.tsv), rebuilds
the CPU test binaries in a build directory, runs them, and reports which mutants every test let
through (survivors). A bench, not a test: about a minute a mutant on two cores.

  bench/mutation/mutate.py [--build DIR] [--only SUBSTRING] [--out REPORT.md] [--json REPORT.json]

mutations.tsv: one mutant a line, tab-separated: file, the exact text to replace (it must occur
exactly once), the replacement, and what the bug is. Lines starting with '#' are comments.
A mutant is killed when a test fails, and fails again when run alone, or the tests crash or run
past a time limit (a hang is a failure); a failure that does not repeat is the test's own
flakiness: the report names it and the mutant is judged by the other tests. Each test binary stops
at its first failure (--gtest_fail_fast), so the report names the first failing test of each.
Sources are restored after every mutant, also on Ctrl-C or SIGTERM."""
import argparse
import datetime
import json
import pathlib
import signal
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


def first_failures(stdout):
    return [l.split("]", 1)[1].strip().split(" ")[0] for l in stdout.splitlines()
            if l.startswith("[  FAILED  ]") and "listed below" not in l and "FAILED TEST" not in l]


def run_tests(build_dir, timeout, exclude=()):
    """Runs the test binaries side by side (without the tests in `exclude`); returns (failed test
    names, seconds)."""
    t0 = time.time()
    args = ["--gtest_brief=1", "--gtest_fail_fast"] + (["--gtest_filter=-" + ":".join(exclude)] if exclude else [])
    procs = {t: subprocess.Popen([str(build_dir / "tests" / t), *args],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True) for t in TARGETS}
    failed = []
    for t, p in procs.items():
        try:
            out, _ = p.communicate(timeout=max(1.0, timeout - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.communicate()
            failed.append(f"{t} (timed out after {timeout:.0f} s)")
            continue
        if p.returncode != 0:
            names = sorted(set(first_failures(out)))
            failed += names if names else [f"{t} (exit {p.returncode})"]
    return failed, time.time() - t0


def fails_again(build_dir, test, timeout):
    """Whether `test` fails when run again alone (a failure that does not repeat is the test's
    flakiness, not the mutant's doing)."""
    for t in TARGETS:
        try:
            r = subprocess.run([str(build_dir / "tests" / t), "--gtest_brief=1", "--gtest_filter=" + test],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return True
        if r.returncode != 0:
            return True
    return False


def judge(build_dir, timeout):
    """Runs the tests on a mutant: (result, failed tests, tests whose failure did not repeat)."""
    flaky = []
    while True:
        failed, _ = run_tests(build_dir, timeout, flaky)
        if not failed:
            return "SURVIVED", [], flaky
        if any("(" in f for f in failed):  # a crash or a hang: no test to run again
            return "killed", failed, flaky
        repeated = [f for f in failed if fails_again(build_dir, f, timeout)]
        if repeated:
            return "killed", repeated, flaky
        flaky += failed


def git(*args):
    r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return r.stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build-mutation", help="build directory (configured here if missing)")
    ap.add_argument("--list", default=str(ROOT / "bench/mutation/mutations.tsv"), help="the mutants")
    ap.add_argument("--only", default="", help="run only mutants whose file contains this")
    ap.add_argument("--out", default="mutation_report.md", help="the Markdown report")
    ap.add_argument("--json", default="", help="also write every mutant's result as JSON here")
    ap.add_argument("--commit", default="", help="the commit to name in the report (default: the tree's HEAD)")
    a = ap.parse_args()
    # A terminated run restores the mutated file too (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    build_dir = (ROOT / a.build) if not pathlib.Path(a.build).is_absolute() else pathlib.Path(a.build)
    if not (build_dir / "build.ninja").exists():
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DCONCORD_CUDA=OFF", "-DCONCORD_BUILD_BENCH=OFF"], check=True, capture_output=True)
    mutants = [m for m in load(pathlib.Path(a.list)) if a.only in m["file"]]
    for m in mutants:
        n = (ROOT / m["file"]).read_text().count(m["from"]) if (ROOT / m["file"]).exists() else 0
        m["stale"] = n != 1
    ok, log = build(build_dir)
    if not ok:
        sys.exit("mutation: the unmutated tree must build first\n" + log)
    failed, base_s = run_tests(build_dir, 3600)
    if failed:
        sys.exit("mutation: the unmutated tree must pass its tests first: " + ", ".join(failed))
    # A mutant that makes the tests run far longer than the unmutated tree's (a hang) is killed.
    timeout = max(120.0, 5 * base_s)
    print(f"unmutated: tests pass in {base_s:.0f} s; a mutant's tests time out after {timeout:.0f} s", flush=True)
    commit = a.commit or git("rev-parse", "--short=12", "HEAD") + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    rows = []
    for m in mutants:
        if m["stale"]:
            rows.append((m, "stale", ["the text to replace is not in the file exactly once"], 0))
            print(f"{'stale':>14}  {m['file']}: {m['what']}", flush=True)
            continue
        path = ROOT / m["file"]
        original = path.read_text()
        t0 = time.time()
        try:
            path.write_text(original.replace(m["from"], m["to"], 1))
            ok, log = build(build_dir)
            if not ok:
                rows.append((m, "does not build", [log.strip().splitlines()[-1] if log.strip() else "?"], time.time() - t0))
            else:
                result, failed, flaky = judge(build_dir, timeout)
                rows.append((m, result, failed + [f"{f} (flaky: passed when run again)" for f in flaky], time.time() - t0))
        finally:
            path.write_text(original)
        print(f"{rows[-1][1]:>14}  {m['file']}: {m['what']}  ({rows[-1][3]:.0f} s)", flush=True)
    build(build_dir)
    counted = [r for r in rows if r[1] in ("killed", "SURVIVED")]
    survived = [r for r in counted if r[1] == "SURVIVED"]
    lines = ["| mutant | file | result | first failing test |", "|---|---|---|---|"]
    for m, result, failed, _ in rows:
        shown = ", ".join(failed[:3]) + (f" (+{len(failed) - 3})" if len(failed) > 3 else "")
        lines.append(f"| {m['what']} | `{m['file']}` | {result} | {shown} |")
    summary = (f"{len(counted)} mutants built, {len(counted) - len(survived)} killed, {len(survived)} survived "
               f"({100.0 * len(survived) / max(1, len(counted)):.1f}%)")
    others = len(rows) - len(counted)
    if others:
        summary += f"; {others} not counted (stale or not building)"
    header = (f"Mutation check of commit {commit}, {datetime.date.today().isoformat()} "
              f"(`bench/mutation/mutate.py`, {len(rows)} mutants from `{pathlib.Path(a.list).name}`).\n\n")
    pathlib.Path(a.out).write_text(header + summary + "\n\n" + "\n".join(lines) + "\n")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({
            "commit": commit, "date": datetime.date.today().isoformat(), "baseline_test_s": base_s,
            "mutants": [{"file": m["file"], "what": m["what"], "result": result, "failed": failed, "seconds": s}
                        for m, result, failed, s in rows]}, indent=1) + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
