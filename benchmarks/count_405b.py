"""Benchmark: count llama-3.1-405b prefill (batch 1, 2048 tokens) from a fresh process.

Measures wall time (process start to exit, import of torch included) and peak resident memory
of `planner count` run as a child process, best of --repeats runs, and writes the figures with
the machine they were measured on to --out PATH, or with --save to benchmarks/results/count_405b.json.
Target (issue 2): under 10 s and under 2 GB on a 2-core machine.

Run: .venv/bin/python benchmarks/count_405b.py
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["-m", "planner.cli", "count", "llama-3.1-405b", "--mode", "prefill", "--batch", "1", "--seq-len", "2048",
           "--json"]


def run_once(command: list[str] = COMMAND) -> tuple[float, float, dict]:
    """Return (wall seconds, peak RSS bytes, the command's JSON) of one child run."""
    start = time.perf_counter()
    # a fresh child per run: ru_maxrss of RUSAGE_CHILDREN is the largest child so far, so the
    # benchmark forks a wrapper that runs one child and reports that child's peak
    wrapper = ("import resource, subprocess, sys, json; "
               "r = subprocess.run([sys.executable] + sys.argv[1:], capture_output=True, text=True); "
               "sys.stderr.write(r.stderr); "
               "print(json.dumps({'rc': r.returncode, 'out': r.stdout, "
               "'maxrss_kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))")
    proc = subprocess.run([sys.executable, "-c", wrapper, *command], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"benchmark failed: {proc.stderr}")
    report = json.loads(proc.stdout)
    if report["rc"] != 0:
        sys.exit(f"planner count failed: {proc.stderr}")
    return wall, report["maxrss_kib"] * 1024.0, json.loads(report["out"])


def report(args, name: str, command: list[str], label: str, exact: str, target_s: float,
           target_bytes: float = 2e9) -> None:
    """Run `command` --repeats times, print and write (benchmarks/output.py) the figures, exit 1 if a target
    is missed."""
    runs = [run_once(command) for _ in range(args.repeats)]
    walls, peaks, counted = [r[0] for r in runs], [r[1] for r in runs], runs[0][2]
    result = {
        "command": "planner " + " ".join(command[2:]),
        "wall_s_best": min(walls), "wall_s_all": walls, "peak_rss_bytes_max": max(peaks),
        "ops_counted": counted["ops"], "flop": counted["flop"], "params": counted["params"], "exact": exact,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "date": datetime.date.today().isoformat(), "target": {"wall_s": target_s, "peak_rss_bytes": target_bytes},
    }
    output.write(args, name, result)
    print(f"{label}: {counted['ops']} ops, {counted['flop']:.4e} FLOP")
    print(f"wall time best of {args.repeats}: {min(walls):.2f} s (all: {', '.join(f'{w:.2f}' for w in walls)})")
    print(f"peak memory: {max(peaks) / 1e9:.3f} GB")
    ok = min(walls) < target_s and max(peaks) < target_bytes
    print(f"target (< {target_s:g} s, < {target_bytes / 1e9:g} GB):", "met" if ok else "MISSED")
    sys.exit(0 if ok else 1)


def arguments(doc: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    output.add_arguments(parser)
    return parser.parse_args()


def main() -> None:
    report(arguments(__doc__), "count_405b", COMMAND, "llama-3.1-405b prefill, batch 1, 2048 tokens",
           "every aten op of all 126 layers executed and counted on meta tensors; nothing sampled", 10)


if __name__ == "__main__":
    main()
