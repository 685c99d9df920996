"""Benchmark the command line's speed at the prompt (issue 42): `planner --help` and `planner models`,
each in a fresh process (interpreter start-up and imports included), under 0.5 s.

Each command runs once untimed (the filesystem cache warms), then 5 times timed, each a new process of
the `planner` script installed beside this interpreter; the median is held to the target. Prints a table;
--out PATH writes the result as JSON, --save to benchmarks/results/cli_speed.json. Exits 1 when a
median misses its target.
Run: .venv/bin/python benchmarks/cli_speed.py [--out PATH | --save]
"""

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

PLANNER = Path(sys.executable).parent / ("planner.exe" if os.name == "nt" else "planner")
COMMANDS = (("planner --help", ["--help"]), ("planner models", ["models"]))
TARGET_S = 0.5
RUNS = 5


def timed(args: list[str]) -> float:
    """Seconds one `planner ARGS` process takes, start to exit; raises if it fails."""
    start = time.perf_counter()
    proc = subprocess.run([str(PLANNER), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"planner {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return seconds


def measure(args: list[str]) -> dict:
    timed(args)  # untimed: warms the filesystem cache (and Python's bytecode cache)
    runs = [timed(args) for _ in range(RUNS)]
    median = statistics.median(runs)
    return {"median_s": median, "min_s": min(runs), "max_s": max(runs), "runs_s": runs, "target_s": TARGET_S,
            "passed": median < TARGET_S}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    output.add_arguments(parser)
    args = parser.parse_args()
    if not PLANNER.is_file():
        raise SystemExit(f"no planner script at {PLANNER}: install planner into this interpreter's environment")
    rows = {name: measure(argv) for name, argv in COMMANDS}
    print(f"{'command':<16} {'median s':>9} {'min s':>7} {'max s':>7} {'target s':>9}  result")
    for name, r in rows.items():
        print(f"{name:<16} {r['median_s']:>9.3f} {r['min_s']:>7.3f} {r['max_s']:>7.3f} {r['target_s']:>9.1f}  "
              f"{'pass' if r['passed'] else 'FAIL'}")
    result = {"benchmark": "cli_speed", "date": datetime.date.today().isoformat(), "python": platform.python_version(),
              "machine": platform.machine(), "cpus": os.cpu_count(), "runs_per_command": RUNS, "commands": rows,
              "passed": all(r["passed"] for r in rows.values())}
    output.write(args, "cli_speed", result)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
