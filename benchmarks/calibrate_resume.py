"""A calibration's budget holds across resumes (issue 45, item 5): `planner calibrate --budget-s B` killed part
way and run again spends at most B (plus start-up) in all its runs together.

Each trial runs `planner calibrate --device cpu --budget-s B --out DIR --force` in a subprocess, stops it after
`--kill-after` seconds (SIGKILL: no chance to write anything more; or SIGINT: Ctrl-C), runs the same command
again until it exits, and records the wall time of every run, start-up included. --force keeps a busy probe
from refusing the profile: the budget, not the machine, is measured here.

Run (about 2 x B s per trial):
    .venv/bin/python benchmarks/calibrate_resume.py                       # B = 30 s, kill after 12 s, SIGKILL
    .venv/bin/python benchmarks/calibrate_resume.py --signal INT --kill-after 20
    .venv/bin/python benchmarks/calibrate_resume.py --out benchmarks/results/calibrate_resume.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
NAME = "calibrate_resume"


def run(command: list[str], kill_after: float | None, sig: int) -> dict:
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    killed = False
    if kill_after is not None:
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, sig)
            killed = True
    _, err = proc.communicate()
    return {"wall_s": round(time.perf_counter() - start, 2), "status": proc.returncode, "killed": killed,
            "stderr_tail": err.decode(errors="replace").strip().splitlines()[-3:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-s", type=float, default=30.0)
    parser.add_argument("--kill-after", type=float, default=12.0, help="seconds before the first run is stopped")
    parser.add_argument("--signal", choices=("KILL", "INT"), default="KILL")
    parser.add_argument("--trials", type=int, default=1)
    output.add_arguments(parser)
    args = parser.parse_args()
    sig = signal.SIGKILL if args.signal == "KILL" else signal.SIGINT
    trials = []
    for _ in range(args.trials):
        with tempfile.TemporaryDirectory() as folder:
            command = [str(ROOT / ".venv" / "bin" / "planner"), "calibrate", "--device", "cpu", "--budget-s",
                       f"{args.budget_s:g}", "--out", folder, "--force"]
            runs = [run(command, args.kill_after, sig)]
            while len(runs) < 5 and (runs[-1]["killed"] or runs[-1]["status"] not in (0, 2)):
                runs.append(run(command, None, sig))
            profile = next(Path(folder).glob("*/profile.json"), None)
            total = round(sum(r["wall_s"] for r in runs), 2)
            trials.append({"runs": runs, "total_wall_s": total, "profile_written": profile is not None,
                           "within": total <= args.budget_s + 5})
            print(f"runs {[r['wall_s'] for r in runs]} s (first stopped by SIG{args.signal} after "
                  f"{args.kill_after:g} s): {total:.1f} s in all for a {args.budget_s:g} s budget; profile "
                  f"{'written' if profile else 'NOT written'}; last status {runs[-1]['status']}")
    result = {"budget_s": args.budget_s, "kill_after_s": args.kill_after, "signal": args.signal, "trials": trials,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "date": datetime.date.today().isoformat()}
    output.write(args, NAME, result)
    return 0 if all(t["within"] and t["profile_written"] for t in trials) else 1


if __name__ == "__main__":
    sys.exit(main())
