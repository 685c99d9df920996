"""Benchmark (issue 44 item 4): how much the calibration probes (planner/calibration/calibrate.py PROBES)
vary between repeated rounds on this machine as it is, and beside 1 and 2 processes each spinning a
Python busy loop (a busy machine). calibrate.py's BUSY_CV, the coefficient of variation above which
`planner calibrate` refuses to write a profile, is set between the two from these figures.

Each setting runs --trials trials of 2 x PROBE_ROUNDS rounds (a run's start and end) and prints the
largest probe CV of each trial (calibrate.variation).

Run: .venv/bin/python benchmarks/calibrate_busy.py [--trials 5] [--loads 0 1 2] [--save]
"""

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import sys
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.calibration.bench import local_device  # noqa: E402
from planner.calibration.calibrate import BUSY_CV, PROBE_ROUNDS, probe_round, variation  # noqa: E402


def spin() -> None:
    """A busy loop: one process that takes a whole core as long as it runs."""
    while True:
        pass


def trial(device) -> float:
    rounds = [probe_round(device) for _ in range(PROBE_ROUNDS)]
    time.sleep(0.5)  # a run's start and end are apart
    rounds += [probe_round(device) for _ in range(PROBE_ROUNDS)]
    return variation(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 1, 2], help="busy-loop processes beside")
    output.add_arguments(parser)
    args = parser.parse_args()
    device = local_device("cpu")
    for _ in range(2):  # warm-up: the first torch GEMM starts its thread pool (2.4 s here), not measured
        probe_round(device)
    rows = []
    for load in args.loads:
        spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(load)]
        for p in spinners:
            p.start()
        try:
            time.sleep(0.5 if load else 0.0)
            cvs = [round(trial(device), 4) for _ in range(args.trials)]
        finally:
            for p in spinners:
                p.terminate()
                p.join()
        row = {"busy_processes": load, "max_cv_per_trial": cvs, "above_threshold": sum(cv > BUSY_CV for cv in cvs)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"benchmark": "calibrate_busy", "date": datetime.date.today().isoformat(),
              "host": f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs",
              "load_average": os.getloadavg(), "threshold": BUSY_CV,
              "note": "a shared VM with other jobs running: 'no added load' is not an idle machine", "rows": rows}
    output.write(args, "calibrate_busy", result)


if __name__ == "__main__":
    main()
