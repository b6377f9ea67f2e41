#!/usr/bin/env python3
"""The mutation check: applies one plausible bug at a time to the source (a suite's list of mutants),
rebuilds the suite's CPU test binaries in a build directory, runs them, and reports which mutants
every test let through (survivors). A bench, not a test: about a minute a mutant on two cores.

  bench/mutation/mutate.py [--suite default|intercept] [--build DIR] [--jobs N] [--only SUBSTRING]
                           [--lines N,M,...] [--out REPORT.md] [--json REPORT.json]

Suites (SUITES below):
  default    mutations.tsv over src/core, src/mechanism and the policies; concord_unit_tests and
             concord_sim_tests, side by side.
  intercept  intercept.tsv over src/intercept, src/ipc/lease_page.cpp and the tenant client's
             reconnecting (src/ipc/reconnecting_client.cpp, tenant_client.cpp); the interception
             library's unit tests (settings, symbols, residency; the completion book over a fake
             driver; the dlsym hook preloaded against the toolkit's stub libcuda), the IPC tests
             (lease page, board, tenant client) and the stand-in end-to-end tests
             (tests/standin: concordd, the preloaded library and the stand-in libcuda), one binary
             after another in that order, each with the environment its ctest entry gives it, and
             stopping at the first binary that fails. Needs a build with CUDA found (the library is
             built only then); no CUDA code is compiled.

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
import os
import pathlib
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Each suite: its mutants, what to build, and its test binaries (path under the build directory and
# the environment ctest gives them; "{build}" is the build directory). `serial`: one binary after
# another, stopping at the first that fails (else side by side, every binary run to its end).
SUITES = {
    "default": {
        "list": "bench/mutation/mutations.tsv",
        "targets": ["concord_unit_tests", "concord_sim_tests"],
        "tests": [("tests/concord_unit_tests", {}), ("tests/concord_sim_tests", {})],
        "serial": False,
        "configure": ["-DCONCORD_CUDA=OFF", "-DCONCORD_BUILD_BENCH=OFF"],
    },
    "intercept": {
        "list": "bench/mutation/intercept.tsv",
        "targets": ["concord_intercept_tests", "concord_intercept_book_tests", "concord_intercept_dlsym_tests",
                    "concord_ipc_tests", "concord_intercept", "concordd", "concord_standin_cuda", "concord_standin_app",
                    "concord_standin_tests"],
        "tests": [("tests/concord_intercept_tests", {}), ("tests/concord_intercept_book_tests", {}),
                  ("tests/concord_intercept_dlsym_tests", {"LD_PRELOAD": "{build}/src/intercept/libconcord_intercept.so"}),
                  ("tests/concord_ipc_tests", {}), ("tests/standin/concord_standin_tests", {})],
        "serial": True,
        "configure": ["-DCONCORD_BUILD_BENCH=OFF"],
    },
}
SUITE = SUITES["default"]
JOBS = 2


def binaries(build_dir):
    """The suite's test binaries: (name, path, environment)."""
    out = []
    for rel, env in SUITE["tests"]:
        full = dict(os.environ)
        full.update({k: v.replace("{build}", str(build_dir)) for k, v in env.items()})
        out.append((pathlib.Path(rel).name, build_dir / rel, full))
    return out


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
    r = subprocess.run(["cmake", "--build", str(build_dir), f"-j{JOBS}", "--target", *SUITE["targets"]],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def first_failures(stdout):
    # "[  FAILED  ] Suite.Test (12 ms)", or for a parameterised test
    # "[  FAILED  ] Prefix/Suite.Test/0, where GetParam() = ... (12 ms)": the name without the comma.
    return [l.split("]", 1)[1].strip().split(" ")[0].rstrip(",") for l in stdout.splitlines()
            if l.startswith("[  FAILED  ]") and "listed below" not in l and "FAILED TEST" not in l]


def run_tests(build_dir, timeout, exclude=()):
    """Runs the test binaries (without the tests in `exclude`): side by side, or one after another
    stopping at the first that fails (a serial suite); returns (failed test names, seconds)."""
    t0 = time.time()
    args = ["--gtest_brief=1", "--gtest_fail_fast"] + (["--gtest_filter=-" + ":".join(exclude)] if exclude else [])
    failed = []

    def start(path, env):
        p = subprocess.Popen([str(path), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, cwd=str(path.parent), env=env)
        RUNNING.append(p)
        return p

    def finish(t, p):
        try:
            out, _ = p.communicate(timeout=max(1.0, timeout - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            stop(p)
            failed.append(f"{t} (timed out after {timeout:.0f} s)")
            return
        RUNNING.remove(p)
        if p.returncode != 0:
            names = sorted(set(first_failures(out)))
            failed.extend(names if names else [f"{t} (exit {p.returncode})"])

    if SUITE["serial"]:
        for t, path, env in binaries(build_dir):
            finish(t, start(path, env))
            if failed:
                break
    else:
        procs = {t: start(path, env) for t, path, env in binaries(build_dir)}
        for t, p in procs.items():
            finish(t, p)
    return failed, time.time() - t0


RUNNING = []  # test binaries running now (stopped, with what they started, when the run is interrupted)


def stop(p):
    """Kills a test binary and the children it started (daemons, programs: its session's group)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.communicate()
    if p in RUNNING:
        RUNNING.remove(p)


def fails_again(build_dir, test, timeout):
    """Whether `test` fails when run again alone (a failure that does not repeat is the test's
    flakiness, not the mutant's doing)."""
    for t, path, env in binaries(build_dir):
        p = subprocess.Popen([str(path), "--gtest_brief=1", "--gtest_filter=" + test], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, cwd=str(path.parent), env=env)
        RUNNING.append(p)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(p)
            return True
        RUNNING.remove(p)
        if p.returncode != 0:
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
        if all(f in flaky for f in failed):  # excluded and failing still: not a name the filter takes
            return "killed", failed, flaky
        repeated = [f for f in failed if fails_again(build_dir, f, timeout)]
        if repeated:
            return "killed", repeated, flaky
        flaky += failed


def git(*args):
    r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return r.stdout.strip()


def main():
    global SUITE, JOBS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="default", choices=sorted(SUITES), help="which mutants and tests (default: default)")
    ap.add_argument("--build", default="build-mutation", help="build directory (configured here if missing)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel build jobs (default 2)")
    ap.add_argument("--list", default="", help="the mutants (default: the suite's list)")
    ap.add_argument("--only", default="", help="run only mutants whose file contains this")
    ap.add_argument("--lines", default="", help="run only the mutants on these lines of the list (comma-separated)")
    ap.add_argument("--out", default="mutation_report.md", help="the Markdown report")
    ap.add_argument("--json", default="", help="also write every mutant's result as JSON here")
    ap.add_argument("--commit", default="", help="the commit to name in the report (default: the tree's HEAD)")
    a = ap.parse_args()
    SUITE = SUITES[a.suite]
    JOBS = max(1, a.jobs)
    mutant_list = pathlib.Path(a.list) if a.list else ROOT / SUITE["list"]
    # A terminated run restores the mutated file too (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    build_dir = (ROOT / a.build) if not pathlib.Path(a.build).is_absolute() else pathlib.Path(a.build)
    if not (build_dir / "build.ninja").exists():
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        *SUITE["configure"]], check=True, capture_output=True)
    picked = {int(n) for n in a.lines.split(",") if n.strip()}
    mutants = [m for m in load(mutant_list) if a.only in m["file"] and (not picked or m["line"] in picked)]
    for m in mutants:
        n = (ROOT / m["file"]).read_text().count(m["from"]) if (ROOT / m["file"]).exists() else 0
        m["stale"] = n != 1
    ok, log = build(build_dir)
    if not ok:
        sys.exit("mutation: the unmutated tree must build first\n" + log)
    base_flaky = []
    while True:
        failed, base_s = run_tests(build_dir, 3600, base_flaky)
        if not failed:
            break
        # A failure that does not repeat alone is the test's flakiness (as for a mutant, below).
        if any("(" in f for f in failed) or any(fails_again(build_dir, f, 3600) for f in failed):
            sys.exit("mutation: the unmutated tree must pass its tests first: " + ", ".join(failed))
        print("unmutated: flaky (passed when run again alone): " + ", ".join(failed), flush=True)
        base_flaky += failed
    # A mutant that makes the tests run far longer than the unmutated tree's (a hang) is killed.
    timeout = max(120.0, 5 * base_s)
    print(f"unmutated: tests pass in {base_s:.0f} s; a mutant's tests time out after {timeout:.0f} s; "
          f"{len(mutants)} mutants", flush=True)
    commit = a.commit or git("rev-parse", "--short=12", "HEAD") + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    rows = []
    for i, m in enumerate(mutants, 1):
        if m["stale"]:
            rows.append((m, "stale", ["the text to replace is not in the file exactly once"], 0))
            print(f"[{i}/{len(mutants)}] {'stale':>14}  {m['file']}: {m['what']}", flush=True)
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
        shown = f" [{', '.join(rows[-1][2][:2])}]" if rows[-1][1] == "killed" else ""
        print(f"[{i}/{len(mutants)}] {rows[-1][1]:>14}  {m['file']}: {m['what']}  ({rows[-1][3]:.0f} s){shown}", flush=True)
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
              f"(`bench/mutation/mutate.py --suite {a.suite}`, {len(rows)} mutants from `{mutant_list.name}`).\n\n")
    pathlib.Path(a.out).write_text(header + summary + "\n\n" + "\n".join(lines) + "\n")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({
            "commit": commit, "date": datetime.date.today().isoformat(), "suite": a.suite, "list": mutant_list.name,
            "tests": [rel for rel, _ in SUITE["tests"]], "baseline_test_s": base_s,
            "mutants": [{"line": m["line"], "file": m["file"], "what": m["what"], "result": result, "failed": failed,
                         "seconds": s}
                        for m, result, failed, s in rows]}, indent=1) + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        for running in list(RUNNING):
            stop(running)
        raise
