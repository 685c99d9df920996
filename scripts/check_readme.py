"""Run every `$ planner ...` example in README.md and docs/*.md and diff its output with what the page shows.

The README and the documentation pages are a promise: each fenced block that starts with `$ planner`
shows a command and the output it prints. This script runs the command with the project's own
`planner` and prints a unified diff for each block whose output differs. Blocks with several `$` lines,
benchmarks and sweeps (their timings vary from run to run) and calibration (minutes of measuring) are
listed as skipped.

Run:  .venv/bin/python scripts/check_readme.py [PATH ...] [--update]
Without PATH it checks README.md and every docs/*.md. With --update, a block that differs gets the
output printed now, in the file it is in (review the diff before committing).
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
"""The day the pages' outputs were made: prices are judged stale against it (PLANNER_TODAY), so the
blocks do not change as the calendar moves; set PLANNER_TODAY to check against another day."""


def default_paths() -> list[Path]:
    """README.md and every page of docs/, in name order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def check_file(path: Path, planner: Path, update: bool) -> tuple[int, int]:
    """Check (and with `update`, rewrite) one file's blocks; returns (blocks found, blocks that differ
    and were not updated)."""
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    text = path.read_text(encoding="utf-8")
    found = blocks(text)
    failed = 0
    for cmd, shown in found:
        if cmd.startswith(SKIP) or any(line.startswith("$ ") for line in shown):
            print(f"skipped  {name}: {cmd}")
            continue
        words = shlex.split(cmd.split("#")[0])
        run = subprocess.run([str(planner), *words[1:]], capture_output=True, text=True, cwd=ROOT,
                             env={"PLANNER_TODAY": README_DAY, **os.environ, "COLUMNS": "200"}, timeout=600)
        got = (run.stdout + run.stderr).rstrip("\n").split("\n")
        if got == shown:
            print(f"same     {name}: {cmd}")
            continue
        print(f"DIFFERS  {name}: {cmd}")
        if update:
            old, new = "\n".join(shown) + "\n```", "\n".join(got) + "\n```"
            if text.count(old) == 1:
                text = text.replace(old, new)
            else:
                failed += 1
                print(f"         (not updated: its output is not unique in {name})")
        else:
            failed += 1
        sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(shown, got, str(name), "now", lineterm=""))
    if update:
        path.write_text(text, encoding="utf-8")
    return len(found), failed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="*", type=Path, help="Markdown files to check (default: README.md and docs/*.md)")
    p.add_argument("--readme", type=Path, action="append", default=[],
                   help="a file to check (kept for old command lines; the same as a PATH)")
    p.add_argument("--update", action="store_true", help="write the output printed now into each file")
    args = p.parse_args(argv)
    paths = [path.resolve() for path in [*args.paths, *args.readme]] or default_paths()
    planner = Path(sys.executable).with_name("planner")
    total = failed = 0
    for path in paths:
        n, f = check_file(path, planner, args.update)
        total += n
        failed += f
    print(f"{total - failed} of {total} blocks in {len(paths)} files match, are skipped or were updated; {failed} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
