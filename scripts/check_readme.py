"""Run every `$ planner ...` example in README.md and diff its output with what the README shows.

The README is a promise: each fenced block that starts with `$ planner` shows a command and the
output it prints. This script runs the command with the project's own `planner` and prints a
unified diff for each block whose output differs. Blocks with several `$` lines, benchmarks and sweeps (their
timings vary from run to run) and calibration (minutes of measuring) are listed as skipped.

Run:  .venv/bin/python scripts/check_readme.py [--readme README.md] [--update]
With --update, a block that differs gets the output printed now (review the diff before committing).
Exit status: 0 when every block matches (or was updated), 1 otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = ("planner calibrate", "planner validate", "planner sweep")  # a sweep prints its wall time


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """(command, shown output lines) for each fenced block whose first line is `$ planner ...`;
    a command continued with a trailing backslash is joined."""
    out = []
    for body in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        lines = body.rstrip("\n").split("\n")
        if not lines or not lines[0].startswith("$ planner"):
            continue
        cmd = lines[0][2:]
        i = 1
        while cmd.endswith("\\") and i < len(lines):
            cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
            i += 1
        out.append((cmd, lines[i:]))
    return out


README_DAY = "2026-11-23"
"""The day the README's outputs were made: prices are judged stale against it (PLANNER_TODAY), so the
blocks do not change as the calendar moves; set PLANNER_TODAY to check against another day."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--readme", type=Path, default=ROOT / "README.md")
    p.add_argument("--update", action="store_true", help="write the output printed now into the README")
    args = p.parse_args(argv)
    planner = Path(sys.executable).with_name("planner")
    failed = 0
    text = args.readme.read_text(encoding="utf-8")
    found = blocks(text)
    for cmd, shown in found:
        if cmd.startswith(SKIP) or any(line.startswith("$ ") for line in shown):
            print(f"skipped  {cmd}")
            continue
        words = shlex.split(cmd.split("#")[0])
        run = subprocess.run([str(planner), *words[1:]], capture_output=True, text=True, cwd=ROOT,
                             env={"PLANNER_TODAY": README_DAY, **os.environ, "COLUMNS": "200"}, timeout=600)
        got = (run.stdout + run.stderr).rstrip("\n").split("\n")
        if got == shown:
            print(f"same     {cmd}")
            continue
        print(f"DIFFERS  {cmd}")
        if args.update:
            old, new = "\n".join(shown) + "\n```", "\n".join(got) + "\n```"
            if text.count(old) == 1:
                text = text.replace(old, new)
            else:
                failed += 1
                print("         (not updated: its output is not unique in the README)")
        else:
            failed += 1
        sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(shown, got, "README", "now", lineterm=""))
    if args.update:
        args.readme.write_text(text, encoding="utf-8")
    print(f"{len(found) - failed} of {len(found)} blocks match, are skipped or were updated; {failed} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
