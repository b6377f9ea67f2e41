#!/usr/bin/env python3
"""The docs' flag tables against the programs' own --help (their CLI definitions).

- docs/daemon.md, "Running it": the option table's flags are exactly those of `concordd --help`.
- docs/running.md, "The command": each `concord SUBCOMMAND` row names every flag of that
  subcommand's --help (and of its parent's, for `profile`), and names no flag the command lacks.

  doc_flags.py CONCORD CONCORDD DOCS_DIR

Prints each difference (the file, the row, the flag) and exits 1 when there is one.
"""
import re
import subprocess
import sys

FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


def help_flags(argv):
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"doc_flags.py: {' '.join(argv)} --help exited {out.returncode}: {out.stderr.strip()}")
    flags = set()
    for line in out.stdout.splitlines():
        m = re.match(r"\s+(?:-\w,)?(--[a-z0-9][a-z0-9-]*)", line)
        if m:
            flags.add(m.group(1))
    flags.discard("--help")
    return flags


def section(path, heading):
    text = open(path, encoding="utf-8").read()
    start = text.find("\n" + heading + "\n")
    if start < 0:
        sys.exit(f"doc_flags.py: {path}: no section '{heading}'")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[-2])
    concord, concordd, docs = sys.argv[1:]
    problems = []

    daemon_md = f"{docs}/daemon.md"
    table = [l for l in section(daemon_md, "## Running it").splitlines() if l.startswith("| `--")]
    documented = set()
    for row in table:
        documented |= set(FLAG.findall(row.split(" | ")[0]))
    want = help_flags([concordd])
    for f in sorted(want - documented):
        problems.append(f"{daemon_md}, Running it: {f} is a concordd flag the option table does not list")
    for f in sorted(documented - want):
        problems.append(f"{daemon_md}, Running it: the option table lists {f}, which concordd --help does not have")

    running_md = f"{docs}/running.md"
    rows = [l for l in section(running_md, "## The command").splitlines() if l.startswith("| `concord ")]
    seen = set()
    for row in rows:
        m = re.match(r"\| `concord ([a-z]+)(?: ([a-z]+)(?=[ `|\\]))?", row)
        words = [m.group(1)] + ([m.group(2)] if m.group(2) and m.group(1) == "profile" else [])
        name = " ".join(words)
        seen.add(name)
        have = help_flags([concord] + words)
        if len(words) > 1:
            have |= help_flags([concord, words[0]])
        named = set(FLAG.findall(row))
        for f in sorted(have - named):
            problems.append(f"{running_md}, The command: the `concord {name}` row does not name its flag {f}")
        for f in sorted(named - have):
            problems.append(f"{running_md}, The command: the `concord {name}` row names {f}, which `concord {name} --help` does not have")
    out = subprocess.run([concord, "--help"], capture_output=True, text=True, timeout=60).stdout
    subcommands = re.findall(r"^  ([a-z]+)\s{2,}", out.split("Subcommands:")[-1], re.M)
    for sub in subcommands:
        if sub not in {s.split()[0] for s in seen}:
            problems.append(f"{running_md}, The command: no row for `concord {sub}`")

    for p in problems:
        print(p)
    print(f"doc_flags.py: {len(problems)} differences between the docs' flag tables and --help")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
